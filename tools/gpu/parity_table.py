"""Tabulate issue #40's H100 visit (config/h100-parity.yaml) from its raw records: per
environment, the runs, the median first compiled step (timeline phase_compile_s) and whole
process (process_wall_s), and the median autotuning lookups (the census's hits and
misses); then each run. Observations for the device call's output; the paper's intervals
come from the workflow's analysis of the same records.

    python3 tools/gpu/parity_table.py results/h100-parity
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

RECORD = re.compile(r"rep\d+\.json")


def row(rec: dict) -> dict:
    metrics = {m["name"]: m["value"] for m in rec.get("metrics") or []}
    phases = (rec.get("timeline") or {}).get("phases_s") or {}
    counts = ((rec.get("detail") or {}).get("autotune_census") or {}).get("counts") or {}
    return {"env": rec["cell"]["environment"], "rep": rec["cell"]["repetition"],
            "compile_s": phases.get("phase_compile_s"), "wall_s": metrics.get("process_wall_s"),
            "hit": counts.get("state=hit"), "miss": counts.get("state=miss")}


def median(values: list) -> str:
    values = [v for v in values if v is not None]
    return f"{statistics.median(values):.2f}" if values else "-"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("campaign", type=Path)
    args = p.parse_args(argv)
    rows = []
    for path in sorted((args.campaign / "raw").glob("*/*/rep*.json")):
        rec = json.loads(path.read_text())
        if RECORD.fullmatch(path.name) and "cell" in rec:
            rows.append(row(rec))
    if not rows:
        print(f"{args.campaign}/raw: no records", file=sys.stderr)
        return 1
    print("| environment | runs | first compiled step, s | whole process, s | hit | miss |")
    print("| --- | --- | --- | --- | --- | --- |")
    for env in dict.fromkeys(r["env"] for r in rows):
        mine = [r for r in rows if r["env"] == env]
        print(f"| {env} | {len(mine)} | {median([r['compile_s'] for r in mine])} | "
              f"{median([r['wall_s'] for r in mine])} | {median([r['hit'] for r in mine])} | "
              f"{median([r['miss'] for r in mine])} |")
    print()
    for r in rows:
        print(f"{r['env']} rep{r['rep']:03d}: compile {r['compile_s']} s, wall {r['wall_s']} s, "
              f"hit {r['hit']}, miss {r['miss']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
