"""Issue #44: no stuck state. Before: after a disk filled during the paper build and space
was freed, `snakemake paper` failed three more times on latexmk's stale state ("File ended
while scanning definition of \\LT@i") until main.aux and main.fdb_latexmk were moved by
hand; after the clock ran a day ahead for two repetitions and was set right, every gate
timed out (it waited from the ledger's latest end time, a day ahead); a disk-full record
write printed the probe's 12-line traceback twice around its one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from containertax.publishing import paper

needs_latex = pytest.mark.skipif(shutil.which("latexmk") is None, reason="needs latexmk")

TINY = r"""\documentclass{article}
\begin{document}
A paper. See Section~\ref{s}.
\section{One}\label{s}
\end{document}
"""


@needs_latex
def test_a_paper_build_recovers_by_itself_after_a_cut_aux(tmp_path, monkeypatch):
    """The planted stale state: a main.aux cut in the middle of a definition (as a full
    disk leaves it) and its latexmk database. The failed build clears them, the next one
    (nothing else changed) succeeds."""
    monkeypatch.setattr(paper.review, "review", lambda *a, **k: [])
    source, build = tmp_path / "src", tmp_path / "build"
    source.mkdir()
    build.mkdir()
    (source / "main.tex").write_text(TINY)
    out = tmp_path / "paper.pdf"
    paper.build(source, build, out)  # a clean build writes the state
    (build / "main.aux").write_text("\\relax\n\\newlabel{s}{{1}{1}")  # cut
    (source / "main.tex").write_text(TINY.replace("A paper.", "A paper, edited."))
    with pytest.raises(paper.PaperError) as failed:
        paper.build(source, build, out)
    assert "main.aux" in str(failed.value) and "starts clean" in str(failed.value)
    assert not (build / "main.aux").exists() and not (build / "main.fdb_latexmk").exists()
    paper.build(source, build, out)  # recovered without a hand
    assert out.stat().st_size > 0


def test_clear_state_removes_only_latex_state(tmp_path: Path):
    for name in ("main.aux", "main.fdb_latexmk", "main.log", "main.tex", "numbers.tex",
                 "main.pdf"):
        (tmp_path / name).write_text("x")
    assert sorted(paper.clear_state(tmp_path, "main")) == ["main.aux", "main.fdb_latexmk",
                                                           "main.log"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["main.pdf", "main.tex",
                                                          "numbers.tex"]


def test_a_gate_after_a_clock_that_ran_ahead_waits_from_now(caplog):
    """The planted jump: the ledger's last run ended a day ahead (the clock ran a day
    ahead for two repetitions and was set right). Before, the gate timed out
    ("thermal.min_interval_s = 2 s did not pass"); now it waits min_interval_s from now,
    says why, and the outcome records the jump."""
    import logging
    from datetime import timedelta

    from containertax.execution import thermal
    from tests.test_thermal import FakeClock, FakeSensor, gate

    clock = FakeClock()
    settings = thermal.GateSettings(threshold_c=45, min_interval_s=2, timeout_s=60, poll_s=0.5)
    ahead = clock.now() + timedelta(days=1)
    thermal.log.addHandler(caplog.handler)  # whatever an earlier cli.main set up
    try:
        with caplog.at_level(logging.WARNING, logger="containertax"):
            out = gate(FakeSensor([30]), settings, ahead, clock)
    finally:
        thermal.log.removeHandler(caplog.handler)
    assert out["passed"] and out["waited_s"] == pytest.approx(2, abs=0.01)
    assert out["clock_jumped_s"] == pytest.approx(86400)
    assert "clock ran ahead" in caplog.text and "min_interval_s = 2 s from now" in caplog.text
    # a clock set back during the wait cannot hold the gate: the monotonic clock counts
    clock2 = FakeClock()
    back = {"n": 0}

    def now_jumping():
        back["n"] += 1
        return clock2.now() - (timedelta(hours=1) if back["n"] > 1 else timedelta(0))

    out = thermal.wait_gate(FakeSensor([30]), settings, clock2.now() - timedelta(seconds=1),
                            clock=clock2.monotonic, sleep=clock2.sleep, now=now_jumping)
    assert out["passed"] and out["waited_s"] == pytest.approx(1, abs=0.01)


def test_a_full_disk_while_the_probe_writes_is_one_line(tmp_path, monkeypatch, capsys):
    """The planted fault: the probe's result write hits ENOSPC. Before, its 12-line
    traceback was printed, and again inside the run step's message; now the probe says it
    in one line (exit status 28) and the run step turns that line into its message."""
    import errno
    import os

    from containertax.execution import cells
    from containertax.workloads.probe import probe_common

    def full(_fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(probe_common.os, "fsync", full)
    with pytest.raises(SystemExit) as stop:
        probe_common.write_atomic(str(tmp_path / "result.json"), {"x": 1})
    assert stop.value.code == errno.ENOSPC
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err, err
    assert list(tmp_path.iterdir()) == []  # no partial file left
    traceback = ("Traceback (most recent call last):\n  File \"x.py\", line 1\n"
                 "OSError: [Errno 28] No space left on device: 'result.json'\n")
    assert cells.disk_full_line(traceback) == (
        "OSError: [Errno 28] No space left on device: 'result.json'")
    assert cells.disk_full_line(err) == err.strip()
    assert cells.disk_full_line("a run that ended well\n") is None
