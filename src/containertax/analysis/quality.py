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
