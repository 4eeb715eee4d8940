"""Time of one committed campaign's `snakemake paper` from its raw records, for the code
of an earlier commit and for this checkout, in one run (alternating, so both see the same
machine load); prints wall and CPU seconds, seconds per rule, the ratios this/before, and
whether the paper's numbers.tex and review.json are byte-identical between the two.

Nothing is measured on a GPU: the committed raw records are the input, and the analysis
and the paper are what is timed (the step a test of a committed campaign or of a demo
campaign's paper pays).

    .venv/bin/python benchmarks/paper_build_speed.py [--campaign h100-matmul] \\
        [--before main] [--rounds 1]
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from paper_rebuild import per_rule  # noqa: E402 - the benchmarks folder is no package

REPO = Path(__file__).resolve().parents[1]
TREE = [".", ":(exclude)results"]  # the whole checkout but its results
COMPARED = ["paper/numbers.tex", "paper/review.json"]


def export(rev: str, into: Path) -> Path:
    """The workflow and package of a commit (git archive), to run beside this checkout."""
    blob = subprocess.run(["git", "archive", rev, "--", *TREE], cwd=REPO, capture_output=True,
                          check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(into, filter="data")
    return into


def cpu_of_children() -> float:
    """CPU seconds (user + system) of the finished child processes and theirs: on a shared
    machine a steadier measure than the wall time, which other work stretches."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def build(tree: Path, campaign: str, work: Path) -> tuple[float, float, str]:
    """One `snakemake paper` of the campaign's committed raw records with `tree`'s
    Snakefile and package (PYTHONPATH first: the steps run `python -m containertax`):
    (wall seconds, CPU seconds, seconds per rule)."""
    shutil.copytree(REPO / "results" / campaign / "raw", work / "results" / campaign / "raw")
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "CONTAINERTAX_STATUS_PAGE": "0"}
    t0, cpu0 = time.perf_counter(), cpu_of_children()
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "paper", "--cores", "1",
         "--snakefile", str(tree / "Snakefile"), "--directory", str(work),
         "--configfile", str(REPO / "config" / f"{campaign}.yaml")],
        capture_output=True, text=True, env=env)
    elapsed, cpu = time.perf_counter() - t0, cpu_of_children() - cpu0
    if out.returncode != 0:
        sys.exit(f"snakemake paper failed with {tree}:\n{out.stdout[-3000:]}{out.stderr[-3000:]}")
    return elapsed, cpu, per_rule(out.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--campaign", default="h100-matmul")
    ap.add_argument("--before", default="main", help="commit whose code is the baseline")
    ap.add_argument("--rounds", type=int, default=1, help="before/after pairs (alternating)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        trees = {"before": export(a.before, base / "before"), "after": REPO}
        took: dict[str, list[float]] = {"before": [], "after": []}
        cpu: dict[str, list[float]] = {"before": [], "after": []}
        same = True
        for r in range(a.rounds):
            works = {}
            for label in ("before", "after") if r % 2 == 0 else ("after", "before"):
                works[label] = base / f"{label}-{r}"
                seconds, cpu_s, rules = build(trees[label], a.campaign, works[label])
                took[label].append(seconds)
                cpu[label].append(cpu_s)
                print(f"{label} ({a.before if label == 'before' else 'this checkout'}): "
                      f"{seconds:.1f} s wall, {cpu_s:.1f} s CPU; {rules}", flush=True)
            for name in COMPARED:
                a_, b_ = (works[k] / "results" / a.campaign / name for k in ("before", "after"))
                equal = a_.read_bytes() == b_.read_bytes()
                same &= equal
                print(f"  {name}: {'byte-identical' if equal else 'DIFFERS'}")
        for what, d in (("wall", took), ("CPU", cpu)):
            before, after = min(d["before"]), min(d["after"])
            print(f"{a.campaign} `snakemake paper` from raw, {what}: before {before:.1f} s, "
                  f"after {after:.1f} s (best of {a.rounds}); after/before = "
                  f"{after / before:.2f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
