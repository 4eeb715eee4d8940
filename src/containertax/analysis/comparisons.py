"""Per model, metric and environment-vs-reference comparison: descriptives, tests, effect
sizes, intervals, equivalence and power; then correction across the whole family.

The primary test follows one stated rule (analysis.primary_test):
  auto   Welch t when both groups pass Shapiro-Wilk at alpha, else Mann-Whitney U;
  paired paired t on complete blocks (one run of each environment per repetition), falling
         back to the auto rule where blocks are incomplete;
  welch / mannwhitney  that test always.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pingouin as pg
from scipy import stats as sps
from statsmodels.stats.power import TTestIndPower

from containertax.analysis.correction import correct

pg.options["round"] = None


@dataclass(frozen=True)
class Settings:
    reference: str
    alpha: float = 0.05
    primary_test: str = "auto"
    equivalence_margin: float = 0.05
    bootstrap_resamples: int = 10_000
    seed: int = 12345
    power: float = 0.8

    @classmethod
    def from_config(cls, analysis: dict[str, Any], reference: str) -> Settings:
        return cls(
            reference=reference,
            alpha=analysis["alpha"],
            primary_test=analysis["primary_test"],
            equivalence_margin=analysis["equivalence_margin"],
            bootstrap_resamples=analysis["bootstrap_resamples"],
            seed=analysis["seed"],
        )


def describe(values: np.ndarray) -> dict[str, float]:
    v = np.asarray(values, dtype=float)
    n = len(v)
    mean = float(np.mean(v)) if n else math.nan
    sd = float(np.std(v, ddof=1)) if n > 1 else math.nan
    return {
        "n": n,
        "mean": mean,
        "median": float(np.median(v)) if n else math.nan,
        "sd": sd,
        "min": float(np.min(v)) if n else math.nan,
        "max": float(np.max(v)) if n else math.nan,
        "q1": float(np.percentile(v, 25)) if n else math.nan,
        "q3": float(np.percentile(v, 75)) if n else math.nan,
        "cv": sd / mean if n > 1 and mean != 0 else math.nan,
    }


def descriptives(runs: pd.DataFrame, requests: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per model, metric and environment; latency percentiles from per-request
    data (never averaged from per-run percentiles)."""
    rows = []
    for (model, metric, env), g in runs.groupby(["model", "metric", "environment"], sort=False):
        rows.append({"model": model, "metric": metric, "environment": env,
                     "unit": g["unit"].iloc[0], **describe(g["value"].to_numpy())})
    if requests is not None and not requests.empty:
        for (model, env), g in requests.groupby(["model", "environment"], sort=False):
            v = g["latency_s"].to_numpy(dtype=float)
            rows.append({"model": model, "metric": "latency_s", "environment": env, "unit": "s",
                         **describe(v), "p50": float(np.percentile(v, 50)),
                         "p95": float(np.percentile(v, 95)), "p99": float(np.percentile(v, 99))})
    return pd.DataFrame(rows)


def _ratio_of_means(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis) / np.mean(y, axis=axis) - 1.0


def relative_overhead(x: np.ndarray, y: np.ndarray, resamples: int, seed: int,
                      level: float = 0.95) -> tuple[float, float, float]:
    """mean(x)/mean(y) - 1 with a BCa bootstrap interval (independent resampling)."""
    est = float(_ratio_of_means(x, y))
    if len(x) < 2 or len(y) < 2 or np.all(x == x[0]) and np.all(y == y[0]):
        return est, math.nan, math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = sps.bootstrap((x, y), _ratio_of_means, n_resamples=resamples, method="BCa",
                            confidence_level=level, vectorized=True, paired=False,
                            random_state=np.random.default_rng(seed))
    return est, float(res.confidence_interval.low), float(res.confidence_interval.high)


def sensitivity(nx: int, ny: int, alpha: float, power: float) -> float:
    """Smallest Cohen d detectable with the given power (two-sided, independent groups)."""
    if nx < 2 or ny < 2:
        return math.nan
    return float(TTestIndPower().solve_power(effect_size=None, nobs1=nx, alpha=alpha,
                                             power=power, ratio=ny / nx))


def _shapiro(v: np.ndarray) -> float:
    if len(v) < 3 or np.all(v == v[0]):
        return math.nan
    return float(sps.shapiro(v).pvalue)


def compare(x: np.ndarray, y: np.ndarray, s: Settings,
            paired: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, Any]:
    """x: the environment, y: the reference."""
    out: dict[str, Any] = {"n_env": len(x), "n_ref": len(y), "mean_env": float(np.mean(x)),
                           "mean_ref": float(np.mean(y))}
    out["diff"] = out["mean_env"] - out["mean_ref"]
    out["shapiro_p_env"], out["shapiro_p_ref"] = _shapiro(x), _shapiro(y)
    degenerate = len(x) < 2 or len(y) < 2 or (np.ptp(x) == 0 and np.ptp(y) == 0)
    if not degenerate:
        t = pg.ttest(x, y, correction=True).iloc[0]
        out.update(welch_t=float(t["T"]), welch_dof=float(t["dof"]), welch_p=float(t["p_val"]),
                   diff_ci_low=float(t["CI95"][0]), diff_ci_high=float(t["CI95"][1]),
                   cohen_d=float(t["cohen_d"]), observed_power=float(t["power"]))
        u = pg.mwu(x, y, alternative="two-sided").iloc[0]
        out.update(mwu_u=float(u["U_val"]), mwu_p=float(u["p_val"]), rbc=float(u["RBC"]))
        out["hedges_g"] = float(pg.compute_effsize(x, y, eftype="hedges"))
    else:
        for k in ("welch_t", "welch_dof", "welch_p", "diff_ci_low", "diff_ci_high", "cohen_d",
                  "observed_power", "mwu_u", "mwu_p", "rbc", "hedges_g"):
            out[k] = math.nan
    if paired is not None and len(paired[0]) >= 2 and np.ptp(paired[0] - paired[1]) > 0:
        pt = pg.ttest(paired[0], paired[1], paired=True).iloc[0]
        out.update(paired_n=len(paired[0]), paired_t=float(pt["T"]),
                   paired_p=float(pt["p_val"]))
        out["wilcoxon_p"] = float(pg.wilcoxon(paired[0], paired[1]).iloc[0]["p_val"])
    else:
        out.update(paired_n=0 if paired is None else len(paired[0]), paired_t=math.nan,
                   paired_p=math.nan, wilcoxon_p=math.nan)
    rel, lo, hi = relative_overhead(x, y, s.bootstrap_resamples, s.seed)
    out.update(rel_overhead=rel, rel_ci_low=lo, rel_ci_high=hi)
    if np.all(x > 0) and np.all(y > 0) and not degenerate:
        bound = math.log1p(s.equivalence_margin)
        tost = pg.tost(np.log(x), np.log(y), bound=bound).iloc[0]
        out["tost_p"] = float(tost["pval"])  # pingouin 0.7 names this one pval
    else:
        out["tost_p"] = math.nan
    out["equivalent"] = bool(out["tost_p"] < s.alpha) if not math.isnan(out["tost_p"]) else None
    d_min = sensitivity(len(x), len(y), s.alpha, s.power)
    pooled = math.sqrt(((len(x) - 1) * np.var(x, ddof=1) + (len(y) - 1) * np.var(y, ddof=1))
                       / (len(x) + len(y) - 2)) if not degenerate else math.nan
    out["mde_d"] = d_min
    out["mde_rel"] = d_min * pooled / out["mean_ref"] if out["mean_ref"] else math.nan
    out.update(_primary(out, s))
    return out


def _primary(r: dict[str, Any], s: Settings) -> dict[str, Any]:
    normal = (not math.isnan(r["shapiro_p_env"]) and not math.isnan(r["shapiro_p_ref"])
              and r["shapiro_p_env"] > s.alpha and r["shapiro_p_ref"] > s.alpha)
    rule = s.primary_test
    if rule == "paired" and r["paired_n"] >= 2 and not math.isnan(r["paired_p"]):
        return {"primary_test": "paired t", "p": r["paired_p"]}
    if rule == "welch" or (rule in ("auto", "paired") and normal):
        return {"primary_test": "Welch t", "p": r["welch_p"]}
    return {"primary_test": "Mann-Whitney U", "p": r["mwu_p"]}


def _blocks(g: pd.DataFrame, env: str, ref: str) -> tuple[np.ndarray, np.ndarray] | None:
    if "block" not in g or g["block"].isna().all():
        return None
    a = g[g.environment == env].set_index("block")["value"]
    b = g[g.environment == ref].set_index("block")["value"]
    if a.index.has_duplicates or b.index.has_duplicates:
        return None
    common = a.index.intersection(b.index)
    return (a.loc[common].to_numpy(float), b.loc[common].to_numpy(float)) if len(common) else None


def machine_adjusted(g: pd.DataFrame, env: str, ref: str, alpha: float) -> dict[str, Any]:
    """Relative difference with a fixed effect per machine (OLS on log values): where a
    campaign ran on several GPUs, a machine's speed must not pass for the environment's."""
    d = g[g.environment.isin([env, ref])]
    n = int(d["machine"].nunique()) if "machine" in d else 1
    out: dict[str, Any] = {"machines": n, "machine_adjusted_rel": np.nan,
                           "machine_adjusted_ci_low": np.nan, "machine_adjusted_ci_high": np.nan}
    if n < 2 or (d["value"] <= 0).any():
        return out
    import statsmodels.formula.api as smf

    d = d.assign(log_value=np.log(d["value"].astype(float)),
                 is_env=(d.environment == env).astype(int))
    fit = smf.ols("log_value ~ is_env + C(machine)", data=d).fit()
    low, high = fit.conf_int(alpha).loc["is_env"]
    out.update(machine_adjusted_rel=float(np.expm1(fit.params["is_env"])),
               machine_adjusted_ci_low=float(np.expm1(low)),
               machine_adjusted_ci_high=float(np.expm1(high)))
    return out


def analyse(runs: pd.DataFrame, s: Settings, metrics: list[str]) -> pd.DataFrame:
    """All comparisons of every non-reference environment with the reference."""
    rows = []
    for (model, metric), g in runs[runs.metric.isin(metrics)].groupby(["model", "metric"],
                                                                        sort=False):
        y = g[g.environment == s.reference]["value"].to_numpy(float)
        if len(y) == 0:
            continue
        for env in [e for e in g.environment.unique() if e != s.reference]:
            x = g[g.environment == env]["value"].to_numpy(float)
            if len(x) == 0:
                continue
            rows.append({"model": model, "metric": metric, "environment": env,
                         "reference": s.reference, "unit": g["unit"].iloc[0],
                         **compare(x, y, s, _blocks(g, env, s.reference)),
                         **machine_adjusted(g, env, s.reference, s.alpha)})
    return correct(pd.DataFrame(rows))
