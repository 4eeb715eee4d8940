"""The publishing rules' steps, from the findings table (stats/findings.csv, written by
statistics/steps.py) and the statistics' outputs to the paper's generated parts: figures,
tables, numbers. Each run_* function is one rule's step (workflow/rules/analysis.smk,
through the CLI): it reads the rule's inputs, asks the modules that decide
(statistics/policy.py: what is analysed and compared; paper_values.py and design_values.py:
the values numbers.tex gives main.tex; quality_section.py; tables.py; facts.py) and writes
the rule's outputs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from containertax.campaign import paths
from containertax.campaign.config import Campaign
from containertax.core import records
from containertax.publishing import discussion, facts, paper_values, quality_section, tables
from containertax.statistics import findings, order, policy, texts
from containertax.statistics.policy import AnalysisError, label_names
from containertax.statistics.steps import read_table

__all__ = ["AnalysisError", "label_names"]  # the CLI's names, kept where it looks for them


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
    from containertax.publishing import figures

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
    values["telemetry-run"] = texts.tex(title)
    if panels_info and not campaign.is_import:  # an imported study's order is unknown
        add("drift", figures.drift(runs, panels_info, envs, paths.figure_file(out_dir, "drift")))
    add("gate-waits", figures.gate_waits(runs, envs, paths.figure_file(out_dir, "gate-waits")))
    from containertax.publishing import phases_paper

    add("phases", phases_paper.figure(phase_rows(campaign, runs, results, others),
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
    from containertax.execution import memorychain
    from containertax.publishing import kvmodel_paper
    from containertax.statistics.aggregate import read_records

    if campaign.is_import:
        return ""
    found = [rec for _, rec in read_records(campaign.root)]
    return memorychain.chain_table(found) + kvmodel_paper.table(kv_covariate(campaign, found))


def kv_covariate(campaign: Campaign, found: list[Any] | None = None) -> pd.DataFrame:
    """The KV cache against the reference, plain and at equal free memory at sizing
    (statistics/kvmodel.py), from the records that carry a memory chain."""
    from containertax.statistics import kvmodel
    from containertax.statistics.aggregate import read_records

    if campaign.is_import:
        return pd.DataFrame(columns=kvmodel.COLUMNS)
    if found is None:
        found = [rec for _, rec in read_records(campaign.root)]
    return kvmodel.analyse(kvmodel.from_records(found), campaign.reference,
                           campaign.analysis["alpha"])


def phase_rows(campaign: Campaign, runs: pd.DataFrame | None, results: pd.DataFrame | None,
               others: pd.DataFrame | None = None) -> list[dict[str, Any]]:
    """The phases' comparisons with their differences in seconds (statistics/phases.py). The
    phases families are not among findings.split's comparisons (they are in `others`, with
    the compile-excluded rows); the wall time, which they decompose, is."""
    from containertax.statistics import phases

    if runs is None or runs.empty:
        return []
    frames = [t for t in (results, others) if t is not None and not t.empty]
    both = pd.concat(frames, ignore_index=True) if frames else None
    return phases.rows(runs, both, campaign.analysis["alpha"],
                       policy.metric_registry(campaign))


def phase_table(campaign: Campaign, runs: pd.DataFrame | None, results: pd.DataFrame | None,
                others: pd.DataFrame | None = None) -> str:
    from containertax.publishing import phases_paper

    return phases_paper.table(phase_rows(campaign, runs, results, others))


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
    from containertax.publishing import phases_paper

    values.update(phases_paper.values(campaign, phase_rows(campaign, runs, results, others), runs,
                                discussion.read_prior_work()))
    from containertax.publishing import kvmodel_paper

    values.update(kvmodel_paper.values(kv_covariate(campaign)))
    records.atomic_write_text(out_numbers, tables.macros(values))
    records.atomic_write_text(out_quality, quality_section.quality_tex(
        quality_report, policy.metric_registry(campaign)))
