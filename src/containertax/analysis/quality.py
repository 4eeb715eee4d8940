"""Data-quality report: what to know before trusting any number.

Checks are findings, never silent fixes: flagged runs stay in the data unless the config
(analysis.exclude) says to drop them, and the paper lists what was dropped and why.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from containertax.analysis.metrics import MetricInfo

KEY = ["model", "environment", "repetition", "metric"]


@dataclass
class Finding:
    check: str
    severity: str  # 'error' (analysis cannot be trusted), 'warning', 'info'
    message: str
    rows: int = 0
    details: dict[str, Any] = field(default_factory=dict)


def _flag_outliers(runs: pd.DataFrame, z: float = 3.0) -> pd.Series:
    grouped = runs.groupby(["model", "environment", "metric"])["value"]
    mean = grouped.transform("mean")
    sd = grouped.transform(lambda v: v.std(ddof=1))
    score = (runs["value"] - mean) / sd
    return score.abs().gt(z) & sd.gt(0)


def annotate(runs: pd.DataFrame) -> pd.DataFrame:
    """Per-row flags the report and the exclusion rule use."""
    out = runs.copy()
    out["flag_non_finite"] = ~np.isfinite(out["value"].astype(float))
    finite = out[~out["flag_non_finite"]]
    out["flag_outlier"] = False
    out.loc[finite.index, "flag_outlier"] = _flag_outliers(finite)
    if "throttled_s" in out:
        out["flag_throttled"] = out["throttled_s"].fillna(0).astype(float) > 0
    else:
        out["flag_throttled"] = False
    out["flag_duplicate"] = out.duplicated(KEY, keep=False)
    return out


def check(runs: pd.DataFrame, registry: dict[str, MetricInfo], *,
          expected_reps: int | None = None, model_sizes: dict[str, float] | None = None,
          alpha: float = 0.05) -> list[Finding]:
    """All checks over an annotated table (see annotate)."""
    f: list[Finding] = []
    dup = runs[runs["flag_duplicate"]]
    if len(dup):
        cells = dup[KEY].drop_duplicates().to_dict("records")
        f.append(Finding("duplicates", "error",
                         f"{len(cells)} cell/metric combinations appear more than once",
                         len(dup), {"cells": cells[:20]}))
    nonfinite = runs[runs["flag_non_finite"]]
    if len(nonfinite):
        f.append(Finding("non_finite", "warning",
                         f"{len(nonfinite)} values are NaN or infinite (always excluded)",
                         len(nonfinite)))
    for metric, g in runs.groupby("metric"):
        units = sorted(g["unit"].dropna().unique())
        known = registry.get(metric)
        if len(units) > 1:
            f.append(Finding("unit_mismatch", "error",
                             f"metric {metric} has several units {units}", len(g)))
        elif known and units and units[0] != known.unit:
            f.append(Finding("unit_mismatch", "error",
                             f"metric {metric} is in {units[0]}, the registry says {known.unit}",
                             len(g)))
        if known is None:
            f.append(Finding("unregistered_metric", "info",
                             f"metric {metric} is not in the registry: not analysed; define it "
                             "under analysis.metrics to analyse it", len(g)))
    sizes = runs.groupby(["model", "metric", "environment"]).size()
    for (model, metric), s in sizes.groupby(level=[0, 1]):
        counts = {k[2]: int(v) for k, v in s.items()}
        if len(set(counts.values())) > 1:
            f.append(Finding("unequal_groups", "warning",
                             f"{model}/{metric}: unequal group sizes {counts}",
                             details={"model": model, "metric": metric, "counts": counts}))
        if expected_reps is not None:
            short = {e: n for e, n in counts.items() if n < expected_reps}
            if short:
                f.append(Finding("missing_repetitions", "warning",
                                 f"{model}/{metric}: fewer than {expected_reps} runs: {short}",
                                 details={"model": model, "metric": metric, "counts": short}))
    outl = runs[runs["flag_outlier"]]
    if len(outl):
        f.append(Finding("outliers", "warning",
                         f"{len(outl)} values beyond 3 sigma of their group (flagged, kept "
                         "unless analysis.exclude lists outliers)", len(outl),
                         {"rows": outl[KEY + ["value"]].to_dict("records")[:30]}))
    thr = runs[runs["flag_throttled"]]
    if len(thr):
        f.append(Finding("throttled", "warning",
                         f"{thr[['model', 'environment', 'repetition']].drop_duplicates().shape[0]}"
                         " runs throttled during the measurement", len(thr)))
    f += machines(runs)
    f += lanes_with_few_blocks(runs)
    f += drift(runs, alpha)
    f += thermal_dependence(runs, set(registry), alpha)
    if model_sizes:
        f += implausible(runs, registry, model_sizes)
    return f


def machines(runs: pd.DataFrame) -> list[Finding]:
    """Runs on several physical devices: say so, and flag any block split between two (a
    block's environments must be compared on one machine)."""
    if "machine" not in runs or runs["machine"].nunique() < 2:
        return []
    counts = runs.drop_duplicates(["model", "environment", "repetition"])["machine"]
    f = [Finding("machines", "info", f"runs on {runs['machine'].nunique()} machines "
                 f"{dict(counts.value_counts())}; the statistics add machine-adjusted "
                 "estimates", details={"machines": sorted(runs["machine"].unique())})]
    split = (runs.groupby(["model", "block"])["machine"].nunique() > 1)
    if split.any():
        blocks = [{"model": m, "block": int(b)} for m, b in split[split].index]
        f.append(Finding("block_split", "warning", f"{len(blocks)} blocks ran on more than "
                         "one machine: their paired comparisons mix machines", len(blocks),
                         {"blocks": blocks[:20]}))
    return f


def lanes_with_few_blocks(runs: pd.DataFrame, minimum: int = 2) -> list[Finding]:
    """A lane (GPU) with fewer than `minimum` complete blocks of a model, or far fewer than
    the other lanes (one stopped early), leaves its machine effect indistinguishable from
    block-to-block noise: the machine-adjusted estimate then rests on too little."""
    if "lane" not in runs or runs["lane"].replace("", np.nan).nunique() < 2:
        return []
    cells = runs.drop_duplicates(["model", "environment", "repetition"])
    n_envs = cells.groupby("model")["environment"].nunique()
    complete = (cells.groupby(["model", "lane", "block"])["environment"].nunique()
                .reset_index())
    complete = complete[complete["environment"] == complete["model"].map(n_envs)]
    counts = complete.groupby(["model", "lane"]).size().unstack(fill_value=0)
    counts = counts.reindex(columns=sorted(cells["lane"].unique()), fill_value=0)
    few = [{"model": m, "lane": lane, "blocks": int(n)}
           for m, row in counts.iterrows() for lane, n in row.items()
           if n < minimum or n < row.max() - 1]
    if not few:
        return []
    return [Finding("lane_blocks", "warning",
                    f"{len(few)} lane/model pairs have too few complete blocks (under "
                    f"{minimum}, or more than one fewer than another lane): the machine "
                    "effect of those lanes rests on too little", len(few),
                    {"lanes": few[:20]})]


def drift(runs: pd.DataFrame, alpha: float) -> list[Finding]:
    """Spearman correlation of value with run order per model, environment and metric;
    Benjamini-Hochberg across those tests."""
    order = "position" if "position" in runs and runs["position"].notna().all() else "repetition"
    tests = []
    for key, g in runs[~runs["flag_non_finite"]].groupby(["model", "environment", "metric"]):
        if len(g) >= 5 and g["value"].nunique() > 1:
            rho, p = sps.spearmanr(g[order], g["value"])
            if not math.isnan(p):
                tests.append((key, float(rho), float(p)))
    if not tests:
        return []
    q = multipletests([t[2] for t in tests], method="fdr_bh")[1]
    return [Finding("drift", "warning",
                    f"{m}/{e}/{metric}: value drifts with run order (Spearman rho {rho:+.2f}, "
                    f"BH-adjusted p {qq:.3g})", details={"model": m, "environment": e,
                                                        "metric": metric, "rho": rho, "q": qq})
            for ((m, e, metric), rho, _), qq in zip(tests, q, strict=True) if qq < alpha]


# the chip's state when a run began, as runs.csv has it (analysis/aggregate.py)
START_STATE = {"start_temperature_c": ("start temperature", "C"),
               "since_last_run_s": ("time since the last run", "s")}


def thermal_dependence(runs: pd.DataFrame, metrics: set[str] | None = None,
                       alpha: float = 0.05) -> list[Finding]:
    """Does a metric depend on the start temperature or the time since the last run?

    Per model and metric, the within-environment regression of value on each start-state
    column (environment means removed from both, so a hotter, slower environment is not
    read as a temperature effect). Effect size: the change across the observed range of
    the covariate, in % of the mean, with the partial correlation; Benjamini-Hochberg
    across all tests. One info finding lists every test, so that a reader sees what a
    shorter cooldown cost or did not; a warning names each dependence that survives."""
    data = runs[~runs["flag_non_finite"]] if "flag_non_finite" in runs else runs
    tests: list[dict[str, Any]] = []
    for column, (label, unit) in START_STATE.items():
        if column not in data:
            continue
        for (model, metric), g in data.groupby(["model", "metric"]):
            if metrics is not None and metric not in metrics:
                continue
            test = _start_state_test(g.dropna(subset=[column, "value"]), column)
            if test is not None:
                tests.append({"model": model, "metric": metric, "covariate": column,
                              "label": label, "unit": unit, **test})
    if not tests:
        return []
    q = multipletests([t["p"] for t in tests], method="fdr_bh")[1]
    for t, qq in zip(tests, q, strict=True):
        t["q"] = float(qq)
    largest = max(tests, key=lambda t: abs(t["effect_pct"]))
    found = [t for t in tests if t["q"] < alpha]
    out = [Finding("thermal_dependence", "info",
                   f"{len(tests)} tests of metric vs start temperature / time since the last "
                   f"run (per model, within environment): {len(found)} with BH-adjusted "
                   f"p < {alpha}; largest effect {largest['effect_pct']:+.2f} % of the mean "
                   f"across the observed {largest['label']} ({largest['model']}/"
                   f"{largest['metric']})", details={"tests": tests})]
    out += [Finding("thermal_dependence", "warning",
                    f"{t['model']}/{t['metric']} depends on the {t['label']}: "
                    f"{t['effect_pct']:+.2f} % of the mean across {t['range']:.3g} {t['unit']} "
                    f"(partial r {t['r']:+.2f}, BH-adjusted p {t['q']:.3g})", details=t)
            for t in found]
    return out


def _start_state_test(g: pd.DataFrame, column: str) -> dict[str, float] | None:
    n_env = g["environment"].nunique()
    df = len(g) - n_env - 1
    if df < 2:
        return None
    x = g[column].astype(float)
    y = g["value"].astype(float)
    xc = x - x.groupby(g["environment"]).transform("mean")
    yc = y - y.groupby(g["environment"]).transform("mean")
    sxx, syy = float((xc ** 2).sum()), float((yc ** 2).sum())
    if sxx <= 0 or syy <= 0 or y.mean() == 0:
        return None
    slope = float((xc * yc).sum()) / sxx
    resid = float(((yc - slope * xc) ** 2).sum())
    se = math.sqrt(resid / df / sxx)
    p = 0.0 if se == 0 else float(2 * sps.t.sf(abs(slope / se), df))
    span = float(x.max() - x.min())
    return {"n": len(g), "slope": slope, "p": p, "range": span,
            "r": float((xc * yc).sum()) / math.sqrt(sxx * syy),
            "effect_pct": 100.0 * slope * span / abs(float(y.mean()))}


def implausible(runs: pd.DataFrame, registry: dict[str, MetricInfo],
                model_sizes: dict[str, float]) -> list[Finding]:
    """Results physics rules out: a metric that should move with model size but does not,
    or that is the same for models of very different sizes."""
    out = []
    data = runs[~runs["flag_non_finite"] & runs["model"].isin(model_sizes)]
    for (metric, env), g in data.groupby(["metric", "environment"]):
        info = registry.get(metric)
        means = g.groupby("model")["value"].mean()
        if info is None or info.size_trend is None or len(means) < 2:
            continue
        sizes = pd.Series({m: model_sizes[m] for m in means.index})
        if sizes.nunique() < 2:
            continue
        spread = (sizes.max() / sizes.min()) if sizes.min() > 0 else math.inf
        rel = (means.max() - means.min()) / abs(means.mean()) if means.mean() else 0.0
        if spread >= 4 and rel < 0.02:
            out.append(Finding("implausible", "error",
                               f"{metric} in {env} is the same (within 2 %) for models whose "
                               f"sizes differ {spread:.0f}-fold: check what was measured",
                               details={"metric": metric, "environment": env,
                                        "means": means.to_dict()}))
            continue
        rho = sps.spearmanr(sizes.loc[means.index], means).statistic
        wrong = rel >= 0.02 and ((info.size_trend == "increasing" and rho < 0) or (
            info.size_trend == "decreasing" and rho > 0))
        if wrong:
            out.append(Finding("implausible", "error",
                               f"{metric} in {env} should be {info.size_trend} with model size "
                               f"but Spearman rho is {rho:+.2f}",
                               details={"metric": metric, "environment": env,
                                        "means": means.to_dict()}))
    return out


def exclude(runs: pd.DataFrame, rules: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(kept, dropped) rows; non-finite values are always dropped."""
    column = {"outliers": "flag_outlier", "throttled": "flag_throttled",
              "duplicate": "flag_duplicate"}
    mask = runs["flag_non_finite"].copy()
    for rule in rules:
        mask |= runs[column[rule]]
    return runs[~mask], runs[mask]


def as_dicts(findings: list[Finding]) -> list[dict[str, Any]]:
    return [asdict(x) for x in findings]
