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
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy import stats

PARTS = {
    "first compiled step (timeline)": lambda m, s: m["phase_compile_s"],
    "Dynamo _compile.compile_inner": lambda m, s: s.get("_compile.compile_inner"),
    "  of it: bytecode_tracing": lambda m, s: s.get("bytecode_tracing"),
    "  of it: OutputGraph.call_user_compiler": lambda m, s: s.get("OutputGraph.call_user_compiler"),
    "  of it: PyCodeCache.load_by_key_path": lambda m, s: s.get("PyCodeCache.load_by_key_path"),
    "rest of the step (first run of the compiled graph)":
        lambda m, s: m["phase_compile_s"] - s["_compile.compile_inner"],
    "imports (timeline)": lambda m, s: m["phase_imports_s"],
    "exit (timeline)": lambda m, s: m["phase_exit_s"],
    "start (timeline)": lambda m, s: m["phase_start_s"],
    "process wall time": lambda m, s: m["process_wall_s"],
}


def read(root: Path) -> dict[int, dict[str, tuple[dict, dict]]]:
    """block -> environment -> (metrics, Dynamo's seconds per timed function), ok runs only."""
    out: dict[int, dict[str, tuple[dict, dict]]] = defaultdict(dict)
    for path in sorted((root / "raw").glob("*/*/rep[0-9][0-9][0-9].json")):
        rec = json.loads(path.read_text())
        if rec.get("status") != "ok":
            continue
        metrics = {m["name"]: m["value"] for m in rec["metrics"]}
        seconds = {k: v.get("s") for k, v in ((rec.get("detail") or {}).get(
            "compile_breakdown") or {}).get("seconds", {}).items() if isinstance(v, dict)}
        out[int(path.stem[3:])][path.parent.name] = (metrics, seconds)
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
                return part(*runs[b][e])
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
