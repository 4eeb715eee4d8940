"""Data-quality report: what to know before trusting any number.

Checks are findings, never silent fixes: flagged runs stay in the data unless the config
(analysis.exclude) says to drop them, and the paper lists what was dropped and why.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
import pandas as pd

from containertax.statistics import clocks
from containertax.statistics import roofline as bound
from containertax.statistics.finding import Finding
from containertax.statistics.texts import interval_texts
from containertax.workloads.metric_registry import MetricInfo

KEY = ["model", "environment", "repetition", "metric"]


# The outlier rule (issue #23). Each value's residual is its distance from the median of
# the other values of its group (model, environment, metric): an outlier cannot pull its
# own centre. Its scale is the mean absolute deviation (x 1.2533, the SD for normal data)
# of values that exclude it. Which values depends on whether the environments of a model
# and metric spread alike: the Brown-Forsythe test (Levene's test centred on the median,
# scipy) on the raw values of the environments, at outlier_level(n). Where it finds no
# difference the scale is the larger of the value's own group's (the others' deviations
# from their median) and the table's (every other value's residual): all k x n values
# lend the power to flag one outlier at n = 4, and a noisier environment the test missed
# is still judged by its own spread. Where it finds a difference each environment is
# judged by its own spread alone. Thresholds are per n (blocks) and k (environments of a
# model and metric), set by simulating the whole two-stage rule on clean normal tables so
# that at most OUTLIER_TARGET of clean tables get any flag; made by
# `python benchmarks/outlier_rule.py thresholds`. Measured by `python
# benchmarks/outlier_rule.py` on 20 000 fresh tables per cell (docs/measurement.md,
# "Outliers"): clean tables with any flag 0.66-0.97 % at n = 4, 6, 10, 30 and k = 2, 3, 4
# (the rule this replaced, a MAD pooled over environments and z > 3.5: 7-10 %); values of
# a 10x noisier environment flagged 3.1 % at n = 4 (the test rarely sees the difference
# there), 0.27 % at n = 6, 0.04 % at n = 10 (before: 13, 22, 31 %); one value 10 SD off
# found 97 % at n = 4, 94 % at n = 6, 96 % at n = 10 (k = 4, equal spreads).
SCALE_FACTOR = 1.2533  # mean absolute deviation -> SD for normal data
OUTLIER_TARGET = 0.008  # share of clean tables with any flag (below 1 %: Monte Carlo margin)
OUTLIER_MIN_N = 3  # fewer values cannot say which one is out of line


def outlier_level(n: int) -> float:
    """Level of the Brown-Forsythe test that sends a table to per-environment scales: 0.05
    at n < 6, where a higher level costs the pooled rule its power against one outlier
    more than it gains against a noisier environment (which the test rarely sees at n = 4),
    0.2 from n = 6 on."""
    return 0.05 if n < 6 else 0.2


# n -> k -> (own, pooled) thresholds; rows between listed n use the smaller n (larger
# thresholds: fewer flags), n above the last and k above the last use the last.
OUTLIER_CUTS: dict[int, dict[int, tuple[float, float]]] = {
    3: {1: (333.45, 333.45), 2: (688.06, 3.49), 3: (970.76, 3.84), 4: (1408.3, 3.92),
        5: (1657.75, 3.91)},
    4: {1: (34.5, 34.5), 2: (44.55, 6.5), 3: (55.51, 5.39), 4: (68.75, 4.87), 5: (75.22, 4.59)},
    5: {1: (13.71, 13.71), 2: (17.47, 5.44), 3: (20.59, 4.58), 4: (22.78, 4.44), 5: (23.87, 4.32)},
    6: {1: (9.88, 9.88), 2: (12.05, 5.13), 3: (13.84, 4.69), 4: (14.75, 4.4), 5: (15.08, 4.31)},
    7: {1: (7.85, 7.85), 2: (9.34, 4.82), 3: (9.94, 4.41), 4: (10.88, 4.22), 5: (11.4, 4.16)},
    8: {1: (7.32, 7.32), 2: (8.25, 4.64), 3: (8.9, 4.48), 4: (9.26, 4.28), 5: (9.73, 4.17)},
    10: {1: (6.05, 6.05), 2: (6.66, 4.38), 3: (7.23, 4.28), 4: (7.3, 4.19), 5: (7.67, 4.12)},
    12: {1: (5.53, 5.53), 2: (6.02, 4.41), 3: (6.35, 4.17), 4: (6.68, 4.2), 5: (6.8, 4.12)},
    15: {1: (5.02, 5.02), 2: (5.38, 4.19), 3: (5.72, 4.1), 4: (5.88, 4.11), 5: (6.05, 4.08)},
    20: {1: (4.76, 4.76), 2: (4.97, 4.11), 3: (5.23, 4.07), 4: (5.38, 4.1), 5: (5.53, 4.13)},
    30: {1: (4.41, 4.41), 2: (4.71, 4.1), 3: (4.84, 4.12), 4: (4.98, 4.11), 5: (5.05, 4.11)},
    50: {1: (4.25, 4.25), 2: (4.44, 4.13), 3: (4.58, 4.15), 4: (4.69, 4.18), 5: (4.75, 4.17)},
}


def outlier_cuts(n: int, k: int) -> tuple[float, float]:
    """(own, pooled) thresholds for a table of k environments of n values each."""
    rows = [m for m in OUTLIER_CUTS if m <= n]
    row = OUTLIER_CUTS[max(rows) if rows else min(OUTLIER_CUTS)]
    return row[min(max(k, 1), max(row))]


# Above this many values a group's leave-one-out medians and deviations are computed from
# its sorted values (n log n) instead of once per left-out value (n^2: a 200,000-row import
# never finished); the same numbers, up to rounding (tests/test_import_hostile.py)
LOO_DIRECT_UP_TO = 200


def _median_of_others(x: np.ndarray) -> np.ndarray:
    """x (..., n): at each position the median of the other n - 1 values."""
    n = x.shape[-1]
    if n <= LOO_DIRECT_UP_TO:
        return np.stack([np.median(np.delete(x, i, axis=-1), axis=-1)
                         for i in range(n)], axis=-1)
    order = np.argsort(x, axis=-1, kind="stable")
    ordered = np.take_along_axis(x, order, axis=-1)
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(n), order.shape), axis=-1)

    def others_at(j: int) -> np.ndarray:  # the j-th smallest of the others, per position
        return np.take_along_axis(ordered, np.where(j < rank, j, j + 1), axis=-1)

    m = n - 1
    return others_at(m // 2) if m % 2 else (others_at(m // 2 - 1) + others_at(m // 2)) / 2


def _mean_abs_dev_of_others(x: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """x, centre (..., n): at each position i the mean of |x_j - centre_i| over j != i."""
    n = x.shape[-1]
    if n <= LOO_DIRECT_UP_TO:
        return np.stack([np.abs(np.delete(x, i, axis=-1) - centre[..., i:i + 1]).mean(-1)
                         for i in range(n)], axis=-1)
    flat_x, flat_c = x.reshape(-1, n), centre.reshape(-1, n)
    out = np.empty_like(flat_c, dtype=float)
    for row, (xs, cs) in enumerate(zip(flat_x, flat_c, strict=True)):
        ordered = np.sort(xs)
        prefix = np.concatenate([[0.0], np.cumsum(ordered)])
        below = np.searchsorted(ordered, cs, side="left")  # values < c
        total = cs * below - prefix[below] + (prefix[-1] - prefix[below]) - cs * (n - below)
        out[row] = (total - np.abs(xs - cs)) / (n - 1)
    return out.reshape(centre.shape)


def outlier_scores(groups: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray],
                                                      np.ndarray]:
    """Scores of one table's values: groups are its environments, arrays (S, n_i) of S
    simulated tables (S = 1 for data). Returns the scores by each value's own environment's
    scale, by the larger of that and the table's scale, and the Brown-Forsythe p (S,)."""
    from scipy import stats as sps

    resid, own_scale = [], []
    for x in groups:
        centre = _median_of_others(x)
        resid.append(x - centre)
        own_scale.append(SCALE_FACTOR * _mean_abs_dev_of_others(x, centre))
    absr = [np.abs(r) for r in resid]
    total = sum(a.sum(-1, keepdims=True) for a in absr)
    others = sum(a.shape[-1] for a in absr) - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        own = [_ratio(a, s) for a, s in zip(absr, own_scale, strict=True)]
        pooled = [_ratio(a, np.maximum(s, SCALE_FACTOR * (total - a) / max(others, 1)))
                  for a, s in zip(absr, own_scale, strict=True)]
        if len(groups) > 1:
            p = np.asarray(sps.levene(*groups, center="median", axis=-1).pvalue, float)
        else:
            p = np.zeros(groups[0].shape[:-1])
    return own, pooled, np.where(np.isnan(p), 1.0, p)  # nan: no spread to compare


def _ratio(a: np.ndarray, s: np.ndarray) -> np.ndarray:
    """a / s, with 0 where both are 0 and inf where only the scale is (every other value
    ties: a differing one is out of line)."""
    return np.where(a == 0, 0.0, a / np.where(s == 0, 0.0, s))


def outlier_flags(groups: list[np.ndarray]) -> list[np.ndarray]:
    """The rule on one table (see outlier_scores for the shapes): flags per value. With
    unequal groups the pooled threshold and the test's level are those of the smallest
    group, each own threshold that of its group's size."""
    n, k = min(g.shape[-1] for g in groups), len(groups)
    own, pooled, p = outlier_scores(groups)
    same = (p >= outlier_level(n))[..., None]
    return [np.where(same, b > outlier_cuts(n, k)[1], a > outlier_cuts(g.shape[-1], k)[0])
            for g, a, b in zip(groups, own, pooled, strict=True)]


def _flag_outliers(runs: pd.DataFrame) -> pd.Series:
    """Outlier flags of finite values, by the rule above, per model and metric; groups of
    fewer than OUTLIER_MIN_N values are never flagged."""
    flags = pd.Series(False, index=runs.index)
    for _, table in runs.groupby(["model", "metric"], sort=False):
        groups = [g for _, g in table.groupby("environment", sort=False)
                  if len(g) >= OUTLIER_MIN_N]
        if not groups:
            continue
        values = [g["value"].to_numpy(float)[None, :] for g in groups]
        for g, f in zip(groups, outlier_flags(values), strict=True):
            flags[g.index] = f[0]
    return flags


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
    out["flag_duplicate"] = duplicate_mask(out)
    return out


def duplicate_mask(runs: pd.DataFrame) -> pd.Series:
    """Rows that repeat a (model, environment, repetition, metric), or a (model,
    environment, block, metric) where blocks are labelled: every copy is marked."""
    mask = pd.Series(False, index=runs.index)
    for key in ("repetition", "block"):
        if key in runs:
            cols = ["model", "environment", key, "metric"]
            mask |= runs[key].notna() & runs.duplicated(cols, keep=False)
    return mask



def _runs_words(counts: dict[str, int]) -> str:
    """{'chroot': 1, 'docker': 2} as the paper prints it: 'chroot 1 run, docker 2 runs'."""
    return ", ".join(f"{env} {n} run{'' if n == 1 else 's'}" for env, n in counts.items())

def check(runs: pd.DataFrame, registry: dict[str, MetricInfo], *,
          expected_reps: int | None = None, model_sizes: dict[str, float] | None = None,
          alpha: float = 0.05, roofline: dict[str, Any] | None = None) -> list[Finding]:
    """All checks over an annotated table (see annotate); `roofline`: analysis.roofline,
    the memory-bandwidth bound of decode rates (statistics/roofline.py)."""
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
                             f"metric {metric} has several units {units}", len(g),
                             {"metric": metric}))
        elif known and units and units[0] != known.unit:
            f.append(Finding("unit_mismatch", "error",
                             f"metric {metric} is in {units[0]}, the registry says {known.unit}",
                             len(g), {"metric": metric}))
        if known is None:
            f.append(Finding("unregistered_metric", "info",
                             f"metric {metric} is not in the registry: not analysed; define it "
                             "under analysis.define_metrics to analyse it", len(g)))
    sizes = runs.groupby(["model", "metric", "environment"]).size()
    for (model, metric), s in sizes.groupby(level=[0, 1]):
        counts = {k[2]: int(v) for k, v in s.items()}
        if len(set(counts.values())) > 1:
            f.append(Finding("unequal_groups", "warning",
                             f"{model}/{metric}: unequal group sizes ({_runs_words(counts)})",
                             details={"model": model, "metric": metric, "counts": counts}))
        if expected_reps is not None:
            short = {e: n for e, n in counts.items() if n < expected_reps}
            if short:
                f.append(Finding("missing_repetitions", "warning",
                                 f"{model}/{metric}: fewer than {expected_reps} runs "
                                 f"({_runs_words(short)})",
                                 details={"model": model, "metric": metric, "counts": short}))
    outl = runs[runs["flag_outlier"]]
    if len(outl):
        f.append(Finding("outliers", "warning",
                         (f"{len(outl)} values are out of line with their group"
                          if len(outl) > 1 else "one value is out of line with its group")
                         + " by the outlier "
                         "rule (robust distance from the median of the rest of the group "
                         "beyond a threshold calibrated per n and number of environments; "
                         "flagged, and kept unless the configuration excludes outliers)", len(outl),
                         {"rows": outl[KEY + ["value"]].to_dict("records")[:30]}))
    thr = runs[runs["flag_throttled"]]
    if len(thr):
        n_runs = thr[["model", "environment", "repetition"]].drop_duplicates().shape[0]
        per_run = thr.drop_duplicates(["model", "environment", "repetition"])["throttled_s"]
        f.append(Finding("throttled", "info",
                         (f"{n_runs} runs had their" if n_runs > 1 else "one run had its")
                         + " clocks lowered by a power, thermal or "
                         "hardware slowdown somewhere in the whole run (build and warm-up "
                         "included), "
                         + (f"for a median of {per_run.astype(float).median():.1f} s per run"
                            if n_runs > 1 else f"for {float(per_run.iloc[0]):.1f} s")
                         + "; the measured windows are judged by the throttled window "
                         "check", len(thr)))
    f += [Finding("throttled_window", "warning", c["message"], c["runs"], c)
          for c in clocks.findings(runs)]
    f += machines(runs)
    f += images(runs)
    f += configs(runs)
    f += lanes_with_few_blocks(runs)
    f += drift(runs, alpha)
    f += thermal_dependence(runs, set(registry), alpha)
    f += order_effects(runs, set(registry), alpha)
    if model_sizes:
        f += implausible(runs, registry, model_sizes)
    if roofline:
        f += bound.findings(runs, roofline)
    return f


def split_blocks(frame: pd.DataFrame) -> dict[str, list[int]]:
    """Per model, the blocks whose runs ran on more than one machine (GPU): a block pairs
    its runs as if on one device, so the paper names such a block beside the headline and
    prints the headline without it (findings.split_excluded; facts.json records it per
    model); machines() below warns of it (block_split). `frame`: one row per run or per
    run and metric, with model, block and machine."""
    if frame.empty or not {"model", "block", "machine"} <= set(frame.columns):
        return {}
    known = frame[frame["block"].notna()]
    per = known.groupby([known["model"].astype(str), "block"])["machine"].nunique()
    out: dict[str, list[int]] = {}
    for (model, block), n in per.items():
        if n > 1:
            out.setdefault(str(model), []).append(int(block))
    return {model: sorted(blocks) for model, blocks in out.items()}


def machines(runs: pd.DataFrame) -> list[Finding]:
    """Runs on several physical devices: say so, and flag any block split between two (a
    block's environments must be compared on one machine)."""
    if "machine" not in runs or runs["machine"].nunique() < 2:
        return []
    counts = runs.drop_duplicates(["model", "environment", "repetition"])["machine"]
    listed = ", ".join(f"{machine} ({int(n)} run{'' if n == 1 else 's'})"
                       for machine, n in counts.value_counts().sort_index().items())
    f = [Finding("machines", "info", f"runs on {runs['machine'].nunique()} machines: "
                 f"{listed}; the statistics add machine-adjusted estimates",
                 details={"machines": sorted(runs["machine"].unique())})]
    blocks = [{"model": m, "block": b} for m, found in split_blocks(runs).items()
              for b in found]
    if blocks:
        f.append(Finding("block_split", "warning",
                         f"{len(blocks)} blocks ran on more than one machine: their paired "
                         "comparisons mix machines" if len(blocks) > 1 else "one block ran on "
                         "more than one machine: its paired comparisons mix machines",
                         len(blocks),
                         {"blocks": blocks[:20]}))
    return f


def images_per_environment(frame: pd.DataFrame) -> dict[str, dict[str, int]]:
    """environment -> {image id: runs} for each environment whose runs used more than one
    image (named by the quality step, never silently pooled)."""
    if "image_id" not in frame or frame.empty:
        return {}
    runs = frame.drop_duplicates(["model", "environment", "repetition"])
    runs = runs[runs["image_id"].fillna("").astype(str) != ""]
    counts = runs.groupby("environment")["image_id"].value_counts()
    out: dict[str, dict[str, int]] = {}
    for (env, image), n in counts.items():
        out.setdefault(str(env), {})[str(image)] = int(n)
    return {env: ids for env, ids in out.items() if len(ids) > 1}


def images(runs: pd.DataFrame) -> list[Finding]:
    """An environment whose runs used more than one image id (the same tag rebuilt or
    pointed at another image mid-campaign): named with each id's runs, so that the reader
    knows the runs are pooled across images (runs.csv's image_id tells them apart)."""
    found = images_per_environment(runs)
    if not found:
        return []
    listed = "; ".join(f"{env}: " + ", ".join(f"{image.removeprefix('sha256:')[:12]} "
                                                f"({n} run{'' if n == 1 else 's'})"
                                                for image, n in sorted(ids.items()))
                       for env, ids in sorted(found.items()))
    return [Finding("images", "warning",
                    f"runs of one environment used more than one image ({listed}): the "
                    "image tag named another image during the campaign; the runs are "
                    "pooled, so check that the images hold the same software, or give "
                    "each image its own environment", sum(map(len, found.values())),
                    {"images": found})]


def configs(runs: pd.DataFrame) -> list[Finding]:
    """Runs measured under more than one config (runs.csv's config_hash): a second config
    under the same campaign name, pooled into one analysis (issue #44: a fresh clone ran a
    config of another size beside the first and the paper pooled both without a word).
    The pin refuses a config that changes a measurement; runs that still differ are named
    with each hash's runs, never silently pooled."""
    if "config_hash" not in runs or runs.empty:
        return []
    cells = runs.drop_duplicates(["model", "environment", "repetition"])
    hashes = cells["config_hash"].fillna("").astype(str)
    counts = hashes[hashes != ""].value_counts()
    if len(counts) < 2:
        return []
    listed = ", ".join(f"{h[:12]} ({n} run{'' if n == 1 else 's'})"
                       for h, n in sorted(counts.items()))
    return [Finding("configs", "warning",
                    f"the runs were measured under {len(counts)} configs ({listed}): they "
                    "are pooled, so check that the configs differ in nothing that changes a "
                    "measurement (each record's config hash, and the resolved config the "
                    "workflow writes beside the records), or give each its own campaign",
                    int(counts.sum()), {"configs": {h: int(n) for h, n in counts.items()}})]


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


def _rank_centred(v: np.ndarray) -> np.ndarray:
    from scipy import stats as sps

    r = sps.rankdata(v)
    r = r - r.mean()
    norm = np.sqrt((r**2).sum())
    return r / norm if norm > 0 else r


# Above this many values in every group, drift's permutation null is replaced by its
# normal limit (the exact mean and variance of the permutation distribution)
DRIFT_EXACT_UP_TO = 1000


def drift(runs: pd.DataFrame, alpha: float, resamples: int = 4999,
          seed: int = 7) -> list[Finding]:
    """Does a metric move with run order? Per metric: the Spearman correlation of value and
    run position within every group (model x environment), averaged over the groups, and
    tested by permuting the order within each group (Monte Carlo): slow drift of the
    machine moves every group alike, so the groups together can show it at n = 4, where
    no single group can. Benjamini-Hochberg across metrics; per-group rhos in the details."""
    from scipy import stats as sps
    from statsmodels.stats.multitest import multipletests

    order = "position" if "position" in runs and runs["position"].notna().all() else "repetition"
    rng = np.random.default_rng(seed)
    tests = []
    for metric, m in runs[~runs["flag_non_finite"]].groupby("metric"):
        groups, rhos = [], {}
        for (model, env), g in m.groupby(["model", "environment"]):
            if len(g) >= 3 and g["value"].nunique() > 1:
                g = g.sort_values(order)
                vr = _rank_centred(g["value"].to_numpy(float))
                orr = _rank_centred(np.arange(len(g), dtype=float))
                groups.append((vr, orr))
                rhos[f"{model}/{env}"] = float(vr @ orr)
        if not groups:
            continue
        observed = float(np.mean(list(rhos.values())))
        if min(len(vr) for vr, _ in groups) > DRIFT_EXACT_UP_TO:
            # each group's permutation rho has mean 0 and variance exactly 1 / (n - 1):
            # their mean is normal to a fraction of a percent at such sizes
            sd = math.sqrt(sum(1 / (len(vr) - 1) for vr, _ in groups)) / len(groups)
            p = float(2 * sps.norm.sf(abs(observed) / sd))
            tests.append((metric, observed, p, rhos))
            continue
        null = np.zeros(resamples)
        for vr, orr in groups:  # in batches of rows (the same random stream as one draw):
            batch = max(1, 4_000_000 // len(vr))  # memory bounded whatever the group's size
            for start in range(0, resamples, batch):
                rows = min(batch, resamples - start)
                perms = np.argsort(rng.random((rows, len(vr))), axis=1)
                null[start:start + rows] += vr[perms] @ orr
        null /= len(groups)
        p = (1 + np.sum(np.abs(null) >= abs(observed) - 1e-12)) / (resamples + 1)
        tests.append((metric, observed, float(p), rhos))
    if not tests:
        return []
    q = multipletests([t[2] for t in tests], method="fdr_bh")[1]
    return [Finding("drift", "warning",
                    f"{metric}: values drift with run order (mean Spearman rho {rho:+.2f} over "
                    f"{len(rhos)} model/environment groups, permutation p {p:.3g}, "
                    f"BH-adjusted {qq:.3g})",
                    details={"metric": metric, "rho": rho, "p": p, "q": float(qq),
                             "groups": rhos})
            for (metric, rho, p, rhos), qq in zip(tests, q, strict=True) if qq < alpha]


# the chip's state when a run began, as runs.csv has it (statistics/aggregate.py)
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
    largest = max(tests, key=lambda t: abs(t["effect_pct"]))
    return _tested_family(
        "thermal_dependence", tests, alpha,
        lambda found: (f"{len(tests)} tests of metric vs start temperature / time since the "
                       f"last run (per model, within environment): {len(found)} with "
                       f"BH-adjusted p < {alpha}; largest effect "
                       f"{largest['effect_pct']:+.2f} % of the mean across the observed "
                       f"{largest['label']} ({largest['model']}/{largest['metric']})"),
        lambda t: (f"{t['model']}/{t['metric']} depends on the {t['label']}: "
                   f"{t['effect_pct']:+.2f} % of the mean across {t['range']:.3g} {t['unit']} "
                   f"(partial r {t['r']:+.2f}, BH-adjusted p {t['q']:.3g})"),
        {"tests": tests})


def _start_state_test(g: pd.DataFrame, column: str) -> dict[str, float] | None:
    from scipy import stats as sps

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


# where a run stood in its block as it happened (statistics/order.py), as run_quality adds it
ORDER_TERMS = {"block_position": "position within the block",
               "predecessor": "environment run just before"}


def order_effects(runs: pd.DataFrame, metrics: set[str] | None = None,
                  alpha: float = 0.05) -> list[Finding]:
    """Does a run's position within its block, or the environment run just before it,
    explain its value beyond the environment?

    Per model and metric, OLS on log values with environment and block fixed effects: the
    F test of adding the position, then of adding the predecessor to environment, block and
    position (carry-over beyond position; with two environments the predecessor is the
    position, so only position is tested). A position partly confounded with the environment
    (alternating with three environments: the middle one is always second) is tested in the
    contrasts the design leaves; a test with none left is counted as untestable. Effect size:
    the spread of the mean residual across the levels, in %. Benjamini-Hochberg across all
    tests. On clean simulated Williams tables (4 environments, 8 blocks, 1 % noise) the
    position test's false-positive rate was 3 % at alpha 0.05 (6 of 200 tables, seed 11;
    tests/test_quality.py); a first run 3 % slower is found in every table."""
    if not set(ORDER_TERMS) <= set(runs.columns):
        return []
    data = runs[~runs["flag_non_finite"]] if "flag_non_finite" in runs else runs
    data = data.dropna(subset=["block_position", "block"])
    tests: list[dict[str, Any]] = []
    untestable: list[str] = []
    for (model, metric), g in data.groupby(["model", "metric"]):
        if metrics is not None and metric not in metrics:
            continue
        g = g[g["value"] > 0]
        if g["value"].nunique() < 2 or g["environment"].nunique() < 2:
            continue
        base = ["environment", "block"]
        for term in ORDER_TERMS:
            if term == "predecessor" and g["environment"].nunique() < 3:
                continue  # with two environments the predecessor is the position
            test = _nested_f(g, base, term)
            base = [*base, term]
            if test is None:
                continue
            if test["df"] < 1:
                untestable.append(f"{model}/{metric} ({ORDER_TERMS[term]})")
                continue
            tests.append({"model": model, "metric": metric, "term": term,
                          "label": ORDER_TERMS[term], **test})
    if not tests and not untestable:
        return []
    note = (f"; {len(untestable)} not testable (confounded with the environment: "
            f"{', '.join(untestable[:6])}{', ...' if len(untestable) > 6 else ''})"
            if untestable else "")
    return _tested_family(
        "order_effects", tests, alpha,
        lambda found: (f"{len(tests)} tests of position within the block and of the preceding "
                       f"environment (per model and metric, F test on log values beyond "
                       f"environment and block): {len(found)} with BH-adjusted p < "
                       f"{alpha}{note}"),
        lambda t: (f"{t['model']}/{t['metric']} depends on the {t['label']}: mean residuals "
                   f"spread {t['effect_pct']:.2f} % across its levels (F {t['F']:.3g} on "
                   f"{t['df']} and {t['df_resid']} df, BH-adjusted p {t['q']:.3g})"),
        {"tests": tests, "untestable": untestable})


def _tested_family(check: str, tests: list[dict[str, Any]], alpha: float,
                   summary: Callable[[list[dict[str, Any]]], str],
                   each: Callable[[dict[str, Any]], str],
                   details: dict[str, Any]) -> list[Finding]:
    """A family of exploratory tests as findings: each test's BH-adjusted p (q), one info
    line for the family, and a warning for each test below alpha after the adjustment."""
    from statsmodels.stats.multitest import multipletests

    q = multipletests([t["p"] for t in tests], method="fdr_bh")[1] if tests else []
    for t, qq in zip(tests, q, strict=True):
        t["q"] = float(qq)
    found = [t for t in tests if t["q"] < alpha]
    return ([Finding(check, "info", summary(found), details=details)]
            + [Finding(check, "warning", each(t), details=t) for t in found])


def _dummies(g: pd.DataFrame, terms: list[str]) -> np.ndarray:
    parts = [np.ones((len(g), 1))]
    for term in terms:
        parts.append(pd.get_dummies(g[term].astype(str), drop_first=True).to_numpy(float))
    return np.hstack(parts)


def _nested_f(g: pd.DataFrame, base: list[str], term: str) -> dict[str, Any] | None:
    """The F test of adding `term` to the base terms (log values); df 0: confounded."""
    # OLS from its own module: statsmodels.api loads all of statsmodels (1.8 s against
    # 0.4 s in the quality step, which runs in every paper build)
    from statsmodels.regression.linear_model import OLS

    y = np.log(g["value"].to_numpy(float))
    with warnings.catch_warnings():  # rank deficiency is expected (a predecessor 'none'
        warnings.simplefilter("ignore")  # is position 1); the df below count the rank
        small = OLS(y, _dummies(g, base)).fit()
        full = OLS(y, _dummies(g, [*base, term])).fit()
    df = int(round(small.df_resid - full.df_resid))
    if full.df_resid < 1:
        return None
    if df < 1:
        return {"df": 0}
    if full.ssr <= 1e-12 * max(float((y - y.mean()) @ (y - y.mean())), 1e-300):
        return None  # the base terms and the term explain every value: nothing to test
    f_value, p, _ = full.compare_f_test(small)
    level_means = pd.Series(small.resid, index=g.index).groupby(g[term].astype(str)).mean()
    return {"n": len(g), "F": float(f_value), "p": float(p), "df": df,
            "df_resid": int(round(full.df_resid)),
            "effect_pct": 100.0 * float(np.expm1(level_means.max() - level_means.min()))}


def implausible(runs: pd.DataFrame, registry: dict[str, MetricInfo],
                model_sizes: dict[str, float]) -> list[Finding]:
    """Results physics rules out, judged only where 3 or more distinct sizes make a trend
    visible: a size-dependent metric that is the same (within its tolerance) for models
    whose sizes differ at least 4-fold, or that moves clearly against its known trend
    (Spearman rho of the means against size at most -0.8 of the expected sign)."""
    from scipy import stats as sps

    out = []
    data = runs[~runs["flag_non_finite"] & runs["model"].isin(model_sizes)]
    for (metric, env), g in data.groupby(["metric", "environment"]):
        info = registry.get(metric)
        if info is None or info.size_trend is None:
            continue
        means = g.groupby("model")["value"].mean()
        sizes = pd.Series({m: model_sizes[m] for m in means.index})
        if sizes.nunique() < 3:
            continue
        spread = (sizes.max() / sizes.min()) if sizes.min() > 0 else math.inf
        rel = (means.max() - means.min()) / abs(means.mean()) if means.mean() else 0.0
        facts = {"metric": metric, "environment": env, "means": means.to_dict(),
                 "sizes": sizes.to_dict(), "tolerance": info.size_tolerance}
        if spread >= 4 and rel < info.size_tolerance:
            out.append(Finding("implausible", "error",
                               f"{metric} in {env} is the same (within "
                               f"{100 * info.size_tolerance:g} %) for models whose sizes differ "
                               f"{spread:.0f}-fold: check what was measured", details=facts))
            continue
        rho = float(sps.spearmanr(sizes.loc[means.index], means).statistic)
        sign = 1 if info.size_trend == "increasing" else -1
        if sign * rho <= -0.8:
            out.append(Finding("implausible", "error",
                               f"{metric} in {env} should be {info.size_trend} with model size "
                               f"but Spearman rho over {sizes.nunique()} sizes is {rho:+.2f}",
                               details=facts))
    return out


def calibration(aa: pd.DataFrame, alpha: float,
                resolution: float) -> tuple[dict[str, Any], list[Finding]]:
    """The A/A verdict, per comparison and per metric, by the decision table's criterion
    (statistics/decisions.py): passed only when equivalent within +-resolution (the
    campaign's analysis.resolution_pct), failed when the Bonferroni-corrected p within its
    family is below alpha, inconclusive otherwise. The campaign's status is that of its
    primary metrics; a failure there is an instrument failure (an error), a failure or an
    inconclusive result on any metric a warning naming it."""
    from containertax.statistics import decisions

    base = {"alpha": alpha, "resolution": resolution}
    if aa.empty:
        return {"status": "none", **base, "metrics": {}, "comparisons": []}, []
    cols = ["model", "metric", "environment", "reference", "family", "design", "n_blocks",
            "rel_overhead", "rel_ci_low", "rel_ci_high", "primary_test", "p", "p_bonferroni",
            "family_size", "signflip_min_p", "tost_resolution_p"]
    aa = aa.assign(aa_status=[decisions.aa_comparison_status(r, resolution, alpha)
                              for _, r in aa.iterrows()])
    rows = aa[[c for c in cols + ["aa_status"] if c in aa]].to_dict("records")
    per_metric = {str(m): decisions.aa_metric_status(g["aa_status"])
                  for m, g in aa.groupby("metric", sort=False)}
    prim = aa[aa["family"] == "calibration"]
    status = decisions.aa_overall_status({m: per_metric[m] for m in prim["metric"].unique()})
    findings: list[Finding] = []

    def rel(r: Any) -> str:
        """As every other print of a relative difference (texts.interval_texts)."""
        est, low, high = interval_texts(r.rel_overhead, r.rel_ci_low, r.rel_ci_high)
        return f"{est} % [{low}, {high}]"

    def listed(frame: pd.DataFrame) -> str:
        return "; ".join(f"{r.model}/{r.metric}: {r.environment} vs {r.reference} "
                         f"{rel(r)}, Bonferroni p {r.p_bonferroni:.3g}"
                         for r in frame.itertuples())

    failed = aa[aa["aa_status"] == "failed"]
    if status == "untested":
        findings.append(Finding("aa_calibration", "warning", "the A/A replica has no testable "
                                "primary-metric comparison: the instrument is not calibrated"))
    elif status == "failed":
        prim_failed = failed[failed["family"] == "calibration"]
        findings.append(Finding("aa_calibration", "error",
                                "INSTRUMENT FAILURE: identical environments (A/A) measured as "
                                f"different: {listed(prim_failed)}. Find the cause before "
                                "trusting any comparison of this campaign.", len(prim_failed),
                                {"comparisons": prim_failed[[c for c in cols if c in prim_failed]]
                                 .to_dict("records")}))
    elif status == "cannot fail":
        findings.append(Finding("aa_calibration", "warning", "the A/A check cannot fail: with "
                                "these blocks the exact sign-flip test cannot reach alpha "
                                "after correction; add repetitions"))
    sec = failed[failed["family"] != "calibration"]
    if len(sec):
        findings.append(Finding("aa_secondary", "warning",
                                "A/A differences in secondary metrics: " + listed(sec)
                                + "; every verdict on these metrics carries that caveat",
                                len(sec)))
    unresolved = aa[aa["aa_status"].isin(["inconclusive", "cannot fail"])]
    if len(unresolved):
        findings.append(Finding(
            "aa_resolution", "warning",
            f"the A/A control does not show a resolution of {100 * resolution:g} %: "
            + "; ".join(f"{r.model}/{r.metric} {rel(r)}" for r in unresolved.itertuples())
            + f" (neither significant after Bonferroni nor equivalent within "
              f"{100 * resolution:g} % either side); every verdict on these metrics carries "
              "that caveat",
            len(unresolved), {"metrics": sorted(set(unresolved["metric"]))}))
    return {"status": status, **base, "metrics": per_metric, "comparisons": rows}, findings


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
