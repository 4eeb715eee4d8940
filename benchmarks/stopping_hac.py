"""Issue #41's open remedy for dependence and drift, measured: the default rule (HSD
gamma -1, looks 6..30 every 2, exact boundaries, shape and drift checks) with three
variances of a look's mean (docs/measurement.md, "Issue #41: ... the design table").

    PYTHONPATH=src python benchmarks/stopping_hac.py [--reps 2000]

Variants of the t test at each look (the looks' levels, checks and answers unchanged;
`stopping.run_rule` with the look's SE and df swapped):
  plain   SD / sqrt(n), df n - 1 (the rule as it is)
  hac     Newey-West, Bartlett kernel, lag 1, small-sample factor n / (n - 1), df n - 1
          (statsmodels OLS(d, 1).fit(cov_type='HAC', maxlags=1, use_correction=True);
          checked against statsmodels on one replicate)
  trend   d_b = b0 + b1 (b - centre of the blocks seen) + e, test b0, df n - 2
  trend30 the same centred on the design's centre (block 15.5 of 30): b0 is the mean
          over all 30 blocks, the truth scored under drift, extrapolated
  ar1     a parametric AR(1) model of the blocks: the lag-1 autocorrelation r with
          Marriott and Pope's bias correction (r + (1 + 3 r) / n), clipped to [0, 0.9],
          scales the plain variance by (1 + r) / (1 - r), the large-sample variance of the
          mean of an AR(1) series; df n - 1
Noise as benchmarks/stopping_design.py (normal, ar1 rho 0.3, drift 0.1 SD per block centred
on 30 blocks). Every variant reads the same data: seeds are the design table's
stable_seed(looks, spending, gamma, shape_check, drift_check, noise, CV, 0.0), so 'plain'
reproduces the drift table's rows at --reps 2000.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import stats as sps
from stopping_design import noise  # the design table's noise, one home (benchmarks/ on path)

from containertax.campaign import stopping
from containertax.core.seeds import stable_seed

VARIANTS = ("plain", "hac", "trend", "trend30", "ar1")


def se_df(x: np.ndarray, variant: str, max_blocks: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Estimate, SE and df of the look's mean effect on rows x (replicates x n blocks)."""
    n = x.shape[1]
    mean = x.mean(axis=1)
    e = x - mean[:, None]
    if variant == "plain":
        return mean, np.sqrt((e * e).sum(axis=1) / (n - 1) / n), n - 1
    if variant == "ar1":
        g0 = (e * e).sum(axis=1)
        r = (e[:, 1:] * e[:, :-1]).sum(axis=1) / np.where(g0 > 0, g0, 1.0)
        r = np.clip(r + (1 + 3 * r) / n, 0.0, 0.9)
        return mean, np.sqrt(g0 / (n - 1) / n * (1 + r) / (1 - r)), n - 1
    if variant == "hac":
        g0 = (e * e).sum(axis=1) / n
        g1 = (e[:, 1:] * e[:, :-1]).sum(axis=1) / n
        return mean, np.sqrt(np.maximum(g0 + g1, 0) / n * n / (n - 1)), n - 1
    b = np.arange(n, dtype=float)
    xc = b - b.mean()
    sxx = float((xc * xc).sum())
    slope = (e * xc).sum(axis=1) / sxx
    resid = e - slope[:, None] * xc
    s2 = (resid * resid).sum(axis=1) / (n - 2)
    if variant == "trend":
        return mean, np.sqrt(s2 / n), n - 2
    shift = (max_blocks - 1) / 2 - b.mean()  # the design's centre, in the look's index
    return mean + slope * shift, np.sqrt(s2 * (1 / n + shift * shift / sxx)), n - 2


def run_variant(d: np.ndarray, rule: stopping.Rule, variant: str) -> dict[str, np.ndarray]:
    """stopping.run_rule with the look's estimate, SE and df from se_df."""
    reps = d.shape[0]
    stopped = np.zeros(reps, bool)
    out = {"blocks": np.full(reps, np.nan), "low": np.full(reps, np.nan),
           "high": np.full(reps, np.nan), "answer": np.full(reps, "", dtype=object)}
    band = math.log1p(rule.margin)
    for n, a, a1 in zip(rule.looks(), *rule.levels(), strict=True):
        last = n == rule.max_blocks
        est, se, df = se_df(d[:, :n], variant, rule.max_blocks)
        q, q1 = sps.t.ppf(1 - a / 2, df), sps.t.ppf(1 - rule.tost_level(a1, False), df)
        with np.errstate(divide="ignore", invalid="ignore"):
            tstat = np.where(se > 0, est / se, np.where(est == 0, 0.0, np.inf))
        diff = 2 * sps.t.sf(np.abs(tstat), df) < a
        equiv = (est - q1 * se > -band) & (est + q1 * se < band)
        why = np.full(reps, "", dtype=object)
        todo = ~stopped & (diff | equiv | last)
        if todo.any():
            why[todo] = stopping.checks(d[todo, :n], rule)
        now = ~stopped & (((diff | equiv) & (why == "")) | last)
        out["blocks"][now] = n
        out["low"][now], out["high"][now] = (est - q * se)[now], (est + q * se)[now]
        plain = np.where(diff, "difference", np.where(equiv, "equivalence", "none"))
        said = np.array([stopping.CHECK_ANSWER.get(w, "") for w in why], dtype=object)
        out["answer"][now] = np.where(why[now] != "", said[now], plain[now])
        stopped |= now
    return out


def check_statsmodels() -> None:
    """The hac variant equals statsmodels' Newey-West (lag 1, small-sample corrected)."""
    import statsmodels.api as sm

    x = np.random.default_rng(1).normal(size=(1, 12))
    fit = sm.OLS(x[0], np.ones(12)).fit(cov_type="HAC",
                                        cov_kwds={"maxlags": 1, "use_correction": True})
    _, se, _ = se_df(x, "hac", 30)
    assert abs(float(fit.bse[0]) - float(se[0])) < 1e-12, (fit.bse, se)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=2000)
    args = ap.parse_args()
    check_statsmodels()
    rule = stopping.Rule(6, 30, 2, spending="hsd", gamma=-1.0)
    start = time.process_time()
    print(f"{args.reps} replicates per cell; HSD -1 6..30 every 2, checks on; seeds "
          "stable_seed(looks, spending, gamma, shape_check, drift_check, noise, CV, 0.0)\n")
    print("| noise | run CV | variance | type I | coverage | mean blocks | seed |")
    print("|---|---|---|---|---|---|---|")
    for kind in ("normal", "ar1", "drift"):
        for cv in (0.02, 0.05):
            seed = stable_seed(rule.looks(), rule.spending, rule.gamma, rule.shape_check,
                               rule.drift_check, kind, cv, 0.0)
            d = noise(kind, cv, (args.reps, rule.max_blocks), np.random.default_rng(seed))
            for v in VARIANTS:
                r = run_variant(d, rule, v)
                print(f"| {kind} | {cv:.1%} | {v} | "
                      f"{float((r['answer'] == 'difference').mean()):.3f} | "
                      f"{float(((r['low'] <= 0) & (r['high'] >= 0)).mean()):.3f} | "
                      f"{float(r['blocks'].mean()):.2f} | {seed} |", flush=True)
    print(f"\nCPU {time.process_time() - start:.0f} s")


if __name__ == "__main__":
    main()
