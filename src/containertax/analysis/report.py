"""The analysis stage's rules, from runs.csv to the paper's generated parts: quality,
statistics per model, family-wide correction, figures, tables, numbers. Each run_* function
is one rule's step (workflow/rules/analysis.smk, through the CLI): it reads the rule's
inputs, asks the modules that decide (policy.py: what is analysed and compared;
paper_values.py and design_values.py: the values numbers.tex gives main.tex;
quality_section.py; tables.py; facts.py) and writes the rule's outputs.

Everything here reads tidy tables (a campaign's runs.csv or an imported CSV), so a study
this workflow did not run goes through exactly the same steps.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from containertax.analysis import (
    discussion,
    facts,
    findings,
    importer,
    order,
    paper_values,
    policy,
    quality,
    quality_section,
    sequential,
    tables,
)
from containertax.analysis.policy import AnalysisError, label_names
from containertax.campaign import paths
from containertax.campaign.config import Campaign
from containertax.core import records

TEXT_COLUMNS = ("text_est", "text_low", "text_high", "text_ci", "verdict", "caveats",
                "check", "message", "why", "reach", "severity")
__all__ = ["AnalysisError", "label_names"]  # the CLI's names, kept where it looks for them


def read_table(path: Path | None) -> pd.DataFrame | None:
    """A generated CSV, or None where it is absent or empty; model ids stay strings."""
    if path is None or not path.exists() or path.stat().st_size <= 1:
        return None
    # the findings' printed texts stay text ('+0.10' is not the number 0.1)
    frame = pd.read_csv(path, dtype={column: str for column in TEXT_COLUMNS},
                        keep_default_na=True)
    if frame.empty:
        return None
    if "model" in frame:
        frame["model"] = frame["model"].astype(str)
    return frame


def read_import(campaign: Campaign) -> pd.DataFrame:
    """The imported table, checked against the campaign's metrics and reference."""
    return importer.read_checked(campaign.import_path, policy.metric_registry(campaign),
                                 campaign.reference)


def run_quality(campaign: Campaign, runs_csv: Path, out_dir: Path,
                out_order: Path | None = None) -> None:
    table = read_table(runs_csv)
    if table is None:
        raise AnalysisError(f"{runs_csv} holds no runs: there are no raw records under "
                            f"{campaign.paths.raw_dir} yet (run the campaign first).")
    table = with_order(campaign, table, out_order or campaign.paths.order)
    runs = quality.annotate(table)
    expected = None if campaign.is_import else campaign.repetitions
    if campaign.raw.get("stopping"):  # a model may stop at any look: the first is the least
        expected = sequential.rule_of(campaign).min_blocks
    findings = quality.check(runs, policy.metric_registry(campaign), expected_reps=expected,
                             model_sizes=policy.model_sizes(campaign, table),
                             alpha=campaign.analysis["alpha"])
    rules = campaign.analysis["exclude"]
    kept, dropped = quality.exclude(runs, rules)
    policy.refuse_duplicates(kept, runs_csv, campaign)
    if kept.empty:
        raise AnalysisError(f"every value of {runs_csv} was excluded (analysis.exclude = "
                            f"{rules}, plus non-finite values); nothing is left to analyse.")
    calibration, aa_findings = quality.calibration(policy.aa_comparisons(campaign, kept),
                                                   campaign.analysis["alpha"],
                                                   policy.resolution(campaign))
    findings = aa_findings + policy.session_findings(campaign) + findings  # design first
    out_dir.mkdir(parents=True, exist_ok=True)
    outputs = paths.quality_files(out_dir)
    records.atomic_write_text(outputs["annotated"], runs.to_csv(index=False))
    records.atomic_write_text(outputs["kept"], kept.to_csv(index=False))
    records.write_json(outputs["report"], {
        "findings": quality.as_dicts(findings),
        "exclude_rules": rules,
        "excluded": dropped[quality.KEY + ["value"] + [
            column for column in dropped if column.startswith("flag_")]].to_dict("records"),
        "n_rows": len(runs),
        "n_kept": len(kept),
        "calibration": calibration,
    })


def with_order(campaign: Campaign, table: pd.DataFrame, out: Path) -> pd.DataFrame:
    """The realised order within blocks (analysis/order.py), written to `out`, and each run
    with its place in its block (block_position) and predecessor, for the quality tests."""
    ledger = None if campaign.is_import else order.ledger_runs(campaign.paths)
    realised = order.realised(table, ledger)
    out.parent.mkdir(parents=True, exist_ok=True)
    records.atomic_write_text(out, realised.to_csv(index=False))
    if realised.empty:
        return table
    places = realised[["model", "environment", "repetition", "position", "predecessor"]]
    return table.merge(places.rename(columns={"position": "block_position"}),
                       on=["model", "environment", "repetition"], how="left")


def run_stats(campaign: Campaign, kept_csv: Path, requests_csv: Path | None,
              outputs: dict[str, tuple[Path, Path]]) -> None:
    """Per model: its comparisons (uncorrected) and descriptives, one file pair each; all
    models in one process, because importing the statistics stack dominates the time."""
    from containertax.analysis import comparisons as st

    all_runs = read_table(kept_csv)
    all_requests = read_table(requests_csv)
    settings = st.Settings.from_config(campaign.analysis, campaign.reference)
    plan = policy.comparison_plan(campaign, all_runs) if all_runs is not None else None
    if all_runs is not None:
        policy.refuse_duplicates(all_runs, kept_csv, campaign)
    scales = st.metric_scales(all_runs) if all_runs is not None else {}  # campaign-wide
    for model, (out, out_desc) in outputs.items():
        runs = all_runs[all_runs.model == model] if all_runs is not None else pd.DataFrame()
        requests = None if all_requests is None else all_requests[all_requests.model == model]
        metrics = policy.analysed_metrics(campaign, runs) if not runs.empty else []
        results = (st.analyse(runs, settings, metrics, plan, scales) if metrics
                   else pd.DataFrame())
        desc = st.descriptives(runs, requests) if not runs.empty else pd.DataFrame()
        records.atomic_write_text(out, results.drop(
            columns=["p_bonferroni", "p_bh", "family_size"], errors="ignore").to_csv(index=False))
        records.atomic_write_text(out_desc, desc.to_csv(index=False))


def read_all(csv_paths: list[Path]) -> pd.DataFrame:
    """The generated CSVs (one per model) as one table; empty where all are."""
    frames = [frame for frame in map(read_table, csv_paths) if frame is not None]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def run_correct(model_csvs: list[Path], desc_csvs: list[Path], out: Path,
                out_desc: Path) -> None:
    from containertax.analysis.correction import correct

    results = read_all(model_csvs)
    corrected = correct(results) if not results.empty else results
    records.atomic_write_text(out, corrected.to_csv(index=False))
    records.atomic_write_text(out_desc, read_all(desc_csvs).to_csv(index=False))


def run_findings(campaign: Campaign, kept_csv: Path, comparisons_csv: Path,
                 quality_json: Path, out: Path) -> None:
    """The findings table (analysis/findings.py): every later step prints from it."""
    runs = read_table(kept_csv)
    table = findings.build(campaign, runs if runs is not None else pd.DataFrame(),
                           read_table(comparisons_csv), records.read_json(quality_json))
    records.atomic_write_text(out, table.to_csv(index=False))


def read_findings(path: Path | None) -> tuple[pd.DataFrame | None, pd.DataFrame]:
    """A findings table (or a plain comparisons.csv) as (comparisons, other findings)."""
    return findings.split(read_table(path))


def _longest_telemetry(campaign: Campaign) -> tuple[pd.DataFrame | None, str]:
    """The reference environment's longest run: the most telling trace."""
    files = campaign.paths.telemetry_files(campaign.reference)
    if not files:
        return None, ""
    best = max(files, key=lambda path: path.stat().st_size)
    title = f"{best.parent.parent.name}, {campaign.reference}, {best.name.split('.')[0]}"
    return pd.read_csv(best), title


def run_figures(campaign: Campaign, kept_csv: Path, comparisons_csv: Path,
                requests_csv: Path | None, out_dir: Path, out_tex: Path) -> None:
    """The figures that say something, and figures.tex: a has-fig-<name> condition for
    each, \\placefigures with the floats (captions: \\papercaption, written in main.tex)."""
    from containertax.analysis import figures

    runs = read_table(kept_csv)
    results, others = read_findings(comparisons_csv)
    reg = policy.metric_registry(campaign)
    envs = policy.environment_order(campaign, runs)
    out_dir.mkdir(parents=True, exist_ok=True)
    made: list[str] = []
    values: dict[str, str] = {}

    def add(name: str, drawn: bool) -> None:
        if drawn:
            made.append(name)

    paired_design = not campaign.is_import and "block" in runs and runs["block"].notna().any()
    values["telemetry-min-samples"] = str(figures.TELEMETRY_MIN_SAMPLES)
    heads = policy.headline_rows(campaign, results, runs) if results is not None else []
    panels = list(dict.fromkeys((head["model"], head["metric"]) for head in heads))
    panels_info = [(model, metric, reg.get(metric)) for model, metric in panels]
    if heads:
        rows = pd.DataFrame([head["row"] for head in heads])
        labels = [f"{head['model']}, {head['environment']}: "
                  f"{tables.in_prose(reg.get(head['metric']), head['metric'])}"
                  for head in heads]
        if paired_design:  # the per-block differences, never unpaired clouds
            add("paired", figures.paired_differences(
                discussion.paired_rows(campaign, runs, results, panels, True),
                "Difference per block, container against reference (%)",
                paths.figure_file(out_dir, "paired")))
        else:
            add("forest", figures.forest(rows, labels, campaign.analysis["equivalence_margin"],
                                         paths.figure_file(out_dir, "forest")))
            add("dist-headline", figures.distributions(
                runs, panels_info, envs, paths.figure_file(out_dir, "dist-headline")))
    for metric in ("startup_s", "process_wall_s"):
        if metric in set(runs["metric"]) and paired_design:
            models = list(dict.fromkeys(runs.loc[runs.metric == metric, "model"]))
            add(f"paired-{metric.replace('_', '-')}", figures.paired_differences(
                discussion.paired_rows(campaign, runs, results,
                                       [(m, metric) for m in models], False),
                f"Difference per block, container against reference ({reg[metric].unit})",
                paths.figure_file(out_dir, f"paired-{metric.replace('_', '-')}")))
        elif metric in set(runs["metric"]):
            models = list(dict.fromkeys(runs.loc[runs.metric == metric, "model"]))
            add(f"dist-{metric.replace('_', '-')}", figures.distributions(
                runs, [(model, metric, reg.get(metric)) for model in models], envs,
                paths.figure_file(out_dir, f"dist-{metric.replace('_', '-')}")))
    add("latency-cdf", figures.latency_cdf(read_table(requests_csv), envs,
                                           paths.figure_file(out_dir, "latency-cdf")))
    trace, title = (None, "") if campaign.is_import else _longest_telemetry(campaign)
    add("telemetry", figures.telemetry_trace(trace, paths.figure_file(out_dir, "telemetry")))
    values["telemetry-run"] = tables.tex(title)
    if panels_info and not campaign.is_import:  # an imported study's order is unknown
        add("drift", figures.drift(runs, panels_info, envs, paths.figure_file(out_dir, "drift")))
    add("gate-waits", figures.gate_waits(runs, envs, paths.figure_file(out_dir, "gate-waits")))
    from containertax.analysis import phases

    add("phases", phases.figure(phase_rows(campaign, runs, results, others),
                                paths.figure_file(out_dir, "phases")))
    # Figures are drawn at the size they are printed (figures.WIDTH): never scaled, so the
    # font sizes set there are the sizes on the page. Files carry the figure's number in the
    # paper (LaTeX numbers them in this order), for the captions of the HTML report.
    flags = [f"\\ctxdef{{{key}}}{{{value}}}" for key, value in values.items()]
    floats = []
    for number, name in enumerate(made, 1):
        numbered = paths.figure_file(out_dir, name, number)
        paths.figure_file(out_dir, name).replace(numbered)
        flags.append(f"\\ctxdef{{has-fig-{name}}}{{1}}")
        floats.append(f"\\begin{{figure}}[tbp]\n\\centering\n"
                      f"\\includegraphics{{{paths.figure_in_paper(numbered)}}}\n"
                      f"\\caption{{\\papercaption{{fig:{name}}}}}\\label{{fig:{name}}}\n"
                      "\\end{figure}")
    parts = [*flags, "\\newcommand{\\placefigures}{%", *floats, "}"]
    records.atomic_write_text(out_tex, "\n".join(parts) + "\n")


def memory_chain_table(campaign: Campaign) -> str:
    """Free memory at KV-cache sizing -> KV cache, per model and environment (empty where no
    record carries the chain: imports, workloads without a KV cache, records before it)."""
    from containertax.analysis import kvmodel
    from containertax.analysis.aggregate import read_records
    from containertax.execution import memorychain

    if campaign.is_import:
        return ""
    found = [rec for _, rec in read_records(campaign.root)]
    return memorychain.chain_table(found) + kvmodel.table(kv_covariate(campaign, found))


def kv_covariate(campaign: Campaign, found: list[Any] | None = None) -> pd.DataFrame:
    """The KV cache against the reference, plain and at equal free memory at sizing
    (analysis/kvmodel.py), from the records that carry a memory chain."""
    from containertax.analysis import kvmodel
    from containertax.analysis.aggregate import read_records

    if campaign.is_import:
        return pd.DataFrame(columns=kvmodel.COLUMNS)
    if found is None:
        found = [rec for _, rec in read_records(campaign.root)]
    return kvmodel.analyse(kvmodel.from_records(found), campaign.reference,
                           campaign.analysis["alpha"])


def phase_rows(campaign: Campaign, runs: pd.DataFrame | None, results: pd.DataFrame | None,
               others: pd.DataFrame | None = None) -> list[dict[str, Any]]:
    """The phases' comparisons with their differences in seconds (analysis/phases.py). The
    phases families are not among findings.split's comparisons (they are in `others`, with
    the compile-excluded rows); the wall time, which they decompose, is."""
    from containertax.analysis import phases

    if runs is None or runs.empty:
        return []
    both = pd.concat([t for t in (results, others) if t is not None and not t.empty],
                     ignore_index=True) if any(
        t is not None and not t.empty for t in (results, others)) else None
    return phases.rows(runs, both, campaign.analysis["alpha"],
                       policy.metric_registry(campaign))


def phase_table(campaign: Campaign, runs: pd.DataFrame | None, results: pd.DataFrame | None,
                others: pd.DataFrame | None = None) -> str:
    from containertax.analysis import phases

    return phases.table(phase_rows(campaign, runs, results, others))


def run_tables(campaign: Campaign, kept_csv: Path, comparisons_csv: Path, desc_csv: Path,
               out_dir: Path, order_csv: Path | None = None,
               quality_json: Path | None = None) -> None:
    reg = policy.metric_registry(campaign)
    runs = read_table(kept_csv)
    metrics = policy.analysed_metrics(campaign, runs)
    desc = read_table(desc_csv)
    results, others = read_findings(comparisons_csv)
    quality_report = (records.read_json(quality_json)
                      if quality_json and quality_json.exists() else None)
    out_dir.mkdir(parents=True, exist_ok=True)
    heads = [dict(model=head["model"], metric=head["metric"], environment=head["environment"],
                  rel=tables.rel_texts(head["row"])[0],
                  ci=", ".join(tables.rel_texts(head["row"])[1:]),
                  p_bh=tables.pval(head["row"].get("look_p")
                                   if head["row"].get("look") == head["row"].get("look")
                                   and head["row"].get("look") is not None
                                   else head["row"].get("p_bh")),
                  mde=tables.num(100 * head["row"].get("mde_rel", math.nan), 2),
                  verdict=head["decision"].short,
                  sequential=head["row"].get("look") == head["row"].get("look")
                  and head["row"].get("look") is not None)
             for head in policy.headline_rows(campaign, results, runs, quality_report)]
    p_header = (r"$p$" if heads and all(h["sequential"] for h in heads)
                else r"$p_\mathrm{BH}$")
    found = facts.record_facts(campaign)
    out = {
        "headline": tables.headline_table(discussion.design_verdicts(campaign, heads), reg,
                                          p_header),
        "estimates": tables.estimates_table(results, reg) if results is not None else "",
        "tests": tables.tests_table(results, reg) if results is not None else "",
        "descriptives": (tables.descriptives_table(desc, reg, policy.without_phases(metrics))
                         if desc is not None else ""),
        "system": tables.system_table(facts.system_facts(campaign)),
        "memory": tables.memory_table(runs, reg),
        "environments": tables.environments_table(found["environments"]) if found["environments"]
        else "",
        "workloads": tables.workloads_table(found["workloads"]) if found["workloads"] else "",
        "design": order.design_table(policy.order_balance(campaign, order_csv)),
        "memory-chain": memory_chain_table(campaign),
        "phases": phase_table(campaign, runs, results, others),
    }
    for name, text in out.items():
        records.atomic_write_text(paths.table_file(out_dir, name), text)


def run_numbers(campaign: Campaign, kept_csv: Path, comparisons_csv: Path,
                quality_json: Path, out_numbers: Path, out_quality: Path,
                order_csv: Path | None = None) -> None:
    """Every value and condition the text of paper/main.tex quotes (\\ctx, \\ifctx), and
    the data of its quality section."""
    runs = read_table(kept_csv)
    quality_report = records.read_json(quality_json)
    results, others = read_findings(comparisons_csv)
    values = paper_values.numbers_values(campaign, runs, results, quality_report, order_csv,
                                         others)
    from containertax.analysis import phases

    values.update(phases.values(campaign, phase_rows(campaign, runs, results, others), runs,
                                discussion.read_prior_work()))
    from containertax.analysis import kvmodel

    values.update(kvmodel.values(kv_covariate(campaign)))
    records.atomic_write_text(out_numbers, tables.macros(values))
    records.atomic_write_text(out_quality, quality_section.quality_tex(
        quality_report, policy.metric_registry(campaign)))
