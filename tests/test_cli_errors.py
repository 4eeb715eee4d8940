"""One base class for the project's known failures: the command line catches it (one line,
exit 1, no traceback), and anything else still raises (a bug shows its traceback)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from containertax import cli
from containertax.core import errors
from containertax.core.errors import ContainertaxError

KNOWN = {
    "containertax.campaign.config": ("ConfigError",),
    "containertax.campaign.optimisation": ("OptimisationError",),
    "containertax.execution.preflight": ("PreflightError",),
    "containertax.execution.thermal": ("GateTimeout", "SensorError"),
    "containertax.execution.gating": ("RunFailed", "StorageFailure"),
    "containertax.execution.environments": ("EnvironmentFailure",),
    "containertax.core.records": ("RecordExistsError",),
    "containertax.core.rawrecord": ("RecordError",),
    "containertax.workloads.base": ("WorkloadError",),
    "containertax.workloads.trtllm": ("DatasetError",),
    "containertax.statistics.importer": ("ImportFailure",),
    "containertax.publishing.paper": ("PaperError",),
    "containertax.publishing.report": ("AnalysisError",),
}


@pytest.mark.parametrize("module,name", [(m, n) for m, ns in KNOWN.items() for n in ns])
def test_every_known_failure_is_a_containertax_error(module, name):
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, ContainertaxError)


def test_errors_is_the_ground_floor():
    tree = ast.parse(Path(errors.__file__).read_text())
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if m.startswith("containertax")]


def test_a_known_failure_exits_1_with_its_message(monkeypatch, capsys):
    """Planted: a handler raising a ContainertaxError subclass."""
    def fails(args):
        raise cli.config.ConfigError("x.yaml: key 'repetitions': planted; set it to 2.")

    monkeypatch.setitem(cli.COMMANDS, "status", cli.Command(
        "status", cli.COMMANDS["status"].arguments, fails))
    assert cli.main(["status", "x.yaml"]) == 1
    err = capsys.readouterr().err
    assert "ERROR x.yaml: key 'repetitions': planted; set it to 2." in err
    assert "Traceback" not in err


def test_any_other_exception_still_raises(monkeypatch):
    """Planted: a bug (a KeyError) is not swallowed into exit 1."""
    def bug(args):
        raise KeyError("bug")

    monkeypatch.setitem(cli.COMMANDS, "status", cli.Command(
        "status", cli.COMMANDS["status"].arguments, bug))
    with pytest.raises(KeyError):
        cli.main(["status", "x.yaml"])


def test_check_of_a_missing_file_exits_1(tmp_path, capsys):
    assert cli.main(["check", str(tmp_path / "none.yaml")]) == 1
