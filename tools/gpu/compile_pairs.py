"""Paired per-block differences of the first compiled step's parts (issue #32): for each
block, each environment minus the reference (and the first two others against each other),
with the mean and its 95 % t interval over the blocks, as a markdown table. The parts: the
timeline's first compiled step, Dynamo's timed functions (record detail.compile_breakdown),
and the rest of the step after Dynamo returned (the first run of the compiled graph).

    python3 tools/gpu/compile_pairs.py results/h100-warmup-causes [--reference native]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compile_breakdown import RECORD, rows_of  # noqa: E402  (one reading of a record)

STEP, DYNAMO = "first compiled step (timeline)", "torch: _compile.compile_inner"
# the table's rows: a name and how it is read from rows_of's values of one run
PARTS = {
    STEP: lambda v: v[STEP],
    "Dynamo _compile.compile_inner": lambda v: v[DYNAMO],
    "  of it: bytecode_tracing": lambda v: v["torch: bytecode_tracing"],
    "  of it: OutputGraph.call_user_compiler": lambda v: v["torch: OutputGraph.call_user_compiler"],
    "  of it: PyCodeCache.load_by_key_path": lambda v: v["torch: PyCodeCache.load_by_key_path"],
    "rest of the step (first run of the compiled graph)": lambda v: v[STEP] - v[DYNAMO],
    "imports (timeline)": lambda v: v["imports (timeline)"],
    "exit (timeline)": lambda v: v["exit (timeline)"],
    "start (timeline)": lambda v: v["start (timeline)"],
    "process wall time": lambda v: v["process wall time"],
}


def read(root: Path) -> dict[int, dict[str, dict]]:
    """block -> environment -> the run's values (compile_breakdown.rows_of, with its start
    phase and wall time), ok runs only."""
    out: dict[int, dict[str, dict]] = defaultdict(dict)
    for path in sorted((root / "raw").glob("*/*/rep*.json")):
        if not RECORD.search(path.name):
            continue
        rec = json.loads(path.read_text())
        if rec.get("status") != "ok":
            continue
        values = rows_of(rec)
        values["start (timeline)"] = rec["timeline"]["phases_s"]["phase_start_s"]
        values["process wall time"] = next(m["value"] for m in rec["metrics"]
                                           if m["name"] == "process_wall_s")
        out[int(path.stem[3:])][path.parent.name] = values
    return out


def interval(d: list[float]) -> str:
    a = np.array([x for x in d if x is not None and math.isfinite(x)], float)
    if len(a) < 2:
        return "n.e."
    m, se = a.mean(), a.std(ddof=1) / math.sqrt(len(a))
    t = stats.t.ppf(0.975, len(a) - 1)
    return f"{m:+.2f} [{m - t * se:+.2f}, {m + t * se:+.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--reference", default="native")
    args = ap.parse_args()
    runs = read(args.root)
    blocks = [b for b in sorted(runs) if len(runs[b]) == len(max(runs.values(), key=len))]
    envs = sorted(e for e in runs[blocks[0]] if e != args.reference)
    pairs = [(e, args.reference) for e in envs] + ([(envs[0], envs[1])] if len(envs) > 1 else [])
    print(f"| seconds, {len(blocks)} blocks | {args.reference} (mean) | "
          + " | ".join(f"{a} - {b}" for a, b in pairs) + " |")
    print("|---|---|" + "---|" * len(pairs))
    for name, part in PARTS.items():
        def value(b: int, e: str, part=part) -> float | None:
            try:
                return part(runs[b][e])
            except (KeyError, TypeError):
                return None
        ref = [value(b, args.reference) for b in blocks]
        ref = [x for x in ref if x is not None]
        diffs = [interval([None if value(b, a) is None or value(b, c) is None
                           else value(b, a) - value(b, c) for b in blocks]) for a, c in pairs]
        mean = f"{np.mean(ref):.2f}" if ref else "n.e."
        print(f"| {name} | {mean} | " + " | ".join(diffs) + " |")


if __name__ == "__main__":
    main()
