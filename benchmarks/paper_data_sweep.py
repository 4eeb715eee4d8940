"""Which of the paper's review checks a campaign's values can trip: one small measured
campaign, its raw records perturbed per seed, the paper rebuilt, review.json collected.

The standard: no test whose outcome depends on the data of the run, so the
review (publishing/review.py, run by the pdf rule) must come out empty for any values the
workflow can measure. A test campaign measures a few runs, and their values land anywhere:
this sweep plants the values a real run could give (one environment slower or faster by
any factor, intervals huge or tiny, a constant metric, values near zero, one block slow)
and lists every review problem per seed. It is a benchmark, not a test: each seed rebuilds
a paper (about 17 s on two cores). Results: docs/measurement.md, "The review for any
values".

How the records are perturbed: a raw record carries no checksum (core/rawrecord.py
validates the schema; campaign/integrity.py checks that a record is JSON and names its own
cell), so the sweep edits the copies' metric values, their timeline marks (the phases and
the process wall time are recomputed from them by the aggregation), their per-request
latencies and telemetry, in the copy's raw/ folder: the earliest layer the paper rule
reads. The values are SYNTHETIC: nothing here measures containers; it measures the
paper's words.

    PYTHONPATH=src .venv/bin/python benchmarks/paper_data_sweep.py [--base DIR]
        [--seeds 0-49] [--keep] [--out FILE.json]

Without --base it first measures the tests' small campaign (tests/test_workflow.py:
native, chroot and docker, two repetitions; Docker and the demo image needed) into a
temporary folder, once.
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CAMPAIGN = "order"
ENVS = ["native", "chroot", "docker"]
# the campaign's folders the paper does not read (the chroot's exported root file system
# is 200 MiB), and the analysis outputs that must be rebuilt from the perturbed records
SKIP = {"rootfs", "work", "paper", "stats", "logs", "runs.csv", "requests.csv", ".run.lock",
        "ledger.lock"}
MEMORY_UNITS = {"MiB", "GiB", "KiB", "%"}


def measure_base(where: Path) -> Path:
    """The tests' small campaign (make_campaign in tests/test_workflow.py), measured once."""
    sys.path.insert(0, str(REPO))
    from tests.test_workflow import make_campaign

    where.mkdir(parents=True)
    cfg = make_campaign(where, CAMPAIGN, ENVS, reps=2)
    env = {**os.environ, "CONTAINERTAX_STATUS_PAGE": "0"}
    out = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--snakefile",
                          str(REPO / "Snakefile"), "--directory", str(where), "--configfile",
                          str(cfg)], capture_output=True, text=True, env=env)
    if out.returncode:
        sys.exit(f"measuring the base campaign failed:\n{out.stderr[-3000:]}")
    return where


def copy_base(base: Path, dest: Path) -> Path:
    """The config and the campaign folder without what the paper rule rebuilds."""
    dest.mkdir(parents=True)
    shutil.copy2(base / f"{CAMPAIGN}.yaml", dest / f"{CAMPAIGN}.yaml")
    src = base / "results" / CAMPAIGN
    root = dest / "results" / CAMPAIGN
    root.mkdir(parents=True)
    for item in src.iterdir():
        if item.name in SKIP:
            continue
        (shutil.copytree if item.is_dir() else shutil.copy2)(item, root / item.name)
    return root


# --- the perturbations: each takes the records (path -> dict) and an rng --------------

Records = dict[Path, dict[str, Any]]


def _env(records: Records, env: str) -> list[tuple[Path, dict[str, Any]]]:
    return [(p, r) for p, r in sorted(records.items()) if r["cell"]["environment"] == env]


def scale_run(path: Path, rec: dict[str, Any], factor: float, which: str = "all",
              phase: str | None = None) -> None:
    """Scale a run's times (metrics in s, per-request latencies, the timeline's gaps: the
    phases and the wall time stay consistent), its throughputs by 1/factor, or its memory
    (which='memory')."""
    for m in rec["metrics"]:
        if which == "memory" and m["unit"] in MEMORY_UNITS:
            m["value"] *= factor
        elif which == "all" and m["unit"] == "s" and not m["name"].startswith("phase_"):
            if m["name"] != "process_wall_s":
                m["value"] *= factor
        elif which == "all" and m["unit"].endswith("/s"):
            m["value"] /= factor
    if which == "all":
        req = path.with_name(rec["files"]["requests"])
        if req.exists() and req.stat().st_size:
            rows = list(csv.DictReader(req.open()))
            for r in rows:
                r["latency_s"] = repr(float(r["latency_s"]) * factor)
            _write_csv(req, rows)
    if which == "all" or phase:
        scale_timeline(rec, factor, phase)


def scale_timeline(rec: dict[str, Any], factor: float, phase: str | None = None) -> None:
    """Every gap between the timeline's marks (or one phase's) times factor; the record's
    phases, sum, wall time and process_wall_s follow."""
    from containertax.workloads import timeline

    tl = rec.get("timeline")
    if not tl:
        return
    marks = tl["marks"]
    names = list(marks)
    start = marks[names[0]]
    new, last_old = {names[0]: start}, start
    for name in names[1:]:
        gap = marks[name] - last_old
        last_old = marks[name]
        if phase is None or _phase_of(name) == phase:
            gap *= factor
        new[name] = new[names[names.index(name) - 1]] + gap
    tl["marks"] = new
    tl["phases_s"] = timeline.phases(new)
    tl["sum_s"] = tl["wall_s"] = new["exited"] - new[timeline.FIRST]
    for m in rec["metrics"]:
        if m["name"] == "process_wall_s":
            m["value"] = tl["wall_s"]
        elif m["name"] in tl["phases_s"]:
            m["value"] = tl["phases_s"][m["name"]]


def _phase_of(mark: str) -> str | None:
    from containertax.workloads import timeline

    return next((p.metric for p in timeline.PHASES if p.mark == mark), None)


def scale_side(path: Path, rec: dict[str, Any], which: str, columns: list[str],
               factor: float) -> None:
    """A run's side file (requests, telemetry): the given columns times factor."""
    side = path.with_name(rec["files"][which])
    if not side.exists() or not side.stat().st_size:
        return
    rows = list(csv.DictReader(side.open()))
    for r in rows:
        for c in columns:
            if r.get(c):
                r[c] = repr(float(r[c]) * factor)
    if rows:
        side.chmod(0o644)
        _write_csv(side, rows)


def _write_csv(path: Path, rows: list[dict[str, str]]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def set_metric(records: Records, env: str | None, metric: str, fn) -> None:
    for _, rec in sorted(records.items()):
        if env is None or rec["cell"]["environment"] == env:
            for m in rec["metrics"]:
                if m["name"] == metric:
                    m["value"] = fn(m["value"], rec)


FACTORS = [1e-6, 1e-3, 0.05, 0.5, 0.97, 0.999, 1.001, 1.03, 2.0, 20.0, 650.0, 1e4, 1e6]
METRICS = ["compute_time_s", "max_rss_mib", "startup_s", "process_wall_s"]


def perturb(records: Records, seed: int) -> list[str]:
    """Two to four of the perturbations, drawn from the seed; returns what was done."""
    rng = np.random.default_rng(seed)
    done = []
    for _ in range(int(rng.integers(2, 5))):
        kind = rng.choice(["scale-env", "scale-phase", "scale-memory", "constant",
                           "identical", "noise", "near-zero", "slow-block", "scale-all",
                           "zero", "one-run", "requests", "telemetry"])
        env = str(rng.choice(ENVS))
        factor = float(rng.choice(FACTORS))
        if kind == "scale-env":
            for p, r in _env(records, env):
                scale_run(p, r, factor)
            done.append(f"{env} times x{factor:g}")
        elif kind == "scale-phase":
            from containertax.workloads.timeline import METRICS as PHASES

            phase = str(rng.choice(PHASES))
            for p, r in _env(records, env):
                scale_run(p, r, factor, which="none", phase=phase)
            done.append(f"{env} {phase} x{factor:g}")
        elif kind == "scale-memory":
            for p, r in _env(records, env):
                scale_run(p, r, factor, which="memory")
            done.append(f"{env} memory x{factor:g}")
        elif kind == "constant":
            metric = str(rng.choice(METRICS))
            first: dict[str, float] = {}
            set_metric(records, env, metric, lambda v, r, first=first: first.setdefault("v", v))
            done.append(f"{env} {metric} constant")
        elif kind == "identical":  # every environment alike: a difference of exactly 0
            metric = str(rng.choice(METRICS))
            by_rep: dict[int, float] = {}
            set_metric(records, "native", metric, lambda v, r, by_rep=by_rep:
                       by_rep.setdefault(r["cell"]["repetition"], v))
            set_metric(records, None, metric, lambda v, r, by_rep=by_rep:
                       by_rep[r["cell"]["repetition"]])
            done.append(f"{metric} identical in every environment")
        elif kind == "noise":
            sigma = float(rng.choice([1e-7, 1e-4, 0.3, 1.5]))
            for p, r in _env(records, env):
                scale_run(p, r, float(rng.lognormal(0, sigma)))
            done.append(f"{env} noise sigma {sigma:g}")
        elif kind == "near-zero":
            metric = str(rng.choice(["host_mem_rise_gib", "startup_s", "compute_time_s"]))
            zero = metric.endswith("gib")  # a memory rise of none; a time near none
            set_metric(records, env, metric, lambda v, r, zero=zero: 0.0 if zero else v * 1e-7)
            done.append(f"{env} {metric} near zero")
        elif kind == "slow-block":
            block = int(rng.integers(0, 2))
            for p, r in sorted(records.items()):
                if r["cell"].get("block") == block:
                    scale_run(p, r, factor)
            done.append(f"block {block} times x{factor:g}")
        elif kind == "scale-all":  # another magnitude for the whole campaign
            for p, r in sorted(records.items()):
                scale_run(p, r, factor)
            done.append(f"all times x{factor:g}")
        elif kind == "zero":  # a coarse clock or counter reads 0 in one run
            metric = str(rng.choice([*METRICS, "host_mem_rise_gib"]))
            path, rec = _env(records, env)[int(rng.integers(0, 2))]
            set_metric({path: rec}, env, metric, lambda v, r: 0.0)
            done.append(f"{env} {metric} 0 in {path.stem}")
        elif kind == "one-run":  # one run alone slower or faster
            path, rec = _env(records, env)[int(rng.integers(0, 2))]
            scale_run(path, rec, factor)
            done.append(f"{env} {path.stem} times x{factor:g}")
        elif kind == "requests":  # the per-request latencies alone
            for p, r in _env(records, env):
                scale_side(p, r, "requests", ["latency_s"], factor)
            done.append(f"{env} request latencies x{factor:g}")
        elif kind == "telemetry":
            for p, r in _env(records, env):
                scale_side(p, r, "telemetry", ["cpu_util_pct", "mem_used_mib"], factor)
            done.append(f"{env} telemetry x{factor:g}")
    return done


def perturb_campaign(root: Path, seed: int) -> list[str]:
    from containertax.campaign.paths import CampaignPaths

    raws = CampaignPaths(root).raw_records()
    for p in (root / "raw").rglob("*"):
        if p.is_file():
            p.chmod(0o644)
    records = {p: json.loads(p.read_text()) for p in raws}
    original = copy.deepcopy(records)
    done = perturb(records, seed)
    for p, rec in records.items():
        if rec != original[p]:
            p.write_text(json.dumps(rec, indent=1))
    for p in (root / "raw").rglob("*"):
        if p.is_file():
            p.chmod(0o444)
    return done


def rebuild(work: Path) -> tuple[int, str, float]:
    """`snakemake paper`: the analysis from the raw records, no cell run."""
    t0 = time.monotonic()
    env = {**os.environ, "CONTAINERTAX_STATUS_PAGE": "0"}
    out = subprocess.run(["nice", sys.executable, "-m", "snakemake", "--cores", "1", "paper",
                          "--snakefile", str(REPO / "Snakefile"), "--directory", str(work),
                          "--configfile", str(work / f"{CAMPAIGN}.yaml")],
                         capture_output=True, text=True, env=env)
    return out.returncode, out.stdout + out.stderr, time.monotonic() - t0


def seeds(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def main() -> int:
    global CAMPAIGN, ENVS  # noqa: PLW0603 - the base decides both, once
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", type=Path, help="a folder holding CAMPAIGN.yaml and "
                    "results/CAMPAIGN/ measured before (default: measure one)")
    ap.add_argument("--campaign", default=CAMPAIGN, help="the base's campaign name (e.g. "
                    "demo: a checkout's config/demo.yaml copied beside its results/demo/, "
                    "for a campaign with an A/A replica and two models)")
    ap.add_argument("--seeds", default="0-15")
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir())
                    / "paper-data-sweep.json", help="every seed's perturbations and problems")
    ap.add_argument("--keep", action="store_true", help="keep each seed's folder")
    args = ap.parse_args()
    CAMPAIGN = args.campaign
    if args.base:
        ENVS = sorted({json.loads(r.read_text())["cell"]["environment"] for r in
                       (args.base / "results" / CAMPAIGN / "raw").glob("*/*/rep*[0-9].json")})
    scratch = Path(tempfile.mkdtemp(prefix="paper-sweep-"))
    base = args.base or measure_base(scratch / "base")
    results = []
    for seed in seeds(args.seeds):
        work = scratch / f"seed{seed}"
        root = copy_base(base, work)
        done = perturb_campaign(root, seed)
        rc, log, wall = rebuild(work)
        review = root / "paper" / "review.json"
        problems = json.loads(review.read_text()) if review.exists() else []
        if rc:
            problems.append({"check": "build-failed", "where": "snakemake",
                             "message": log[-600:]})
        results.append({"seed": seed, "perturbed": done, "seconds": round(wall, 1),
                        "problems": problems})
        print(f"seed {seed} ({wall:.0f} s) {'; '.join(done)}: "
              f"{Counter(p['check'] for p in problems) or 'clean'}", flush=True)
        for p in problems:
            print(f"    {p['check']} @ {p['where']}: {p['message'][:300]}", flush=True)
        if not args.keep:
            shutil.rmtree(work)
    classes = Counter(p["check"] for r in results for p in r["problems"])
    seeds_hit = Counter(c for r in results for c in {p["check"] for p in r["problems"]})
    print(f"{len(results)} seeds, {sum(1 for r in results if not r['problems'])} clean; "
          f"problems by check: {dict(classes)}; seeds per check: {dict(seeds_hit)}")
    args.out.write_text(json.dumps(results, indent=1))
    print(f"per seed: {args.out}" + (f"; folders kept in {scratch}" if args.keep else ""))
    if not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
