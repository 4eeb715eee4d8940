"""Expected blocks under the stopping rule vs the fixed design (docs/measurement.md,
"Sequential stopping"): null, 1 % and 5 % effects at between-run CVs from the H100 engine
campaign (0.06 %) to plain decoding (15 %), for the Spark plan's 30 blocks (looks every 6
from 6) and a short 8-block campaign (looks at 6 and 8).

    PYTHONPATH=src python benchmarks/sequential_table.py [--reps 100000]

Per cell: mean blocks used (fixed design: the maximum), saving, and how often the answer
is a difference / equivalence / none; the rule's own O'Brien-Fleming-type spending.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from containertax.campaign import stopping

CVS = (0.0006, 0.003, 0.04, 0.15)
EFFECTS = (0.0, 0.01, 0.05)
DESIGNS = ((6, 30, 6), (6, 8, 2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=100_000)
    ap.add_argument("--spending", default="obrien-fleming", choices=stopping.SPENDING)
    ap.add_argument("--boundaries", default="exact", choices=stopping.BOUNDARIES)
    ap.add_argument("--no-shape-check", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(2025)
    print(f"{args.reps} replicates per row; {args.spending} spending, {args.boundaries} "
          f"boundaries, shape check {'off' if args.no_shape_check else 'on'}, alpha 0.05, "
          "margin 5 %\n")
    print("| looks (blocks) | run CV | effect | mean blocks | fixed | saved | "
          "difference | equivalence | none |")
    print("|---|---|---|---|---|---|---|---|---|")
    for lo, hi, every in DESIGNS:
        rule = stopping.Rule(lo, hi, every, spending=args.spending,
                             boundaries=args.boundaries, shape_check=not args.no_shape_check)
        for cv in CVS:
            for eff in EFFECTS:
                d = math.log1p(eff) + rng.normal(0, cv * math.sqrt(2), (args.reps, hi))
                out = stopping.run_rule(d, rule)
                mean = float(out["blocks"].mean())
                ans = {a: float((out["answer"] == a).mean()) for a in
                       ("difference", "equivalence", "none")}
                print(f"| {', '.join(map(str, rule.looks()))} | {cv * 100:g} % | "
                      f"{eff * 100:g} % | {mean:.2f} | {hi} | {1 - mean / hi:.0%} | "
                      f"{ans['difference']:.3f} | {ans['equivalence']:.3f} | "
                      f"{ans['none']:.3f} |")


if __name__ == "__main__":
    main()
