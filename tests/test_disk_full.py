"""Issue #35: a full disk and damaged ledgers. Before: a full disk during cells gave
one-line failures plus a '--- Logging error ---' dump per message, and an ENOSPC
traceback in the analysis steps; `status` said '0 failed'; a ledger line without
`model`, with a `utc` that is no time, or a ledger path that is a folder stopped `status`
with KeyError, ValueError or IsADirectoryError. The full disk is a real one: a 64 KiB
tmpfs (skipped where this machine may not mount one)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from containertax import cli
from tests.conftest import REPO, demo_config


@pytest.fixture
def full_disk(tmp_path: Path):
    """A mounted 64 KiB tmpfs, filled to the last byte."""
    mnt = tmp_path / f"full-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {out.stderr.strip()}")
    try:
        try:
            with (mnt / "filler").open("wb", buffering=0) as fh:
                while True:
                    fh.write(b"x" * 4096)
        except OSError:
            pass  # full
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_a_full_disk_is_one_clear_line_and_exit_1(tmp_path, full_disk):
    cfg = tmp_path / "demo.yaml"
    cfg.write_text(yaml.safe_dump(demo_config(), sort_keys=False))
    out = subprocess.run(
        [sys.executable, "-m", "containertax", "schedule", "--config", str(cfg),
         "--out", str(full_disk / "schedule.csv"), "--log", str(full_disk / "sched.log")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    err = out.stderr
    assert out.returncode == 1, err
    assert "--- Logging error ---" not in err and "Traceback" not in err, err
    assert "disk full: cannot write" in err and "free space" in err, err
    assert err.count("not written") <= 1, err


def _event(step, event, model, rep, utc, lane="", **more):
    return {"step": step, "event": event, "model": model, "environment": "native",
            "repetition": rep, "utc": utc, "lane": lane, **more}


def test_status_reads_a_damaged_ledger_and_names_each_bad_line(tmp_path, monkeypatch,
                                                                capsys):
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "demo.yaml"
    cfg.write_text(yaml.safe_dump(demo_config(), sort_keys=False))
    root = tmp_path / "results" / "demo"
    root.mkdir(parents=True)
    t = "2026-01-01T00:00:0{}+00:00"
    lines = [
        _event("gate", "start", "n256", 1, t.format(1)),
        {"step": "run", "event": "start", "environment": "native", "repetition": 1,
         "utc": t.format(2)},                                            # no model
        _event("run", "end", "n256", 1, "yesterday", status="failed"),   # utc no time
        _event("run", "start", "n256", 2, t.format(3)),   # never ended: a full disk
        _event("run", "start", "n512", 1, t.format(4)),   # the newest: running now
    ]
    (root / "ledger.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    (root / "ledger.other.jsonl").mkdir()                 # a ledger path that is a folder
    assert cli.main(["status", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "ledger.jsonl line 2: no 'model'" in out, out
    assert "ledger.jsonl line 3: 'utc' is not a time ('yesterday')" in out, out
    assert "ledger.other.jsonl is a folder" in out, out
    # the cell whose run never ended counts as failed; the newest start is running
    assert "2 failed (will rerun)" in out, out
    assert "started and never ended" in out and "started, not finished: n512" in out


def test_a_log_file_on_a_full_disk_says_so_once(tmp_path):
    """/dev/full: every write fails with ENOSPC."""
    code = ("import logging; from containertax import cli; cli._setup_logging('/dev/full')\n"
            "for i in range(12): logging.getLogger('containertax').info('message %d', i)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(REPO / "src")}, timeout=60)
    assert out.returncode == 0
    assert "--- Logging error ---" not in out.stderr
    assert out.stderr.count("log file /dev/full not written") == 1, out.stderr
    assert out.stderr.count("INFO message") == 12
