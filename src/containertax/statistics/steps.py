"""The statistics rules' steps, from runs.csv to the findings table: the realised order,
quality, statistics per model, family-wide correction and the findings (each run_* function
is one rule's step of workflow/rules/analysis.smk, through the CLI). stats/findings.csv,
the last file written here, is what publishing prints from (publishing/report.py).

Everything here reads tidy tables (a campaign's runs.csv or an imported CSV), so a study
this workflow did not run goes through exactly the same steps.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from containertax.campaign import paths
from containertax.campaign.config import Campaign
from containertax.core import records
from containertax.statistics import facts, findings, importer, order, policy, quality, sequential
from containertax.statistics.policy import AnalysisError

TEXT_COLUMNS = ("text_est", "text_low", "text_high", "text_ci", "verdict", "caveats",
                "check", "message", "why", "reach", "severity")


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
                                 campaign.reference,
                                 campaign.analysis.get("import_repeats", "error"),
                                 campaign.analysis.get("import_duplicates", "error"))


def run_quality(campaign: Campaign, runs_csv: Path, out_dir: Path,
                out_order: Path | None = None) -> None:
    edited = (records.written_mismatch(campaign.root, runs_csv, runs_csv.read_bytes())
              if runs_csv.is_file() else None)
    if edited is not None:  # the aggregate or import step put its sha256 in hashes.jsonl
        raise AnalysisError(
            f"{runs_csv} is not what the {'import' if campaign.is_import else 'aggregate'} "
            f"step wrote (sha256 {edited[0][:12]}, hashes.jsonl has {edited[1][:12]}): edited "
            "by hand, so the analysis would not be of what was measured. Remove it (rm "
            f"{runs_csv}) and run Snakemake again: it is rebuilt from the "
            f"{'imported table' if campaign.is_import else 'raw records'} (a value to "
            "change is changed there, or excluded by analysis.exclude).")
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
                             alpha=campaign.analysis["alpha"],
                             roofline=campaign.analysis.get("roofline"))
    rules = campaign.analysis["exclude"]
    kept, dropped = quality.exclude(runs, rules)
    policy.refuse_duplicates(kept, runs_csv, campaign)
    if kept.empty:
        raise AnalysisError(f"every value of {runs_csv} was excluded (analysis.exclude = "
                            f"{rules}, plus non-finite values); nothing is left to analyse.")
    calibration, aa_findings = quality.calibration(policy.aa_comparisons(campaign, kept),
                                                   campaign.analysis["alpha"],
                                                   policy.resolution(campaign))
    findings = (aa_findings + policy.session_findings(campaign)  # design first
                + policy.listed_unanalysed_findings(campaign, table) + findings)
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
    """The realised order within blocks (statistics/order.py), written to `out`, and each run
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
    from containertax.statistics import comparisons as st

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
    from containertax.statistics.correction import correct

    results = read_all(model_csvs)
    corrected = correct(results) if not results.empty else results
    records.atomic_write_text(out, corrected.to_csv(index=False))
    records.atomic_write_text(out_desc, read_all(desc_csvs).to_csv(index=False))


def run_findings(campaign: Campaign, kept_csv: Path, comparisons_csv: Path,
                 quality_json: Path, out: Path, out_facts: Path | None = None) -> None:
    """The findings table (statistics/findings.py) and the campaign's facts (statistics/
    facts.py): every later step prints from them."""
    runs = read_table(kept_csv)
    runs = runs if runs is not None else pd.DataFrame()
    table = findings.build(campaign, runs, read_table(comparisons_csv),
                           records.read_json(quality_json))
    records.atomic_write_text(out, table.to_csv(index=False))
    facts.write(campaign, runs, out_facts or campaign.paths.facts)
