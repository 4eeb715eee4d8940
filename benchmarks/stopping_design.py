"""Issue #41's design table: stopping designs under normal, skewed, contaminated and
AR(1) noise, every answer counted (docs/measurement.md, "Sequential stopping: the design
table").

    PYTHONPATH=src python benchmarks/stopping_design.py [--reps 4000] [--drift]

Noise of the per-block log ratio d at run CV c (d has SD s = c sqrt 2):
  normal        d ~ N(0, s^2)
  skewed        d = s (E - 1), E exponential: skewness 2, mean 0
  contaminated  d ~ N(0, s^2), and in 5 % of blocks N(0, (5 s)^2): symmetric outliers
  ar1           d_b = 0.3 d_{b-1} + e_b, stationary with SD s (lag-1 correlation 0.3)
  drift         (--drift only) normal plus a linear drift of 0.1 s per block, centred on
                the design's maximum (its mean over all blocks is the truth, 0)
Per cell: type I error (answer 'difference' with no true difference), power at +2 % and
+5 % (answer 'difference'), equivalence size (answer 'equivalence' at either edge of the
5 % band, the larger), coverage of the stopping look's interval (no true difference),
expected blocks (no true difference). Every answer counts: a check's word ('not
symmetric', 'not exchangeable', 'not stationary') is an answer that is neither. Each
cell's generator is seeded with stable_seed(design, noise, CV, effect): the table
regenerates exactly. Monte Carlo SD of a rate p: sqrt(p (1 - p) / reps), 0.0034 at 0.05
with 4,000 replicates.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from containertax.campaign import stopping
from containertax.core.seeds import stable_seed

NOISES = ("normal", "skewed", "contaminated", "ar1")
CVS = (0.005, 0.02, 0.05)
# (name, min_blocks, max_blocks, every, spending, gamma): max 30 blocks, looks on whole
# Williams periods of 2 blocks (two environments)
DESIGNS = (
    ("OBF 6..30 every 6", 6, 30, 6, "obrien-fleming", -4.0),
    ("OBF 6..30 every 2", 6, 30, 2, "obrien-fleming", -4.0),
    ("Pocock 6..30 every 2", 6, 30, 2, "pocock", -4.0),
    ("HSD -1 6..30 every 2", 6, 30, 2, "hsd", -1.0),
    ("HSD -2 6..30 every 2", 6, 30, 2, "hsd", -2.0),
    ("OBF 6, 8", 6, 8, 2, "obrien-fleming", -4.0),
)


def noise(kind: str, cv: float, shape: tuple[int, int], rng: np.random.Generator
          ) -> np.ndarray:
    """Per-block log-ratio noise of one kind (module docstring), mean 0 over the design."""
    sd = cv * math.sqrt(2)
    if kind == "normal":
        return rng.normal(0, sd, shape)
    if kind == "skewed":
        return sd * (rng.exponential(1.0, shape) - 1.0)
    if kind == "contaminated":
        scale = np.where(rng.random(shape) < 0.05, 5.0, 1.0)
        return rng.normal(0, sd, shape) * scale
    if kind == "ar1":
        rho = 0.3
        e = rng.normal(0, sd * math.sqrt(1 - rho * rho), shape)
        out = np.empty(shape)
        out[:, 0] = rng.normal(0, sd, shape[0])
        for b in range(1, shape[1]):
            out[:, b] = rho * out[:, b - 1] + e[:, b]
        return out
    if kind == "drift":
        n = shape[1]
        return rng.normal(0, sd, shape) + 0.1 * sd * (np.arange(n) - (n - 1) / 2)
    raise ValueError(f"unknown noise {kind!r}; choose one of {NOISES} or drift")


def measure(rule: stopping.Rule, kind: str, cv: float, reps: int) -> dict:
    """One cell: the rates above, every answer counted, and the null run itself."""
    n = rule.max_blocks

    def run(effect: float) -> dict:
        rng = np.random.default_rng(stable_seed(rule.looks(), rule.spending, rule.gamma,
                                                rule.shape_check, rule.drift_check,
                                                kind, cv, effect))
        return stopping.run_rule(effect + noise(kind, cv, (reps, n), rng), rule)

    band = math.log1p(rule.margin)
    null = run(0.0)
    res = {"null": null, "blocks": float(null["blocks"].mean()),
           "type1": float((null["answer"] == "difference").mean()),
           "coverage": float(((null["low"] <= 0) & (null["high"] >= 0)).mean()),
           "size": max(float((run(e)["answer"] == "equivalence").mean())
                       for e in (band, -band)),
           "checked": float((null["shape"] != "").mean())}
    for eff in (0.02, 0.05):
        res[f"power{round(100 * eff)}"] = float(
            (run(math.log1p(eff))["answer"] == "difference").mean())
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=4000)
    ap.add_argument("--drift", action="store_true",
                    help="the drift-remedy table: each design with and without the drift "
                         "check under AR(1) and linear drift")
    args = ap.parse_args()
    print(f"{args.reps} replicates per cell; alpha 0.05, margin 5 %; seeds "
          "stable_seed(looks, spending, gamma, shape_check, drift_check, noise, CV, effect)\n")
    if args.drift:
        print("| design | drift check | noise | run CV | type I | size | coverage | "
              "mean blocks |")
        print("|---|---|---|---|---|---|---|---|")
        for name, lo, hi, every, kind_s, gamma in DESIGNS[1:4] + DESIGNS[5:]:
            for check in (False, True):
                rule = stopping.Rule(lo, hi, every, spending=kind_s, gamma=gamma,
                                     drift_check=check)
                for kind in ("ar1", "drift"):
                    for cv in (0.02, 0.05):
                        r = measure(rule, kind, cv, args.reps)
                        print(f"| {name} | {'on' if check else 'off'} | {kind} | "
                              f"{cv:.1%} | {r['type1']:.3f} | {r['size']:.3f} | "
                              f"{r['coverage']:.3f} | {r['blocks']:.2f} |", flush=True)
        return
    print("| design | noise | run CV | type I | power +2 % | power +5 % | size | coverage | "
          "mean blocks | check's word |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, lo, hi, every, kind_s, gamma in DESIGNS:
        rule = stopping.Rule(lo, hi, every, spending=kind_s, gamma=gamma)
        for kind in NOISES:
            for cv in CVS:
                r = measure(rule, kind, cv, args.reps)
                print(f"| {name} | {kind} | {cv:.1%} | {r['type1']:.3f} | "
                      f"{r['power2']:.3f} | {r['power5']:.3f} | {r['size']:.3f} | "
                      f"{r['coverage']:.3f} | {r['blocks']:.2f} | {r['checked']:.3f} |",
                      flush=True)


if __name__ == "__main__":
    main()
