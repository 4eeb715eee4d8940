"""The stopping rule before and after issue #33 (docs/measurement.md, "Sequential
stopping"): the union bound (each look at the spending increment, no shape check) against
exact boundaries, without and with the shape check, under normal, skewed and contaminated
noise.

    PYTHONPATH=src python benchmarks/stopping_exact.py [--reps 20000] [--design 6,30,6]

Noise of the per-block log ratio d (run CV c; d has SD c sqrt 2):
  normal        d ~ N(0, 2 c^2)
  skewed        d = c sqrt 2 (E - 1), E exponential: skewness 2, mean 0
  contaminated  d ~ N(0, 2 c^2) + 10 c with probability 0.05 (5 % of container runs
                10 run-SDs slow); the truth scored is the typical run's ratio, 0 (the mean
                of d is 0.5 c)
Per row: mean blocks and the share answered (difference or equivalence) with no true
difference; type I error (a difference with none); equivalence size (equivalence shown
at either edge of the band, the larger); non-coverage of the stopping look's interval;
'refused': the share that ran to the maximum with the shape check failing there (the
rule's 'no answer I vouch for'). With the check, the rates count only answers given on
blocks the check let through; the same rates over every answer are in brackets.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from containertax.campaign import stopping
from containertax.core.seeds import stable_seed

NOISES = ("normal", "skewed", "contaminated")


def noise(kind: str, cv: float, shape: tuple[int, int], rng: np.random.Generator
          ) -> np.ndarray:
    sd = cv * math.sqrt(2)
    if kind == "normal":
        return rng.normal(0, sd, shape)
    if kind == "skewed":
        return sd * (rng.exponential(1.0, shape) - 1.0)
    if kind == "contaminated":
        return rng.normal(0, sd, shape) + 10 * cv * (rng.random(shape) < 0.05)
    raise ValueError(kind)


def measure(rule: stopping.Rule, kind: str, cv: float, reps: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    n = rule.max_blocks
    null = stopping.run_rule(noise(kind, cv, (reps, n), rng), rule)
    band = math.log1p(rule.margin)
    edges = [stopping.run_rule(e + noise(kind, cv, (reps, n), rng), rule)
             for e in (band, -band)]

    def rate(out, hit, vouched_only):
        keep = out["shape"] == "" if vouched_only else np.ones(len(hit), bool)
        return float((hit & keep).mean())

    ok = rule.shape_check
    res = {"blocks": float(null["blocks"].mean()),
           "answered": float(np.isin(null["answer"], ("difference", "equivalence")).mean())}
    for vouched in (True, False) if ok else (False,):
        key = "" if vouched or not ok else "_all"
        res["type1" + key] = rate(null, null["answer"] == "difference", vouched)
        res["size" + key] = max(rate(o, o["answer"] == "equivalence", vouched)
                                for o in edges)
        res["noncover" + key] = rate(null, (null["low"] > 0) | (null["high"] < 0), vouched)
    res["refused"] = float((null["shape"] != "").mean())
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=20_000)
    ap.add_argument("--design", action="append",
                    help="min,max,every (default: 6,30,6 and 6,8,2)")
    ap.add_argument("--cvs", default="0.005,0.02,0.05")
    ap.add_argument("--spending", default="obrien-fleming")
    args = ap.parse_args()
    designs = [tuple(map(int, d.split(","))) for d in (args.design or ["6,30,6", "6,8,2"])]
    cvs = [float(c) for c in args.cvs.split(",")]
    rules = {"union": dict(boundaries="union", shape_check=False),
             "exact": dict(boundaries="exact", shape_check=False),
             "exact+check": dict(boundaries="exact", shape_check=True)}
    print(f"{args.reps} replicates per cell; {args.spending} spending, alpha 0.05, margin "
          "5 %; rates with the check: on the blocks it let through [every answer]\n")
    print("| looks | noise | run CV | rule | mean blocks | answered | type I | size | "
          "non-coverage | refused |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for design in designs:
        for kind in NOISES:
            for cv in cvs:
                for name, kw in rules.items():
                    rule = stopping.Rule(*design, spending=args.spending, **kw)
                    r = measure(rule, kind, cv, args.reps,
                                seed=stable_seed("stopping_exact", kind, cv))

                    def f(key, r=r):
                        both = f"{r[key]:.3f}"
                        return both + (f" [{r[key + '_all']:.3f}]" if key + "_all" in r
                                       else "")

                    print(f"| {','.join(map(str, rule.looks()))} | {kind} | {cv:.1%} | "
                          f"{name} | {r['blocks']:.2f} | {r['answered']:.3f} | "
                          f"{f('type1')} | {f('size')} | {f('noncover')} | "
                          f"{r['refused']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
