"""Per environment, where the first compiled step of the LLM probe's engine decoding went
(issue #32), from a campaign's raw records: the timeline's compile, imports and exit
phases (exit: the launcher's wall time ends at the process's exit), torch.compile's
own seconds per timed function (detail.compile_breakdown, recorded by probe/llm.py when
that step returned), Inductor's compile_threads, the probe's descendant processes by then
(its compile worker pool) and the probe's seccomp mode. A markdown table on stdout; each
cell the mean over the environment's runs, with min-max when there are several.

    python3 tools/gpu/compile_breakdown.py results/h100-warmup-causes [--top 12]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

RECORD = re.compile(r"rep\d+\.json$")


def rows_of(record: dict[str, Any]) -> dict[str, float | str | None]:
    """One run's values by row name; a value this record lacks is absent."""
    out: dict[str, float | str | None] = {}
    phases = (record.get("timeline") or {}).get("phases_s") or {}
    if "phase_compile_s" in phases:
        out["first compiled step (timeline)"] = phases["phase_compile_s"]
    if "phase_imports_s" in phases:
        out["imports (timeline)"] = phases["phase_imports_s"]
    if "phase_exit_s" in phases:  # the waitid launcher fix, checked on the GPU machine
        out["exit (timeline)"] = phases["phase_exit_s"]
    b = (record.get("detail") or {}).get("compile_breakdown") or {}
    for name, v in (b.get("seconds") or {}).items():
        out[f"torch: {name}"] = v.get("s")
    for name, seconds in (b.get("phases") or {}).items():
        out[f"torch phase: {name}"] = seconds
    if b.get("compile_threads") is not None:
        out["compile_threads"] = b["compile_threads"]
    d = b.get("descendants") or {}
    if d:
        out["descendant processes at the step's end"] = d.get("count")
        out["first descendant started (s after probe start)"] = d.get("first_start_s")
        out["last descendant started (s after probe start)"] = d.get("last_start_s")
    status = (((record.get("inside") or {}).get("environment") or {}).get("status") or {})
    if "Seccomp" in status:
        out["Seccomp (0 none, 2 filter)"] = status["Seccomp"]
    return out


def collect(root: Path) -> tuple[dict[str, dict[str, list]], list[str]]:
    """values[row][environment] over the ok records under root/raw (or root itself)."""
    raw = root / "raw" if (root / "raw").is_dir() else root
    values: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    envs: list[str] = []
    for path in sorted(raw.rglob("rep*.json")):
        if not RECORD.search(path.name) or "visits" in path.parts:
            continue
        try:
            record = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            print(f"{path}: unreadable ({exc}); skipped", file=sys.stderr)
            continue
        if record.get("status") != "ok":
            continue
        env = (record.get("cell") or {}).get("environment") or "?"
        if env not in envs:
            envs.append(env)
        for row, value in rows_of(record).items():
            values[row][env].append(value)
    return values, envs


def cell(values: list) -> str:
    if not values:
        return ""
    if any(not isinstance(v, int | float) for v in values):
        return ", ".join(sorted({str(v) for v in values}))
    text = f"{statistics.fmean(values):.3g}"
    if len(values) > 1:
        text += f" ({min(values):.3g}-{max(values):.3g}, n={len(values)})"
    return text


def table(values: dict[str, dict[str, list]], envs: list[str], top: int) -> str:
    fixed = [r for r in values if not r.startswith("torch")]
    phases = sorted(r for r in values if r.startswith("torch phase: "))
    torch_rows = sorted((r for r in values if r.startswith("torch: ")),
                        key=lambda r: -max((statistics.fmean(v) for v in values[r].values()
                                            if v and all(isinstance(x, int | float)
                                                         for x in v)), default=0.0))
    lines = ["| sub-step (seconds unless named) | " + " | ".join(envs) + " |",
             "| --- |" + " --- |" * len(envs)]
    for row in fixed[:3] + phases + torch_rows[:top] + fixed[3:]:
        lines.append(f"| {row} | " + " | ".join(cell(values[row].get(e, [])) for e in envs)
                     + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", type=Path, help="a campaign's results folder (or its raw/)")
    p.add_argument("--top", type=int, default=15, help="torch's N longest timed functions")
    args = p.parse_args(argv)
    if not args.results.is_dir():
        print(f"{args.results}: no such folder; give a campaign's results folder, e.g. "
              "results/h100-warmup-causes", file=sys.stderr)
        return 2
    values, envs = collect(args.results)
    if not envs:
        print(f"{args.results}: no ok run records (raw/<model>/<environment>/repNNN.json)",
              file=sys.stderr)
        return 1
    print(table(values, envs, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
