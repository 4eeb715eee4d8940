"""Issue #33's goal numbers, measured: expected blocks of 30 with no true difference at a
run CV of 2 % (goal <= 10) and 0.5 % (goal <= 7), with the type I error, equivalence size
(either edge of the 5 % band) and coverage under normal noise, for the rule before #33
(union bound, O'Brien-Fleming, looks every 6 from 6: the Spark plan's) and after (exact
boundaries, shape check), both with the Spark plan's looks and with the design
stopping.propose picks for that spread (looks every Williams period of 2 blocks). 'same
as 30 blocks': the share of simulated campaigns whose answer equals the fixed design's
(all 30 blocks, t test and TOST at alpha) on the same blocks.

    PYTHONPATH=src python benchmarks/stopping_goals.py [--reps 20000]

One comparison per model (the issue's case). Second table: an A/A replica (no true
difference) and how often it passes its calibration (statistics/decisions.py: TOST at alpha
within +-2 %, the resolution, and the 95 % t interval inside +-2 %) on the blocks of the
look where it stopped, before (decided within the 5 % margin) and after (within its own
2 %), and on all 30 blocks.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from containertax.campaign import stopping


def measure(rule: stopping.Rule, cv: float, reps: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    sd, n = cv * math.sqrt(2), rule.max_blocks
    d = rng.normal(0, sd, (reps, n))
    null = stopping.run_rule(d, rule)
    full = stopping.look_stats(d.mean(1), d.std(1, ddof=1), n, rule.alpha, rule.margin)
    full_answer = np.where(full["difference"], "difference",
                           np.where(full["equivalence"], "equivalence", "none"))
    band = math.log1p(rule.margin)
    size = max(float((stopping.run_rule(e + rng.normal(0, sd, (reps, n)), rule)["answer"]
                      == "equivalence").mean()) for e in (band, -band))
    return {"blocks": float(null["blocks"].mean()),
            "answered": float((null["answer"] != "none").mean()),
            "type1": float((null["answer"] == "difference").mean()), "size": size,
            "coverage": float(((null["low"] <= 0) & (null["high"] >= 0)).mean()),
            "same": float((null["answer"] == full_answer).mean())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=20_000)
    args = ap.parse_args()
    print(f"{args.reps} replicates per row; alpha 0.05, margin 5 %, 30 blocks at most\n")
    print("| run CV | goal | rule | looks | mean blocks | answered | type I | size | "
          "coverage | same as 30 blocks |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for cv, goal in ((0.02, 10), (0.005, 7)):
        prop = stopping.propose(cv * math.sqrt(2), 1, 30, 2)
        keys = prop["stopping"]
        rules = {
            "before: union, O'Brien-Fleming": stopping.Rule(6, 30, 6, boundaries="union",
                                                            shape_check=False),
            "exact + shape check, O'Brien-Fleming": stopping.Rule(6, 30, 6),
            f"proposed: exact + shape check, {keys['spending']}"
            + (f" gamma {keys['gamma']:g}" if "gamma" in keys else ""):
                stopping.Rule(keys["min_blocks"], 30, keys["every"],
                              spending=keys["spending"], gamma=keys.get("gamma", -4.0)),
        }
        for name, rule in rules.items():
            r = measure(rule, cv, args.reps, seed=int(cv * 1e4))
            looks = rule.looks()
            short = (f"{looks[0]}..{looks[-1]} every {rule.every}" if len(looks) > 2
                     else ",".join(map(str, looks)))
            print(f"| {cv:.1%} | <= {goal} | {name} | {short} | {r['blocks']:.2f} | "
                  f"{r['answered']:.3f} | {r['type1']:.4f} | {r['size']:.4f} | "
                  f"{r['coverage']:.4f} | {r['same']:.3f} |", flush=True)
    replica_table(args.reps)


def calibration_passes(d: np.ndarray, resolution: float = 0.02, alpha: float = 0.05
                       ) -> np.ndarray:
    """Per row, whether the A/A calibration passes on these blocks."""
    from scipy import stats as sps

    n = d.shape[1]
    m, se = d.mean(1), d.std(1, ddof=1) / math.sqrt(n)
    band = math.log1p(resolution)
    q95, q90 = sps.t.ppf(0.975, n - 1), sps.t.ppf(1 - alpha, n - 1)
    tost = (m - q90 * se > -band) & (m + q90 * se < band)
    inside = (np.expm1(m - q95 * se) >= -resolution) & (np.expm1(m + q95 * se) <= resolution)
    return tost & inside


def replica_table(reps: int) -> None:
    print("\n| run CV | rule | mean blocks | stopped as equivalent | calibration passes at "
          "the stopping look | at 30 blocks |")
    print("|---|---|---|---|---|---|")
    for cv in (0.005, 0.01, 0.02):
        rng = np.random.default_rng(int(cv * 1e5))
        d = rng.normal(0, cv * math.sqrt(2), (reps, 30))
        rules = {"before: within the 5 % margin (union)":
                 stopping.Rule(6, 30, 6, boundaries="union", shape_check=False),
                 "after: within its 2 % (exact + check)":
                 stopping.Rule(6, 30, 6, resolution=0.02)}
        full = calibration_passes(d).mean()
        for name, rule in rules.items():
            out = stopping.run_rule(d, rule, replica=True)
            passes = np.zeros(reps, bool)
            for n in rule.looks():
                at = out["blocks"] == n
                passes[at] = calibration_passes(d[at, :n])
            print(f"| {cv:.1%} | {name} | {out['blocks'].mean():.2f} | "
                  f"{(out['answer'] == 'equivalence').mean():.3f} | {passes.mean():.3f} | "
                  f"{full:.3f} |", flush=True)


if __name__ == "__main__":
    main()
