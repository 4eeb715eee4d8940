"""Thresholds and measured rates of the outlier rule in statistics/quality.py (issue #23).

The rule (see the comment at quality.OUTLIER_CUTS): each value's distance from the median
of the others of its environment, over a mean absolute deviation that excludes it; pooled
over the table (the larger of the table's and the value's own environment's scale) where
the Brown-Forsythe test at quality.outlier_level(n) finds no difference in spread between
the environments, the environment's own scale where it does. The whole two-stage rule is
calibrated on clean normal tables (k environments of n values): the own-scale threshold
so that OUTLIER_TARGET of tables get a flag when every table is judged by own scales (so
tables whose environments truly differ in spread keep that rate), then the pooled
threshold so that the two-stage rule as a whole flags OUTLIER_TARGET of clean tables.

    python benchmarks/outlier_rule.py thresholds   # the table quality.OUTLIER_CUTS holds
    python benchmarks/outlier_rule.py              # rates on fresh tables (a few minutes)

'before' is the rule this replaced: the modified z-score (0.6745 r / MAD) of leave-one-out
residuals with the MAD pooled over the environments, flagged above 3.5.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from containertax.statistics import quality

GRID_N = (3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 30, 50)
GRID_K = (1, 2, 3, 4, 5)


def calibrate(n: int, k: int, rng: np.random.Generator, sims: int = 20_000) -> tuple[float,
                                                                                    float]:
    """(own, pooled) thresholds for k environments of n values (see the docstring)."""
    own, pooled, p = quality.outlier_scores([rng.standard_normal((sims, n))
                                             for _ in range(k)])
    top_own = np.max(np.concatenate(own, -1), -1)
    top_pooled = np.max(np.concatenate(pooled, -1), -1)
    own_cut = float(np.quantile(top_own, 1 - quality.OUTLIER_TARGET))
    if k == 1:
        return round(own_cut, 2), round(own_cut, 2)
    same = p >= quality.outlier_level(n)
    left = quality.OUTLIER_TARGET - float(np.mean(~same & (top_own > own_cut)))
    pooled_cut = float(np.quantile(np.where(same, top_pooled, -np.inf), 1 - left))
    return round(own_cut, 2), round(pooled_cut, 2)


def thresholds(seed: int = 11) -> dict[int, dict[int, tuple[float, float]]]:
    rng = np.random.default_rng(seed)
    return {n: {k: calibrate(n, k, rng) for k in GRID_K} for n in GRID_N}


def before(groups: list[np.ndarray]) -> list[np.ndarray]:
    """The replaced rule's flags (pooled MAD, 3.5), vectorised like outlier_flags."""
    resid = [x - quality._median_of_others(x) for x in groups]
    mad = np.median(np.abs(np.concatenate(resid, -1)), -1, keepdims=True)
    return [0.6745 * np.abs(r) / mad > 3.5 for r in resid]


def _tables(rng: np.random.Generator, sims: int, n: int, scales: list[float],
            plant: tuple[int, float] | None = None) -> list[np.ndarray]:
    groups = [s * rng.standard_normal((sims, n)) for s in scales]
    if plant is not None:
        groups[plant[0]][:, 0] += plant[1] * scales[plant[0]]
    return groups


def rates(sims: int = 20_000, seed: int = 5) -> pd.DataFrame:
    """On fresh tables: clean tables with any flag (equal spreads, k = 2..4), values
    flagged in a 10x noisier environment (and tables with any flag), one value 10 SD off
    found (equal spreads, k = 4), and found with no other flag in a 2-environment table
    whose reference is 10x tighter (planted in the noisier one, or in the reference)."""
    rng = np.random.default_rng(seed)
    out = []
    for n in (4, 6, 10, 30):
        row: dict[str, float] = {"n": n}
        for rule, flag in (("before", before), ("now", quality.outlier_flags)):
            for k in (2, 3, 4):
                f = flag(_tables(rng, sims, n, [1.0] * k))
                row[f"{rule}: clean tables flagged, k={k}"] = np.any(np.concatenate(f, -1),
                                                                     -1).mean()
            f = flag(_tables(rng, sims, n, [0.1, 1.0]))
            row[f"{rule}: values of the 10x noisier flagged"] = f[1].mean()
            row[f"{rule}: 10x tables flagged"] = np.any(np.concatenate(f, -1), -1).mean()
            f = flag(_tables(rng, sims, n, [1.0] * 4, (1, 10.0)))
            row[f"{rule}: 10 SD found, k=4"] = f[1][:, 0].mean()
            for where, env in (("noisier", 1), ("reference", 0)):
                f = flag(_tables(rng, sims, n, [0.1, 1.0], (env, 10.0)))
                rest = np.concatenate([f[env][:, 1:], f[1 - env]], -1)
                row[f"{rule}: 10x, 10 SD in the {where} found alone"] = (
                    f[env][:, 0] & ~rest.any(-1)).mean()
        out.append(row)
    return pd.DataFrame(out).set_index("n").T


if __name__ == "__main__":
    if sys.argv[1:] == ["thresholds"]:
        print("OUTLIER_CUTS = {")
        for n, row in thresholds().items():
            print(f"    {n}: {row},")
        print("}")
    else:
        with pd.option_context("display.width", 200, "display.float_format", "{:.4f}".format):
            print(rates())
