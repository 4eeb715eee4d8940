"""Issue #44: two working folders sharing one results_dir. Snakemake's lock lives in the
working folder, so two checkouts whose configs name the same campaign folder each took
their own and interleaved their steps in it; before, the second failed with a misleading
"fix environments.docker.python" from preflight (the first had removed its work folder).
Now the invocation's main process holds the campaign's writer lock (config.hold_folder)
and the other is refused, naming both folders and the fix. Planted with a child process
that holds the lock as checkout A's Snakemake would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from containertax.campaign import config
from tests.conftest import REPO, demo_config

HOLD = """
import sys, time
from pathlib import Path
from containertax.campaign import config
campaign = config.load_file(Path(sys.argv[1]), Path(sys.argv[2]))
config.hold_folder(campaign, Path(sys.argv[2]))
print("held", flush=True)
time.sleep(float(sys.argv[3]))
"""


def _checkouts(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Checkouts a and b, each with its config, both naming one absolute results_dir."""
    shared = tmp_path / "shared-results"
    cfg = {**demo_config(), "results_dir": str(shared), "results_dir_absolute": True}
    out = []
    for name in ("a", "b"):
        folder = tmp_path / name
        (folder / "config").mkdir(parents=True)
        path = folder / "config" / "demo.yaml"
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        out.append(path)
    return out[0], out[1], shared


def _hold(path: Path, workdir: Path, seconds: float) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(workdir),
                              str(seconds)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def test_a_second_working_folder_is_refused_while_the_first_writes(tmp_path):
    a, b, shared = _checkouts(tmp_path)
    child = _hold(a, a.parent.parent, 60)
    try:
        campaign = config.load_file(b, b.parent.parent)
        with pytest.raises(config.ConfigError) as err:
            config.hold_folder(campaign, b.parent.parent)
    finally:
        child.kill()
        child.wait()
    text = str(err.value)
    assert f"{shared / 'demo'} is being written by another working folder: " \
           f"{a.parent.parent}" in text, text
    assert f"config {a}" in text and f"this invocation runs in {b.parent.parent}" in text
    assert "results folder of its own" in text and "wait for that invocation" in text


def test_the_folder_is_free_once_the_first_has_ended_and_the_change_is_said(tmp_path):
    a, b, _ = _checkouts(tmp_path)
    child = _hold(a, a.parent.parent, 0)
    child.wait()  # ended: the kernel dropped its lock
    campaign = config.load_file(b, b.parent.parent)
    assert config.hold_folder(campaign, b.parent.parent) == str(a.parent.parent)
    assert config.hold_folder(campaign, b.parent.parent) is None  # held already: as is


@pytest.mark.slow
def test_snakemake_in_the_second_checkout_names_both_and_the_fix(tmp_path):
    """Before: the second checkout's preflight failed with 'fix environments.docker.python'.
    Now its Snakemake stops before any job, naming both folders; nothing of it runs."""
    a, b, shared = _checkouts(tmp_path)
    child = _hold(a, a.parent.parent, 120)
    try:
        out = subprocess.run(
            [sys.executable, "-m", "snakemake", "--cores", "1", "--snakefile",
             str(REPO / "Snakefile"), "--directory", str(b.parent.parent),
             "--configfile", str(b)], capture_output=True, text=True, timeout=300)
    finally:
        child.kill()
        child.wait()
    text = out.stdout + out.stderr
    assert out.returncode != 0, text[-3000:]
    assert "is being written by another working folder" in text, text[-3000:]
    assert str(a.parent.parent) in text and str(b.parent.parent) in text
    assert "environments.docker.python" not in text and "Traceback" not in text
    assert not (shared / "demo" / "schedule.csv").exists()
