"""Harness overhead per cell against the floor of a bare Snakemake chain, in one run.

Runs a small campaign (`snakemake cells`, default: config/demo.yaml with 2 repetitions,
12 cells) and then a bare Snakefile with the same number of cells, each a chain of three
trivial jobs (gate -> run -> cooldown, every job `date > {output}`), with the same flags.

    overhead per cell = (last cooldown end - first gate start - workload process time
                         - gate waits - cooldown waits - page-cache drops) / cells
    floor per cell    = (last trivial job - first trivial job) / cells

and a second floor, the same chain with every job an interpreter start of the steps'
Python (`python -c pass`): the least any harness pays whose steps are processes of their own
(which #16's guarantees rest on: a step outlives a killed Snakemake and still writes its
record),

i.e. what Snakemake, the steps' interpreter start-up and imports, config and schedule
reads, sensors, telemetry and record writing add to every cell beyond the deliberate waits
and the workload. It also says where that time goes: inside each step (ledger start to
end, less its deliberate time) and between steps (Snakemake's job cost plus the next
step's interpreter start, before its first ledger line).

How low any design could go is measured as well, in the same run: the same campaign's step
work with all three steps of every cell called in one warm process (no interpreter start,
no imports, no Snakemake: what a step server forking each step from a warm process would
still pay), and Snakemake's own cost of three jobs run inside its process (`run:` jobs
under --force-use-threads). Their sum against 1.5x the floor says whether a design that
keeps every step a process of its own (a warm server) could meet that target with the
steps' present work. Run it alone on the machine:

    flock /tmp/ct-docker.lock .venv/bin/python benchmarks/harness_overhead.py
    .venv/bin/python benchmarks/harness_overhead.py --ledger results/demo   # existing ledger
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from containertax.core.records import cell_events, read_ledger

REPO = Path(__file__).resolve().parents[1]
STEPS = ("gate", "run", "cooldown")
FLAGS = ["--cores", "1", "--scheduler", "greedy", "--keep-going"]


def _t(event: dict) -> float:
    return datetime.fromisoformat(event["utc"]).timestamp()


def cells_of(root: Path) -> list[dict[str, Any]]:
    """Per complete cell: start/end of each step and its deliberate time (last attempt)."""
    cells: dict[tuple, dict[str, Any]] = {}
    for e in cell_events(read_ledger(root)):  # gate, run, cooldown: a move aside is none
        key = (e["model"], e["environment"], e["repetition"])
        c = cells.setdefault(key, {"environment": e["environment"]})
        step = e["step"]
        if e["event"] == "start":
            c[f"{step}_start"] = _t(e)
        elif e.get("status") == "ok":
            c[f"{step}_end"] = _t(e)
            # run: the workload, and the page-cache drop the config asks for before it
            c[f"{step}_deliberate"] = (e.get("workload_s", 0.0) + e.get("page_cache_s", 0.0)
                                       if step == "run" else e.get("waited_s", 0.0))
            if step == "run":
                c["page_cache"] = e.get("page_cache_s", 0.0)
    need = {f"{s}_{k}" for s in STEPS for k in ("start", "end", "deliberate")}
    return sorted((c for c in cells.values() if need <= c.keys()),
                  key=lambda c: c["gate_start"])


def harness_per_cell(cells: list[dict[str, Any]]) -> float:
    span = cells[-1]["cooldown_end"] - cells[0]["gate_start"]
    deliberate = sum(c[f"{s}_deliberate"] for c in cells for s in STEPS)
    return (span - deliberate) / len(cells)


def breakdown(cells: list[dict[str, Any]]) -> dict[str, float]:
    """Medians: time inside each step beyond its deliberate part, and the gaps between
    steps (Snakemake's per-job cost + the next step's interpreter start and imports)."""
    parts: dict[str, list[float]] = {}
    for i, c in enumerate(cells):
        for s in STEPS:
            inside = c[f"{s}_end"] - c[f"{s}_start"] - c[f"{s}_deliberate"]
            parts.setdefault(f"in {s}", []).append(inside)
            if s == "run":  # a container's teardown, e.g., is the run step's, not the workload's
                parts.setdefault(f"  in run, {c['environment']}", []).append(inside)
        parts.setdefault("gap gate->run", []).append(c["run_start"] - c["gate_end"])
        parts.setdefault("gap run->cooldown", []).append(c["cooldown_start"] - c["run_end"])
        if i + 1 < len(cells):
            parts.setdefault("gap cooldown->next gate", []).append(
                cells[i + 1]["gate_start"] - c["cooldown_end"])
    parts["page-cache drop (deliberate)"] = [c.get("page_cache", 0.0) for c in cells]
    return {k: statistics.median(v) for k, v in parts.items()}


FLOOR_SNAKEFILE = """\
N = {n}
JOB = {job!r}
CELLS = [f"c{{i:04d}}" for i in range(N)]


rule all:
    input:
        expand("floor/{{cell}}.cooldown", cell=CELLS),


rule gate:
    output:
        "floor/{{cell}}.gate",
{action}


rule run:
    input:
        "floor/{{cell}}.gate",
    output:
        "floor/{{cell}}.run",
{action}


rule cooldown:
    input:
        "floor/{{cell}}.run",
    output:
        "floor/{{cell}}.cooldown",
{action}
"""


SHELL_JOB = """\
    shell:
        JOB"""
IN_PROCESS_JOB = """\
    run:
        Path(output[0]).write_text(repr(time.time()))"""


def floor_per_cell(n: int, work: Path, job: str = "date +%s.%N > {output}",
                   in_process: bool = False) -> float:
    """A bare chain of three trivial jobs per cell, same cell count and flags; in_process:
    each job a `run:` block in Snakemake's own process (--force-use-threads)."""
    work.mkdir(parents=True, exist_ok=True)
    snakefile = FLOOR_SNAKEFILE.format(n=n, job=job,
                                       action=IN_PROCESS_JOB if in_process else SHELL_JOB)
    flags = list(FLAGS)
    if in_process:
        snakefile = "import time\nfrom pathlib import Path\n" + snakefile
        flags.append("--force-use-threads")
    (work / "Snakefile").write_text(snakefile)
    out = subprocess.run([sys.executable, "-m", "snakemake", *flags, "--directory", str(work),
                          "--snakefile", str(work / "Snakefile")],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"floor workflow failed:\n{out.stderr[-3000:]}")
    stamps = sorted(float(p.read_text()) for p in (work / "floor").iterdir())
    return (stamps[-1] - stamps[0]) / n


def _snakemake(config: Path, reps: int, work: Path, name: str,
               targets: list[str]) -> tuple[Path, float]:
    """Snakemake's `targets` of the config as campaign `name` with `reps` repetitions."""
    cfg = yaml.safe_load(config.read_text())
    cfg.update(campaign=name, repetitions=reps)
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "snakemake", *targets, *FLAGS,
                          "--snakefile", str(REPO / "Snakefile"), "--directory", str(work),
                          "--configfile", str(path)], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"campaign failed:\n{out.stderr[-3000:]}")
    return work / "results" / name, time.perf_counter() - t0


def run_campaign(config: Path, reps: int, work: Path) -> Path:
    root, took = _snakemake(config, reps, work, "overheadbench", ["cells"])
    print(f"campaign {config.name} x{reps} reps: `snakemake cells` took {took:.1f} s")
    return root


def warm_step_work(config: Path, reps: int, work: Path) -> list[dict[str, Any]]:
    """The same campaign's cells with every step called in this one process, in schedule
    order, once Snakemake has made what the cells need (schedule, system facts,
    preflight): the steps' own work without interpreter starts, imports or Snakemake."""
    from containertax import cli
    from containertax.campaign import schedule

    envs = yaml.safe_load(config.read_text())["environments"]
    root = Path("results/warmsteps")
    _snakemake(config, reps, work, root.name,
               [str(root / "schedule.csv"), str(root / "system.json"),
                *(str(root / "preflight" / f"{env}.json") for env in envs)])
    root = work / root
    resolved = root / "config.resolved.json"
    campaign = cli.load(str(resolved))
    cwd = Path.cwd()
    os.chdir(work)  # the campaign's paths are relative to Snakemake's directory
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # the steps log to files as well
            for cell in schedule.plan(campaign):
                _warm_cell(cli, campaign, cell, resolved, work / "logs")
        return cells_of(root)
    finally:
        os.chdir(cwd)
        logging.getLogger().handlers.clear()  # cli.main's file handler


def _warm_cell(cli: Any, campaign: Any, cell: Any, resolved: Path, logs: Path) -> None:
    paths = campaign.paths.cell(cell.model, cell.environment, cell.repetition)
    paths.gate.parent.mkdir(parents=True, exist_ok=True)
    common = ["--config", str(resolved), "--model", cell.model, "--environment",
              cell.environment, "--rep", paths.label]
    for step, args in (("gate", ["--out", str(paths.gate)]),
                       ("run", ["--gate", str(paths.gate), "--out", str(paths.ran)]),
                       ("cooldown", ["--out", str(paths.done)])):
        log = logs / f"{step}.log"
        if cli.main([step, *common, *args, "--log", str(log)]) != 0:
            raise SystemExit(f"warm {step} of {cell} failed; see {log}")


def report(cells: list[dict[str, Any]], floor: float | None,
           python_floor: float | None = None, warm: list[dict[str, Any]] | None = None,
           in_process_floor: float | None = None) -> None:
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("note: PYTHONDONTWRITEBYTECODE is set: every step compiles the package's modules "
              "from source (no .pyc), as it would not on a usual machine")
    per_cell = harness_per_cell(cells)
    print(f"{len(cells)} cells; harness overhead per cell: {per_cell:.2f} s")
    for k, v in breakdown(cells).items():
        print(f"  median {k:<24} {v:6.2f} s")
    if floor is not None:
        print(f"floor (bare Snakemake, 3 trivial jobs per cell): {floor:.2f} s per cell")
        print(f"ratio harness / floor: {per_cell / floor:.2f}")
    if python_floor is not None:
        print(f"floor with a Python start per job (3 per cell): {python_floor:.2f} s per cell")
        print(f"ratio harness / Python-start floor: {per_cell / python_floor:.2f}")
    if warm and in_process_floor is not None and floor is not None:
        work_per_cell = harness_per_cell(warm)
        least = work_per_cell + in_process_floor
        print(f"step work in one warm process, no Snakemake ({len(warm)} cells): "
              f"{work_per_cell * 1000:.0f} ms per cell")
        for k, v in breakdown(warm).items():
            if not k.startswith("page-cache"):
                print(f"  median {k:<24} {v * 1000:6.1f} ms")
        print(f"Snakemake's own cost of 3 jobs in its process (run:, --force-use-threads): "
              f"{in_process_floor * 1000:.1f} ms per cell")
        print(f"=> a warm step server with today's step work: {least * 1000:.0f} ms per cell, "
              f"{least / floor:.2f}x the floor (target 1.5x = {1.5 * floor * 1000:.0f} ms)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=REPO / "config" / "demo.yaml")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--ledger", type=Path, help="only analyse this campaign's ledger")
    args = parser.parse_args()
    if args.ledger:
        cells = cells_of(args.ledger)
        if not cells:
            print(f"no complete cells in {args.ledger}/ledger.jsonl")
            return 1
        report(cells, None)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        root = run_campaign(args.config.resolve(), args.reps, work / "campaign")
        cells = cells_of(root)
        floor = floor_per_cell(len(cells), work / "floor")
        python_floor = floor_per_cell(
            len(cells), work / "python-floor",
            f"{sys.executable} -c pass && date +%s.%N > {{output}}")
        warm = warm_step_work(args.config.resolve(), args.reps, work / "warm")
        in_process_floor = floor_per_cell(len(cells), work / "in-process-floor",
                                          in_process=True)
        report(cells, floor, python_floor, warm, in_process_floor)
    return 0


if __name__ == "__main__":
    sys.exit(main())
