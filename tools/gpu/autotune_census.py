"""Tabulate each run's autotuning cache census (issue #32; record detail.autotune_census,
written by probe/llm.py after the measured window): per run, how many Triton kernels found
their launch configuration in the cache (hit), how many benchmarked (miss), whether the
.best_config each looked for exists and whether its stored configs_hash is the kernel's;
then, for the first kernel that benchmarked, the file it looked for.

    python3 tools/gpu/autotune_census.py results/h100-autotune-census
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

RECORD = re.compile(r"rep\d+\.json")  # a run's record; not rep001.cooldown.json and kin


def census_of(record: dict) -> dict | None:
    return (record.get("detail") or {}).get("autotune_census")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("campaign", type=Path)
    args = p.parse_args(argv)
    records = sorted(p for p in (args.campaign / "raw").glob("*/*/rep*.json")
                     if RECORD.fullmatch(p.name))
    if not records:
        print(f"{args.campaign}/raw: no records", file=sys.stderr)
        return 1
    for path in records:
        rec = json.loads(path.read_text())
        cell = rec.get("cell") or {}
        if "environment" not in cell:  # not a run's record
            print(f"{path}: no cell, skipped")
            continue
        c = census_of(rec)
        where = f"{cell['environment']} rep{cell['repetition']:03d}"
        if c is None:
            print(f"{where}: no census")
            continue
        counts = ", ".join(f"{k} {v}" for k, v in sorted(c["counts"].items()))
        print(f"{where}: {c['kernels']} kernels ({counts}); cache_dir {c['cache_dir']}")
        for row in c["multi_config"][:2]:
            print(f"  benchmarked: {row['file']} -> {row['best_config']} "
                  f"exists {row['exists']}, stored hash {row['stored_hash']}, "
                  f"own hash {row['hash']}, info {row['info']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
