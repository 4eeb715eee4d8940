"""Phase 2B's two designs at equal runs, simulated: one option at a time (the baseline and
seven variants, 8 environments x 12 blocks = 96 runs a model) against the 2^(7-3)
resolution IV factorial of config/phase-2b.yaml (16 rows x 6 blocks = 96 runs), over the
same seven options. Each run's log value is a block's drift (sd 1 %) + the planted effects
+ noise of the stated CV; planted: option A (shm) +2 % (main effect), and an interaction of
network and cpuset of +2 % (the product column's effect, high minus low, log scale), which
no one-at-a-time variant can see (no variant sets both). Each design is analysed as the
workflow does: one-at-a-time by the paired t on per-block log ratios of each variant to the
baseline (the campaign's primary test), the factorial by statistics/factorial.fit (OLS with
block effects); Holm over each design's family of effects (7 mains; 7 mains + 7 chains).

Printed per CV: the mean width of the 95 % interval of an option's effect (unadjusted, in
per cent; the same for every option of a design), the power to find the planted +2 % main
effect (Holm p < 0.05, right sign), and the power to find the planted interaction (its
alias chain, AE = BC = DF, in the factorial; not estimable one at a time).

    .venv/bin/python benchmarks/factorial_vs_oat.py [--sims 400] [--seed 1]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from containertax.campaign import factorial
from containertax.statistics.factorial import fit

FACTORS = {"shm": "A", "network": "B", "cpuset": "C", "privileged": "D", "cgroup": "E",
           "memory": "F", "seccomp": "G"}
MAIN = math.log(1.02)         # shm, high minus low
INTERACTION = math.log(1.02)  # network x cpuset, the product column's effect
ALPHA = 0.05


def design() -> factorial.Design:
    spec = {"factorial": {"base": "b", "resolution": 4,
                          "factors": {f: {"high": {f: 1}} for f in FACTORS}}}
    d = factorial.design_of(spec, "benchmark")
    assert d is not None and d.generators == ("E=ABC", "F=BCD", "G=ACD")
    return d


def mu(levels: dict[str, int]) -> float:
    """The planted log mean of a run at these levels (-1/+1 by letter)."""
    return MAIN / 2 * levels["A"] + INTERACTION / 2 * levels["B"] * levels["C"]


def one_at_a_time(rng: np.random.Generator, cv: float, blocks: int
                  ) -> tuple[float, bool]:
    """Width of option A's 95 % interval (per cent) and whether Holm finds it."""
    low = {c: -1 for c in FACTORS.values()}
    pvals, width, sign_ok = [], 0.0, False
    drift = rng.normal(0, 0.01, blocks)
    base = drift + mu(low) + rng.normal(0, cv, blocks)
    for letter in FACTORS.values():
        levels = {**low, letter: 1}
        ratio = drift + mu(levels) + rng.normal(0, cv, blocks) - base
        m, se = ratio.mean(), ratio.std(ddof=1) / math.sqrt(blocks)
        t = m / se
        pvals.append(2 * sps.t.sf(abs(t), blocks - 1))
        if letter == "A":
            q = sps.t.ppf(0.975, blocks - 1)
            width = 100 * (math.exp(m + q * se) - math.exp(m - q * se))
            sign_ok = m > 0
    holm = multipletests(pvals, method="holm")[1]
    return width, bool(holm[0] < ALPHA and sign_ok)


def factorial_run(d: factorial.Design, rng: np.random.Generator, cv: float, blocks: int
                  ) -> tuple[float, bool, bool]:
    """Width of A's 95 % interval (per cent), and whether A and the planted chain are
    found (Holm over the 14 effects, right sign)."""
    rows = []
    for b in range(1, blocks + 1):
        drift = rng.normal(0, 0.01)
        for env in d.env_ids():
            levels = d.row_of(env)
            assert levels is not None
            rows.append({"environment": env, "block": b,
                         "value": math.exp(drift + mu(levels) + rng.normal(0, cv))})
    eff = fit(pd.DataFrame(rows), d, ALPHA, 2.0).set_index("term")
    a = eff.loc["A"]
    q = sps.t.ppf(0.975, a["df"])
    width = 100 * (math.exp(a["effect_log"] + q * a["se_log"])
                   - math.exp(a["effect_log"] - q * a["se_log"]))
    chain = eff.loc["AE"]  # AE = BC = DF: the planted BC interaction is estimated here
    return (width, bool(a["p_holm"] < ALPHA and a["effect_log"] > 0),
            bool(chain["p_holm"] < ALPHA and chain["effect_log"] > 0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    d = design()
    rng = np.random.default_rng(a.seed)
    started = time.process_time()
    print(f"equal runs a model: one at a time 8 environments x 12 blocks = 96; factorial "
          f"{d.name} 16 rows x 6 blocks = 96; {a.sims} simulations a CV, seed {a.seed}")
    print("| CV | design | 95 % interval width of a main effect (pp) | power, +2 % main "
          "effect | power, +2 % interaction |")
    print("| ---: | --- | ---: | ---: | ---: |")
    for cv_pct in (0.5, 2.0, 5.0):
        cv = cv_pct / 100
        oat = [one_at_a_time(rng, cv, 12) for _ in range(a.sims)]
        fac = [factorial_run(d, rng, cv, 6) for _ in range(a.sims)]
        print(f"| {cv_pct:g} % | one at a time | {np.mean([w for w, _ in oat]):.2f} | "
              f"{np.mean([f for _, f in oat]):.2f} | not estimable |")
        print(f"| {cv_pct:g} % | factorial | {np.mean([w for w, _, _ in fac]):.2f} | "
              f"{np.mean([f for _, f, _ in fac]):.2f} | {np.mean([i for _, _, i in fac]):.2f} |")
    print(f"CPU time {time.process_time() - started:.0f} s")


if __name__ == "__main__":
    main()
