"""False-flag rates of the outlier rule in analysis/quality.py (MAD pooled over the
environments of a model and metric), and of a candidate that judges each environment by
its own spread, calibrated per n (not in quality.py yet: issue #23, part 3).

Candidate: each value's distance from the median of the other values of its own
environment over their mean absolute deviation from it (x 1.2533, the SD for normal
data). For normal data the largest score of a group of n is pivotal (it depends on n
alone), so its threshold is set by simulation per n: a clean group of n is flagged with
probability GROUP_ALPHA, a clean table of E environments with at most E x that.

    python benchmarks/outlier_rule.py thresholds   # the candidate's cut-offs, n = 3..30
    python benchmarks/outlier_rule.py              # rates at n = 4, 6, 10, 30 (minutes)
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from containertax.analysis import quality

GROUP_ALPHA = 0.002
SCALE_FACTOR = 1.2533  # mean absolute deviation -> SD for normal data


def max_scores(x: np.ndarray) -> np.ndarray:
    """Largest leave-one-out score of each row (one simulated group per row)."""
    out = np.zeros(len(x))
    for i in range(x.shape[1]):
        others = np.delete(x, i, axis=1)
        med = np.median(others, axis=1)
        scale = SCALE_FACTOR * np.abs(others - med[:, None]).mean(axis=1)
        out = np.maximum(out, np.abs(x[:, i] - med) / scale)
    return out


def thresholds(ns: range, sims: int = 200_000, seed: int = 11) -> dict[int, float]:
    rng = np.random.default_rng(seed)
    return {n: round(float(np.quantile(max_scores(rng.standard_normal((sims, n))),
                                       1 - GROUP_ALPHA)), 2) for n in ns}


def table(rng: np.random.Generator, n: int, scales: list[float]) -> pd.DataFrame:
    rows = [{"model": "m", "metric": "x", "environment": f"e{j}", "repetition": r,
             "value": 100 + 10 * j + s * v}
            for j, s in enumerate(scales) for r, v in enumerate(rng.standard_normal(n))]
    return pd.DataFrame(rows)


def candidate(t: pd.DataFrame, cut: dict[int, float]) -> pd.Series:
    """The candidate's flags: each environment's own leave-one-out score > cut[n]."""
    flags = pd.Series(False, index=t.index)
    for _, g in t.groupby(["model", "environment", "metric"]):
        v = g["value"].to_numpy(float)
        for i, idx in enumerate(g.index):
            others = np.delete(v, i)
            med = np.median(others)
            scale = SCALE_FACTOR * np.abs(others - med).mean()
            flags[idx] = scale > 0 and abs(v[i] - med) / scale > cut[len(v)]
    return flags


def rates(cut: dict[int, float], tables: int = 1000, seed: int = 5) -> pd.DataFrame:
    """Share of clean tables with any flag, and the share of the last group's values
    flagged (in the unequal table: the 10x noisier one), for the rule in quality.py
    ('current') and the candidate."""
    rng = np.random.default_rng(seed)
    out = []
    for n in (4, 6, 10, 30):
        for label, scales in (("3 envs, equal", [1, 1, 1]), ("4 envs, equal", [1, 1, 1, 1]),
                              ("2 envs, one 10x noisier", [1, 10])):
            counts = dict.fromkeys(("cur", "cand", "cur_last", "cand_last"), 0)
            for _ in range(tables):
                t = table(rng, n, scales)
                cur, cand = quality._flag_outliers(t), candidate(t, cut)
                last = t["environment"] == f"e{len(scales) - 1}"
                counts["cur"] += bool(cur.any())
                counts["cand"] += bool(cand.any())
                counts["cur_last"] += int(cur[last].sum())
                counts["cand_last"] += int(cand[last].sum())
            out.append({"n": n, "table": label,
                        "tables_flagged_current": counts["cur"] / tables,
                        "tables_flagged_candidate": counts["cand"] / tables,
                        "last_group_flagged_current": counts["cur_last"] / (tables * n),
                        "last_group_flagged_candidate": counts["cand_last"] / (tables * n)})
    return pd.DataFrame(out)


def power(cut: dict[int, float], shift: float = 10.0, sims: int = 20_000,
          seed: int = 3) -> dict[int, float]:
    """How often the candidate flags one value `shift` SD off in a group of n."""
    rng = np.random.default_rng(seed)
    out = {}
    for n in (4, 6, 10, 30):
        y = rng.standard_normal((sims, n))
        y[:, 0] += shift
        others = y[:, 1:]
        med = np.median(others, axis=1)
        scale = SCALE_FACTOR * np.abs(others - med[:, None]).mean(axis=1)
        out[n] = float((np.abs(y[:, 0] - med) / scale > cut[n]).mean())
    return out


if __name__ == "__main__":
    cuts = thresholds(range(3, 31) if sys.argv[1:] == ["thresholds"] else (4, 6, 10, 30))
    print("candidate thresholds:", cuts)
    print("candidate power, one value 10 SD off:", power(cuts))
    if sys.argv[1:] != ["thresholds"]:
        print(rates(cuts).to_string(index=False))
