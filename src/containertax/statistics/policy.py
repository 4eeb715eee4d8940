"""The analysis's policy for a campaign: which metrics are analysed and which form the
primary family, the reference and the order of environments, the A/A comparisons, the
headline rows, and what stops the analysis (duplicates, sessions instead of environments).

Every rule of the analysis asks these questions the same way, so they live in one place;
statistics/steps.py and publishing/report.py only wire them to the files the rules name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from containertax.campaign.config import Campaign
from containertax.core.errors import ContainertaxError
from containertax.statistics import decisions, order, quality
from containertax.workloads.metric_registry import MetricInfo, registry

# the A/A families (the calibration); the headline rows and the primary family leave them out
AA_FAMILIES = ("calibration", "calibration-secondary", "calibration-phases")
# memory metrics: identical in every run of a model, they say nothing about speed
MEMORY_METRICS = ("kv_cache_gib", "host_mem_used_peak_gib", "host_mem_rise_gib",
                  "gpu_mem_peak_gib", "gpu_proc_mem_peak_gib", "peak_memory_gib",
                  "mem_available_before_gib", "mem_available_after_gib", "max_rss_mib")


class AnalysisError(ContainertaxError, RuntimeError):
    """Nothing to analyse; the message says why."""


def metric_registry(campaign: Campaign) -> dict[str, MetricInfo]:
    return registry(campaign.analysis.get("define_metrics"))


def label_names(campaign: Campaign) -> list[str]:
    """Column and metric names that must never appear raw as a figure's label."""
    from containertax.statistics.aggregate import COLUMNS
    from containertax.workloads.metric_registry import TELEMETRY

    return sorted(set(metric_registry(campaign)) | set(TELEMETRY) | set(COLUMNS))


def model_sizes(campaign: Campaign, runs: pd.DataFrame | None = None) -> dict[str, float]:
    """Model sizes for the plausibility check: a matmul model's size, an import's
    model_size column, then analysis.model_sizes (which wins)."""
    sizes = {model.id: float(model.params["size"]) for model in campaign.models
             if isinstance(model.params.get("size"), int | float)}
    if runs is not None and "model_size" in runs:
        known = runs.dropna(subset=["model_size"]).drop_duplicates("model")
        sizes.update({str(row.model): float(row.model_size) for row in known.itertuples()})
    sizes.update({model: float(size)
                  for model, size in campaign.analysis.get("model_sizes", {}).items()})
    return sizes


def analysed_metrics(campaign: Campaign, runs: pd.DataFrame) -> list[str]:
    """The comparable metrics the config asks for (all where it names none) that ran, and
    the phases of the runs' timelines wherever the records have them (their own family,
    comparisons.PHASES_FAMILY)."""
    from containertax.workloads.timeline import METRICS as PHASES

    reg = metric_registry(campaign)
    wanted = campaign.analysis.get("metrics")
    present = set(runs["metric"])
    named = [metric for metric in (wanted or list(reg)) if metric in reg and metric in present
             and reg[metric].comparable]
    return named + [metric for metric in PHASES if metric in present and metric not in named]


def listed_unanalysed(campaign: Campaign, runs: pd.DataFrame) -> list[tuple[str, str]]:
    """The metrics analysis.metrics lists that analysed_metrics leaves out, each with why:
    no run recorded it, or it is not comparable across environments. Never silence: the
    quality step prints each as a note naming the key and the fix, and the paper's quality
    section lists it (listed_unanalysed_findings)."""
    reg = metric_registry(campaign)
    present = set(runs["metric"]) if "metric" in runs else set()
    out = []
    for metric in campaign.analysis.get("metrics") or []:
        if metric not in present:
            why = "no run recorded it"
            if metric == "max_rss_mib" and "max_rss_rusage_mib" in present:
                why += (" (the runs predate the probes' VmHWM reading; their ru_maxrss "
                        "value is kept apart and never compared)")
            out.append((metric, why))
        elif metric in reg and not reg[metric].comparable:
            out.append((metric, "it is measured differently across environments and never "
                                "compared"))
    return out


def listed_unanalysed_findings(campaign: Campaign, runs: pd.DataFrame) -> list[Any]:
    """listed_unanalysed as quality findings (the paper's words, no config key) and as
    notes on stderr and the step's log (the key, the config file and the fix)."""
    import logging

    out = []
    for metric, why in listed_unanalysed(campaign, runs):
        logging.getLogger("containertax").warning(
            "note: key 'analysis.metrics' of %s lists %r, which is not analysed: %s. Fix: "
            "remove it from analysis.metrics, or run a workload that measures it.",
            campaign.source, metric, why)
        out.append(quality.Finding("metric_not_analysed", "warning",
                                   f"{metric} was to be analysed, but {why}: not analysed",
                                   details={"metric": metric}))
    return out


def without_phases(metrics: list[str]) -> list[str]:
    """The metrics of the general tables: the phases have their own table and figure."""
    from containertax.workloads.timeline import METRICS as PHASES

    return [metric for metric in metrics if metric not in PHASES]


def primary_metrics(campaign: Campaign, runs: pd.DataFrame) -> dict[str, list[str]]:
    """Per model, the metrics of the primary family (fixed by the config, not the data:
    analysis.primary_metrics, else the workload kind's default, else the headline)."""
    from containertax.workloads.metric_registry import PRIMARY_BY_KIND

    analysed = analysed_metrics(campaign, runs)
    wanted = campaign.analysis.get("primary_metrics")
    out: dict[str, list[str]] = {}
    for model in dict.fromkeys(runs["model"].astype(str)):
        if wanted:
            out[model] = [metric for metric in wanted if metric in analysed]
            continue
        if campaign.is_import or model not in {known.id for known in campaign.models}:
            head = headline(campaign, runs)
            out[model] = [head] if head else []
            continue
        have = set(analysed) & set(runs.loc[runs.model.astype(str) == model, "metric"])
        picks = []
        for choices in PRIMARY_BY_KIND.get(campaign.workload_kind(model), []):
            first = next((metric for metric in choices if metric in have), None)
            if first:
                picks.append(first)
        out[model] = picks
    return out


def comparison_plan(campaign: Campaign, runs: pd.DataFrame):  # -> comparisons.Plan
    from containertax.statistics.comparisons import Plan

    reg = metric_registry(campaign)
    return Plan(campaign.reference, campaign.replicas, primary_metrics(campaign, runs),
                {metric: info.restates for metric, info in reg.items() if info.restates})


def environment_order(campaign: Campaign, runs: pd.DataFrame) -> list[str]:
    envs = ([env.id for env in campaign.environments]
            or list(dict.fromkeys(runs["environment"])))
    return [campaign.reference] + [env for env in envs if env != campaign.reference]


def headline(campaign: Campaign, runs: pd.DataFrame) -> str | None:
    """The metric the headline table and the abstract quote (analysis.headline_metric);
    under a stopping rule the primary metric the rule decided on (headline_override says
    so in the paper), since only its verdict respects the looks."""
    metrics = analysed_metrics(campaign, runs)
    wanted = campaign.analysis.get("headline_metric")
    stopped = stopping_metric(campaign, runs)
    if stopped is not None:
        return stopped
    return wanted if wanted in metrics else (metrics[0] if metrics else None)


def stopping_metric(campaign: Campaign, runs: pd.DataFrame) -> str | None:
    """The primary metric a stopping rule decided on (the first model's first), or None
    without a rule."""
    if not campaign.raw.get("stopping") or runs is None or runs.empty:
        return None
    firsts = [metrics[0] for metrics in primary_metrics(campaign, runs).values() if metrics]
    return firsts[0] if firsts else None


def headline_metrics(campaign: Campaign, runs: pd.DataFrame) -> dict[str, str]:
    """Per model, the metric its headline quotes: the metric its rule decided on (its
    first primary metric: only its verdict carries the primary family's correction and,
    under a stopping rule, respects the looks), else the configured headline (issue #39:
    a headline metric that is not the primary one printed a secondary p as primary)."""
    if runs is None or runs.empty:
        return {}
    wanted = headline(campaign, runs)
    return {model: metrics[0] if metrics else wanted
            for model, metrics in primary_metrics(campaign, runs).items()
            if metrics or wanted}


def headline_override(campaign: Campaign, runs: pd.DataFrame) -> str | None:
    """The configured headline metric where the primary metric of a model that ran it
    replaced it, or None."""
    wanted = campaign.analysis.get("headline_metric")
    if not wanted or runs is None or runs.empty:
        return None
    # a model without the configured metric (a matrix product has no token throughput)
    # never had it as its headline: only one that ran it and is headed by another overrides
    ran = {str(m): set(g["metric"]) for m, g in runs.groupby(runs["model"].astype(str))}
    return wanted if any(metric != wanted and wanted in ran.get(model, set())
                         for model, metric in headline_metrics(campaign, runs).items()) \
        else None


def resolution(campaign: Campaign) -> float:
    """The resolution the campaign needs (analysis.resolution_pct), as a fraction."""
    return float(campaign.analysis["resolution_pct"]) / 100  # the schema's default: 2


def session_findings(campaign: Campaign) -> list[Any]:
    """An imported study whose runs were not interleaved (analysis.import_study.order:
    sequential, or unknown) compares sessions, not environments: an error-severity finding
    on every metric, so that the decision table qualifies every verdict of it (a test of
    such data cannot tell the environment from whatever else changed between sessions)."""
    if not campaign.is_import:
        return []
    study_order = (campaign.analysis.get("import_study") or {}).get("order", "unknown")
    if study_order == "interleaved":
        return []
    why = ("each environment ran in one session" if study_order == "sequential" else
           "the source does not say whether its runs were interleaved")
    return [quality.Finding("pseudo_replication", "error",
                            f"{why}: the runs are "
                            "repeated measurements of a session, not independent replicates "
                            "of an environment, so every test here compares sessions")]


def refuse_duplicates(runs: pd.DataFrame, path: Path, campaign: Campaign) -> None:
    """A repeated (model, environment, repetition/block, metric) stops the analysis: a
    block with two runs of one environment cannot be paired, and no test may be swapped
    for an unpaired one silently. analysis.exclude: [duplicate] drops every copy."""
    dup = runs[quality.duplicate_mask(runs)]
    if dup.empty:
        return
    source = (f" (imported from {campaign.analysis['import_csv']})" if campaign.is_import
              else f" (from the raw records under {campaign.paths.raw_dir})")
    cols = [column for column in
            ("model", "environment", "repetition", "block", "metric", "value") if column in dup]
    more = f"\n(and {len(dup) - 10} more)" if len(dup) > 10 else ""
    raise AnalysisError(
        f"{path}{source}: {len(dup)} rows repeat a (model, environment, repetition/block, "
        f"metric):\n{dup[cols].head(10).to_string(index=False)}{more}\nFix the source "
        "(remove the extra records or rows), or set analysis.exclude: [duplicate] to drop "
        "every copy (their blocks then count as incomplete).")


def aa_comparisons(campaign: Campaign, kept: pd.DataFrame) -> pd.DataFrame:
    """The A/A comparisons (replicas against what they copy), corrected within their
    families: the same code and plan as the statistics rule, with the equivalence test
    at the campaign's resolution (column tost_resolution_p) instead of its margin."""
    if not campaign.replicas:
        return pd.DataFrame()
    from dataclasses import replace

    from containertax.statistics import comparisons as st

    plan = comparison_plan(campaign, kept)
    aa_envs = set(campaign.replicas) | set(campaign.replicas.values())
    runs = kept[kept.environment.isin(aa_envs)]
    settings = replace(st.Settings.from_config(campaign.analysis, campaign.reference),
                       equivalence_margin=resolution(campaign))
    results = st.analyse(runs, settings, analysed_metrics(campaign, runs), plan,
                         st.metric_scales(kept))
    if results.empty:
        return results
    results = results.rename(columns={"tost_p": "tost_resolution_p"})
    return results[results.family.isin(["calibration", "calibration-secondary"])]


def family_of(results: pd.DataFrame) -> pd.Series:
    """Each comparison's family (comparisons.Plan); 'primary' for a table without one."""
    if "family" in results:
        return results["family"]
    return pd.Series("primary", index=results.index)


def primary_family(results: pd.DataFrame) -> pd.DataFrame:
    """The comparisons the paper's verdicts rest on: every environment against the
    reference, not the A/A calibration of a replica against what it copies."""
    return results[~family_of(results).isin(AA_FAMILIES)]


def evidence(quality_report: dict[str, Any] | None,
             metrics: list[str]) -> tuple[dict[str, str], set[str]]:
    """What the decision table needs besides the statistics, from quality.json: each
    metric's A/A status and the metrics an error-severity finding concerns."""
    if not quality_report:
        return {}, set()

    aa = dict((quality_report.get("calibration") or {}).get("metrics") or {})
    return aa, decisions.error_metrics(quality_report.get("findings", []), metrics)


def headline_rows(campaign: Campaign, results: pd.DataFrame | None,
                  runs: pd.DataFrame, quality_report: dict[str, Any] | None = None
                  ) -> list[dict[str, Any]]:
    if results is None or results.empty:
        return []
    results = primary_family(results)
    reg = metric_registry(campaign)
    metrics = analysed_metrics(campaign, runs)
    aa, errors = evidence(quality_report, metrics)
    return headlines(results, reg, headline_metrics(campaign, runs),
                     metrics, campaign.analysis["alpha"], aa, errors)


def order_balance(campaign: Campaign, order_csv: Path | None) -> dict[str, Any]:
    """The realised order's balance (statistics/order.py) from stats/order.csv."""
    realised = order.read(order_csv or campaign.paths.order)
    envs = ([env.id for env in campaign.environments]
            or list(dict.fromkeys(realised["environment"])))
    return order.balance(realised, envs)


def headline_metric_of(model_results: pd.DataFrame, wanted: str | None,
                       metrics: list[str]) -> str | None:
    """The campaign's headline metric where the model has it, else its first analysed
    speed metric with an interval (a matrix product has no token throughput; its peak
    memory, identical in every run, says nothing about speed)."""
    present = set(model_results["metric"])
    if wanted in present:
        return wanted
    informative = set(model_results.loc[model_results["rel_ci_low"].notna(), "metric"])
    ranked = ([m for m in metrics if m in informative and m not in MEMORY_METRICS]
              + [m for m in metrics if m in present])
    return ranked[0] if ranked else None


def headlines(results: pd.DataFrame, registry: dict[str, MetricInfo],
              wanted: str | dict[str, str] | None,
              metrics: list[str], alpha: float, aa: dict[str, str] | None = None,
              errors: set[str] | None = None) -> list[dict[str, Any]]:
    """One row per model and environment: its headline comparison and its verdict, with
    the caveats the decision table adds (aa: metric -> A/A status; errors: metrics with an
    error-severity quality finding); wanted: the headline metric, or one per model."""
    aa, errors = aa or {}, errors or set()
    rows = []
    for model, g in results.groupby("model", sort=False):
        want = wanted.get(str(model)) if isinstance(wanted, dict) else wanted
        metric = headline_metric_of(g, want, metrics)
        if metric is None:
            continue
        info = registry.get(metric)
        for _, r in g[g.metric == metric].iterrows():
            found = r.get("verdict")
            if isinstance(found, str) and found in decisions.WORDS:  # the findings table's
                caveats = r.get("caveats")
                decided = decisions.Verdict(found, tuple(
                    c for c in str(caveats).split(";") if c) if isinstance(caveats, str)
                    else ())
            else:
                decided = decisions.verdict(r, info.direction if info else "none", alpha,
                                            aa_status=aa.get(metric),
                                            quality_error=metric in errors)
            rows.append({"model": str(model), "metric": metric, "environment": r.environment,
                         "row": r, "verdict": decided.word, "decision": decided})
    return rows
