"""Issue #41's AR(1) and drift targets where the noise arises: in the runs, in time order,
seen through the campaign's design (docs/measurement.md, "Dependence in the runs, through
the design").

    PYTHONPATH=src python benchmarks/stopping_runlevel.py [--reps 4000] [--records]

The design table (benchmarks/stopping_design.py) puts AR(1) and drift on the per-block log
ratio d itself. A machine whose state wanders (temperature, clocks, background load, page
cache) moves the runs, and a block's ratio is the difference of two runs a few minutes
apart in an order the schedule fixes. Here each replicate is one campaign's run series:
log values y_t = e_t in run order t = 0 .. envs x 30 - 1, with
  ar1 rho    e_t = rho e_{t-1} + u_t, stationary SD = the run CV (rho 0.3, 0.7, 0.9)
  drift      normal noise plus a linear drift of 0.1 SD per block over the campaign
  walk       normal noise plus a random walk whose steps have 0.3 SD per run (a wander
             that never returns: after 60 runs its SD is 2.3 times the run's own)
  position   normal noise plus 0.5 SD on the first run of every block (the run after the
             cooldown: a carry-over the schedule's order must balance)
  block-ar1  the design table's AR(1) on d itself (rho 0.3), for reference
and the block's ratio d_b = y(environment 1's run in block b) - y(environment 0's), the
block's order given by the schedule design (campaign/designs.py: williams as every
campaign here runs it; 'fixed' always runs environment 0 first, the order a naive script
uses). The rule is the default (HSD gamma -1, looks 6..30 every whole period, exact
boundaries, shape and drift checks), every answer counted. Reported per cell: type I error
(no true difference), non-coverage of the stopping look's interval, mean blocks, and the
lag-1 correlation of d over 30 blocks (mean over replicates). Seeds:
stable_seed('runlevel', design, envs, noise, rho, CV).

--records: the same two correlations measured in the committed campaigns' raw records,
per model and primary metric: lag-1 correlation of one environment's log values in run
order (the machine's wander) and of the per-block log ratio against the reference (what
the rule sees).
"""

from __future__ import annotations

import argparse
import math
import random

import numpy as np

from containertax.campaign import designs, stopping
from containertax.core.seeds import stable_seed

BLOCKS = 30
CVS = (0.005, 0.02, 0.05)
NOISES = (("ar1", 0.3), ("ar1", 0.7), ("ar1", 0.9), ("drift", 0.0), ("walk", 0.3),
          ("position", 0.5), ("block-ar1", 0.3))


def orders(design: str, envs: int) -> np.ndarray:
    """Position of environments 0 and 1 in each of the 30 blocks (blocks x 2)."""
    if design == "fixed":
        return np.tile([0, 1], (BLOCKS, 1))
    rng = random.Random(0)
    out = []
    for b in range(BLOCKS):
        _, order = designs.block_order(design, envs, b, rng)
        out.append([order.index(0), order.index(1)])
    return np.array(out)


def block_ratios(design: str, envs: int, kind: str, rho: float, cv: float, reps: int,
                 rng: np.random.Generator) -> np.ndarray:
    """Per-block log ratios (reps x 30) of environment 1 against 0 under run-level noise."""
    if kind == "block-ar1":
        sd = cv * math.sqrt(2)
        out = np.empty((reps, BLOCKS))
        out[:, 0] = rng.normal(0, sd, reps)
        u = rng.normal(0, sd * math.sqrt(1 - rho * rho), (reps, BLOCKS))
        for b in range(1, BLOCKS):
            out[:, b] = rho * out[:, b - 1] + u[:, b]
        return out
    runs = envs * BLOCKS
    if kind == "ar1":
        e = np.empty((reps, runs))
        e[:, 0] = rng.normal(0, cv, reps)
        u = rng.normal(0, cv * math.sqrt(1 - rho * rho), (reps, runs))
        for t in range(1, runs):
            e[:, t] = rho * e[:, t - 1] + u[:, t]
    elif kind == "drift":
        e = rng.normal(0, cv, (reps, runs)) + 0.1 * cv * (np.arange(runs) / envs
                                                          - (BLOCKS - 1) / 2)
    elif kind == "walk":
        e = rng.normal(0, cv, (reps, runs)) + np.cumsum(rng.normal(0, rho * cv, (reps, runs)),
                                                        axis=1)
    elif kind == "position":
        e = rng.normal(0, cv, (reps, runs)) + rho * cv * (np.arange(runs) % envs == 0)
    else:
        raise ValueError(f"unknown noise {kind!r}")
    return ratios_of_runs(e, design, envs)


def ratios_of_runs(e: np.ndarray, design: str, envs: int) -> np.ndarray:
    """Per-block log ratios of environment 1 against 0 from log values in run order
    (replicates x envs * 30): each block's two runs where the design's order puts them."""
    pos = orders(design, envs)
    start = np.arange(BLOCKS) * envs
    return e[:, start + pos[:, 1]] - e[:, start + pos[:, 0]]


def lag1(d: np.ndarray) -> float:
    """Mean over rows of the lag-1 autocorrelation (the usual estimator)."""
    x = d - d.mean(axis=1, keepdims=True)
    return float(np.mean((x[:, 1:] * x[:, :-1]).sum(axis=1) / (x * x).sum(axis=1)))


def cell(design: str, envs: int, kind: str, rho: float, cv: float, reps: int) -> dict:
    period = designs.period("williams", envs) or 1
    rule = stopping.Rule(-(-6 // period) * period, BLOCKS, period, spending="hsd",
                         gamma=-1.0)
    rng = np.random.default_rng(stable_seed("runlevel", design, envs, kind, rho, cv))
    d = block_ratios(design, envs, kind, rho, cv, reps, rng)
    out = stopping.run_rule(d, rule)
    return {"type1": float((out["answer"] == "difference").mean()),
            "noncover": float(((out["low"] > 0) | (out["high"] < 0)).mean()),
            "blocks": float(out["blocks"].mean()), "lag1": lag1(d),
            "checked": float((out["shape"] != "").mean())}


def simulate(reps: int) -> None:
    print(f"{reps} replicates per cell; default rule HSD -1, looks 6..30 every period; "
          "seeds stable_seed('runlevel', design, envs, noise, rho, CV)\n")
    print("| order | envs | noise | run CV | lag-1 of d | type I | non-coverage | "
          "mean blocks | check's word |")
    print("|---|---|---|---|---|---|---|---|---|")
    for design, envs in (("williams", 2), ("williams", 4), ("fixed", 2)):
        for kind, rho in NOISES:
            if kind == "block-ar1" and design != "williams":
                continue
            for cv in CVS:
                r = cell(design, envs, kind, rho, cv, reps)
                name = kind if kind == "drift" else f"{kind} {rho:g}"
                print(f"| {design} | {envs} | {name} | {cv:.1%} | {r['lag1']:+.2f} | "
                      f"{r['type1']:.3f} | {r['noncover']:.3f} | {r['blocks']:.2f} | "
                      f"{r['checked']:.3f} |", flush=True)


def records() -> None:
    """Lag-1 correlations in the committed campaigns (module docstring)."""
    import pandas as pd

    from containertax.campaign.config import load_file
    from containertax.statistics.aggregate import tidy
    from containertax.statistics.policy import primary_metrics

    configs = ("h100-matmul", "h100-engine-balanced", "h100-engine", "h100-engine-gqa",
               "h100", "h100-variants", "h100-stopping", "h100-stopping-exact",
               "h200-stopping-hsd", "h200x2-lanes", "h200x2-onelane")
    print("| campaign | model | metric | runs of the reference, lag-1 in run order | "
          "per-block ratios, lag-1 | blocks |")
    print("|---|---|---|---|---|---|")
    pooled = {"runs": [], "blocks": []}
    for name in configs:
        campaign = load_file(f"config/{name}.yaml")
        runs = tidy(campaign.root)
        if runs.empty:
            continue
        ref = campaign.reference
        others = [e.id for e in campaign.environments
                  if e.id != ref and e.id not in campaign.replicas]
        for model, metrics in primary_metrics(campaign, runs).items():
            if not metrics:
                continue
            metric = metrics[0]
            m = runs[(runs["model"] == model) & (runs["metric"] == metric)
                     & (runs["value"] > 0)]
            r = m[m["environment"] == ref].sort_values("started_utc")
            y = np.log(r["value"].to_numpy())
            wide = m.pivot_table(index="block", columns="environment", values="value",
                                 aggfunc="first")
            if len(y) < 6 or ref not in wide or not others or others[0] not in wide:
                continue
            d = np.log(wide[others[0]] / wide[ref]).dropna().sort_index().to_numpy()
            if len(d) < 6:
                continue
            a, b = lag1(y[None, :]), lag1(d[None, :])
            pooled["runs"].append(a)
            pooled["blocks"].append(b)
            print(f"| {name} | {model} | {metric} | {a:+.2f} | {b:+.2f} ({others[0]}) | "
                  f"{len(d)} |")
    s = pd.DataFrame(pooled)
    print(f"\nmedian over {len(s)} comparisons: runs {s['runs'].median():+.2f}, "
          f"per-block ratios {s['blocks'].median():+.2f}; share above 0.3: runs "
          f"{(s['runs'] > 0.3).mean():.2f}, ratios {(s['blocks'] > 0.3).mean():.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=4000)
    ap.add_argument("--records", action="store_true")
    args = ap.parse_args()
    if args.records:
        records()
    else:
        simulate(args.reps)


if __name__ == "__main__":
    main()
