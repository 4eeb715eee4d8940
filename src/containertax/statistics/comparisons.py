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
The design is the table's, never the data's: a table with block labels is analysed paired,
on complete blocks only. A block where one environment's run is missing (a failed cell, a
value excluded by analysis.exclude or non-finite) is left out and counted in
blocks_dropped; with fewer than two complete blocks there is no interval (no_interval
says why), never a switch to an unpaired test. A block holding two runs of one
environment (a repeated model, environment, repetition/block, metric) is an error,
DuplicateRows: analysis.exclude: [duplicate] is the explicit way to drop such rows. Only a
table without blocks (an import) is compared as independent groups: Welch t on the same
scale (interval and test), with a permutation test.

Scale: one per metric for the whole campaign (metric_scales, column 'scale'): the log
ratio where every value of the metric in the campaign is > 0, else the raw difference,
reported relative to |reference mean|.

Degenerate data give NaN with a reason, never an exception: 'not_estimable' says why the
relative estimate is NaN (empty exactly when it is finite: no value, no complete block,
reference mean zero on the raw scale, out of floating-point range; its p and TOST p are
NaN too), 'no_interval' why its interval is missing (one block or run, no variation).

Secondary columns: Welch t on the raw values, the exact sign-flip p (paired_t campaigns)
or paired t p (signflip campaigns), the ratio of arithmetic means with a bootstrap
interval, the equivalence test (two one-sided tests on the same scale and design as the
primary test; on the log scale the margin +-log(1 + m) is the ratio band
[1/(1 + m), 1 + m], i.e. [-4.76 %, +5 %] at m = 0.05), the minimum detectable effect at
80 % power (prospective; no post-hoc 'observed power', a function of p alone, Hoenig and
Heisey 2001), and the rank test and effect size of the design:
  paired       Wilcoxon signed-rank test of the per-block differences d (scipy.stats.
               wilcoxon; exact below 50 blocks without ties or zeros, smallest
               attainable two-sided p 2^(1-n): 0.125 at n = 4, 0.031 at n = 6, so it
               cannot reject at alpha 0.05 below 6 blocks); d_z = mean(d) / sd(d) and
               g_z = d_z J(n - 1), Hedges' small-sample correction with the n - 1 df of
               d_z (Hedges 1981; Borenstein et al. 2009, Introduction to Meta-Analysis,
               sec. 4.4; Lakens 2013, Front. Psychol. 4:863): effect_size = g_z
  independent  Mann-Whitney U (smallest two-sided p 2 / C(nx + ny, nx): 0.029 at 4 + 4)
               and Cohen's d / Hedges' g on the primary scale: effect_size = Hedges' g
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from containertax.statistics.correction import correct
from containertax.statistics.quality import duplicate_mask
from containertax.workloads.timeline import METRICS as PHASE_METRICS

# The phases of a run's timeline (workloads/timeline.py) form their own families: where
# the wall time goes is asked apart from the primary and secondary questions
PHASES_FAMILY, PHASES_AA_FAMILY = "phases", "calibration-phases"


def _pg():  # noqa: ANN202 - pingouin, imported where an effect size needs it: importing it
    # costs more than the rest of this module (it pulls in matplotlib), and the status page
    # rebuilt after every cell uses the paired estimate alone
    import pingouin as pg

    return pg  # compute_effsize returns an unrounded float (its 'round' option touches only
    # pingouin's DataFrame outputs, none used here), so no global option is set


EXACT_UP_TO = 16  # blocks: enumerate all 2^n sign patterns up to here
MONTE_CARLO = 19_999
# Monte Carlo null draws are made in batches of at most this many values (memory: a
# 200,000-row import once asked for a 20,000 x 50,000 matrix at once)
BATCH_VALUES = 4_000_000
# Above this many runs in one comparison no resampling is done (its cost grows with runs x
# resamples: a 200,000-row import): the permutation test's perm_p and the bootstrap
# interval of the ratio of means are NaN, Welch's t (asymptotically exact at such sizes)
# stands, and a permutation primary falls back to it, said in primary_test
PERMUTATION_UP_TO = 20_000


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
    """n, mean, median, SD, range, quartiles and CV of one cell's values."""
    v = np.asarray(values, dtype=float)
    n = len(v)
    mean = float(np.mean(v)) if n else math.nan
    # identical values have no spread: np.std's rounded mean would give ~1e-16 instead,
    # printed in the descriptives table as a spurious SD and CV (and widening it)
    sd = (0.0 if np.ptp(v) == 0 else float(np.std(v, ddof=1))) if n > 1 else math.nan
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


# --- degenerate data: a defined result and the reason -----------------------------------


def _finite(v: float) -> bool:
    return v is not None and math.isfinite(v)


def scale_of(values: np.ndarray) -> str:
    """'log' where every value is > 0 (at least one), else 'raw'."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return "log" if len(v) and bool(np.all(v > 0)) else "raw"


def metric_scales(runs: pd.DataFrame, metrics: list[str] | None = None) -> dict[str, str]:
    """One scale per metric for the whole campaign, decided once from every finite value
    of the metric in the table given (the campaign's kept.csv): 'log' where all are > 0,
    else 'raw'. No comparison chooses its own."""
    names = metrics if metrics is not None else list(dict.fromkeys(runs["metric"]))
    return {m: scale_of(runs.loc[runs.metric == m, "value"].to_numpy(float)) for m in names}


SCALE_WORDS = {"log": "log ratio", "raw": "difference"}


def _relative(e: dict[str, float], scale: str, ref_mean: float) -> dict[str, float]:
    """The estimate and interval as relative differences: exp(.) - 1 on the log scale,
    difference / |reference mean| on the raw scale (the sign stays that of the
    difference where the reference mean is negative)."""
    keys = ("est", "low", "high")
    with np.errstate(all="ignore"):
        if scale == "log":
            return {k: float(np.expm1(e[k])) for k in keys}
        if ref_mean == 0 or not _finite(ref_mean):
            return {k: math.nan for k in keys}
        return {k: float(np.float64(e[k]) / abs(ref_mean)) for k in keys}


def _reasons(out: dict[str, Any], est_why: str, ci_why: str) -> dict[str, str]:
    """not_estimable: why the relative estimate is NaN (empty exactly when it is finite);
    no_interval: why its interval is missing (empty exactly when both ends are finite).
    The named causes first, floating-point range last."""
    est_ok = _finite(out["rel_overhead"])
    ci_ok = _finite(out["rel_ci_low"]) and _finite(out["rel_ci_high"])
    if est_ok:
        est_why = ""
    elif not est_why:
        est_why = "not finite in floating point (values out of range)"
    if not est_ok:
        out["rel_overhead"] = math.nan  # an infinite estimate is none
    if ci_ok:
        ci_why = ""
    else:
        ci_why = est_why or ci_why or "interval not finite in floating point"
        out["rel_ci_low"] = out["rel_ci_high"] = math.nan
    return {"not_estimable": est_why, "no_interval": ci_why}


# --- the primary analysis --------------------------------------------------------------


def signflip_p(d: np.ndarray, seed: int = 0) -> float:
    """Two-sided sign-flip test of mean(d) = 0: exact over all 2^n sign patterns up to
    n = EXACT_UP_TO, else MONTE_CARLO random patterns (the observed one counted).

    Under no difference each block's difference is as likely positive as negative, so
    the p value is the share of sign patterns whose |mean| reaches the observed one; no
    distribution is assumed.

    Parameters
    ----------
    d : array of float
        The per-block differences (on the log scale: log x_b - log y_b).
    seed : int
        Seed of the random patterns, used only above EXACT_UP_TO blocks.

    Returns
    -------
    float
        The two-sided p value; NaN without a value or with a non-finite one.

    Examples
    --------
    Four blocks, all slower in the container: the exact test cannot go below 2^(1-4).

    >>> import numpy as np
    >>> signflip_p(np.array([0.03, 0.05, 0.02, 0.04]))
    0.125
    >>> signflip_p(np.array([0.03, -0.05, 0.02, -0.04]))
    0.75
    """
    d = np.asarray(d, dtype=float)
    n = len(d)
    if n == 0 or not np.all(np.isfinite(d)):
        return math.nan
    observed = abs(d.mean())
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))
    if n <= EXACT_UP_TO:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
        null = np.abs(signs @ d) / n
        return float(np.mean(null >= observed - tol))
    rng = np.random.default_rng(seed)
    hits, batch = 0, max(1, BATCH_VALUES // n)
    for start in range(0, MONTE_CARLO, batch):
        signs = rng.choice((1.0, -1.0), size=(min(batch, MONTE_CARLO - start), n))
        hits += int(np.sum(np.abs(signs @ d) / n >= observed - tol))
    return float((1 + hits) / (MONTE_CARLO + 1))


def min_signflip_p(n: int) -> float:
    """The smallest p the exact sign-flip test can give with n blocks (also that of the
    exact Wilcoxon signed-rank test: both put 1/2^n on each sign pattern).

    Parameters
    ----------
    n : int
        Number of complete blocks.

    Returns
    -------
    float
        2^(1 - n); NaN for no block.

    Examples
    --------
    >>> min_signflip_p(4), min_signflip_p(6)
    (0.125, 0.03125)
    """
    return 2.0 ** (1 - n) if n > 0 else math.nan


def min_mannwhitney_p(nx: int, ny: int) -> float:
    """The smallest two-sided p of the exact Mann-Whitney U test: 2 / C(nx + ny, nx)
    (0.029 at 4 + 4 runs)."""
    if not (nx and ny):
        return math.nan
    # C(nx + ny, nx) overflows a float beyond ~1030 runs: in logs (0.0 below 1e-308)
    log_c = math.lgamma(nx + ny + 1) - math.lgamma(nx + 1) - math.lgamma(ny + 1)
    if log_c > 700:
        return math.exp(math.log(2.0) - log_c)
    return min(1.0, 2.0 / math.comb(nx + ny, nx))


def paired_estimate(d: np.ndarray, alpha: float) -> dict[str, float]:
    """Mean of the per-block differences with its t interval and t test: the paired
    comparison of the primary analysis (on the log scale, exp(est) - 1 is the relative
    difference of the geometric means).

    Parameters
    ----------
    d : array of float
        The per-block differences, environment minus reference, one per complete block.
    alpha : float
        Two-sided level: the interval is at 1 - alpha.

    Returns
    -------
    dict
        ``est`` (mean of d), ``low`` and ``high`` (t interval, n - 1 df), ``t``, ``df``,
        ``p`` (one-sample t test of mean d = 0) and ``sd``. Below two blocks, or without
        variation, the interval, t and p are NaN (a defined result, no exception).

    Examples
    --------
    >>> import numpy as np
    >>> e = paired_estimate(np.array([0.03, 0.05, 0.02, 0.04]), alpha=0.05)
    >>> print(f"{e['est']:.3f} [{e['low']:.4f}, {e['high']:.4f}] p = {e['p']:.4f}")
    0.035 [0.0145, 0.0555] p = 0.0123
    >>> paired_estimate(np.array([0.03]), alpha=0.05)["p"]
    nan
    """
    # scipy.special's Student t functions, the very ones scipy.stats.t calls (its ppf is
    # stdtrit(df, q), its sf stdtr(df, -x); with loc 0 and scale 1 the same floats):
    # loading scipy.stats for two numbers cost the findings step and the status page
    # about 1 s each
    from scipy.special import stdtr, stdtrit

    d = np.asarray(d, dtype=float)
    n = len(d)
    nan = math.nan
    if n == 0:
        return {"est": nan, "low": nan, "high": nan, "t": nan, "df": nan, "p": nan, "sd": nan}
    with np.errstate(all="ignore"):
        mean = float(np.mean(d))
        # identical differences have no spread (a memory metric counted in pages): np.std
        # of 3 equal values can give 1e-18 from the rounded mean, an interval of zero width
        # that prints as '+0.775 [+0.775, +0.775]'
        sd = (0.0 if np.ptp(d) == 0 else float(np.std(d, ddof=1))) if n > 1 else nan
    if n < 2 or not sd > 0 or not math.isfinite(sd) or not math.isfinite(mean):
        return {"est": mean, "low": nan, "high": nan, "t": nan, "df": n - 1, "p": nan,
                "sd": sd}
    se = sd / math.sqrt(n)
    t = mean / se
    crit = float(stdtrit(n - 1, 1 - alpha / 2))
    return {"est": mean, "low": mean - crit * se, "high": mean + crit * se, "t": t,
            "df": n - 1, "p": float(2 * stdtr(n - 1, -abs(t))), "sd": sd}


def welch_estimate(a: np.ndarray, b: np.ndarray, alpha: float) -> dict[str, float]:
    """mean(a) - mean(b) with Welch's interval and test: the primary comparison of a
    table without blocks (an import), where the groups are independent.

    Parameters
    ----------
    a, b : array of float
        The environment's and the reference's values (on the metric's scale).
    alpha : float
        Two-sided level: the interval is at 1 - alpha.

    Returns
    -------
    dict
        ``est``, ``low``, ``high``, ``t``, ``df`` (Welch-Satterthwaite) and ``p``; NaN
        where a group is empty, has one value, or neither group varies.

    Examples
    --------
    >>> import numpy as np
    >>> w = welch_estimate(np.array([10.2, 10.4, 10.1, 10.3]),
    ...                    np.array([10.0, 10.1, 9.9, 10.0]), alpha=0.05)
    >>> print(f"{w['est']:.2f} [{w['low']:.3f}, {w['high']:.3f}] df = {w['df']:.2f}")
    0.25 [0.054, 0.446] df = 5.07
    """
    from scipy import stats as sps

    nan = math.nan
    if len(a) == 0 or len(b) == 0:
        return {"est": nan, "low": nan, "high": nan, "t": nan, "df": nan, "p": nan}
    with np.errstate(all="ignore"):
        est = float(np.mean(a) - np.mean(b))
    if len(a) < 2 or len(b) < 2 or (np.ptp(a) == 0 and np.ptp(b) == 0):
        return {"est": est, "low": nan, "high": nan, "t": nan, "df": nan, "p": nan}
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = sps.ttest_ind(a, b, equal_var=False)
        ci = res.confidence_interval(1 - alpha)
    return {"est": est, "low": float(ci.low), "high": float(ci.high),
            "t": float(res.statistic), "df": float(res.df), "p": float(res.pvalue)}


def permutation_p(a: np.ndarray, b: np.ndarray, seed: int) -> float:
    """Two-sided permutation test of the difference of means of independent groups."""
    from scipy import stats as sps

    if len(a) < 2 or len(b) < 2 or not np.all(np.isfinite(np.concatenate([a, b]))) \
            or len(a) + len(b) > PERMUTATION_UP_TO:
        return math.nan
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = sps.permutation_test((a, b), lambda u, v, axis: np.mean(u, axis)
                                   - np.mean(v, axis), permutation_type="independent",
                                   vectorized=True, n_resamples=MONTE_CARLO,
                                   alternative="two-sided", rng=np.random.default_rng(seed))
    return float(res.pvalue)


def hedges_correction(df: int) -> float:
    """Hedges' (1981) small-sample factor J(df) = Gamma(df/2) / (sqrt(df/2)
    Gamma((df-1)/2)), exact (about 1 - 3 / (4 df - 1)); NaN below 2 df, where it is 0.

    Parameters
    ----------
    df : int
        Degrees of freedom of the standard deviation (blocks - 1 for g_z).

    Returns
    -------
    float
        The factor that multiplies d into Hedges' g.

    Examples
    --------
    Six blocks (5 df): the exact factor, next to the usual approximation 1 - 3/(4 df - 1).

    >>> round(hedges_correction(5), 4), round(1 - 3 / (4 * 5 - 1), 4)
    (0.8407, 0.8421)
    >>> hedges_correction(1)
    nan
    """
    from scipy.special import gammaln

    if df < 2:
        return math.nan
    return math.exp(gammaln(df / 2) - gammaln((df - 1) / 2)) / math.sqrt(df / 2)


def primary(x: np.ndarray, y: np.ndarray, paired: tuple[np.ndarray, np.ndarray] | None,
            s: Settings, scale: str | None = None) -> dict[str, Any]:
    """The pre-specified primary comparison (see the module docstring): paired when blocks
    are given (however few), independent otherwise; never one for the other.

    Parameters
    ----------
    x, y : array of float
        All values of the environment and of the reference.
    paired : tuple of two arrays, or None
        Their values in complete blocks (same order), or None for independent groups.
    s : Settings
        Level, primary test (``paired_t`` or ``signflip``), equivalence margin, seed.
    scale : {'log', 'raw'}, optional
        The metric's scale over the campaign (metric_scales); else from x and y.

    Returns
    -------
    dict
        ``design``, ``primary_test``, ``p``, ``rel_overhead`` with ``rel_ci_low`` and
        ``rel_ci_high`` (relative difference and its interval), ``tost_p``, ``mde_rel``
        and the reasons ``not_estimable`` and ``no_interval`` (empty where defined).

    Examples
    --------
    >>> import numpy as np
    >>> x, y = np.array([10.3, 10.6, 10.2, 10.5]), np.array([10.0, 10.2, 9.9, 10.1])
    >>> r = primary(x, y, (x, y), Settings(reference="native"))
    >>> print(f"{r['primary_test']}: {r['rel_overhead']:+.2%} "
    ...       f"[{r['rel_ci_low']:+.2%}, {r['rel_ci_high']:+.2%}], p = {r['p']:.4f}")
    paired t: +3.48% [+2.63%, +4.33%], p = 0.0009
    """
    scale = scale or scale_of(np.concatenate([x, y]))
    f = np.log if scale == "log" else (lambda v: np.asarray(v, dtype=float))
    a_all = np.concatenate([x, y] if paired is None else [*paired])
    if scale == "log" and np.any(a_all <= 0):
        raise ValueError("log scale chosen for a metric with values <= 0")
    out: dict[str, Any] = {"scale": SCALE_WORDS[scale]}
    nan = math.nan
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if paired is not None:
            ref_values = paired[1]
            d = f(paired[0]) - f(paired[1])
            n = len(d)
            e = paired_estimate(d, s.alpha)
            flip = signflip_p(d, s.seed)
            out.update(design="paired", n_blocks=n, t_p=e["p"], signflip_p=flip,
                       signflip_min_p=min_signflip_p(n), perm_p=nan,
                       primary_t=e["t"], primary_df=e["df"])
            if s.primary_test == "signflip":
                out.update(primary_test="sign-flip (exact)" if n <= EXACT_UP_TO
                           else "sign-flip (Monte Carlo)", p=flip)
            else:
                out.update(primary_test="paired t", p=e["p"])
            bound = (math.log1p(s.equivalence_margin) if scale == "log" else
                     s.equivalence_margin * abs(float(np.mean(ref_values))) if n else nan)
            tost = tost_paired(d, bound)
            mde = _mde_paired(n, s)
            mde_scale = mde * e["sd"]
            est_why = "no complete block" if n == 0 else ""
            ci_why = ("one complete block" if n == 1 else
                      "no variation: every block has the same difference" if not e["sd"] > 0
                      else "")
        else:
            ref_values = y
            a, b = f(x), f(y)
            e = welch_estimate(a, b, s.alpha)
            perm = permutation_p(a, b, s.seed)
            out.update(design="independent", n_blocks=0, t_p=e["p"], signflip_p=nan,
                       signflip_min_p=nan, perm_p=perm, primary_t=e["t"], primary_df=e["df"])
            if s.primary_test == "signflip" and len(a) + len(b) > PERMUTATION_UP_TO:
                out.update(primary_test=f"Welch t (permutation not run above "
                                        f"{PERMUTATION_UP_TO} runs)", p=e["p"])
            elif s.primary_test == "signflip":  # no blocks to flip: the permutation analogue
                out.update(primary_test="permutation", p=perm)
            else:
                out.update(primary_test="Welch t", p=e["p"])
            bound = (math.log1p(s.equivalence_margin) if scale == "log" else
                     s.equivalence_margin * abs(float(np.mean(y))) if len(y) else nan)
            tost = tost_welch(a, b, bound)
            mde = sensitivity(len(a), len(b), s.alpha, s.power)
            mde_scale = mde * _pooled_sd(a, b)
            est_why = ("no value of the environment" if len(x) == 0 else
                       "no value of the reference" if len(y) == 0 else "")
            ci_why = ("" if est_why else "a single run of the environment" if len(x) == 1 else
                      "a single run of the reference" if len(y) == 1 else
                      "no variation: every run of both has the same value"
                      if np.ptp(a) == 0 and np.ptp(b) == 0 else "")
        ref_mean = float(np.mean(ref_values)) if len(ref_values) else nan
        if scale == "raw" and ref_mean == 0 and not est_why:
            est_why = "reference mean is zero"
        rel = _relative(e, scale, ref_mean)
        mde_rel = (float(np.expm1(mde_scale)) if scale == "log" else
                   mde_scale / abs(ref_mean) if ref_mean else nan)
    out.update(rel_overhead=rel["est"], rel_ci_low=rel["low"], rel_ci_high=rel["high"],
               mde_rel=mde_rel if _finite(mde_rel) else nan, tost_p=tost, mde_d=mde)
    out.update(_reasons(out, est_why, ci_why))
    if out["not_estimable"]:  # no relative difference: nothing to test or call equivalent
        out.update(p=nan, t_p=nan, signflip_p=nan, perm_p=nan, tost_p=nan)
    return out


def _pooled_sd(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 2 or len(b) < 2:
        return math.nan
    with np.errstate(all="ignore"):
        return float(np.sqrt(((len(a) - 1) * np.var(a, ddof=1) + (len(b) - 1)
                              * np.var(b, ddof=1)) / (len(a) + len(b) - 2)))


def tost_paired(d: np.ndarray, bound: float) -> float:
    """Two one-sided t tests (TOST) of |mean d| < bound, on the primary test's scale and
    design: equivalence is shown at level alpha where the returned p is below alpha.

    Parameters
    ----------
    d : array of float
        The per-block differences (log scale: log x_b - log y_b).
    bound : float
        The equivalence bound on d's scale: log(1 + margin) on the log scale (the ratio
        band [1/(1 + m), 1 + m]).

    Returns
    -------
    float
        The larger of the two one-sided p values; NaN below two blocks, without
        variation, with a non-finite value or a bound that is not positive.

    Examples
    --------
    Differences of about 0 % lie well inside a 5 % band; differences of 2-5 % do not.

    >>> import math
    >>> import numpy as np
    >>> band = math.log1p(0.05)
    >>> print(f"{tost_paired(np.array([0.01, -0.01, 0.005, 0.0, 0.002]), band):.1e}")
    6.9e-05
    >>> print(f"{tost_paired(np.array([0.03, 0.05, 0.02, 0.04]), band):.3f}")
    0.061
    """
    from scipy import stats as sps

    if len(d) < 2 or np.ptp(d) == 0 or not bound > 0 or not np.all(np.isfinite(d)):
        return math.nan
    low = sps.ttest_1samp(d, -bound, alternative="greater").pvalue
    high = sps.ttest_1samp(d, bound, alternative="less").pvalue
    return float(max(low, high))


def tost_welch(a: np.ndarray, b: np.ndarray, bound: float) -> float:
    """Two one-sided Welch t tests (TOST) of |mean a - mean b| < bound: the equivalence
    test of independent groups (a table without blocks).

    Parameters
    ----------
    a, b : array of float
        The environment's and the reference's values on the primary scale.
    bound : float
        The equivalence bound on that scale.

    Returns
    -------
    float
        The larger one-sided p value; NaN where a group has fewer than two values,
        neither varies, a value is not finite or the bound is not positive.

    Examples
    --------
    >>> import math
    >>> import numpy as np
    >>> a = np.log([10.2, 10.4, 10.1, 10.3])
    >>> b = np.log([10.0, 10.1, 9.9, 10.0])
    >>> print(f"{tost_welch(a, b, math.log1p(0.05)):.4f}")
    0.0113
    """
    from scipy import stats as sps

    if (len(a) < 2 or len(b) < 2 or (np.ptp(a) == 0 and np.ptp(b) == 0) or not bound > 0
            or not np.all(np.isfinite(np.concatenate([a, b])))):
        return math.nan
    low = sps.ttest_ind(a + bound, b, equal_var=False, alternative="greater").pvalue
    high = sps.ttest_ind(a - bound, b, equal_var=False, alternative="less").pvalue
    return float(max(low, high))


def mde_at_level(mde_rel: float, mde_d: float, n: int, alpha: float, scale: str,
                 power: float = 0.8) -> float:
    """A paired comparison's minimum detectable effect (relative) at another level and
    number of blocks: a stopping look's (h200-stopping-hsd printed 9.9 % at 0.05 beside
    mm-4096's verdict at the last look's level 0.0274, where it is 11.2 %). From the
    comparison's own mde_rel at d_z mde_d, which fix the SD of its per-block values:
    on the log scale sd = log(1 + mde_rel) / mde_d; on the raw scale mde_rel is
    proportional to d_z.

    Parameters
    ----------
    mde_rel, mde_d : float
        The comparison's minimum detectable effect, relative and as d_z (comparisons.csv).
    n : int
        Blocks at the other level.
    alpha : float
        The other level (a look's nominal level).
    scale : str
        The comparison's scale as comparisons.csv words it ('log ratio' or 'difference').
    power : float
        The power the effect is detected with.

    Returns
    -------
    float
        The relative effect detectable with that power at that level; NaN below 2 blocks.

    Examples
    --------
    An effect of 9.9 % detectable at d_z 1.2 needs to be larger at a look's level 0.0274:

    >>> round(mde_at_level(0.099, 1.2, 8, 0.0274, "log ratio"), 4)
    0.1089
    """
    from statsmodels.stats.power import TTestPower

    if n < 2 or not (mde_d > 0) or not math.isfinite(mde_rel) or not 0 < alpha < 1:
        return math.nan
    d = float(TTestPower().solve_power(effect_size=None, nobs=n, alpha=alpha, power=power))
    if scale == SCALE_WORDS["log"]:
        return float(np.expm1(d * math.log1p(mde_rel) / mde_d))
    return mde_rel * d / mde_d


def _mde_paired(n: int, s: Settings) -> float:
    """Smallest standardised mean difference (d_z) the paired t test detects with the
    given power (prospective sensitivity, not post-hoc 'observed power')."""
    from statsmodels.stats.power import TTestPower

    if n < 2:
        return math.nan
    return float(TTestPower().solve_power(effect_size=None, nobs=n, alpha=s.alpha,
                                          power=s.power))


def sensitivity(nx: int, ny: int, alpha: float, power: float) -> float:
    """Smallest Cohen d detectable with the given power (two-sided, independent groups)."""
    from statsmodels.stats.power import TTestIndPower

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
    where paired). Secondary: the primary estimate is the geometric-mean ratio. NaN where
    either group is empty or the reference mean is zero."""
    from scipy import stats as sps

    nan = math.nan
    if len(x) == 0 or len(y) == 0 or np.mean(y) == 0:
        return nan, nan, nan
    with np.errstate(all="ignore"):
        est = float(_ratio_of_means(x, y))
    if (len(x) < 2 or len(y) < 2 or np.all(x == x[0]) and np.all(y == y[0])
            or not math.isfinite(est) or len(x) + len(y) > PERMUTATION_UP_TO):
        return est if math.isfinite(est) else nan, nan, nan  # (no resampling that large)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = sps.bootstrap((x, y), _ratio_of_means, n_resamples=resamples,
                            method="percentile", confidence_level=level, vectorized=True,
                            paired=paired, rng=np.random.default_rng(seed))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return est, nan, nan
    return est, lo, hi


SECONDARY_KEYS = ("welch_t", "welch_dof", "welch_p", "diff_ci_low", "diff_ci_high", "d_z",
                  "g_z", "cohen_d", "hedges_g", "effect_size", "effect_size_kind",
                  "wilcoxon_p", "wilcoxon_min_p", "mwu_u", "mwu_p", "mwu_min_p", "rbc")


def secondary(x: np.ndarray, y: np.ndarray, paired: tuple[np.ndarray, np.ndarray] | None,
              s: Settings, scale: str | None = None) -> dict[str, Any]:
    """Welch on the raw values; the rank test and the standardised effect size of the
    design: Wilcoxon signed-rank and d_z / g_z on the per-block differences (paired),
    Mann-Whitney U and Cohen's d / Hedges' g (independent), on the primary test's scale."""
    from scipy import stats as sps

    scale = scale or scale_of(np.concatenate([x, y]))
    f = np.log if scale == "log" else (lambda v: np.asarray(v, dtype=float))
    out: dict[str, Any] = dict.fromkeys(SECONDARY_KEYS, math.nan)
    out["effect_size_kind"] = ""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if len(x) >= 2 and len(y) >= 2 and not (np.ptp(x) == 0 and np.ptp(y) == 0):
            w = welch_estimate(x, y, s.alpha)
            out.update(welch_t=w["t"], welch_dof=w["df"], welch_p=w["p"],
                       diff_ci_low=w["low"], diff_ci_high=w["high"])
        if paired is not None:
            d = f(paired[0]) - f(paired[1])
            n = len(d)
            out["effect_size_kind"] = "g_z (paired)"
            out["wilcoxon_min_p"] = min_signflip_p(n)
            if n >= 1 and np.all(np.isfinite(d)) and np.any(d != 0):
                out["wilcoxon_p"] = float(sps.wilcoxon(d).pvalue)
            sd = float(np.std(d, ddof=1)) if n >= 2 else math.nan
            if sd > 0 and math.isfinite(sd):
                out["d_z"] = float(np.mean(d)) / sd
                out["g_z"] = out["d_z"] * hedges_correction(n - 1)
            out["effect_size"] = out["g_z"]
        else:
            a, b = f(x), f(y)
            out["effect_size_kind"] = "Hedges' g (independent)"
            pooled = _pooled_sd(a, b)
            if pooled > 0 and math.isfinite(pooled):
                pg = _pg()
                out["cohen_d"] = float(pg.compute_effsize(a, b, eftype="cohen"))  # signed
                out["hedges_g"] = float(pg.compute_effsize(a, b, eftype="hedges"))
            out["effect_size"] = out["hedges_g"]
            both = np.concatenate([x, y])
            if len(x) and len(y) and np.all(np.isfinite(both)) and np.ptp(both) != 0:
                u = sps.mannwhitneyu(x, y, alternative="two-sided")
                out.update(mwu_u=float(u.statistic), mwu_p=float(u.pvalue),
                           rbc=float(2 * u.statistic / (len(x) * len(y)) - 1))
            out["mwu_min_p"] = min_mannwhitney_p(len(x), len(y))
    for k in ("d_z", "g_z", "cohen_d", "hedges_g", "effect_size"):
        if not _finite(out[k]):
            out[k] = math.nan
    rel, lo, hi = (relative_overhead(*paired, s.bootstrap_resamples, s.seed, paired=True)
                   if paired is not None else
                   relative_overhead(x, y, s.bootstrap_resamples, s.seed))
    out.update(mean_ratio=rel, mean_ratio_ci_low=lo, mean_ratio_ci_high=hi)
    return out


def compare(x: np.ndarray, y: np.ndarray, s: Settings,
            paired: tuple[np.ndarray, np.ndarray] | None = None,
            scale: str | None = None) -> dict[str, Any]:
    """One environment against the reference: the primary comparison, the secondary
    tests and effect sizes, and the equivalence decision. Non-finite values are not data:
    they are left out (quality.exclude drops them).

    Parameters
    ----------
    x, y : array of float
        The environment's and the reference's values.
    s : Settings
        Level, primary test, equivalence margin, bootstrap resamples and seed.
    paired : tuple of two arrays, optional
        Their values in complete blocks: the design is paired whenever it is given,
        however few blocks it holds.
    scale : {'log', 'raw'}, optional
        As decided for the metric over the campaign (metric_scales), else from x and y.

    Returns
    -------
    dict
        One row of a model's comparisons: ``n_env``, ``n_ref``, the primary columns
        (primary), the secondary ones (secondary) and ``equivalent`` (TOST p < alpha;
        None where the TOST is undefined).

    Examples
    --------
    Four blocks in which the container ran about 3.5 % longer:

    >>> import numpy as np
    >>> x, y = np.array([10.3, 10.6, 10.2, 10.5]), np.array([10.0, 10.2, 9.9, 10.1])
    >>> r = compare(x, y, Settings(reference="native", bootstrap_resamples=200),
    ...             paired=(x, y))
    >>> r["design"], r["n_blocks"], f"{r['rel_overhead']:+.2%}", r["equivalent"]
    ('paired', 4, '+3.48%', True)

    One block gives an estimate but no interval, and says why:

    >>> r = compare(x[:1], y[:1], Settings(reference="native"), paired=(x[:1], y[:1]))
    >>> f"{r['rel_overhead']:+.1%}", r["rel_ci_low"], r["no_interval"]
    ('+3.0%', nan, 'one complete block')
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if paired is not None:
        a, b = (np.asarray(v, dtype=float) for v in paired)
        ok = np.isfinite(a) & np.isfinite(b)
        paired = (a[ok], b[ok])
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out: dict[str, Any] = {"n_env": len(x), "n_ref": len(y),
                               "mean_env": float(np.mean(x)) if len(x) else math.nan,
                               "mean_ref": float(np.mean(y)) if len(y) else math.nan}
        out["diff"] = out["mean_env"] - out["mean_ref"]
    out.update(secondary(x, y, paired, s, scale))
    out.update(primary(x, y, paired, s, scale))
    out["equivalent"] = bool(out["tost_p"] < s.alpha) if not math.isnan(out["tost_p"]) else None
    return out


class DuplicateRows(ValueError):
    """The same (model, environment, repetition or block, metric) more than once: a
    block would hold two runs of one environment, which no paired analysis can use."""

    def __init__(self, rows: pd.DataFrame):
        self.rows = rows
        cols = [c for c in ("model", "environment", "repetition", "block", "metric", "value")
                if c in rows]
        shown = rows[cols].head(10).to_string(index=False)
        more = f"\n(and {len(rows) - 10} more)" if len(rows) > 10 else ""
        super().__init__(f"{len(rows)} rows repeat a (model, environment, repetition/block, "
                         f"metric):\n{shown}{more}")


def blocks(g: pd.DataFrame, env: str, ref: str) -> tuple[np.ndarray, np.ndarray, int] | None:
    """The two environments' values in their complete blocks (both ran, both values
    finite), and the number of incomplete blocks left out (a run without a block label
    is a block of its own); None where the table carries no blocks. A block with two
    runs of one environment is an error (DuplicateRows), never a reason to drop the
    pairing."""
    if "block" not in g or g["block"].isna().all():
        return None
    d = g[g.environment.isin([env, ref]) & np.isfinite(g["value"].astype(float))]
    labelled = d[d["block"].notna()]
    dup = labelled[labelled.duplicated(["environment", "block"], keep=False)]
    if len(dup):
        raise DuplicateRows(dup)
    a = labelled[labelled.environment == env].set_index("block")["value"]
    b = labelled[labelled.environment == ref].set_index("block")["value"]
    common = a.index.intersection(b.index).sort_values()
    dropped = len(a.index.union(b.index)) - len(common) + int(d["block"].isna().sum())
    return a.loc[common].to_numpy(float), b.loc[common].to_numpy(float), dropped


def machine_adjusted(g: pd.DataFrame, env: str, ref: str, alpha: float) -> dict[str, Any]:
    """Relative difference with a fixed effect per machine (OLS on log values): where a
    campaign ran on several GPUs, a machine's speed must not pass for the environment's.
    In a blocked table the model keeps the blocks too (complete blocks only, a fixed effect
    per block): a model without them would drop the pairing and give an interval narrower
    than the paired one, which is no robustness check. Where every block ran on one
    machine, the block effects absorb the machine's and the estimate and interval equal
    the paired analysis; they differ only where a block was split between machines."""
    d = g[g.environment.isin([env, ref])]
    n = int(d["machine"].nunique()) if "machine" in d else 1
    out: dict[str, Any] = {"machines": n, "machine_adjusted_rel": np.nan,
                           "machine_adjusted_ci_low": np.nan, "machine_adjusted_ci_high": np.nan}
    d = d[np.isfinite(d["value"].astype(float))]
    blocked = "block" in d and d["block"].notna().any()
    if blocked:
        both = d.groupby("block")["environment"].nunique()
        d = d[d["block"].isin(both[both == 2].index)]
    if n < 2 or (d["value"] <= 0).any() or d["value"].nunique() < 2 or (
            blocked and d["block"].nunique() < 2):
        return out
    import statsmodels.formula.api as smf

    d = d.assign(log_value=np.log(d["value"].astype(float)),
                 is_env=(d.environment == env).astype(int))
    formula = "log_value ~ is_env + C(machine)" + (" + C(block)" if blocked else "")
    fit = smf.ols(formula, data=d).fit()
    if not np.isfinite(fit.bse["is_env"]) or fit.df_resid < 1:
        return out
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
        if metric in PHASE_METRICS:
            return PHASES_AA_FAMILY if aa else PHASES_FAMILY
        primary_ = metric in self.primary_metrics.get(model, [])
        if aa:
            return "calibration" if primary_ else "calibration-secondary"
        return "primary" if primary_ else "secondary"


def analyse(runs: pd.DataFrame, s: Settings, metrics: list[str],
            plan: Plan | None = None, scales: dict[str, str] | None = None) -> pd.DataFrame:
    """All planned comparisons (uncorrected p in 'p', correction within each family).
    scales: metric -> 'log' or 'raw', decided once for the campaign (metric_scales of the
    whole kept table); from these runs where not given. A repeated row is an error
    (DuplicateRows): the caller names the file."""
    plan = plan or Plan(s.reference, {}, {}, {})
    data = runs[runs.metric.isin(metrics)]
    dup = data[duplicate_mask(data)]
    if len(dup):
        raise DuplicateRows(dup)
    scales = {**metric_scales(data, metrics), **(scales or {})}
    blocked = "block" in data and bool(data["block"].notna().any())
    rows = []
    present = set(metrics)
    for (model, metric), g in data.groupby(["model", "metric"], sort=False):
        envs = list(dict.fromkeys(g.environment))
        for env, ref, aa in plan.pairs(envs):
            x = g[g.environment == env]["value"].to_numpy(float)
            y = g[g.environment == ref]["value"].to_numpy(float)
            found = blocks(g, env, ref) if blocked else None
            paired = None if found is None else found[:2]
            if found is None and blocked:  # this pair's rows carry no block label
                paired = (np.array([]), np.array([]))
            row = {"model": model, "metric": metric, "environment": env, "reference": ref,
                   "unit": g["unit"].iloc[0],
                   "family": plan.family(str(model), metric, aa, present),
                   **compare(x, y, s, paired, scales[metric]),
                   "blocks_dropped": (found[2] if found is not None else
                                      int(len(x) + len(y)) if blocked else 0),
                   **machine_adjusted(g, env, ref, s.alpha)}
            if row["family"] == "derived":
                row.update(p=math.nan, primary_test=f"not tested (restates "
                           f"{plan.restates[metric]})")
            rows.append(row)
    return correct(pd.DataFrame(rows))
