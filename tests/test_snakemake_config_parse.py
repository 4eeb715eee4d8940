"""Issue #44: Snakemake's own refusal of a malformed --configfile. Snakemake reads the file
before the Snakefile runs and said only "Config file is not valid JSON or YAML" or "...
with keys at top level" (a binary file: a UnicodeDecodeError traceback), naming neither
the file nor the line, where `containertax check` names both. The logger plugin package
snakemake_logger_plugin_containertax (imported by Snakemake while it builds its command
line) rewords that refusal with containertax's reading of the file."""

from __future__ import annotations

import subprocess
import sys

import pytest
from snakemake_interface_common.exceptions import WorkflowError

from tests.conftest import REPO, demo_config

# (case, the file's bytes, what the message must say besides the file's name)
CASES = [
    ("empty-file", b"", "is empty"),
    ("only-comments", b"# a config, one day\n", "is empty"),
    ("top-level-list", b"- campaign: x\n- repetitions: 3\n", "is a list"),
    ("top-level-scalar", b"demo\n", "is a str"),
    ("yaml-syntax", b"campaign: [demo\nrepetitions: 3\n", "line 2, column 12"),
    ("tab-indent", b"campaign: demo\nthermal:\n\tsensor: none\n", "line 3, column 1"),
    ("not-text", b"\xff\xfe\x00binary\x00", "is not a text file"),
]


def test_the_plugin_rewords_snakemakes_refusal_and_leaves_a_good_file_alone(tmp_path):
    from snakemake.settings import types

    import snakemake_logger_plugin_containertax  # noqa: F401  (wraps on import)

    bad = tmp_path / "bad.yaml"
    bad.write_bytes(CASES[4][1])
    with pytest.raises(WorkflowError) as err:
        types.load_configfile(bad)
    assert str(err.value).startswith(f"{bad}: not valid YAML: line 2, column 12"), err.value
    good = tmp_path / "good.yaml"
    good.write_text("campaign: demo\nrepetitions: 3\n")
    assert dict(types.load_configfile(good)) == {"campaign": "demo", "repetitions": 3}
    assert types.load_configfile.__wrapped__  # wrapped once, whatever imports it again


@pytest.mark.slow
@pytest.mark.parametrize("data,said", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_snakemake_names_the_file_and_the_position(tmp_path, data, said):
    """Before: 'Config file is not valid JSON or YAML...' or '... keys at top level' with
    no file, or a traceback (not-text). Now one line naming the file and what is wrong."""
    path = tmp_path / "case.yaml"
    path.write_bytes(data)
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(tmp_path), "--configfile", str(path)],
        capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode != 0, text[-2000:]
    assert f"{path}" in text and said in text, text[-2000:]
    assert "Traceback" not in text and 'File "' not in text, text[-2000:]
    assert "not valid JSON or YAML" not in text and "keys at top level" not in text


def test_a_good_config_still_plans(tmp_path):
    """The wrapper only speaks where Snakemake refuses: the demo config plans as before."""
    import yaml

    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(demo_config(), sort_keys=False))
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(tmp_path), "--configfile", str(path)],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, (out.stdout + out.stderr)[-2000:]
