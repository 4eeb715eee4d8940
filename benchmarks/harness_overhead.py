"""Harness overhead per cell of a finished campaign, from its ledger.

overhead = (gate start -> cooldown end) - workload process time - deliberate waits
(gate waiting and cooldown), i.e. what Snakemake, the steps' start-up, preflight reads,
telemetry and record writing add to every cell. Prints the median and quartiles.

    .venv/bin/python benchmarks/harness_overhead.py results/demo
"""

from __future__ import annotations

import statistics
import sys
from datetime import datetime
from pathlib import Path

from containertax.execution.records import read_ledger


def overheads(root: Path) -> list[float]:
    cells: dict[tuple, dict[str, float]] = {}
    for e in read_ledger(root):
        key = (e.get("model"), e.get("environment"), e.get("repetition"))
        t = datetime.fromisoformat(e["utc"]).timestamp()
        c = cells.setdefault(key, {})
        if e["step"] == "gate" and e["event"] == "start":
            cells[key] = {"start": t}
        elif e["event"] == "end" and e.get("status") == "ok":
            if e["step"] == "gate":
                c["gate_wait"] = e.get("waited_s", 0.0)
            elif e["step"] == "run":
                c["workload"] = e.get("workload_s", 0.0)
            elif e["step"] == "cooldown":
                c["cool_wait"] = e.get("waited_s", 0.0)
                c["end"] = t
    out = []
    for c in cells.values():
        if {"start", "end", "gate_wait", "workload", "cool_wait"} <= c.keys():
            out.append(c["end"] - c["start"] - c["workload"] - c["gate_wait"] - c["cool_wait"])
    return out


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "results/demo")
    values = overheads(root)
    if not values:
        print(f"no complete cells in {root}/ledger.jsonl")
        return 1
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    print(f"{root}: {len(values)} cells; harness overhead per cell: median "
          f"{statistics.median(values):.2f} s (Q1 {q[0]:.2f}, Q3 {q[2]:.2f}, "
          f"max {max(values):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
