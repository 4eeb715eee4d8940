"""The values numbers.tex gives paper/main.tex (\\ctx{key}, \\ifctx{key}): the counts, the
verdicts of the headline comparisons and their caveats, the A/A control's, and every
estimate the text may quote. Values and conditions only: the sentences are in main.tex.
The design's values are in design_values.py.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from containertax.campaign.config import Campaign
from containertax.campaign.stopping import CHECK_ANSWER
from containertax.publishing import design_values, discussion, facts, tables
from containertax.statistics import decisions, findings, order, policy, quality, sequential, texts
from containertax.statistics.policy import (
    AnalysisError,
    analysed_metrics,
    evidence,
    family_of,
    metric_registry,
    primary_family,
    resolution,
)
from containertax.workloads.metric_registry import MetricInfo


def numbers_values(campaign: Campaign, runs: pd.DataFrame, results: pd.DataFrame | None,
                   quality_report: dict[str, Any], order_csv: Path | None,
                   others: pd.DataFrame | None = None) -> dict[str, Any]:
    """Every value and condition the text of paper/main.tex quotes, by key."""
    reg = metric_registry(campaign)
    settings = campaign.analysis
    head = policy.headline(campaign, runs)
    cells = runs.drop_duplicates(["model", "environment", "repetition"])
    envs = policy.environment_order(campaign, runs)
    present_envs = [env for env in envs if env in set(runs["environment"])]
    values: dict[str, Any] = {
        "campaign": texts.tex(campaign.name),
        "runs": len(cells),
        "models": runs["model"].nunique(),
        "model-list": texts.tex(tables.join_words(list(dict.fromkeys(runs["model"])))),
        "environments": len(present_envs),
        "environment-list": texts.tex(tables.join_words(present_envs)),
        "others": texts.tex(tables.join_words([env for env in present_envs
                                                if env != campaign.reference])),
        "reference": texts.tex(campaign.reference),
        "alpha": settings["alpha"],
        **margin_values(settings["equivalence_margin"]),
        "resamples": f"{settings['bootstrap_resamples']:,}".replace(",", "\\,"),
        "excluded": len(quality_report["excluded"]),
        "findings": len(quality_report["findings"]),
        **finding_counts(quality_report["findings"]),
        **design_values.outlier_values(runs),
        "headline-metric": headline_words(policy.headline_metrics(campaign, runs), reg)
        if head else "--",
        "metrics": len(analysed_metrics(campaign, runs)),
        "has-memory": bool(set(policy.MEMORY_METRICS) & set(runs["metric"])),
        **primary_test_values(campaign),
        **design_values.design_values(campaign, runs),
        **design_values.clock_values(quality_report),
        **order.macros(policy.order_balance(campaign, order_csv), campaign.schedule["design"]),
        **result_values(campaign, results, runs, quality_report),
        **calibration_macros(quality_report.get("calibration") or {"status": "none"}, reg,
                             campaign.replicas),
        **sequential.macros(campaign, runs, lambda m: tables.in_prose(reg[m], m)
                            if m in reg else m),  # none without a stopping rule
    }
    values.update(discussion.values(campaign, runs, results, others))  # the argument
    # the start-up cost is said once, in seconds: its relative restatement stays out of the
    # abstract (the findings section lists it)
    said = {"startup_s"} if values.get("startup-robust") or values.get("startup-one") else set()
    values.update(findings_values(campaign, runs, results, others, reg, said))
    values.update(split_values(campaign, runs, results, others, reg, quality_report))
    values["resolution"] = f"{100 * resolution(campaign):g}"
    from containertax.publishing import benchmarking

    values.update(benchmarking.values(
        values, reg, analysed_metrics(campaign, runs),
        shape_checked=bool(campaign.raw.get("stopping"))
        and sequential.rule_of(campaign).shape_check))
    overridden = policy.headline_override(campaign, runs)
    values["headline-overridden"] = bool(overridden)
    values["headline-configured"] = (texts.tex(tables.in_prose(reg.get(overridden), overridden))
                                     if overridden else "--")
    values["seq-headline"] = bool(values.get("hl-count")) and all(
        values.get(f"hl/{n}/sequential") for n in range(1, values["hl-count"] + 1))
    for (model, env, metric), group in runs.groupby(["model", "environment", "metric"]):
        mean = group["value"].mean()
        values[f"mean/{model}/{env}/{metric}"] = (tables.num(mean) if not math.isnan(mean)
                                                  else "--")
    return values


# the severities of a quality finding that are a problem; the rest (info) are notes: a
# summary of checks that found nothing, or a fact such as the machines the runs used
PROBLEM_SEVERITIES = ("warning", "error")


def finding_counts(found: list[dict[str, Any]]) -> dict[str, int]:
    """The quality section's counts by severity: h100-warmup-causes said 'six problems'
    of six findings, two of them info items whose checks found nothing."""
    problems = sum(f.get("severity") in PROBLEM_SEVERITIES for f in found)
    return {"findings-problems": problems, "findings-notes": len(found) - problems}


def split_values(campaign: Campaign, runs: pd.DataFrame, results: pd.DataFrame | None,
                 others: pd.DataFrame | None, reg: dict[str, MetricInfo],
                 quality_report: dict[str, Any] | None = None) -> dict[str, Any]:
    """Each headline comparison of a model with a block split across GPUs (statistics/
    findings.split_excluded): the block named and the headline without it, printed from
    the findings table's own text (sp/...; split-count 0 where no block was split)."""
    v: dict[str, Any] = {"split-count": 0, "split-each": ""}
    if (results is None or results.empty or others is None or others.empty
            or "family" not in others):
        return v
    rows = others[others["family"] == findings.SPLIT_FAMILY]
    n = 0
    for head in policy.headline_rows(campaign, results, runs, quality_report):
        found = rows[(rows["model"].astype(str) == str(head["model"]))
                     & (rows["environment"] == head["environment"])
                     & (rows["metric"] == head["metric"])]
        if found.empty:
            continue
        n += 1
        r = found.iloc[0]
        blocks = [int(float(b)) for b in str(r["split_blocks"]).split()]
        model = str(head["model"])
        mine = runs[(runs["model"].astype(str) == model) & runs["block"].isin(blocks)]
        est, low, high = tables.rel_texts(r)
        v[f"sp/{n}/model"] = texts.tex(model)
        v[f"sp/{n}/env"] = texts.tex(head["environment"])
        v[f"sp/{n}/metric"] = texts.tex(tables.in_prose(reg.get(head["metric"]),
                                                        head["metric"]))
        v[f"sp/{n}/blocks"] = ("block " if len(blocks) == 1 else "blocks ") + \
            tables.join_words([str(b) for b in blocks])
        v[f"sp/{n}/it"] = "it" if len(blocks) == 1 else "them"
        v[f"sp/{n}/gpus"] = int(mine["machine"].nunique())
        v[f"sp/{n}/est"] = est
        v[f"sp/{n}/has-ci"] = low != "--"
        v[f"sp/{n}/ci"] = f"{low}, {high}" if low != "--" else tables.NOT_ESTIMABLE
        v[f"sp/{n}/n"] = int(r["look_blocks"]) if r["look_blocks"] == r["look_blocks"] else 0
        look = r.get("look")
        v[f"sp/{n}/interval"] = (
            f"the {100 * (1 - float(r['look_alpha'])):.4g}\\,\\% repeated-look adjusted "
            f"interval of look {int(float(look))} (level {float(r['look_alpha']):.3g})"
            if look == look and look is not None and str(look) != ""
            else f"its {texts.tex(str(r.get('interval_kind') or ''))} interval")
    v["split-count"] = n
    v["split-each"] = "".join(f"\\splititem{{{k}}}" for k in range(1, n + 1))
    return v


def headline_words(per_model: dict[str, str], reg: dict[str, MetricInfo]) -> str:
    """The headline metric in words: 'token throughput' where every model has it, else
    each metric with its models ('token throughput (qwen2-0.5b) and compute time per
    product (matmul-10k and mm-4096)')."""
    by_metric: dict[str, list[str]] = {}
    for model, metric in per_model.items():
        by_metric.setdefault(metric, []).append(model)

    def words(metric: str) -> str:
        return tables.in_prose(reg.get(metric), metric)

    if len(by_metric) == 1:
        return texts.tex(words(next(iter(by_metric))))
    return texts.tex(tables.join_words([f"{words(metric)} ({tables.join_words(models)})"
                                        for metric, models in by_metric.items()]))


def margin_values(margin: float) -> dict[str, str]:
    """The equivalence band on the log scale, +-log(1 + m), as the ratio band it is:
    [1/(1 + m) - 1, m], [-4.76 %, +5 %] at m = 0.05 (not a symmetric +-5 %)."""
    low, high = f"{100 * (1 / (1 + margin) - 1):+.3g}", f"{100 * margin:+.3g}"
    return {"margin": f"{100 * margin:g}", "margin-ratio": f"{1 + margin:g}",
            "margin-low": low, "margin-high": high,
            "margin-band": f"[${low}$\\,\\%, ${high}$\\,\\%]"}


def primary_test_values(campaign: Campaign) -> dict[str, Any]:
    """The pre-specified primary test (analysis.primary_test), for the methods."""
    test = campaign.analysis["primary_test"]
    blocks = campaign.repetitions if not campaign.is_import else 0
    return {"primary-paired-t": test == "paired_t", "primary-signflip": test == "signflip",
            "signflip-min-p": tables.num(2.0 ** (1 - blocks), 3) if blocks else "--"}


def caveat_text(caveats: tuple[str, ...] | list[str], metric_words: str,
                resolution_pct: float) -> str:
    """', but <caveat> and <caveat>' in LaTeX, or '' where there is none."""
    if not caveats:
        return ""
    return ", but " + texts.tex(" and ".join(
        decisions.caveat_words(caveat, metric_words, resolution_pct) for caveat in caveats))


def group_caveat(decided: list[tuple[Any, str]], resolution_pct: float) -> str:
    """The caveat of a group of verdicts (the conclusion's 'in all four ... equivalent'):
    ', but for two of them the A/A control ...', or '' where none carries one."""
    qualified = [(decision, words) for decision, words in decided if decision.caveats]
    if not qualified:
        return ""
    texts = list(dict.fromkeys(caveat_text(decision.caveats, words, resolution_pct)[len(", but "):]
                               for decision, words in qualified))
    some = "" if len(qualified) == len(decided) else \
        f"for \\numword{{{len(qualified)}}} of them "
    return ", but " + some + "; ".join(texts)


def result_values(campaign: Campaign, results: pd.DataFrame | None, runs: pd.DataFrame,
                  quality_report: dict[str, Any] | None = None) -> dict[str, Any]:
    """The counts of each family, the headline rows (\\hlitem) with their verdicts and
    caveats, start-up cost, equivalent metrics, and every comparison's estimate and p."""
    alpha = campaign.analysis["alpha"]
    reg = metric_registry(campaign)
    res_pct = 100 * resolution(campaign)
    aa, errors = evidence(quality_report, analysed_metrics(campaign, runs))
    values: dict[str, Any] = {
        "family": 0, "significant-bh": 0, "significant-bonf": 0, "equivalent": 0,
        "hl-count": 0, "hl-each": "", "hl-one-metric": False, "hl-metric": "",
        "hl-overhead": 0, "hl-equivalent": 0,
        "hl-inconclusive": 0, "hl-advantage": 0, "startup-present": False,
        "startup-robust": False, "startup-one": False, "startup-caveat": "",
        "equivalent-caveat": "", "quality-error": bool(errors),
        "quality-error-metrics": texts.tex(tables.join_words(
            [tables.in_prose(reg.get(metric), metric) for metric in sorted(errors)])) or "--",
        "secondary-family": 0, "secondary-significant-bh": 0,
        "secondary-significant-bonf": 0, "secondary-equivalent": 0,
        "primary-metrics": "--", "has-derived": False, "derived-metrics": "--",
        "design-paired": False, "design-independent": False}
    if results is None or results.empty:
        return values
    all_results = results
    results = primary_family(results)  # the A/A calibration is reported on its own
    fam = family_of(results)
    for prefix, name in (("", "primary"), ("secondary-", "secondary")):
        family_rows = results[fam == name]
        values[f"{prefix}family"] = int(family_rows["p"].notna().sum())
        values[f"{prefix}significant-bh"] = int((family_rows["p_bh"] < alpha).sum())
        values[f"{prefix}significant-bonf"] = int((family_rows["p_bonferroni"] < alpha).sum())
        values[f"{prefix}equivalent"] = int((family_rows["tost_p"] < alpha).sum())
        if name == "primary" and "look" in family_rows and family_rows["look"].notna().any():
            # under a stopping rule: the answers of the looks where the models stopped
            word = family_rows["verdict"].astype(str)
            values[f"{prefix}significant-bh"] = int(word.isin(
                ["overhead", "advantage", "difference"]).sum())
            values[f"{prefix}significant-bonf"] = values[f"{prefix}significant-bh"]
            values[f"{prefix}equivalent"] = int((word == "equivalent").sum())
    values["primary-metrics"] = texts.tex(tables.join_words([
        tables.in_prose(reg.get(metric), metric)
        for metric in dict.fromkeys(results.loc[fam == "primary", "metric"])])) or "--"
    derived = results[fam == "derived"]
    values["has-derived"] = not derived.empty
    values["derived-metrics"] = texts.tex(tables.join_words([
        tables.in_prose(reg.get(metric), metric)
        for metric in dict.fromkeys(derived["metric"])])) or "--"
    design = results["design"] if "design" in results else pd.Series(dtype=str)
    values["design-paired"] = bool((design == "paired").any())
    values["design-independent"] = bool((design == "independent").any())
    values.update(degenerate_values(all_results, reg))
    heads = policy.headline_rows(campaign, results, runs, quality_report)
    values["hl-count"] = len(heads)
    values["hl-each"] = "".join(f"\\hlitem{{{number}}}" for number in range(1, len(heads) + 1))
    # one metric for every headline row (the usual case): the abstract names it once, not
    # in each row (the demo's four rows repeated it: 282 words against the 250 allowed)
    metrics = list(dict.fromkeys(head["metric"] for head in heads))
    values["hl-one-metric"] = len(heads) > 1 and len(metrics) == 1
    values["hl-metric"] = texts.tex(tables.in_prose(reg.get(metrics[0]), metrics[0])) \
        if len(metrics) == 1 else ""
    values["hl-bases"] = ""  # below, once each base is printed (numbers.tex keeps this place)
    for number, head in enumerate(heads, 1):
        row, info = head["row"], reg.get(head["metric"])
        values[f"hl/{number}/model"] = texts.tex(head["model"])
        values[f"hl/{number}/env"] = texts.tex(head["environment"])
        values[f"hl/{number}/metric"] = texts.tex(tables.in_prose(info, head["metric"]))
        est, low, high = tables.rel_texts(row)
        values[f"hl/{number}/rel"] = est
        values[f"hl/{number}/ci"] = f"{low}, {high}"
        values[f"hl/{number}/has-rel"] = row.rel_overhead == row.rel_overhead
        values[f"hl/{number}/has-ci"] = row.rel_ci_low == row.rel_ci_low
        values[f"hl/{number}/why"] = texts.tex(facts.why_not_estimable(row)) or "--"
        values[f"hl/{number}/mde"] = tables.num(100 * row.get("mde_rel", math.nan), 2)
        values[f"hl/{number}/test"] = texts.tex(row.get("primary_test", "--"))
        values[f"hl/{number}/p"] = tables.pval(row.get("p", math.nan))
        values[f"hl/{number}/p-bh"] = tables.pval(row.get("p_bh", math.nan))
        values[f"hl/{number}/p-tost"] = tables.pval(row.get("tost_p", math.nan))
        look = row.get("look", math.nan)
        values[f"hl/{number}/sequential"] = bool(look is not None and look == look)
        values[f"hl/{number}/look-words"] = (
            f"look {int(look)}, {int(row.get('look_blocks'))} blocks, level "
            f"{tables.num(row.get('look_alpha'), 3)}"
            if look == look and look is not None else "--")
        # a look at the maximum whose check failed answers with the check's word (not
        # stationary, ...), not the plain test's: the headline says which, not only
        # "inconclusive" (stopping.CHECK_ANSWER)
        answer = row.get("answer")
        failed_check = isinstance(answer, str) and answer in set(CHECK_ANSWER.values())
        values[f"hl/{number}/has-check-answer"] = failed_check
        values[f"hl/{number}/check-answer"] = texts.tex(answer) if failed_check else "--"
        for word in decisions.WORDS:
            values[f"hl/{number}/{word.replace(' ', '-')}"] = head["verdict"] == word
        # the ratio's base (Hoefler and Belli's rule 1): the reference's mean, and n
        ref = runs[(runs["model"].astype(str) == str(head["model"]))
                   & (runs["environment"] == row.get("reference", campaign.reference))
                   & (runs["metric"] == head["metric"])]["value"]
        unit = info.unit if info else ""
        values[f"hl/{number}/base"] = (f"{tables.num(ref.mean())}\\,{texts.tex(unit)}"
                                       if len(ref) and ref.mean() == ref.mean() else "--")
        blocks = row.get("look_blocks") if look == look and look is not None else row.get(
            "n_blocks")
        # an independent design (n_blocks 0: an import printed 'n = 0 runs'): the
        # reference's runs
        if row.get("design") == "independent" or blocks is None or blocks != blocks:
            blocks = row.get("n_ref")
        values[f"hl/{number}/n"] = int(blocks) if blocks == blocks and blocks is not None \
            else 0
        values[f"hl/{number}/ref"] = texts.tex(str(row.get("reference", campaign.reference)))
        values[f"hl/{number}/caveat"] = caveat_text(
            head["decision"].caveats, tables.in_prose(info, head["metric"]), res_pct)
        if head["verdict"] in ("overhead", "equivalent", "inconclusive", "advantage"):
            values[f"hl-{head['verdict']}"] += 1
    # each base once, as printed (model, metric, base, reference, blocks): h200-factorial's
    # 16 rows against one Docker base printed 'mm-4096, median compute time per product:
    # 1.92e-4 s in docker, n = 2 blocks' 16 times
    printed = {tuple(values[f"hl/{n}/{part}"] for part in ("model", "metric", "base", "ref", "n")):
               n for n in range(len(heads), 0, -1)}
    values["hl-bases"] = "".join(f"\\hlbase{{{n}}}" for n in sorted(printed.values()))
    for word in ("overhead", "equivalent", "advantage"):
        values[f"hl-{word}-caveat"] = group_caveat(
            [(head["decision"], tables.in_prose(reg.get(head["metric"]), head["metric"]))
             for head in heads if head["verdict"] == word], res_pct)
    # where runs measured several machines (GPUs): the headline with a fixed effect per machine
    # (a model with a block split across machines: its headline without that block is
    # printed beside the headline instead, split_values; the two estimates coincide)
    split = quality.split_blocks(runs)
    adjusted = [head for head in heads if head["row"].get("machines", 1) >= 2
                and str(head["model"]) not in split
                and head["row"].get("machine_adjusted_rel")
                == head["row"].get("machine_adjusted_rel")]
    # where every block ran on one machine the block effects absorb the machine's: the
    # adjusted estimate is the paired one, and printing it again (at 95 %, beside a
    # look-adjusted headline in a stopping campaign) would be a second number for one
    # quantity (the referee's h100-stopping-exact audit); only a different one is printed
    def adjusted_texts(row: Any) -> tuple[str, str, str]:
        return texts.interval_texts(row.machine_adjusted_rel, row.machine_adjusted_ci_low,
                                    row.machine_adjusted_ci_high)

    unchanged = [adjusted_texts(h["row"])[0] == texts.interval_texts(
        h["row"].rel_overhead, h["row"].rel_ci_low, h["row"].rel_ci_high)[0] for h in adjusted]
    same = [h for h, u in zip(adjusted, unchanged, strict=True) if u]
    moved = [h for h, u in zip(adjusted, unchanged, strict=True) if not u]
    values["machine-adjusted-same"] = tables.join_words([
        f"{texts.tex(h['model'])} in {texts.tex(h['environment'])}" for h in same]) or "--"
    values["machine-adjusted"] = tables.join_words([
        "{} in {}: ${}$\\,\\% [${}$, ${}$] (95\\,\\% interval)".format(
            texts.tex(h["model"]), texts.tex(h["environment"]),
            *adjusted_texts(h["row"])) for h in moved]) or "--"
    values["has-machine-adjusted-same"] = bool(same)
    values["has-machine-adjusted-differs"] = bool(moved)
    values["has-machine-adjusted"] = bool(adjusted)
    mdes = [100 * head["row"].get("mde_rel", math.nan) for head in heads
            if head["verdict"] == "inconclusive"]
    mdes = [mde for mde in mdes if mde == mde]
    values["hl-mde-min"] = tables.num(min(mdes), 2) if mdes else "--"
    values["hl-mde-max"] = tables.num(max(mdes), 2) if mdes else "--"
    # start-up: an environment whose launch is slower for every model (decisions.every_model:
    # Bonferroni-corrected, and never 'every model' with one)
    starts = {env: decisions.every_model(group[group.metric == "startup_s"], alpha)
              for env, group in results.groupby("environment", sort=False)}
    values["startup-present"] = any(row["present"] for row in starts.values())
    for claim, key in (("every model", "startup-robust"), ("the one model", "startup-one")):
        held = {env: row for env, row in starts.items() if row["claim"] == claim}
        values[key] = bool(held)
        if held and not (values["startup-robust"] and claim == "the one model"):
            values["startup-envs"] = texts.tex(tables.join_words(list(held)))
            values["startup-min"] = tables.num(min(row["min"] for row in held.values()), 2)
            values["startup-max"] = tables.num(max(row["max"] for row in held.values()), 2)
            values["startup-n"] = sum(row["n"] for row in held.values())
            values["startup-significant"] = sum(row["significant"] for row in held.values())
    values["startup-one"] = values["startup-one"] and not values["startup-robust"]
    values["startup-caveat"] = caveat_text(
        decisions.caveats_for(aa.get("startup_s"), "startup_s" in errors),
        tables.in_prose(reg.get("startup_s"), "startup_s"), res_pct)
    equivalent_metrics = [metric for metric, group in results.groupby("metric", sort=False)
                          if all(decisions.verdict(row, "none", alpha).word == "equivalent"
                                 for _, row in group.iterrows())]
    values["any-equivalent-metric"] = bool(equivalent_metrics)
    values["equivalent-metrics"] = texts.tex(tables.join_words([
        tables.in_prose(reg.get(metric), metric) for metric in equivalent_metrics])) or "--"
    values["equivalent-caveat"] = group_caveat(
        [(decisions.Verdict("equivalent", decisions.caveats_for(aa.get(metric), metric in errors)),
          tables.in_prose(reg.get(metric), metric)) for metric in equivalent_metrics], res_pct)
    for _, row in all_results.iterrows():
        key = f"{row.model}/{row.environment}/{row.metric}"
        est, low, high = tables.rel_texts(row)
        values[f"rel/{key}"] = (est if row.rel_overhead == row.rel_overhead
                                else tables.NOT_ESTIMABLE)
        values[f"rel-ci/{key}"] = (f"[{low}, {high}]" if low != "--"
                                   else f"[{tables.NOT_ESTIMABLE}]")
        values[f"p/{key}"] = tables.pval(row.p)
        values[f"p-bh/{key}"] = tables.pval(row.p_bh)
        values[f"test/{key}"] = row.primary_test
    return values


def degenerate_values(results: pd.DataFrame, reg: dict[str, MetricInfo]) -> dict[str, Any]:
    """What the methods say about incomplete blocks, comparisons without an estimate or
    an interval, and metrics compared on the raw scale (comparisons.py)."""
    dropped = results.get("blocks_dropped", pd.Series(dtype=float)).fillna(0)
    why = results.get("not_estimable", pd.Series(dtype=object)).fillna("").astype(str)
    no_ci = results.get("no_interval", pd.Series(dtype=object)).fillna("").astype(str)
    scale = results.get("scale", pd.Series(dtype=object))
    raw = list(dict.fromkeys(results.loc[scale == "difference", "metric"])) if len(
        scale) else []
    return {"blocks-dropped-any": bool((dropped > 0).any()),
            "blocks-dropped-max": int(dropped.max()) if len(dropped) else 0,
            "not-estimable": int((why != "").sum()),
            "no-interval": int(((no_ci != "") & (why == "")).sum()),
            "has-raw-scale": bool(raw),
            "raw-scale-metrics": texts.tex(tables.join_words([
                tables.in_prose(reg.get(metric), metric) for metric in raw])) or "--"}


AA_STATUSES = ("none", "passed", "failed", "inconclusive", "cannot fail", "untested")


def calibration_macros(cal: dict[str, Any], reg: dict[str, MetricInfo] | None = None,
                       replicas: dict[str, str] | None = None) -> dict[str, Any]:
    """The A/A verdict (quality.json's calibration) as conditions and values for the A/A
    section and the abstract of paper/main.tex: its status, one \\aaitem per comparison of
    the calibration family (estimate, interval, primary test, Bonferroni p)."""
    status = cal.get("status", "none")
    if status not in AA_STATUSES:
        raise AnalysisError(f"quality.json: calibration status '{status}' is not one of "
                            f"{', '.join(AA_STATUSES)}; rebuild the quality step.")
    has_resolution = isinstance(cal.get("resolution"), int | float)
    if status != "none" and not has_resolution:
        # the band the A/A was judged by is the analysis's, never a default the paper assumes
        raise AnalysisError("quality.json: calibration has no resolution (the A/A band it "
                            "was judged by); rebuild the quality step.")
    rows = [row for row in cal.get("comparisons", []) if row.get("family") == "calibration"]
    label = {metric: tables.in_prose(info, metric) for metric, info in (reg or {}).items()}
    replicas = replicas or {}
    if not replicas and rows:
        replicas = {str(row["environment"]): str(row["reference"]) for row in rows}
    values: dict[str, Any] = {
        "aa-status": status, "aa-count": len(rows),
        "aa-each": "".join(f"\\aaitem{{{number}}}" for number in range(1, len(rows) + 1)),
        "aa-replicas": texts.tex(tables.join_words(list(replicas))) or "--",
        "aa-originals": texts.tex(tables.join_words(list(dict.fromkeys(
            replicas.values())))) or "--",
        "aa-n": len(replicas),
        "aa-alpha": cal.get("alpha", "--"),
        "aa-resolution": f"{100 * cal['resolution']:g}" if has_resolution else "--"}
    for word in AA_STATUSES:
        values[f"aa-{word.replace(' ', '-')}"] = status == word
    # per metric, every family: the metrics whose verdicts carry the A/A's caveat
    per_metric = cal.get("metrics") or {}
    for word, statuses in (("failed", ("failed",)),
                           ("unresolved", ("inconclusive", "cannot fail")),
                           ("passed", ("passed",))):
        names = [label.get(metric, metric) for metric, metric_status in per_metric.items()
                 if metric_status in statuses]
        values[f"aa-{word}-metrics"] = texts.tex(tables.join_words(names)) or "--"
        values[f"aa-any-{word}-metric"] = bool(names)
    values["aa-metric-list"] = texts.tex("; ".join(
        f"{label.get(metric, metric)}: {metric_status}"
        for metric, metric_status in per_metric.items())) or "--"
    for number, row in enumerate(rows, 1):
        values[f"aa/{number}/model"] = texts.tex(row["model"])
        values[f"aa/{number}/metric"] = texts.tex(label.get(row["metric"], row["metric"]))
        values[f"aa/{number}/env"] = texts.tex(row["environment"])
        values[f"aa/{number}/ref"] = texts.tex(row["reference"])
        est, low, high = tables.rel_texts(row)
        values[f"aa/{number}/rel"] = est
        values[f"aa/{number}/ci"] = f"{low}, {high}"
        values[f"aa/{number}/test"] = texts.tex(row.get("primary_test", "--"))
        values[f"aa/{number}/p"] = tables.pval(row.get("p", math.nan))
        values[f"aa/{number}/p-bonf"] = tables.pval(row.get("p_bonferroni", math.nan))
        values[f"aa/{number}/p-tost"] = tables.pval(row.get("tost_resolution_p", math.nan))
        values[f"aa/{number}/status"] = texts.tex(row.get("aa_status", "--"))
        values[f"aa/{number}/significant"] = bool(row.get("p_bonferroni", math.nan)
                                                  < cal.get("alpha", 0))
    return values


FAMILY_WORDS = findings.FAMILY_WORDS
# How many findings beyond the headline, and how many data-quality findings, the abstract
# names (issue #39: an abstract of at most 250 words; h100-stopping's five thermal
# dependences took 130 words); the rest are counted there and listed in the findings section
ABSTRACT_FINDINGS = 1
ABSTRACT_QUALITY = 1
# ... and only where the headline rows are at most this many: more rows take its words (the
# demo's four, with the largest finding beyond them, made 263 words); it then counts them
# (the findings beyond the headline and the data-quality findings alike)
ABSTRACT_HEADLINES_WITH_FINDING = 3


# a container comparison's family -> the family of its A/A replica on the same blocks
AA_OF = {"primary": "calibration", "secondary": "calibration-secondary",
         findings.EXCLUDED_FAMILY: findings.EXCLUDED_AA_FAMILY}


def replica_moved(table: pd.DataFrame, r: Any) -> bool:
    """Whether the A/A replica, on the same blocks and metric, moved at least half as much
    as this container comparison (discussion.replica_as_much: same sign, at least half the
    size);
    h100-engine-balanced: Docker +9.7 % in process time without the compiling block, the
    identical copy of native +7.5 %."""
    aa = AA_OF.get(str(r.get("family")))
    if aa is None or "family" not in table:
        return False
    rows = table[(table["model"].astype(str) == str(r["model"]))
                 & table["family"].isin([r["family"], aa])]
    replicas = rows.loc[rows["family"] == aa, "environment"]
    return any(discussion.replica_as_much(rows[rows["environment"].isin([r["environment"], e])],
                               str(r["metric"]), str(r["environment"]), str(e))
               for e in replicas.unique())


def ranked_quality(rows: pd.DataFrame) -> pd.DataFrame:
    """Data-quality findings in the order the abstract names them (written in the findings
    section): errors first, then the largest effect over the observed range (either sign)."""
    if rows.empty:
        return rows
    error = rows.get("severity", pd.Series("", index=rows.index)).eq("error")
    size = rows.get("estimate_effect", pd.Series(float("nan"), index=rows.index))
    return rows.assign(_e=~error, _size=-pd.to_numeric(size, errors="coerce").abs().fillna(-1.0)
                       ).sort_values(["_e", "_size"], kind="stable").drop(columns=["_e", "_size"])


def ranked(rows: pd.DataFrame) -> pd.DataFrame:
    """Findings in the order the abstract names them, a ranking written in the findings
    section: the largest relative difference first (its size, either sign); those without
    an estimate last, in the findings table's order."""
    size = rows["rel_overhead"].abs() if "rel_overhead" in rows else pd.Series(
        float("nan"), index=rows.index)
    return rows.assign(_size=size.fillna(-1.0)).sort_values(
        "_size", ascending=False, kind="stable").drop(columns="_size")
VERDICT_WORDS = {"A/A failed": "failed", "A/A inconclusive": "inconclusive",
                 "A/A passed": "passed", "A/A cannot fail": "cannot fail",
                 "overhead": "overhead", "advantage": "better in the container",
                 "difference": "a difference", "equivalent": "equivalent",
                 "inconclusive": "inconclusive", "not estimable": "not estimable"}


def findings_values(campaign: Campaign, runs: pd.DataFrame, results: pd.DataFrame | None,
                    others: pd.DataFrame | None, reg: dict[str, MetricInfo],
                    said_metrics: set[str] | None = None) -> dict[str, Any]:
    """The findings rule's output for main.tex (statistics/findings.py decides; stats/
    findings.csv holds it): the comparisons that reach the abstract beyond the headline
    ones (f/...), the quality findings that do (q/...), and those the findings section
    lists (l/...), each printed with the findings table's own text; said_metrics: those the
    abstract states in a sentence of their own, left out of its list."""
    frames = [f for f in (results, others) if f is not None and not f.empty]
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    heads = set()
    if results is not None and not results.empty:
        heads = {(str(h["model"]), h["environment"], h["metric"]) for h in
                 policy.headline_rows(campaign, results, runs)}
    v: dict[str, Any] = {"f-count": 0, "f-short": "", "thermal-count": 0,
                         "f-abstract": "", "f-more": 0, "f-listed": "", "f-shown": 0,
                         "f-said": False, "f-budget": False,
                         "fp-count": 0, "fp-listed": "",
                         "interval-truncated": False, "excluded-family": 0,
                         "phases-family": 0, "phases-aa-family": 0,
                         "fa-count": 0, "fa-listed": "",
                         "q-count": 0, "q-abstract": "", "q-more": 0, "q-budget": False,
                         "q-listed": "",
                         "l-count": 0, "l-each": "", "ql-count": 0, "ql-each": "",
                         "appendix-count": 0, "appendix-tables": 0,
                         "appendix-elsewhere": 0, "appendix-elsewhere-families": 0,
                         "appendix-elsewhere-words": "--", "excluded-aa-family": 0,
                         "f-passed": False, "f-passed-words": "--",
                         "has-findings-rule": "reach" in table}
    if table.empty or "reach" not in table:
        return v
    def words(metric: str) -> str:
        return texts.tex(tables.in_prose(reg.get(metric), metric)) if metric else "--"

    def comparison(prefix: str, n: int, r: Any) -> None:
        est, low, high = tables.rel_texts(r)
        v[f"{prefix}/{n}/model"] = texts.tex(r["model"])
        v[f"{prefix}/{n}/env"] = texts.tex(r["environment"] if r["family"] not in
                                            policy.AA_FAMILIES + ("compile-excluded A/A",)
                                            else f"{r['environment']} vs {r['reference']}")
        v[f"{prefix}/{n}/metric"] = words(r["metric"])
        v[f"{prefix}/{n}/family"] = texts.tex(FAMILY_WORDS.get(r["family"], r["family"]))
        v[f"{prefix}/{n}/est"] = est
        v[f"{prefix}/{n}/ci"] = f"{low}, {high}" if low != "--" else tables.NOT_ESTIMABLE
        word = str(r.get("verdict", ""))
        caveats = [decisions.SHORT[c] for c in str(r.get("caveats") or "").split(";")
                   if c in decisions.SHORT]
        if replica_moved(table, r):
            caveats.append("the A/A replica moved at least half as much")
        v[f"{prefix}/{n}/verdict"] = texts.tex(VERDICT_WORDS.get(word, word) + "".join(
            f" ({c})" for c in caveats))
        v[f"{prefix}/{n}/p"] = tables.pval(r.get("p_bh", math.nan))
        v[f"{prefix}/{n}/why"] = texts.tex(r.get("why", ""))

    def quality(prefix: str, n: int, r: Any) -> None:
        v[f"{prefix}/{n}/thermal"] = r.get("check") == "thermal_dependence"
        v[f"{prefix}/{n}/model"] = texts.tex(r.get("model") or "--")
        v[f"{prefix}/{n}/metric"] = words(str(r.get("metric") or ""))
        v[f"{prefix}/{n}/covariate"] = texts.tex(r.get("covariate") or "--")
        v[f"{prefix}/{n}/est"] = f"${r['text_est']}$" if str(r.get("text_est", "--")) not in (
            "--", "nan") else "--"
        v[f"{prefix}/{n}/r"] = tables.num(r.get("partial_r", math.nan), 2)
        v[f"{prefix}/{n}/p"] = tables.pval(r.get("p_bh", math.nan))
        v[f"{prefix}/{n}/check"] = texts.tex(str(r.get("check", "")).replace("_", " "))
        v[f"{prefix}/{n}/message"] = texts.tex(tables.humanise(str(r.get("message", "")), reg))
        v[f"{prefix}/{n}/severity"] = texts.tex(r.get("severity", ""))

    kinds = table.get("kind", pd.Series("comparison", index=table.index)).fillna("comparison")
    aa_rows = table["family"].astype(str).str.contains("calibration|A/A")
    said = table["family"].isin(policy.AA_FAMILIES)  # \\aacaveats says these by metric
    groups = {("abstract", "comparison"): ("f", comparison),
              ("abstract", "aa"): ("fa", comparison),
              ("abstract", "quality"): ("q", quality),
              ("findings section", "comparison"): ("l", comparison),
              ("findings section", "quality"): ("ql", quality)}
    for (where, kind), (prefix, put) in groups.items():
        if kind == "aa":
            rows = table[(table["reach"] == where) & aa_rows & ~said]
        elif kind == "comparison" and where == "abstract":
            rows = table[(table["reach"] == where) & (kinds == kind) & ~aa_rows]
        else:
            rows = table[(table["reach"] == where) & (kinds == kind)]
        if kind == "comparison" and where == "abstract":
            rows = rows[[(str(r.model), r.environment, r.metric) not in heads
                         for r in rows.itertuples()]]
            # a primary verdict reaches the abstract by the rule whatever it is; the
            # abstract's sentence says 'significant and larger than the resolution' only
            # of those that are (h100-warmup-causes: p_BH 0.508 printed as significant)
            beyond = rows.get("why", pd.Series("", index=rows.index)).astype(str
                                                                           ).str.startswith(
                "significant after correction and larger")
            other_primary = rows[~beyond]
            rows = ranked(rows[beyond])
            for n, (_, r) in enumerate(other_primary.iterrows(), 1):
                comparison("fp", n, r)
            v["fp-count"] = len(other_primary)
            v["fp-listed"] = "".join(f"\\primarylisted{{{n}}}"
                                     for n in range(1, len(other_primary) + 1))
        if prefix == "q":
            rows = ranked_quality(rows)
        for n, (_, r) in enumerate(rows.iterrows(), 1):
            put(prefix, n, r)
        v[f"{prefix}-count"] = len(rows)
        item = {"l": "listeditem", "ql": "qlisteditem"}.get(prefix)  # the lists printed whole
        if item:
            v[f"{prefix}-each"] = "".join(f"\\{item}{{{n}}}" for n in range(1, len(rows) + 1))
        if prefix == "fa":
            v["fa-listed"] = "".join(f"\\aalisted{{{n}}}" for n in range(1, len(rows) + 1))
        if prefix == "q":  # the abstract names the first ABSTRACT_QUALITY, counts the rest
            # (none named beside more headline rows than ABSTRACT_HEADLINES_WITH_FINDING:
            # the demo's four rows, an unresolved A/A and a named finding made 264 words)
            shown_q = min(len(rows), ABSTRACT_QUALITY
                          if len(heads) <= ABSTRACT_HEADLINES_WITH_FINDING else 0)
            v["q-budget"] = len(rows) > 0 and shown_q == 0
            v["q-abstract"] = "".join(f"\\qfindingitem{{{n}}}" for n in range(1, shown_q + 1))
            v["q-more"] = len(rows) - shown_q
            v["q-listed"] = "".join(f"\\qabstractlisted{{{n}}}"
                                    for n in range(1, len(rows) + 1))
        if prefix == "f":
            v["f-short"] = "".join(f"\\findingshort{{{n}}}" for n in range(1, len(rows) + 1))
            # the abstract names the first ABSTRACT_FINDINGS by the ranking; the findings
            # section and the conclusion name every one
            # no finding at all: an empty frame without columns (the trtllm stand-in's)
            metrics = list(rows["metric"]) if "metric" in rows else []
            candidates = [n for n, metric in enumerate(metrics, 1)
                          if metric not in (said_metrics or set())]
            budget = ABSTRACT_FINDINGS if len(heads) <= ABSTRACT_HEADLINES_WITH_FINDING else 0
            shown = candidates[:budget]
            v["f-abstract"] = "; ".join(f"\\findingbody{{{k}}}" for k in shown)
            # the largest named is the list's largest only where no finding the abstract
            # already gave (start-up, in seconds) ranks above it (h100-engine-balanced:
            # 'the largest: process wall time +9.7 %' below start-up's +204 %)
            passed = [metrics[k - 1] for k in range(1, shown[0])] if shown else []
            v["f-passed"] = bool(passed)
            v["f-passed-words"] = tables.join_words(
                [words(m) for m in dict.fromkeys(passed)]) or "--"
            v["f-shown"] = len(shown)
            v["f-budget"] = bool(candidates) and not shown  # counted, none named
            v["f-said"] = bool(set(metrics) & (said_metrics or set()))
            v["f-more"] = len(rows) - len(shown)
            v["f-listed"] = "".join(f"\\findinglisted{{{n}}}" for n in range(1, len(rows) + 1))
    appendix = table[table["reach"] == "appendix"]
    v["appendix-count"] = len(appendix)
    # Tables tab:estimates and tab:tests list the families of comparisons.csv (tables.
    # by_family); the others (without the blocks that compiled) are in no table, and the
    # text says so (h100-stopping-exact: '62 remaining ... listed in Tables 9 and 10', 6
    # of them in neither)
    in_tables = appendix["family"].isin(tables.FAMILY_ORDER)
    v["appendix-tables"] = int(in_tables.sum())
    elsewhere = list(dict.fromkeys(appendix.loc[~in_tables, "family"].astype(str)))
    v["appendix-elsewhere"] = int((~in_tables).sum())
    v["appendix-elsewhere-families"] = len(elsewhere)
    v["appendix-elsewhere-words"] = texts.tex(tables.join_words(
        [FAMILY_WORDS.get(f, f) for f in elsewhere])) or "--"
    v["excluded-family"] = int((table["family"] == findings.EXCLUDED_FAMILY).sum())
    # their A/A control only where the campaign has one (h100-stopping-exact: 'and their
    # A/A control' in a campaign that ran no A/A replica)
    v["excluded-aa-family"] = int((table["family"] == findings.EXCLUDED_AA_FAMILY).sum())
    # "Where the time goes": its own family, corrected on its own like the others
    v["phases-family"] = int((table["family"] == findings.PHASES_FAMILY).sum())
    v["phases-aa-family"] = int((table["family"] == findings.PHASES_AA_FAMILY).sum())
    v["interval-truncated"] = bool(table.get("truncated", pd.Series(dtype=object))
                                   .fillna(False).astype(bool).any())
    v["thermal-count"] = int((table.get("check") == "thermal_dependence").sum())
    return v

