"""Where the time goes: each phase of the runs' timelines (workloads/timeline.py) per
environment against its reference, paired by block.

The comparisons themselves are ordinary rows of comparisons.csv in the family `phases`
(A/A pairs: `calibration-phases`), tested and corrected like every other family; this
module adds what a phase needs besides a relative difference: the difference in seconds
per block with its t interval (phases add up, ratios do not), with its verdict and its
printing in milliseconds (ms_texts: one printing for the table and the text). The stacked
figure, the paper's table and the values of its section "Where the time goes"
(paper/phases.tex) are publishing/phases_paper.py's.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from containertax.statistics import decisions
from containertax.statistics.comparisons import PHASES_AA_FAMILY, PHASES_FAMILY, paired_estimate
from containertax.workloads.metric_registry import MetricInfo
from containertax.workloads.timeline import PHASES

ORDER = [p.metric for p in PHASES]
WALL = "process_wall_s"


def seconds_text(x: float, digits: int = 3) -> str:
    """A signed difference with `digits` decimals, '--' where it is not finite, and no
    signed zero."""
    if not math.isfinite(x):
        return "--"
    text = f"{x:+.{digits}f}"
    return text[1:] if float(text) == 0 else text


# at most 1 ns: the resolution of the timeline's clock (CLOCK_MONOTONIC, its marks kept as
# seconds in a float); a narrower interval is none that was measured
MS_DECIMALS = 6


def ms_texts(est: float, low: float, high: float) -> tuple[str, str, str]:
    """A difference in seconds printed in milliseconds, (estimate, low, high), with the
    decimals (0 to MS_DECIMALS) that give the smaller of the estimate and the interval's
    width two significant digits (a phase of a few microseconds is not printed as 0, nor
    an interval a microsecond wide as '0.000 [0.000, +0.001]'): the texts findings.csv
    holds and the paper prints, in the table and the text alike."""
    values = [v * 1000 for v in (est, low, high)]
    width = values[2] - values[1]
    finite = [abs(v) for v in (values[0], width) if math.isfinite(v) and v != 0]
    d = 1
    if finite:
        # an estimate near zero in a wide interval takes no more decimals than a
        # thousandth of the width needs ('0 [-99900, +100100]', not '0.000000 [...')
        least = max(min(finite), width / 1000 if width > 0 else 0)
        d = int(min(MS_DECIMALS, max(0, 1 - math.floor(math.log10(least)))))
    est_t, low_t, high_t = (seconds_text(v, d) for v in values)
    return est_t, low_t, high_t


def paired_seconds(runs: pd.DataFrame, metric: str, env: str, ref: str,
                   alpha: float) -> dict[str, float]:
    """Mean per-block difference env - ref in the metric's unit, its t interval and the
    number of complete blocks (comparisons.paired_estimate on the raw scale)."""
    d = runs[(runs.metric == metric) & runs.environment.isin([env, ref])]
    if d.empty or "block" not in d:
        return {"est": math.nan, "low": math.nan, "high": math.nan, "n": 0}
    w = d.pivot_table(index=["model", "block"], columns="environment", values="value")
    if env not in w or ref not in w:
        return {"est": math.nan, "low": math.nan, "high": math.nan, "n": 0}
    diff = (w[env] - w[ref]).dropna().to_numpy(float)
    e = paired_estimate(diff, alpha)
    return {"est": e["est"], "low": e["low"], "high": e["high"], "n": len(diff)}


def rows(runs: pd.DataFrame, results: pd.DataFrame | None, alpha: float,
         reg: dict[str, MetricInfo]) -> list[dict[str, Any]]:
    """One row per model, compared environment and phase (then the wall time): both means,
    the difference in seconds with its interval, and the comparison's verdict (decision
    table, BH within the phases family)."""
    if results is None or results.empty or "family" not in results:
        return []
    found = results[results.family.isin([PHASES_FAMILY, PHASES_AA_FAMILY])]
    if found.empty:  # e.g. one environment: findings.csv holds no comparison's columns
        return []
    out = []
    for (model, env, ref), group in found.groupby(["model", "environment", "reference"],
                                                  sort=False):
        model_runs = runs[runs.model == model]
        aa = bool((group.family == PHASES_AA_FAMILY).any())  # the wall row's family is not
        by_metric = {r.metric: r for r in group.itertuples()}
        wall = results[(results.model == model) & (results.environment == env)
                       & (results.reference == ref) & (results.metric == WALL)]
        for metric in [m for m in ORDER if m in by_metric] + [WALL]:
            r = by_metric.get(metric)
            if r is None and wall.empty:
                continue
            r = r if r is not None else next(wall.itertuples())
            # computed once, by findings.build (abs_* columns); a plain comparisons.csv
            # (no findings table yet) has them computed here the same way
            secs = ({"est": float(r.abs_diff), "low": float(r.abs_low),
                     "high": float(r.abs_high), "n": int(float(r.abs_blocks))}
                    if math.isfinite(float(getattr(r, "abs_blocks", math.nan)))
                    else paired_seconds(model_runs, metric, env, ref, alpha))
            out.append({
                "model": model, "environment": env, "reference": ref, "metric": metric,
                "label": reg[metric].label if metric in reg else metric,
                "aa": aa,
                "mean_ref": float(r.mean_ref), "mean_env": float(r.mean_env),
                "diff_s": secs["est"], "diff_low": secs["low"], "diff_high": secs["high"],
                "n_blocks": secs["n"], "rel": float(r.rel_overhead),
                "rel_low": float(r.rel_ci_low), "rel_high": float(r.rel_ci_high),
                "p_bh": float(getattr(r, "p_bh", math.nan)),
                "verdict": decisions.verdict(r, "lower", alpha).word,
            })
    return out


def sum_gap(runs: pd.DataFrame) -> float:
    """The largest |sum of a run's phases - its process_wall_s| over the runs (seconds)."""
    d = runs[runs.metric.isin([*ORDER, WALL])]
    if d.empty or not d.metric.isin(ORDER).any():
        return math.nan
    keys = ["model", "environment", "repetition"]
    w = d.pivot_table(index=keys, columns="metric", values="value", aggfunc="first")
    if WALL not in w:
        return math.nan
    have = [m for m in ORDER if m in w]
    gaps = (w[have].sum(axis=1, min_count=1) - w[WALL]).abs().dropna()
    return float(gaps.max()) if len(gaps) else math.nan
