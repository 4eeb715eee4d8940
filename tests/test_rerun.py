"""Exactly-once cells under kill / orphan / rerun interleavings, with real Snakemake.

Only the snakemake process is killed (SIGKILL), as a crashed terminal or an OOM killer
would: the step it had started goes on as an orphan. Then `--unlock` and a rerun, as the
README says. Native environments only: no Docker needed, the interleavings are the same.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, demo_config, held_python, processes

pytestmark = [pytest.mark.slow]


def native_campaign(tmp_path: Path, name: str, reps: int, size: int = 128,
                    repeats: int = 5, min_interval_s: float = 0) -> Path:
    cfg = demo_config()
    cfg["campaign"] = name
    cfg["repetitions"] = reps
    cfg["environments"] = {"native": cfg["environments"]["native"]}
    cfg["reference_environment"] = "native"
    cfg["models"] = [{"id": f"n{size}", "size": size, "repeats": repeats}]
    cfg["thermal"].update(min_interval_s=min_interval_s, cooldown_s=0.2, poll_s=0.1)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def snakemake(tmp_path: Path, cfg: Path, *args: str, popen: bool = False):
    argv = [sys.executable, "-m", "snakemake", *args, "--snakefile", str(REPO / "Snakefile"),
            "--directory", str(tmp_path), "--configfile", str(cfg)]
    if popen:
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    return subprocess.run(argv, capture_output=True, text=True, timeout=600)


def ledger(root: Path) -> list[dict]:
    path = root / "ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for(pred, what: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def started(root: Path, step: str, position: int) -> bool:
    return any(e["step"] == step and e["event"] == "start" and e["position"] == position
               for e in ledger(root))


def ended(root: Path, step: str, position: int) -> bool:
    return any(e["step"] == step and e["event"] == "end" and e["position"] == position
               for e in ledger(root))


def run_steps(tmp_path: Path, position: int) -> set[int]:
    """The pids of this test's run steps (`containertax run`, working in tmp_path) of the
    cell at a schedule position (repetition position + 1: one environment, one model)."""
    def match(argv: list[str]) -> bool:
        return ("containertax" in argv and "run" in argv and "--rep" in argv
                and int(argv[argv.index("--rep") + 1]) == position + 1)
    return processes(match, cwd=tmp_path)


def why(out: subprocess.CompletedProcess) -> str:
    """The failed jobs' errors from Snakemake's output (its tail is the job summary)."""
    text = out.stdout + out.stderr
    at = text.find("Error in rule")
    return text[at:at + 3000] if at >= 0 else text[-3000:]


def records(root: Path) -> list[Path]:
    return sorted(p for p in (root / "raw").glob("*/*/rep*.json")
                  if not p.name.endswith(".cooldown.json"))


def ok_runs(root: Path) -> Counter:
    return Counter(e["position"] for e in ledger(root)
                   if e["step"] == "run" and e["event"] == "end" and e["status"] == "ok")


def kill_snakemake_only(proc: subprocess.Popen) -> None:
    """SIGKILL the snakemake process alone: the step it started goes on, orphaned."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def unlock_and_rerun(tmp_path: Path, cfg: Path) -> subprocess.CompletedProcess:
    unlock = snakemake(tmp_path, cfg, "--unlock")
    assert unlock.returncode == 0, unlock.stderr[-2000:]
    return snakemake(tmp_path, cfg, "cells")


def test_rerun_after_an_orphaned_gate_completes_every_cell(tmp_path):
    """Issue #16, failure 1: killed during a gate whose orphan then finished, the rerun ran
    the gate alone, exited 0 and left most cells unrun."""
    cfg = native_campaign(tmp_path, "orphangate", reps=4, min_interval_s=3)
    root = tmp_path / "results" / "orphangate"
    proc = snakemake(tmp_path, cfg, "cells", popen=True)
    wait_for(lambda: started(root, "gate", 1), "the second cell's gate")
    kill_snakemake_only(proc)
    wait_for(lambda: ended(root, "gate", 1), "the orphaned gate to finish")
    out = unlock_and_rerun(tmp_path, cfg)
    assert out.returncode == 0, why(out)
    assert len(records(root)) == 4
    assert ok_runs(root) == Counter({0: 1, 1: 1, 2: 1, 3: 1})


@pytest.mark.parametrize("rerun_when", ["orphan-measuring", "orphan-done"])
def test_rerun_beside_an_orphaned_run_keeps_its_record(tmp_path, rerun_when):
    """Issue #16, failure 2: a rerun while the orphaned run still measured waited on the
    run lock, measured again, failed on the existing record, and Snakemake deleted it.
    (And the rerun after the orphan has written its record: the cell is done.) The first
    run is held (conftest.held_python) until the test lets it go: the interleaving is made
    by events, not by a run long enough for a clock (it was 150 products of 768 x 768)."""
    cfg = native_campaign(tmp_path, "orphanrun", reps=2)
    wrapper, hold, held = held_python(tmp_path, hold_at=1)
    data = yaml.safe_load(cfg.read_text())
    data["environments"]["native"]["python"] = str(wrapper)
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    root = tmp_path / "results" / "orphanrun"
    proc = snakemake(tmp_path, cfg, "cells", popen=True)
    wait_for(held.exists, "the first run, held")
    kill_snakemake_only(proc)
    assert not ended(root, "run", 0)
    unlock = snakemake(tmp_path, cfg, "--unlock")
    assert unlock.returncode == 0
    orphaned = run_steps(tmp_path, position=0)
    assert len(orphaned) == 1, orphaned  # the orphaned run step, still measuring
    if rerun_when == "orphan-done":
        hold.unlink()
        wait_for(lambda: ended(root, "run", 0), "the orphaned run to finish")
    rerun = snakemake(tmp_path, cfg, "cells", popen=True)
    if rerun_when == "orphan-measuring":
        # the rerun's own run step of that cell has started beside the orphan: only then
        # does the orphan finish
        wait_for(lambda: run_steps(tmp_path, position=0) - orphaned, "the rerun's run step")
        hold.unlink()
    wait_for(lambda: ended(root, "run", 0), "the orphaned run to finish")
    orphan = next(e["attempt"] for e in ledger(root)
                  if e["step"] == "run" and e["event"] == "end" and e["position"] == 0)
    assert rerun.wait(timeout=300) == 0
    assert len(records(root)) == 2
    rec0 = next(p for p in records(root) if p.name == "rep001.json")
    assert json.loads(rec0.read_text())["attempt"] == orphan, "the orphan's record was lost"
    assert ok_runs(root) == Counter({0: 1, 1: 1}), "a cell was measured twice"
    # orphan-measuring: the interleaving happened, the rerun's run step waited for the
    # orphan and found its record (the old code measured again, failed on the record, and
    # Snakemake deleted it); orphan-done: the rerun never planned that run
    assert any(e["step"] == "run" and e["event"] == "skipped" and e["position"] == 0
               for e in ledger(root)) == (rerun_when == "orphan-measuring")


def test_added_repetition_and_model_reach_runs_csv_and_paper_in_one_invocation(tmp_path):
    """Issue #16, failures 3 and 4: after a finished campaign, an edit that adds a
    repetition and a model runs the new cells and rebuilds runs.csv and the paper from every
    record in the same invocation; the old cells keep their schedule positions."""
    cfg = native_campaign(tmp_path, "grow", reps=2)
    data = yaml.safe_load(cfg.read_text())  # two environments: the paper has a comparison
    data["environments"]["native2"] = dict(data["environments"]["native"])
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    root = tmp_path / "results" / "grow"
    first = snakemake(tmp_path, cfg)
    assert first.returncode == 0, why(first)
    old_schedule = (root / "schedule.csv").read_text().splitlines()
    data = yaml.safe_load(cfg.read_text())
    data["repetitions"] = 3
    data["models"].append({"id": "n96", "size": 96, "repeats": 5})
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    second = snakemake(tmp_path, cfg)
    assert second.returncode == 0, why(second)
    assert len(records(root)) == 12
    with (root / "runs.csv").open() as fh:
        cells = {(r["model"], r["repetition"]) for r in csv.DictReader(fh)}
    assert cells == {(m, str(r)) for m in ("n128", "n96") for r in (1, 2, 3)}
    new_schedule = (root / "schedule.csv").read_text().splitlines()
    assert new_schedule[:len(old_schedule)] == old_schedule, "existing cells moved"
    positions = [line.split(",")[0] for line in new_schedule[1:]]
    assert len(set(positions)) == len(positions) == 12
    for rec in records(root):  # every record's position is its cell's schedule position
        cell = json.loads(rec.read_text())["cell"]
        assert (f"{cell['position']},{cell['model']},{cell['environment']},"
                f"{cell['repetition']},") in "\n".join(new_schedule)
    text = " ".join(subprocess.run(["pdftotext", str(root / "paper" / "paper.pdf"), "-"],
                                   capture_output=True, text=True).stdout.split())
    assert "in 12 runs" in text, text[:2000]
    assert ok_runs(root) == Counter(range(12)), "a cell ran twice or not at all"


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs (needs root)")
@pytest.mark.parametrize("trouble", ["full", "read-only"])
def test_a_full_or_read_only_cell_folder_fails_only_its_cells(tmp_path, trouble):
    """Issue #16, failure 7: a results folder that cannot take a record fails those cells
    with a clear ledger entry; every other cell still runs and keeps its record."""
    cfg = native_campaign(tmp_path, "disk", reps=2)
    data = yaml.safe_load(cfg.read_text())
    data["models"].append({"id": "n96", "size": 96, "repeats": 5})
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    root = tmp_path / "results" / "disk"
    stuck = root / "raw" / "n96" / "native"
    stuck.mkdir(parents=True)
    if trouble == "full":
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(stuck)],
                       check=True)
        subprocess.run(["dd", "if=/dev/zero", f"of={stuck / 'filler'}", "bs=4k"],
                       capture_output=True)
    else:
        subprocess.run(["mount", "--bind", "-o", "ro", str(stuck), str(stuck)], check=True)
    try:
        out = snakemake(tmp_path, cfg, "cells")
    finally:
        subprocess.run(["umount", str(stuck)], check=True)
    assert out.returncode != 0
    assert {p.parent.parent.name for p in records(root)} == {"n128"}
    assert len(records(root)) == 2
    failed = [e for e in ledger(root) if e.get("status") == "failed"]
    assert {e["model"] for e in failed} == {"n96"} and len(failed) == 2
    why = "No space left on device" if trouble == "full" else "Read-only file system"
    assert all(why in e["error"] and "full or not writable" in e["error"] for e in failed)
    status = subprocess.run([sys.executable, "-m", "containertax", "status", str(cfg)],
                            capture_output=True, text=True, cwd=tmp_path)
    assert "failed n96/native/rep001 (run" in status.stdout, status.stdout + status.stderr
