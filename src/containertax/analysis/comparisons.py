"""Per model, metric and environment-vs-reference comparison: descriptives, the primary
test and its interval, effect sizes, equivalence and sensitivity.

The primary analysis is fixed before any data are seen (no normality pretest picks it) and
follows the design: every repetition is a block holding one run of each environment, so
the comparison is made within blocks, on the log of the per-block ratio env / reference.
Block-to-block drift (temperature, background load, page cache) cancels in the ratio.

  d_b = log(x_b) - log(y_b) for every complete block b (n blocks)
  estimate   exp(mean d) - 1: the geometric-mean ratio minus one
  interval   t interval of mean d (n - 1 df), exponentiated
  primary_test (analysis.primary_test)
    paired_t   one-sample t test of mean d = 0: the same t as the interval, so a result
               is significant exactly when its interval excludes 0
    signflip   exact sign-flip (randomisation) test of mean d: every one of the 2^n sign
               patterns (random ones beyond 2^16), no distributional assumption; its
               smallest attainable p is 2^(1-n) (0.125 at n = 4)
Without blocks (an imported table, or fewer than 2 complete blocks) the same is done on the
independent groups: Welch t on log values (interval and test), with a permutation test.
Metrics that can be zero or negative are compared on the raw scale the same way.

Secondary columns: Welch t and Mann-Whitney U on the raw values, the exact sign-flip p
(paired_t campaigns) or paired t p (signflip campaigns), the ratio of arithmetic means with
a bootstrap interval, signed Cohen's d and Hedges' g, the equivalence test (two one-sided
tests on the same log scale and design as the primary test) and the minimum detectable
effect at 80 % power.
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pingouin as pg
from scipy import stats as sps
from statsmodels.stats.power import TTestIndPower, TTestPower

from containertax.analysis.correction import correct

pg.options["round"] = None

EXACT_UP_TO = 16  # blocks: enumerate all 2^n sign patterns up to here
MONTE_CARLO = 19_999


@dataclass(frozen=True)
class Settings:
    reference: str
    alpha: float = 0.05
    primary_test: str = "paired_t"
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


# --- the primary analysis --------------------------------------------------------------


def signflip_p(d: np.ndarray, seed: int = 0) -> float:
    """Two-sided sign-flip test of mean(d) = 0: exact over all 2^n sign patterns up to
    n = EXACT_UP_TO, else MONTE_CARLO random patterns (the observed one counted)."""
    d = np.asarray(d, dtype=float)
    n = len(d)
    if n == 0:
        return math.nan
    observed = abs(d.mean())
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))
    if n <= EXACT_UP_TO:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
        null = np.abs(signs @ d) / n
        return float(np.mean(null >= observed - tol))
    rng = np.random.default_rng(seed)
    signs = rng.choice((1.0, -1.0), size=(MONTE_CARLO, n))
    null = np.abs(signs @ d) / n
    return float((1 + np.sum(null >= observed - tol)) / (MONTE_CARLO + 1))


def min_signflip_p(n: int) -> float:
    """The smallest p the exact sign-flip test can give with n blocks."""
    return 2.0 ** (1 - n) if n > 0 else math.nan


def paired_estimate(d: np.ndarray, alpha: float) -> dict[str, float]:
    """Mean of the per-block differences with its t interval and t test."""
    n = len(d)
    mean = float(np.mean(d))
    sd = float(np.std(d, ddof=1)) if n > 1 else math.nan
    if n < 2 or sd == 0 or math.isnan(sd):
        return {"est": mean, "low": math.nan, "high": math.nan, "t": math.nan, "df": n - 1,
                "p": math.nan, "sd": sd}
    se = sd / math.sqrt(n)
    t = mean / se
    crit = float(sps.t.ppf(1 - alpha / 2, n - 1))
    return {"est": mean, "low": mean - crit * se, "high": mean + crit * se, "t": t,
            "df": n - 1, "p": float(2 * sps.t.sf(abs(t), n - 1)), "sd": sd}


def welch_estimate(a: np.ndarray, b: np.ndarray, alpha: float) -> dict[str, float]:
    """mean(a) - mean(b) with Welch's interval and test."""
    est = float(np.mean(a) - np.mean(b))
    if len(a) < 2 or len(b) < 2 or (np.ptp(a) == 0 and np.ptp(b) == 0):
        return {"est": est, "low": math.nan, "high": math.nan, "t": math.nan, "df": math.nan,
                "p": math.nan}
    res = sps.ttest_ind(a, b, equal_var=False)
    ci = res.confidence_interval(1 - alpha)
    return {"est": est, "low": float(ci.low), "high": float(ci.high),
            "t": float(res.statistic), "df": float(res.df), "p": float(res.pvalue)}


def permutation_p(a: np.ndarray, b: np.ndarray, seed: int) -> float:
    """Two-sided permutation test of the difference of means of independent groups."""
    if len(a) < 2 or len(b) < 2:
        return math.nan
    res = sps.permutation_test((a, b), lambda u, v, axis: np.mean(u, axis) - np.mean(v, axis),
                               permutation_type="independent", vectorized=True,
                               n_resamples=MONTE_CARLO, alternative="two-sided",
                               rng=np.random.default_rng(seed))
    return float(res.pvalue)


def primary(x: np.ndarray, y: np.ndarray, paired: tuple[np.ndarray, np.ndarray] | None,
            s: Settings) -> dict[str, Any]:
    """The pre-specified primary comparison (see the module docstring)."""
    pairs = paired if paired is not None and len(paired[0]) >= 2 else None
    a_all = np.concatenate([x, y] if pairs is None else [*pairs])
    log = bool(np.all(a_all > 0))
    f = np.log if log else (lambda v: np.asarray(v, dtype=float))
    out: dict[str, Any] = {"scale": "log ratio" if log else "difference"}
    if pairs is not None:
        d = f(pairs[0]) - f(pairs[1])
        e = paired_estimate(d, s.alpha)
        flip = signflip_p(d, s.seed)
        out.update(design="paired", n_blocks=len(d), t_p=e["p"], signflip_p=flip,
                   signflip_min_p=min_signflip_p(len(d)), perm_p=math.nan,
                   primary_t=e["t"], primary_df=e["df"])
        if s.primary_test == "signflip":
            out.update(primary_test="sign-flip (exact)" if len(d) <= EXACT_UP_TO
                       else "sign-flip (Monte Carlo)", p=flip)
        else:
            out.update(primary_test="paired t", p=e["p"])
        tost = _tost_paired(d, math.log1p(s.equivalence_margin) if log else
                            s.equivalence_margin * float(np.mean(pairs[1])))
        dz = e["est"] / e["sd"] if e["sd"] and not math.isnan(e["sd"]) else math.nan
        mde = _mde_paired(len(d), s)
        mde_scale = mde * e["sd"] if not math.isnan(e["sd"]) else math.nan
        out["dz"] = dz
    else:
        a, b = f(x), f(y)
        e = welch_estimate(a, b, s.alpha)
        perm = permutation_p(a, b, s.seed)
        out.update(design="independent", n_blocks=0, t_p=e["p"], signflip_p=math.nan,
                   signflip_min_p=math.nan, perm_p=perm, primary_t=e["t"], primary_df=e["df"],
                   dz=math.nan)
        if s.primary_test == "signflip":  # no blocks to flip: the permutation analogue
            out.update(primary_test="permutation", p=perm)
        else:
            out.update(primary_test="Welch t", p=e["p"])
        tost = _tost_welch(a, b, math.log1p(s.equivalence_margin) if log else
                           s.equivalence_margin * float(np.mean(y)))
        mde = sensitivity(len(a), len(b), s.alpha, s.power)
        pooled = _pooled_sd(a, b)
        mde_scale = mde * pooled
    if log:
        out.update(rel_overhead=math.expm1(e["est"]), rel_ci_low=math.expm1(e["low"]),
                   rel_ci_high=math.expm1(e["high"]), mde_rel=math.expm1(mde_scale))
    else:
        ref = float(np.mean(y))
        out.update(rel_overhead=e["est"] / ref, rel_ci_low=e["low"] / ref,
                   rel_ci_high=e["high"] / ref, mde_rel=mde_scale / ref)
    out.update(tost_p=tost, mde_d=mde)
    return out


def _pooled_sd(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 2 or len(b) < 2:
        return math.nan
    return math.sqrt(((len(a) - 1) * np.var(a, ddof=1) + (len(b) - 1) * np.var(b, ddof=1))
                     / (len(a) + len(b) - 2))


def _tost_paired(d: np.ndarray, bound: float) -> float:
    """Two one-sided t tests of |mean d| < bound, on the primary test's scale and design."""
    if len(d) < 2 or np.ptp(d) == 0:
        return math.nan
    low = sps.ttest_1samp(d, -bound, alternative="greater").pvalue
    high = sps.ttest_1samp(d, bound, alternative="less").pvalue
    return float(max(low, high))


def _tost_welch(a: np.ndarray, b: np.ndarray, bound: float) -> float:
    """Two one-sided Welch t tests of |mean a - mean b| < bound."""
    if len(a) < 2 or len(b) < 2 or (np.ptp(a) == 0 and np.ptp(b) == 0):
        return math.nan
    low = sps.ttest_ind(a + bound, b, equal_var=False, alternative="greater").pvalue
    high = sps.ttest_ind(a - bound, b, equal_var=False, alternative="less").pvalue
    return float(max(low, high))


def _mde_paired(n: int, s: Settings) -> float:
    """Smallest standardised mean difference (d_z) the paired t test detects with the
    given power."""
    if n < 2:
        return math.nan
    return float(TTestPower().solve_power(effect_size=None, nobs=n, alpha=s.alpha,
                                          power=s.power))


def sensitivity(nx: int, ny: int, alpha: float, power: float) -> float:
    """Smallest Cohen d detectable with the given power (two-sided, independent groups)."""
    if nx < 2 or ny < 2:
        return math.nan
    return float(TTestIndPower().solve_power(effect_size=None, nobs1=nx, alpha=alpha,
                                             power=power, ratio=ny / nx))


# --- secondary columns -----------------------------------------------------------------


def _ratio_of_means(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis) / np.mean(y, axis=axis) - 1.0


def relative_overhead(x: np.ndarray, y: np.ndarray, resamples: int, seed: int,
                      level: float = 0.95, paired: bool = False) -> tuple[float, float, float]:
    """mean(x)/mean(y) - 1 with a percentile bootstrap interval (blocks resampled together
    where paired). Secondary: the primary estimate is the geometric-mean ratio."""
    est = float(_ratio_of_means(x, y))
    if len(x) < 2 or len(y) < 2 or np.all(x == x[0]) and np.all(y == y[0]):
        return est, math.nan, math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = sps.bootstrap((x, y), _ratio_of_means, n_resamples=resamples,
                            method="percentile", confidence_level=level, vectorized=True,
                            paired=paired, rng=np.random.default_rng(seed))
    return est, float(res.confidence_interval.low), float(res.confidence_interval.high)


def secondary(x: np.ndarray, y: np.ndarray, paired: tuple[np.ndarray, np.ndarray] | None,
              s: Settings) -> dict[str, Any]:
    """Unpaired tests on the raw values and signed standardised effect sizes."""
    out: dict[str, Any] = {}
    degenerate = len(x) < 2 or len(y) < 2 or (np.ptp(x) == 0 and np.ptp(y) == 0)
    if not degenerate:
        w = welch_estimate(x, y, s.alpha)
        out.update(welch_t=w["t"], welch_dof=w["df"], welch_p=w["p"], diff_ci_low=w["low"],
                   diff_ci_high=w["high"])
        out["cohen_d"] = float(pg.compute_effsize(x, y, eftype="cohen"))  # signed
        out["hedges_g"] = float(pg.compute_effsize(x, y, eftype="hedges"))  # signed
        out["observed_power"] = float(pg.ttest(x, y, correction=True).iloc[0]["power"])
        u = sps.mannwhitneyu(x, y, alternative="two-sided")
        out.update(mwu_u=float(u.statistic), mwu_p=float(u.pvalue),
                   rbc=float(2 * u.statistic / (len(x) * len(y)) - 1))
    else:
        for k in ("welch_t", "welch_dof", "welch_p", "diff_ci_low", "diff_ci_high", "cohen_d",
                  "hedges_g", "observed_power", "mwu_u", "mwu_p", "rbc"):
            out[k] = math.nan
    if paired is not None and len(paired[0]) >= 2 and np.ptp(paired[0] - paired[1]) > 0:
        out["wilcoxon_p"] = float(sps.wilcoxon(paired[0], paired[1]).pvalue)
    else:
        out["wilcoxon_p"] = math.nan
    pairs = paired if paired is not None and len(paired[0]) >= 2 else None
    rel, lo, hi = (relative_overhead(*pairs, s.bootstrap_resamples, s.seed, paired=True)
                   if pairs is not None else
                   relative_overhead(x, y, s.bootstrap_resamples, s.seed))
    out.update(mean_ratio=rel, mean_ratio_ci_low=lo, mean_ratio_ci_high=hi)
    return out


def compare(x: np.ndarray, y: np.ndarray, s: Settings,
            paired: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, Any]:
    """x: the environment, y: the reference; paired: their values in complete blocks."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    out: dict[str, Any] = {"n_env": len(x), "n_ref": len(y), "mean_env": float(np.mean(x)),
                           "mean_ref": float(np.mean(y))}
    out["diff"] = out["mean_env"] - out["mean_ref"]
    out.update(secondary(x, y, paired, s))
    out.update(primary(x, y, paired, s))
    out["equivalent"] = bool(out["tost_p"] < s.alpha) if not math.isnan(out["tost_p"]) else None
    return out


def blocks(g: pd.DataFrame, env: str, ref: str) -> tuple[np.ndarray, np.ndarray] | None:
    """The two environments' values in the blocks where both ran once."""
    if "block" not in g or g["block"].isna().all():
        return None
    a = g[g.environment == env].set_index("block")["value"]
    b = g[g.environment == ref].set_index("block")["value"]
    if a.index.has_duplicates or b.index.has_duplicates:
        return None
    common = a.index.intersection(b.index).sort_values()
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


@dataclass(frozen=True)
class Plan:
    """What is compared with what, and in which family, fixed by the config before data:
    replicas against the environment they copy (calibration), every other environment
    against the reference; primary metrics in the primary family, the rest secondary;
    metrics that restate another (request throughput = token throughput / tokens per
    request) are estimated but not tested a second time."""
    reference: str
    replicas: dict[str, str]
    primary_metrics: dict[str, list[str]]  # model -> its primary metrics
    restates: dict[str, str]

    def pairs(self, envs: list[str]) -> list[tuple[str, str, bool]]:
        """(environment, compared with, is an A/A pair)."""
        out = []
        for env in envs:
            if env in self.replicas:
                if self.replicas[env] in envs:
                    out.append((env, self.replicas[env], True))
            elif env != self.reference and self.reference in envs:
                out.append((env, self.reference, False))
        return out

    def family(self, model: str, metric: str, aa: bool, present: set[str]) -> str:
        if self.restates.get(metric) in present:
            return "derived"
        primary_ = metric in self.primary_metrics.get(model, [])
        if aa:
            return "calibration" if primary_ else "calibration-secondary"
        return "primary" if primary_ else "secondary"


def analyse(runs: pd.DataFrame, s: Settings, metrics: list[str],
            plan: Plan | None = None) -> pd.DataFrame:
    """All planned comparisons (uncorrected p in 'p', correction within each family)."""
    plan = plan or Plan(s.reference, {}, {}, {})
    rows = []
    present = set(metrics)
    for (model, metric), g in runs[runs.metric.isin(metrics)].groupby(["model", "metric"],
                                                                        sort=False):
        envs = list(dict.fromkeys(g.environment))
        for env, ref, aa in plan.pairs(envs):
            x = g[g.environment == env]["value"].to_numpy(float)
            y = g[g.environment == ref]["value"].to_numpy(float)
            if len(x) == 0 or len(y) == 0:
                continue
            row = {"model": model, "metric": metric, "environment": env, "reference": ref,
                   "unit": g["unit"].iloc[0],
                   "family": plan.family(str(model), metric, aa, present),
                   **compare(x, y, s, blocks(g, env, ref)),
                   **machine_adjusted(g, env, ref, s.alpha)}
            if row["family"] == "derived":
                row.update(p=math.nan, primary_test=f"not tested (restates "
                           f"{plan.restates[metric]})")
            rows.append(row)
    return correct(pd.DataFrame(rows))
