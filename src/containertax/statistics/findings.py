"""The findings of a campaign, computed once: every comparison (each family, the A/A
control, the comparisons without the blocks that compiled) and every data-quality finding,
with its estimator, estimate, the interval the paper prints (the repeated-look adjusted one
where a stopping rule looked at it), test, corrected p, equivalence, MDE, the decision
table's verdict, a severity and why it matters, and where the paper must say it (the
findings rule below). Written once by the `findings` rule to stats/findings.csv
(campaign/paths.py FINDINGS); the tables, figures, numbers.tex and the discussion read that
file and print its text columns, so a quantity is printed the same wherever it appears.

The findings rule (docs/measurement.md, "What reaches the abstract"): a finding reaches the
abstract and the conclusion when it is

1. a primary comparison (every primary verdict, whatever it says);
2. a secondary, derived or exploratory comparison (the compile-excluded ones too)
   significant after correction within its family (p_BH < alpha) and larger than the
   campaign's resolution (|estimate| > analysis.resolution_pct);
3. an A/A comparison that failed or is inconclusive on a reported metric (one of 1 or 2);
4. a data-quality finding of error severity, or a thermal dependence (a metric depending on
   the start temperature or the time since the last run, BH-significant) whose effect over
   the observed range is larger than the resolution;

the phases of a run (families phases and calibration-phases) decompose its wall time:
they are said in the section "Where the time goes" (reach `where the time goes`: each phase
that differs, in milliseconds), never one by one in the abstract, whose process wall time
they explain; every other significant comparison, A/A result and quality warning is listed
in the paper's findings section; comparisons that are neither significant nor equivalent are
counted there and listed in the appendix tables.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from containertax.campaign.config import Campaign
from containertax.statistics import decisions, phases, texts
from containertax.statistics.comparisons import (
    PHASES_AA_FAMILY,
    PHASES_FAMILY,
    mde_at_level,
)
from containertax.statistics.policy import metric_registry, resolution

# where the paper says a finding
ABSTRACT, LISTED, APPENDIX = "abstract", "findings section", "appendix"
PHASES_SECTION = "where the time goes"
# metrics whose difference the paper also prints in milliseconds (the phases' section)
ABSOLUTE_METRICS = frozenset(phases.ORDER) | {phases.WALL}
COMPARISON_FAMILIES = ("primary", "secondary", "derived", "calibration",
                       "calibration-secondary")
EXCLUDED_FAMILY = "compile-excluded"  # exploratory: process time and energy without the
EXCLUDED_AA_FAMILY = "compile-excluded A/A"  # blocks that hold a compiling run
QUALITY_FAMILY = "quality"
SPLIT_FAMILY = "split-excluded"  # a headline comparison without its blocks split across GPUs
BESIDE_HEADLINE = "beside the headline"  # where the paper says it (never the abstract)
# quality findings that restate A/A comparisons, which are findings rows of their own
RESTATED = ("aa_resolution", "aa_secondary")
# a family in the paper's words
FAMILY_WORDS = {"primary": "primary", "secondary": "secondary",
                "derived": "derived", "calibration": "A/A control",
                "calibration-secondary": "A/A control, secondary",
                "compile-excluded": "without the blocks that compiled",
                "compile-excluded A/A": "A/A control without the blocks that compiled",
                SPLIT_FAMILY: "without the blocks split across GPUs"}
EXTRA_COLUMNS = ["kind", "estimator", "interval_kind", "estimate", "ci_low", "ci_high", "look",
                 "look_blocks", "look_alpha", "look_p", "answer", "verdict", "caveats",
                 "severity", "reach", "why", "text_est", "text_low", "text_high",
                 "text_ci", "check", "message"]


# one way to print an estimate and its interval: texts.interval_texts
interval_texts = texts.interval_texts


# --- the comparisons -------------------------------------------------------------------


def estimator_of(r: Any) -> str:
    if r.get("scale") == "difference" or r.get("scale") == "raw":
        return "difference of means relative to the reference mean"
    if r.get("design") == "paired":
        return "geometric mean of the per-block ratios minus one"
    return "ratio of the geometric means minus one"


def looks_by_comparison(campaign: Campaign, runs: pd.DataFrame) -> dict[tuple, dict]:
    """Where a stopping rule looked: per (model, environment, metric) the row of the look
    at which the model stopped (or the last look made), through statistics/sequential.py."""
    if not campaign.raw.get("stopping"):
        return {}
    from containertax.statistics import sequential

    rows = sequential.last_state(campaign, runs)
    out: dict[tuple, dict] = {}
    for model in {r["model"] for r in rows}:
        mine = [r for r in rows if r["model"] == model]
        last = max(r["look"] for r in mine)
        for r in mine:
            if r["look"] == last:
                out[(str(r["model"]), r["environment"], r["metric"])] = r
    return out


def _verdict(r: Any, direction: str, alpha: float, aa: dict[str, str], errors: set[str],
             look: dict | None) -> decisions.Verdict:
    shown = None
    if look is not None:
        shown = {"difference": "difference", "equivalence": "equivalence"}.get(
            look.get("answer"), "none")
    return decisions.verdict(r, direction, alpha, aa_status=aa.get(r["metric"]),
                             quality_error=r["metric"] in errors, shown=shown)


def comparison_rows(campaign: Campaign, results: pd.DataFrame, runs: pd.DataFrame,
                    quality_report: dict[str, Any] | None) -> pd.DataFrame:
    """comparisons.csv with the findings' columns: the verdict of the decision table (from
    the look where a model stopped, with that look's level and adjusted interval, under a
    stopping rule), the printed interval and its text."""
    from containertax.statistics.policy import analysed_metrics, evidence

    reg = metric_registry(campaign)
    alpha = campaign.analysis["alpha"]
    aa, errors = evidence(quality_report, analysed_metrics(campaign, runs))
    looks = looks_by_comparison(campaign, runs)
    res = resolution(campaign)
    rows = []
    for _, r in results.iterrows():
        row = r.to_dict()
        look = looks.get((str(r["model"]), r["environment"], r["metric"]))
        if r.get("family") != "primary":
            look = None
        info = reg.get(r["metric"])
        direction = info.direction if info else "none"
        row["kind"] = "comparison"
        row["estimator"] = estimator_of(row)
        if r.get("family") in ("calibration", "calibration-secondary", EXCLUDED_AA_FAMILY):
            status = decisions.aa_comparison_status(_with_tost(row, campaign, quality_report),
                                                    res, alpha)
            row["verdict"] = f"A/A {status}"
            row["caveats"] = ""
        else:
            v = _verdict(row, direction, alpha, aa, errors, look)
            row["verdict"], row["caveats"] = v.word, ";".join(v.caveats)
        if look is not None:
            row.update(interval_kind=f"{100 * (1 - look['alpha_look']):.4g} % repeated-look "
                                     f"adjusted (look {look['look']}, level "
                                     f"{look['alpha_look']:.3g})",
                       ci_low=look["adj_low"], ci_high=look["adj_high"],
                       look=int(look["look"]), look_blocks=int(look["blocks"]),
                       look_alpha=float(look["alpha_look"]), look_p=float(look["p"]),
                       answer=look["answer"])
            row["rel_overhead_look"] = look["estimate"]
            # the smallest effect the look could detect, at its own level and blocks
            # (the verdict's), not the fixed design's 0.05
            if row.get("design") == "paired":
                row["mde_rel"] = mde_at_level(
                    _f(row.get("mde_rel")), _f(row.get("mde_d")), int(look["blocks"]),
                    float(look["alpha_look"]), str(row.get("scale")))
        else:
            row.update(interval_kind="95 % t", ci_low=row.get("rel_ci_low"),
                       ci_high=row.get("rel_ci_high"))
        if _f(row["ci_low"]) < -1:  # a raw-scale difference of a non-negative metric:
            row["ci_low"] = -1.0     # no relative difference lies below -100 %
            row["interval_kind"] += ", lower end truncated at -100 %"
            row["truncated"] = True
        est = row["rel_overhead_look"] if look is not None else row.get("rel_overhead")
        row["estimate"] = est  # the printed estimate (the look's under a stopping rule)
        row["text_est"], row["text_low"], row["text_high"] = interval_texts(
            _f(est), _f(row["ci_low"]), _f(row["ci_high"]))
        row["text_ci"] = _ci_text(row)
        if row.get("metric") in ABSOLUTE_METRICS and runs is not None and "block" in runs:
            row.update(absolute_difference(runs, row, alpha))
        rows.append(row)
    return pd.DataFrame(rows)


def absolute_difference(runs: pd.DataFrame, row: dict, alpha: float) -> dict[str, Any]:
    """A phase's (or the wall time's) mean per-block difference in seconds with its t
    interval, and its printed texts in milliseconds: what the section 'Where the time goes'
    prints, computed here once."""
    d = phases.paired_seconds(runs[runs.model.astype(str) == str(row["model"])],
                              row["metric"], row["environment"], row["reference"], alpha)
    est, low, high = phases.ms_texts(d["est"], d["low"], d["high"])
    return {"abs_diff": d["est"], "abs_low": d["low"], "abs_high": d["high"],
            "abs_blocks": d["n"], "abs_text_est": est, "abs_text_low": low,
            "abs_text_high": high}


def _with_tost(row: dict, campaign: Campaign, quality_report: dict | None) -> dict:
    """An A/A row with its TOST at the resolution, as the quality step computed it."""
    for c in ((quality_report or {}).get("calibration") or {}).get("comparisons", []):
        if (str(c.get("model")) == str(row["model"]) and c.get("metric") == row["metric"]
                and c.get("environment") == row["environment"]):
            return {**row, "tost_resolution_p": c.get("tost_resolution_p", math.nan)}
    return row


def _f(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _ci_text(row: dict) -> str:
    if row["text_low"] == "--":
        return ""
    return f"[{row['text_low']}, {row['text_high']}]"


def compile_excluded(campaign: Campaign, runs: pd.DataFrame) -> pd.DataFrame:
    """Process time and energy without the blocks that hold a run that compiled (its record
    says so: statistics/facts.py): every environment against the reference and the
    A/A replica against what it copies, by the primary analysis (comparisons.py, the same
    estimator and test), corrected within a family of their own."""
    from containertax.statistics import comparisons as st
    from containertax.statistics import facts, policy
    from containertax.statistics.correction import correct

    comp = facts.compiled_runs(campaign)[["model", "environment", "repetition"]]
    metrics = [m for m in facts.STEADY_METRICS if m in set(runs["metric"])]
    if comp.empty or not metrics:
        return pd.DataFrame()
    m = runs.assign(model=runs["model"].astype(str)).merge(
        comp, on=["model", "environment", "repetition"])
    bad = set(zip(m["model"].astype(str), m["block"], strict=False))
    keep = [(str(a), b) not in bad for a, b in zip(runs["model"], runs["block"], strict=False)]
    rest = runs[keep]
    if rest.empty:
        return pd.DataFrame()
    settings = st.Settings.from_config(campaign.analysis, campaign.reference)
    plan = policy.comparison_plan(campaign, runs)
    plan = type(plan)(plan.reference, plan.replicas, {}, {})  # every metric secondary here
    out = st.analyse(rest, settings, metrics, plan, st.metric_scales(runs, metrics))
    if out.empty:
        return out
    aa = out["family"].isin(["calibration", "calibration-secondary"])
    out["family"] = np.where(aa, EXCLUDED_AA_FAMILY, EXCLUDED_FAMILY)
    out = correct(out)
    out["blocks_excluded"] = len({b for _, b in bad})
    return out


def split_excluded(campaign: Campaign, runs: pd.DataFrame, heads: list[dict[str, Any]]
                   ) -> pd.DataFrame:
    """Each headline comparison of a model with a block split across machines (its runs
    on more than one GPU: quality.split_blocks), recomputed without those blocks
    by the headline's own analysis: under a stopping rule the blocks of the look where the
    model stopped, less the split ones, at that look's level (the repeated-look interval);
    otherwise the primary analysis (comparisons.py) on the other blocks. A different
    quantity from the headline (fewer blocks), printed once beside it."""
    from containertax.statistics import comparisons as st
    from containertax.statistics import policy, quality

    split = quality.split_blocks(runs)
    rows = []
    for head in heads:
        model, r = str(head["model"]), head["row"]
        blocks = split.get(model)
        if not blocks:
            continue
        metric, env, ref = head["metric"], head["environment"], r["reference"]
        row: dict[str, Any] = {
            "kind": "comparison", "family": SPLIT_FAMILY, "model": model, "metric": metric,
            "environment": env, "reference": ref, "unit": r.get("unit", ""),
            "estimator": r.get("estimator", ""), "split_blocks": " ".join(map(str, blocks))}
        look = r.get("look", math.nan)
        if look == look and look is not None:
            from containertax.campaign.stopping import look_stats
            from containertax.statistics import sequential

            d = sequential.block_log_ratios(runs, model, metric, env, ref)
            d = d.iloc[:int(r["look_blocks"])]
            kept = d[~d.index.isin(blocks)].to_numpy(float)
            a = float(r["look_alpha"])
            n = len(kept)
            est = low = high = p = math.nan
            if n >= 2:
                s = look_stats(np.array([kept.mean()]), np.array([kept.std(ddof=1)]), n, a,
                               sequential.rule_of(campaign).margin_of(False))
                est, low, high = (math.expm1(kept.mean()), math.expm1(float(s["low"][0])),
                                  math.expm1(float(s["high"][0])))
                p = float(s["p"][0])
            row.update(interval_kind=f"{100 * (1 - a):.4g} % repeated-look adjusted "
                                     f"(look {int(look)}, level {a:.3g})",
                       look=int(look), look_alpha=a, look_blocks=n, look_p=p, p=p)
        else:
            mine = runs[(runs["model"].astype(str) == model) & ~runs["block"].isin(blocks)]
            settings = st.Settings.from_config(campaign.analysis, campaign.reference)
            out = st.analyse(mine, settings, [metric], policy.comparison_plan(campaign, runs),
                             st.metric_scales(runs, [metric])) if len(mine) else pd.DataFrame()
            out = out[out["environment"] == env] if not out.empty else out
            first = out.iloc[0] if len(out) else {}
            est = _f(first.get("rel_overhead")) if len(out) else math.nan
            low = _f(first.get("rel_ci_low")) if len(out) else math.nan
            high = _f(first.get("rel_ci_high")) if len(out) else math.nan
            n = int(first.get("n_blocks") or first.get("n_env") or 0) if len(out) else 0
            row.update(interval_kind=r.get("interval_kind", "95 % t"), look_blocks=n,
                       p=_f(first.get("p")) if len(out) else math.nan)
        row.update(estimate=est, rel_overhead=est, ci_low=low, ci_high=high,
                   rel_ci_low=low, rel_ci_high=high, verdict="", caveats="")
        row["text_est"], row["text_low"], row["text_high"] = interval_texts(est, low, high)
        row["text_ci"] = _ci_text(row)
        rows.append(row)
    return pd.DataFrame(rows)


# --- data-quality findings ----------------------------------------------------------------


def quality_rows(quality_report: dict[str, Any] | None, res: float) -> list[dict[str, Any]]:
    """Every data-quality finding of warning or error severity as a finding; a thermal
    dependence carries its effect over the observed range (per cent of the mean)."""
    out = []
    for f in (quality_report or {}).get("findings", []):
        sev = f.get("severity")
        if sev not in ("warning", "error") or f.get("check") in RESTATED:
            continue
        d = f.get("details") or {}
        effect = _f(d.get("effect_pct")) / 100 if "effect_pct" in d else math.nan
        row = {"kind": "quality", "family": QUALITY_FAMILY, "check": f.get("check"),
               "message": f.get("message", ""), "severity": sev,
               "model": str(d.get("model", "")), "metric": d.get("metric", ""),
               "environment": "", "estimate_effect": effect}
        if f.get("check") == "thermal_dependence":
            row["covariate"] = d.get("label") or d.get("covariate", "")
            row["partial_r"] = _f(d.get("r"))
            row["p_bh"] = _f(d.get("q"))
            row["range"] = _f(d.get("range"))
            row["unit"] = d.get("unit", "")
            row["text_est"] = interval_texts(effect, math.nan, math.nan)[0]
        out.append(row)
    return out


# --- the findings rule --------------------------------------------------------------------


def reach(row: Any, alpha: float, res: float, reported: set[str]) -> tuple[str, str, str]:
    """(reach, severity, why) of one finding: the findings rule of this module's docstring."""
    fam = row.get("family")
    if fam == SPLIT_FAMILY:
        return BESIDE_HEADLINE, "caveat", ("a headline comparison without its blocks split "
                                           "across GPUs")
    if row.get("kind") == "quality":
        if row.get("severity") == "error":
            return ABSTRACT, "error", "a data-quality error"
        if row.get("check") == "thermal_dependence" and abs(_f(row.get("estimate_effect"))) > res:
            return ABSTRACT, "major", (f"a thermal dependence larger than the resolution of "
                                       f"{100 * res:g} %")
        return LISTED, "minor", "a data-quality warning"
    if fam == "primary":
        return ABSTRACT, "primary", "a primary verdict"
    verdict = str(row.get("verdict", ""))
    if fam in ("calibration", "calibration-secondary", EXCLUDED_AA_FAMILY):
        status = verdict.removeprefix("A/A ")
        if status in ("failed", "inconclusive", "cannot fail") and row.get("metric") in reported:
            return ABSTRACT, "caveat" if status != "failed" else "error", (
                f"the A/A control {status} on a reported metric")
        if status == "failed":
            return LISTED, "error", "the A/A control failed"
        if status in ("inconclusive", "cannot fail"):
            return LISTED, "caveat", f"the A/A control is {status}"
        return APPENDIX, "none", "the A/A control passed"
    p_bh, est = _f(row.get("p_bh")), _f(row.get("rel_overhead"))
    if fam in (PHASES_FAMILY, PHASES_AA_FAMILY):
        return PHASES_SECTION, "minor" if p_bh < alpha else "none", (
            "a phase of the run, said where the time goes" + (
                " (significant after correction)" if p_bh < alpha else ""))
    if p_bh < alpha and abs(est) > res:
        return ABSTRACT, "major", (f"significant after correction and larger than the "
                                   f"resolution of {100 * res:g} %")
    if p_bh < alpha:
        return LISTED, "minor", (f"significant after correction, within the resolution of "
                                 f"{100 * res:g} %")
    if verdict == "equivalent":
        return APPENDIX, "none", "equivalent within the margin"
    return APPENDIX, "none", "neither significant nor equivalent"


def build(campaign: Campaign, runs: pd.DataFrame, results: pd.DataFrame | None,
          quality_report: dict[str, Any] | None) -> pd.DataFrame:
    """The campaign's findings table (stats/findings.csv): one row per comparison, per
    compile-excluded comparison and per data-quality warning or error."""
    alpha, res = campaign.analysis["alpha"], resolution(campaign)
    parts = []
    if results is not None and not results.empty:
        parts.append(comparison_rows(campaign, results, runs, quality_report))
        if runs is not None and {"block", "machine"} <= set(runs.columns):
            from containertax.statistics.policy import headline_rows

            parts.append(split_excluded(campaign, runs, headline_rows(
                campaign, parts[-1], runs, quality_report)))
    excluded = compile_excluded(campaign, runs) if runs is not None and "block" in runs else None
    if excluded is not None and not excluded.empty:
        parts.append(comparison_rows(campaign, excluded, runs, quality_report))
    parts.append(pd.DataFrame(quality_rows(quality_report, res)))
    table = pd.concat([p for p in parts if not p.empty], ignore_index=True) if any(
        not p.empty for p in parts) else pd.DataFrame(columns=EXTRA_COLUMNS)
    if table.empty:
        return table
    primary = table[table.get("family") == "primary"]
    reported = set(primary["metric"]) if not primary.empty else set()
    first = [reach(r, alpha, res, reported) for _, r in table.iterrows()]
    reported |= {r["metric"] for (_, r), (where, _, _) in zip(table.iterrows(), first,
                                                              strict=True)
                 if where == ABSTRACT and r.get("kind") == "comparison"}
    decided = [reach(r, alpha, res, reported) for _, r in table.iterrows()]
    table["reach"] = [d[0] for d in decided]
    table["severity"] = [d[1] for d in decided]
    table["why"] = [d[2] for d in decided]
    for column in EXTRA_COLUMNS:
        if column not in table:
            table[column] = "" if column in ("check", "message", "caveats") else math.nan
    if "model" in table:
        table["model"] = table["model"].astype(str)
    return table


# --- reading it back ----------------------------------------------------------------------


def split(table: pd.DataFrame | None) -> tuple[pd.DataFrame | None, pd.DataFrame]:
    """The findings table as (the campaign's comparisons: families of comparisons.csv, with
    the findings' columns; everything else: compile-excluded comparisons, quality)."""
    if table is None or table.empty:
        return table, pd.DataFrame()
    if "kind" not in table:  # a plain comparisons.csv
        return table, pd.DataFrame()
    base = table["family"].isin(COMPARISON_FAMILIES) & (table["kind"] == "comparison")
    return table[base].reset_index(drop=True), table[~base].reset_index(drop=True)
