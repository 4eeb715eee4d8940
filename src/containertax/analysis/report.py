"""The analysis stage, from runs.csv to the paper's generated parts: quality, statistics
per model, family-wide correction, figures, tables, numbers.

Everything here reads tidy tables (a campaign's runs.csv or an imported CSV), so a study
this workflow did not run goes through exactly the same steps.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from containertax.analysis import facts, hostmarkers, importer, order, quality, sequential, tables
from containertax.analysis.metrics import MetricInfo, registry
from containertax.campaign.config import Campaign
from containertax.execution import records


class AnalysisError(RuntimeError):
    """Nothing to analyse; the message says why."""


def metric_registry(campaign: Campaign) -> dict[str, MetricInfo]:
    return registry(campaign.analysis.get("define_metrics"))


def label_names(campaign: Campaign) -> list[str]:
    """Column and metric names that must never appear raw as a figure's label."""
    from containertax.analysis.aggregate import COLUMNS
    from containertax.analysis.metrics import TELEMETRY

    return sorted(set(metric_registry(campaign)) | set(TELEMETRY) | set(COLUMNS))


def model_sizes(campaign: Campaign, runs: pd.DataFrame | None = None) -> dict[str, float]:
    """Model sizes for the plausibility check: a matmul model's size, an import's
    model_size column, then analysis.model_sizes (which wins)."""
    sizes = {m.id: float(m.params["size"]) for m in campaign.models
             if isinstance(m.params.get("size"), int | float)}
    if runs is not None and "model_size" in runs:
        known = runs.dropna(subset=["model_size"]).drop_duplicates("model")
        sizes.update({str(r.model): float(r.model_size) for r in known.itertuples()})
    sizes.update({k: float(v) for k, v in campaign.analysis.get("model_sizes", {}).items()})
    return sizes


def read_table(path: Path | None) -> pd.DataFrame | None:
    """A generated CSV, or None where it is absent or empty; model ids stay strings."""
    if path is None or not path.exists() or path.stat().st_size <= 1:
        return None
    frame = pd.read_csv(path)
    if frame.empty:
        return None
    if "model" in frame:
        frame["model"] = frame["model"].astype(str)
    return frame


def analysed_metrics(campaign: Campaign, runs: pd.DataFrame) -> list[str]:
    reg = metric_registry(campaign)
    wanted = campaign.analysis.get("metrics")
    present = set(runs["metric"])
    return [m for m in (wanted or list(reg)) if m in reg and m in present
            and reg[m].comparable]


def primary_metrics(campaign: Campaign, runs: pd.DataFrame) -> dict[str, list[str]]:
    """Per model, the metrics of the primary family (fixed by the config, not the data:
    analysis.primary_metrics, else the workload kind's default, else the headline)."""
    from containertax.analysis.metrics import PRIMARY_BY_KIND

    analysed = analysed_metrics(campaign, runs)
    wanted = campaign.analysis.get("primary_metrics")
    out: dict[str, list[str]] = {}
    for model in dict.fromkeys(runs["model"].astype(str)):
        if wanted:
            out[model] = [m for m in wanted if m in analysed]
            continue
        if campaign.is_import or model not in {m.id for m in campaign.models}:
            head = headline(campaign, runs)
            out[model] = [head] if head else []
            continue
        have = set(analysed) & set(runs.loc[runs.model.astype(str) == model, "metric"])
        picks = []
        for choices in PRIMARY_BY_KIND.get(campaign.workload_kind(model), []):
            first = next((m for m in choices if m in have), None)
            if first:
                picks.append(first)
        out[model] = picks
    return out


def comparison_plan(campaign: Campaign, runs: pd.DataFrame):  # -> comparisons.Plan
    from containertax.analysis.comparisons import Plan

    reg = metric_registry(campaign)
    return Plan(campaign.reference, campaign.replicas, primary_metrics(campaign, runs),
                {m: i.restates for m, i in reg.items() if i.restates})


def read_import(campaign: Campaign) -> pd.DataFrame:
    """The imported table, checked against the campaign's metrics and reference."""
    return importer.read_checked(campaign.import_path, metric_registry(campaign),
                                 campaign.reference)


def environment_order(campaign: Campaign, runs: pd.DataFrame) -> list[str]:
    envs = [e.id for e in campaign.environments] or list(dict.fromkeys(runs["environment"]))
    return [campaign.reference] + [e for e in envs if e != campaign.reference]


# --- rule: quality -------------------------------------------------------------------


def run_quality(campaign: Campaign, runs_csv: Path, out_dir: Path,
                out_order: Path | None = None) -> None:
    from containertax.analysis import quality  # scipy, statsmodels: only this step and numbers

    table = read_table(runs_csv)
    if table is None:
        raise AnalysisError(f"{runs_csv} holds no runs: there are no raw records under "
                            f"{campaign.paths.raw_dir} yet (run the campaign first).")
    table = with_order(campaign, table, out_order or campaign.paths.order)
    runs = quality.annotate(table)
    expected = None if campaign.is_import else campaign.repetitions
    if campaign.raw.get("stopping"):  # a model may stop at any look: the first is the least
        expected = sequential.rule_of(campaign).min_blocks
    findings = quality.check(runs, metric_registry(campaign), expected_reps=expected,
                             model_sizes=model_sizes(campaign, table),
                             alpha=campaign.analysis["alpha"])
    rules = campaign.analysis["exclude"]
    kept, dropped = quality.exclude(runs, rules)
    refuse_duplicates(kept, runs_csv, campaign)
    if kept.empty:
        raise AnalysisError(f"every value of {runs_csv} was excluded (analysis.exclude = "
                            f"{rules}, plus non-finite values); nothing is left to analyse.")
    calibration, aa_findings = quality.calibration(a_a(campaign, kept),
                                                   campaign.analysis["alpha"],
                                                   resolution(campaign))
    findings = aa_findings + session_findings(campaign) + findings  # design first
    out_dir.mkdir(parents=True, exist_ok=True)
    records.atomic_write_text(out_dir / "annotated.csv", runs.to_csv(index=False))
    records.atomic_write_text(out_dir / "kept.csv", kept.to_csv(index=False))
    records.write_json(out_dir / "quality.json", {
        "findings": quality.as_dicts(findings),
        "exclude_rules": rules,
        "excluded": dropped[quality.KEY + ["value"] + [c for c in dropped if c.startswith(
            "flag_")]].to_dict("records"),
        "n_rows": len(runs),
        "n_kept": len(kept),
        "calibration": calibration,
    })


def session_findings(campaign: Campaign) -> list[Any]:
    """An imported study whose runs were not interleaved (analysis.import_study.order:
    sequential, or unknown) compares sessions, not environments: an error-severity finding
    on every metric, so that the decision table qualifies every verdict of it (a test of
    such data cannot tell the environment from whatever else changed between sessions)."""
    from containertax.analysis import quality

    if not campaign.is_import:
        return []
    order = (campaign.analysis.get("import_study") or {}).get("order", "unknown")
    if order == "interleaved":
        return []
    why = ("each environment ran in one session" if order == "sequential" else
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
    cols = [c for c in ("model", "environment", "repetition", "block", "metric", "value")
            if c in dup]
    more = f"\n(and {len(dup) - 10} more)" if len(dup) > 10 else ""
    raise AnalysisError(
        f"{path}{source}: {len(dup)} rows repeat a (model, environment, repetition/block, "
        f"metric):\n{dup[cols].head(10).to_string(index=False)}{more}\nFix the source "
        "(remove the extra records or rows), or set analysis.exclude: [duplicate] to drop "
        "every copy (their blocks then count as incomplete).")


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


def resolution(campaign: Campaign) -> float:
    """The resolution the campaign needs (analysis.resolution_pct), as a fraction."""
    return float(campaign.analysis.get("resolution_pct", 2)) / 100


def a_a(campaign: Campaign, kept: pd.DataFrame) -> pd.DataFrame:
    """The A/A comparisons (replicas against what they copy), corrected within their
    families: the same code and plan as the statistics rule, with the equivalence test
    at the campaign's resolution (column tost_resolution_p) instead of its margin."""
    if not campaign.replicas:
        return pd.DataFrame()
    from dataclasses import replace

    from containertax.analysis import comparisons as st

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


# --- rule: stats (one model) and correct (the family) --------------------------------


def run_stats(campaign: Campaign, kept_csv: Path, requests_csv: Path | None,
              outputs: dict[str, tuple[Path, Path]]) -> None:
    """Per model: its comparisons (uncorrected) and descriptives, one file pair each; all
    models in one process, because importing the statistics stack dominates the time."""
    from containertax.analysis import comparisons as st

    all_runs = read_table(kept_csv)
    all_requests = read_table(requests_csv)
    settings = st.Settings.from_config(campaign.analysis, campaign.reference)
    plan = comparison_plan(campaign, all_runs) if all_runs is not None else None
    if all_runs is not None:
        refuse_duplicates(all_runs, kept_csv, campaign)
    scales = st.metric_scales(all_runs) if all_runs is not None else {}  # campaign-wide
    for model, (out, out_desc) in outputs.items():
        runs = all_runs[all_runs.model == model] if all_runs is not None else pd.DataFrame()
        requests = None if all_requests is None else all_requests[all_requests.model == model]
        metrics = analysed_metrics(campaign, runs) if not runs.empty else []
        results = (st.analyse(runs, settings, metrics, plan, scales) if metrics
                   else pd.DataFrame())
        desc = st.descriptives(runs, requests) if not runs.empty else pd.DataFrame()
        records.atomic_write_text(out, results.drop(
            columns=["p_bonferroni", "p_bh", "family_size"], errors="ignore").to_csv(index=False))
        records.atomic_write_text(out_desc, desc.to_csv(index=False))


def _read_all(paths: list[Path]) -> pd.DataFrame:
    frames = [f for f in map(read_table, paths) if f is not None]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def run_correct(model_csvs: list[Path], desc_csvs: list[Path], out: Path,
                out_desc: Path) -> None:
    from containertax.analysis.correction import correct

    results = _read_all(model_csvs)
    corrected = correct(results) if not results.empty else results
    records.atomic_write_text(out, corrected.to_csv(index=False))
    records.atomic_write_text(out_desc, _read_all(desc_csvs).to_csv(index=False))


# --- rules: figures, tables, numbers -------------------------------------------------


def headline(campaign: Campaign, runs: pd.DataFrame) -> str | None:
    metrics = analysed_metrics(campaign, runs)
    wanted = campaign.analysis.get("headline_metric")
    return wanted if wanted in metrics else (metrics[0] if metrics else None)


def _longest_telemetry(campaign: Campaign) -> tuple[pd.DataFrame | None, str]:
    """The reference environment's longest run: the most telling trace."""
    files = campaign.paths.telemetry_files(campaign.reference)
    if not files:
        return None, ""
    best = max(files, key=lambda p: p.stat().st_size)
    title = f"{best.parent.parent.name}, {campaign.reference}, {best.name.split('.')[0]}"
    return pd.read_csv(best), title


def run_figures(campaign: Campaign, kept_csv: Path, comparisons_csv: Path,
                requests_csv: Path | None, out_dir: Path, out_tex: Path) -> None:
    """The figures that say something, and figures.tex: a has-fig-<name> condition for
    each, \\placefigures with the floats (captions: \\papercaption, written in main.tex)."""
    from containertax.analysis import figures

    runs = read_table(kept_csv)
    results = read_table(comparisons_csv)
    reg = metric_registry(campaign)
    envs = environment_order(campaign, runs)
    out_dir.mkdir(parents=True, exist_ok=True)
    made: list[str] = []
    values: dict[str, str] = {}

    def add(name: str, drawn: bool) -> None:
        if drawn:
            made.append(name)

    heads = _headline_rows(campaign, results, runs) if results is not None else []
    panels = list(dict.fromkeys((h["model"], h["metric"]) for h in heads))
    panels_info = [(m, metric, reg.get(metric)) for m, metric in panels]
    if heads:
        rows = pd.DataFrame([h["row"] for h in heads])
        labels = [f"{h['model']}, {h['environment']}: "
                  f"{tables.in_prose(reg.get(h['metric']), h['metric'])}"
                  for h in heads]
        add("forest", figures.forest(rows, labels, campaign.analysis["equivalence_margin"],
                                     out_dir / "forest.pdf"))
        add("dist-headline", figures.distributions(runs, panels_info, envs,
                                                   out_dir / "dist-headline.pdf"))
    for metric in ("startup_s", "process_wall_s"):
        if metric in set(runs["metric"]):
            models = list(dict.fromkeys(runs.loc[runs.metric == metric, "model"]))
            add(f"dist-{metric.replace('_', '-')}", figures.distributions(
                runs, [(m, metric, reg.get(metric)) for m in models], envs,
                out_dir / f"dist-{metric.replace('_', '-')}.pdf"))
    add("latency-cdf", figures.latency_cdf(read_table(requests_csv), envs,
                                           out_dir / "latency-cdf.pdf"))
    trace, title = (None, "") if campaign.is_import else _longest_telemetry(campaign)
    add("telemetry", figures.telemetry_trace(trace, out_dir / "telemetry.pdf"))
    values["telemetry-run"] = tables.tex(title)
    if panels_info and not campaign.is_import:  # an imported study's order is unknown
        add("drift", figures.drift(runs, panels_info, envs, out_dir / "drift.pdf"))
    add("gate-waits", figures.gate_waits(runs, envs, out_dir / "gate-waits.pdf"))
    # Figures are drawn at the size they are printed (figures.WIDTH): never scaled, so the
    # font sizes set there are the sizes on the page. Files carry the figure's number in the
    # paper (LaTeX numbers them in this order), for the captions of the HTML report.
    flags = [f"\\ctxdef{{{k}}}{{{v}}}" for k, v in values.items()]
    floats = []
    for number, name in enumerate(made, 1):
        numbered = f"{number:02d}-{name}.pdf"
        (out_dir / f"{name}.pdf").replace(out_dir / numbered)
        flags.append(f"\\ctxdef{{has-fig-{name}}}{{1}}")
        floats.append(f"\\begin{{figure}}[tbp]\n\\centering\n"
                      f"\\includegraphics{{figures/{numbered}}}\n"
                      f"\\caption{{\\papercaption{{fig:{name}}}}}\\label{{fig:{name}}}\n"
                      "\\end{figure}")
    parts = [*flags, "\\newcommand{\\placefigures}{%", *floats, "}"]
    records.atomic_write_text(out_tex, "\n".join(parts) + "\n")


SOFTWARE_WORDS = {"blas": "BLAS", "numpy": "NumPy", "torch": "PyTorch", "cuda": "CUDA",
                  "cudnn": "cuDNN", "python": "Python", "transformers": "transformers"}


def software_words(key: str, value: str) -> str:
    """One piece of software a record names: 'blas' / 'blas,blas' (NumPy's build info
    lists a library once per use) as 'BLAS (libblas)', never 'blas blas,blas'."""
    name = SOFTWARE_WORDS.get(key, key)
    value = ", ".join(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    if value.lower() == key.lower():
        return f"{name} (lib{value})"
    return f"{name} {value}"


def system_facts(campaign: Campaign) -> dict[str, Any]:
    """System and software of the runs, from the raw records themselves (not from the
    machine that rebuilds the paper)."""
    if campaign.is_import:
        return {"Source": campaign.raw.get("description", campaign.analysis["import_csv"])}
    from containertax.analysis.aggregate import read_records

    seen: dict[str, set[str]] = {}

    def note(key: str, value: Any) -> None:
        if value not in (None, ""):
            seen.setdefault(key, set()).add(str(value))

    for _, rec in read_records(campaign.root):
        host = rec.provenance["host"]
        note("Host", host.get("hostname"))
        note("Kernel", host.get("kernel"))
        note("CPU", f"{host.get('cpu_model')} ({host.get('cpu_count')} logical)"
             if host.get("cpu_model") else None)
        note("Memory (MiB)", host.get("memory_total_mib"))
        sensor = rec.gate.get("sensor_info", {})
        note("GPU", sensor.get("gpu_name"))
        note("GPU UUID", (rec.telemetry.get("gpu") or {}).get("uuid"))
        note("Temperature sensor", rec.gate.get("sensor"))
        env = rec.environment
        resolved = env.get("resolved", {})
        note("Docker Engine", resolved.get("engine_version"))
        image = resolved.get("image") or {}
        note("Image", f"{image.get('name')} ({str(image.get('id', ''))[7:19]})"
             if image.get("id") else None)
        inside = rec.inside.get("software") or {}
        note(f"Software in {env['id']}", ", ".join(
            software_words(k, v) for k, v in inside.items()
            if isinstance(v, str) and "device" not in k))
        note("Snakemake", host.get("packages", {}).get("snakemake"))
        note("Git commit", (rec.provenance.get("git", {}).get("commit") or "")[:12])
        note("Config hash", rec.provenance.get("config_hash"))
    return {k: "; ".join(sorted(v)) for k, v in seen.items()}


def family_of(results: pd.DataFrame) -> pd.Series:
    """Each comparison's family (comparisons.Plan); 'primary' for a table without one."""
    if "family" in results:
        return results["family"]
    return pd.Series("primary", index=results.index)


def primary_family(results: pd.DataFrame) -> pd.DataFrame:
    """The comparisons the paper's verdicts rest on: every environment against the
    reference, not the A/A calibration of a replica against what it copies."""
    return results[~family_of(results).isin(tables.AA_FAMILIES)]


def evidence(q: dict[str, Any] | None, metrics: list[str]) -> tuple[dict[str, str], set[str]]:
    """What the decision table needs besides the statistics, from quality.json: each
    metric's A/A status and the metrics an error-severity finding concerns."""
    if not q:
        return {}, set()
    from containertax.analysis import decisions

    aa = dict((q.get("calibration") or {}).get("metrics") or {})
    return aa, decisions.error_metrics(q.get("findings", []), metrics)


def _headline_rows(campaign: Campaign, results: pd.DataFrame | None,
                   runs: pd.DataFrame, q: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    if results is None or results.empty:
        return []
    results = primary_family(results)
    reg = metric_registry(campaign)
    metrics = analysed_metrics(campaign, runs)
    aa, errors = evidence(q, metrics)
    return facts.headlines(results, reg, campaign.analysis.get("headline_metric"),
                           metrics, campaign.analysis["alpha"], aa, errors)


def _record_facts(campaign: Campaign) -> dict[str, Any]:
    if campaign.is_import:
        return {"environments": [], "workloads": [], "hosts": [], "gpus": {}}
    return facts.from_records(campaign.root)


def environments_table(envs: list[dict[str, str]]) -> str:
    def setup(e: dict[str, str]) -> str:
        flags = e["flags"]
        flags = "none" if flags == "none" else "\\texttt{" + tables.tex(flags).replace(
            "--", "-{}-") + "}"
        return (f"Software: {tables.tex(e['software'])}.\\newline "
                f"Host paths mounted: {tables.tex(e['mounts'])}"
                f"{' (read-only)' if e['read_only'] else ''}.\\newline "
                f"GPU access: {tables.tex(e['gpu'])}.\\newline "
                f"Engine flags: {flags}.\\newline "
                f"Isolated: {tables.tex(e['isolation'])}.")

    rows = [[tables.tex(e["environment"]), setup(e)] for e in envs]
    return tables.booktabs(
        ["Env.", "Set-up as recorded"], rows, r"L{0.16\linewidth}L{0.78\linewidth}",
        "tab:environments")


def workloads_table(work: list[dict[str, str]]) -> str:
    rows = [[tables.tex(w["model"]), tables.tex(w["kind"]), tables.code(tables.tex(w["params"]))]
            for w in work]
    return tables.booktabs(["Model", "Workload", "Parameters (as recorded)"], rows,
                           r"lL{0.22\linewidth}L{0.55\linewidth}", "tab:workloads",
                           size=r"\footnotesize")


def order_balance(campaign: Campaign, order_csv: Path | None) -> dict[str, Any]:
    """The realised order's balance (analysis/order.py) from stats/order.csv."""
    realised = order.read(order_csv or campaign.paths.order)
    envs = [e.id for e in campaign.environments] or list(dict.fromkeys(
        realised["environment"]))
    return order.balance(realised, envs)


def run_tables(campaign: Campaign, kept_csv: Path, comparisons_csv: Path, desc_csv: Path,
               out_dir: Path, order_csv: Path | None = None,
               quality_json: Path | None = None) -> None:
    reg = metric_registry(campaign)
    runs = read_table(kept_csv)
    metrics = analysed_metrics(campaign, runs)
    desc = read_table(desc_csv)
    results = read_table(comparisons_csv)
    q = records.read_json(quality_json) if quality_json and quality_json.exists() else None
    out_dir.mkdir(parents=True, exist_ok=True)
    heads = [dict(model=h["model"], metric=h["metric"], environment=h["environment"],
                  rel=tables.pct(h["row"].rel_overhead),
                  ci=f"{tables.pct(h['row'].rel_ci_low)}, {tables.pct(h['row'].rel_ci_high)}",
                  p_bh=tables.pval(h["row"].get("p_bh")),
                  mde=tables.num(100 * h["row"].get("mde_rel", math.nan), 2),
                  verdict=h["decision"].short)
             for h in _headline_rows(campaign, results, runs, q)]
    found = _record_facts(campaign)
    out = {
        "headline": tables.headline_table(heads, reg),
        "estimates": tables.estimates_table(results, reg) if results is not None else "",
        "tests": tables.tests_table(results, reg) if results is not None else "",
        "descriptives": (tables.descriptives_table(desc, reg, metrics) if desc is not None
                         else ""),
        "system": tables.system_table(system_facts(campaign)),
        "memory": tables.memory_table(runs, reg),
        "environments": environments_table(found["environments"]) if found["environments"]
        else "",
        "workloads": workloads_table(found["workloads"]) if found["workloads"] else "",
        "design": order.design_table(order_balance(campaign, order_csv)),
    }
    for name, text in out.items():
        records.atomic_write_text(out_dir / f"{name}.tex", text)


def page_cache_values(campaign: Campaign, runs: pd.DataFrame) -> dict[str, Any]:
    """What the page cache was before the runs: dropped, kept, or not recorded."""
    cells = runs.drop_duplicates(["model", "environment", "repetition"])
    states = cells["page_cache"].fillna("") if "page_cache" in cells else pd.Series(dtype=str)
    n, dropped = len(cells), int((states == "dropped").sum())
    kept = int((states == "kept").sum())
    return {"page-cache-all-dropped": dropped == n,
            "page-cache-unrecorded": dropped + kept == 0,
            "page-cache-dropped": dropped, "page-cache-kept": kept,
            "page-cache-mode": tables.tex(campaign.raw.get("memory", {}).get(
                "drop_page_cache", "auto"))}


def clock_values(q: dict[str, Any]) -> dict[str, Any]:
    """The threat item on clocks lowered inside the measured windows (quality's
    throttled_window findings: any reason over clocks.THRESHOLD of any run's window)."""
    hits = [f["details"] for f in q["findings"] if f["check"] == "throttled_window"]
    words = "; ".join(f"{h['words']}: {h['range_pct']} of the {h['window']} "
                      + ("in every run" if h["runs"] == h["of_runs"]
                         else f"in {h['runs']} of {h['of_runs']} runs")
                      for h in hits)
    return {"clock-throttled": bool(hits), "clock-throttle-words": _unbroken_pct(
        tables.tex(words)) or "--"}


def check_words(check: str) -> str:
    """A quality check's name as a reader sees it: 'thermal_dependence' -> 'Thermal
    dependence', 'aa_calibration' -> 'A/A calibration'."""
    words = check.replace("aa_", "A/A ").replace("_", " ")
    return words[:1].upper() + words[1:]


def _unbroken_pct(text: str) -> str:
    """'+22.29 \\%' as '+22.29\\,\\%': a line never breaks between a number and its
    per cent sign."""
    return re.sub(r"(\d) \\%", r"\1\\,\\%", text)


def _quality_tex(q: dict[str, Any], reg: dict[str, MetricInfo]) -> str:
    """The data-quality findings as the paper lists them: each check's name in words and
    every metric by its label (quality.json keeps the identifiers)."""
    findings = q["findings"]
    lines = []
    if findings:  # none: the text says so ('they found no problems')
        lines.append("\\begin{itemize}")
        for f in findings:
            item = (f"\\textbf{{{tables.tex(check_words(f['check']))}}} "
                    f"({tables.tex(f['severity'])}): "
                    f"{_unbroken_pct(tables.tex(tables.humanise(f['message'], reg)))}")
            if f["severity"] == "error":  # what makes the analysis untrustworthy: in red
                item = f"\\textcolor{{red}}{{{item}}}"
            lines.append(f"\\item {item}")
        lines.append("\\end{itemize}")
    rules = q["exclude_rules"]
    dropped = q["excluded"]
    kept = (f"all {q['n_rows']} values were kept" if not dropped else
            f"{len(dropped)} of {q['n_rows']} values "
            f"{'was' if len(dropped) == 1 else 'were'} excluded")
    lines.append(f"Exclusion rule: {tables.tex(', '.join(rules)) if rules else 'none'} "
                 f"(non-finite values are always excluded); {kept}.")
    if dropped:
        lines.append("\\begin{itemize}")
        for d in dropped[:40]:
            why = ", ".join(k[5:] for k, v in d.items() if k.startswith("flag_") and v)
            lines.append(f"\\item {tables.tex(d['model'])}/{tables.tex(d['environment'])}/"
                         f"rep {d['repetition']}, "
                         f"{tables.tex(tables.in_prose(reg.get(d['metric']), d['metric']))} = "
                         f"{tables.num(d['value'])}: {tables.tex(why)}")
        if len(dropped) > 40:
            lines.append(f"\\item and {len(dropped) - 40} more (see quality.json)")
        lines.append("\\end{itemize}")
    return "\n".join(lines) + "\n"


def _join(items: list[str]) -> str:
    items = list(items)
    if not items:
        return ""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# the gate's sensor (thermal.sensor) as the methods name it: 'the GPU (NVML) sensor'
SENSOR_WORDS = {"nvml": "GPU (NVML)", "cpu": "CPU"}


def outlier_values(runs: pd.DataFrame) -> dict[str, Any]:
    """The outlier rule's thresholds at this campaign's usual group size n and number of
    environments k (each table is judged at its own: analysis/quality.py)."""
    data = runs[runs["value"].astype(float).abs().lt(math.inf)]
    if data.empty:
        return {"outlier-n": "--", "outlier-k": "--", "outlier-pooled-z": "--",
                "outlier-own-z": "--", "outlier-level": "--"}
    n = int(data.groupby(["model", "metric", "environment"]).size().mode().iloc[0])
    k = int(data.groupby(["model", "metric"])["environment"].nunique().mode().iloc[0])
    own, pooled = quality.outlier_cuts(n, k)
    return {"outlier-n": n, "outlier-k": k, "outlier-pooled-z": f"{pooled:g}",
            "outlier-own-z": f"{own:g}", "outlier-level": f"{quality.outlier_level(n):g}"}


def _design_values(campaign: Campaign, runs: pd.DataFrame) -> dict[str, Any]:
    """The design as it ran: blocks, order, gate, cooldown, sensor, machines."""
    if campaign.is_import:
        n = runs.groupby(["model", "environment"])["repetition"].nunique()
        return {"imported": True,
                "repetitions-import": _join(sorted({str(int(x)) for x in n})),
                "gate-constant": False, "random-weights": False,
                **import_study_values(campaign),
                # nothing is known of how the source read peak memory
                **memory_source_values({}, runs)}
    t, sched = campaign.thermal, campaign.schedule
    sensors = sorted(set(runs["sensor"].dropna())) if "sensor" in runs else []
    cells = runs.drop_duplicates(["model", "environment", "repetition"])
    waits = cells["gate_waited_s"].dropna() if "gate_waited_s" in cells else pd.Series()
    n_machines = runs["machine"].nunique() if "machine" in runs else 1
    found = facts.from_records(campaign.root)
    docker = [e for e in found["environments"] if e["kind"] == "docker"]
    host_dirs = sorted({d for e in docker for d in e["host_dirs"].split(", ") if d})
    return {
        "imported": False,
        "repetitions": campaign.repetitions,
        "design-williams": sched["design"] == "williams",
        "design-alternating": sched["design"] == "alternating",
        "design-random": sched["design"] == "random",
        "models-interleaved": sched.get("models") == "interleaved",
        "sensor-none": sensors in ([], ["none"]),
        "sensor": tables.tex("/".join(SENSOR_WORDS.get(s, s) for s in sensors if s != "none")
                             or SENSOR_WORDS.get(t["sensor"], t["sensor"])),
        "threshold": f"{t['threshold_c']:g}",
        "min-interval": f"{t['min_interval_s']:g}",
        "has-stability": bool(t.get("stability_s")),
        "stability": f"{t.get('stability_s') or 0:g}",
        "cooldown": f"{t['cooldown_s']:g}",
        "cooldown-adaptive": t.get("cooldown", "fixed") == "adaptive",
        "adaptive-band": f"{t.get('adaptive', {}).get('band_c', 0):g}",
        "adaptive-min": f"{t.get('adaptive', {}).get('min_s', 0):g}",
        "adaptive-max": f"{t.get('adaptive', {}).get('max_s', 0):g}",
        "telemetry-hz": f"{campaign.telemetry['hz']:g}",
        "gate-constant": bool(len(waits)) and waits.nunique() == 1,
        "gate-wait": tables.num(float(waits.iloc[0])) if len(waits) else "--",
        "gate-wait-max": tables.num(float(waits.max())) if len(waits) else "--",
        "n-machines": n_machines,
        # host names only: lent or cloned machines may share one (the runs' GPUs, by UUID,
        # are told apart; two GPUs under one host name may be one host or two)
        "n-hosts": len(found["hosts"]),
        "host-names": tables.tex(_join(found["hosts"])) or "--",
        "n-gpus": len(found["gpus"]),
        "gpu": bool(found["gpus"]),
        "gpu-names": tables.tex(_join(sorted(set(found["gpus"].values())))) or "--",
        "blocks-split": any(f.check == "block_split" for f in quality.machines(runs)),
        "random-weights": any(w["random_weights"] for w in found["workloads"]),
        "container-host-software": bool({"/usr", "/opt"} & set(host_dirs)),
        "container-host-dirs": tables.tex(_join(host_dirs)) if host_dirs else "--",
        "has-docker": bool(docker),
        "docker-device-nodes": any("device nodes" in e["gpu"] for e in docker),
        **page_cache_values(campaign, runs),
        **where_ran_values(campaign, runs),
        **cpuset_values(found),
        **memory_source_values(found, runs),
    }


def caveat_text(caveats: tuple[str, ...] | list[str], metric_words: str,
                resolution_pct: float) -> str:
    """', but <caveat> and <caveat>' in LaTeX, or '' where there is none."""
    from containertax.analysis import decisions

    if not caveats:
        return ""
    return ", but " + tables.tex(" and ".join(
        decisions.caveat_words(c, metric_words, resolution_pct) for c in caveats))


def _group_caveat(decided: list[tuple[Any, str]], resolution_pct: float) -> str:
    """The caveat of a group of verdicts (the conclusion's 'in all four ... equivalent'):
    ', but for two of them the A/A control ...', or '' where none carries one."""
    qualified = [(d, words) for d, words in decided if d.caveats]
    if not qualified:
        return ""
    texts = list(dict.fromkeys(caveat_text(d.caveats, words, resolution_pct)[len(", but "):]
                               for d, words in qualified))
    some = "" if len(qualified) == len(decided) else \
        f"for \\numword{{{len(qualified)}}} of them "
    return ", but " + some + "; ".join(texts)


def _result_values(campaign: Campaign, results: pd.DataFrame | None,
                   runs: pd.DataFrame, q: dict[str, Any] | None = None) -> dict[str, Any]:
    from containertax.analysis import decisions

    a = campaign.analysis
    alpha = a["alpha"]
    reg = metric_registry(campaign)
    res_pct = 100 * resolution(campaign)
    aa, errors = evidence(q, analysed_metrics(campaign, runs))
    v: dict[str, Any] = {"family": 0, "significant-bh": 0, "significant-bonf": 0,
                         "equivalent": 0, "hl-count": 0, "hl-each": "",
                         "hl-overhead": 0, "hl-equivalent": 0, "hl-inconclusive": 0,
                         "hl-advantage": 0, "startup-present": False, "startup-robust": False,
                         "startup-one": False, "startup-caveat": "", "equivalent-caveat": "",
                         "quality-error": bool(errors), "quality-error-metrics": tables.tex(
                             _join([tables.in_prose(reg.get(m), m) for m in sorted(errors)]))
                         or "--",
                         "secondary-family": 0, "secondary-significant-bh": 0,
                         "secondary-significant-bonf": 0, "secondary-equivalent": 0,
                         "primary-metrics": "--", "has-derived": False, "derived-metrics": "--",
                         "design-paired": False, "design-independent": False}
    if results is None or results.empty:
        return v
    all_results = results
    results = primary_family(results)  # the A/A calibration is reported on its own
    fam = family_of(results)
    for prefix, name in (("", "primary"), ("secondary-", "secondary")):
        f = results[fam == name]
        v[f"{prefix}family"] = int(f["p"].notna().sum())
        v[f"{prefix}significant-bh"] = int((f["p_bh"] < alpha).sum())
        v[f"{prefix}significant-bonf"] = int((f["p_bonferroni"] < alpha).sum())
        v[f"{prefix}equivalent"] = int((f["tost_p"] < alpha).sum())
    v["primary-metrics"] = tables.tex(_join([
        tables.in_prose(reg.get(m), m)
        for m in dict.fromkeys(results.loc[fam == "primary", "metric"])])) or "--"
    derived = results[fam == "derived"]
    v["has-derived"] = not derived.empty
    v["derived-metrics"] = tables.tex(_join([
        tables.in_prose(reg.get(m), m)
        for m in dict.fromkeys(derived["metric"])])) or "--"
    design = results["design"] if "design" in results else pd.Series(dtype=str)
    v["design-paired"] = bool((design == "paired").any())
    v["design-independent"] = bool((design == "independent").any())
    v.update(degenerate_values(all_results, reg))
    heads = _headline_rows(campaign, results, runs, q)
    v["hl-count"] = len(heads)
    v["hl-each"] = "".join(f"\\hlitem{{{i}}}" for i in range(1, len(heads) + 1))
    for i, h in enumerate(heads, 1):
        r, info = h["row"], reg.get(h["metric"])
        v[f"hl/{i}/model"] = tables.tex(h["model"])
        v[f"hl/{i}/env"] = tables.tex(h["environment"])
        v[f"hl/{i}/metric"] = tables.tex(tables.in_prose(info, h["metric"]))
        v[f"hl/{i}/rel"] = tables.pct(r.rel_overhead)
        v[f"hl/{i}/ci"] = f"{tables.pct(r.rel_ci_low)}, {tables.pct(r.rel_ci_high)}"
        v[f"hl/{i}/has-rel"] = r.rel_overhead == r.rel_overhead
        v[f"hl/{i}/has-ci"] = r.rel_ci_low == r.rel_ci_low
        v[f"hl/{i}/why"] = tables.tex(facts.why_not_estimable(r)) or "--"
        v[f"hl/{i}/mde"] = tables.num(100 * r.get("mde_rel", math.nan), 2)
        v[f"hl/{i}/test"] = tables.tex(r.get("primary_test", "--"))
        v[f"hl/{i}/p"] = tables.pval(r.get("p", math.nan))
        v[f"hl/{i}/p-bh"] = tables.pval(r.get("p_bh", math.nan))
        v[f"hl/{i}/p-tost"] = tables.pval(r.get("tost_p", math.nan))
        for word in decisions.WORDS:
            v[f"hl/{i}/{word.replace(' ', '-')}"] = h["verdict"] == word
        v[f"hl/{i}/caveat"] = caveat_text(h["decision"].caveats,
                                          tables.in_prose(info, h["metric"]), res_pct)
        if h["verdict"] in ("overhead", "equivalent", "inconclusive", "advantage"):
            v[f"hl-{h['verdict']}"] += 1
    for word in ("overhead", "equivalent", "advantage"):
        v[f"hl-{word}-caveat"] = _group_caveat(
            [(h["decision"], tables.in_prose(reg.get(h["metric"]), h["metric"]))
             for h in heads if h["verdict"] == word], res_pct)
    # where runs measured several machines (GPUs): the headline with a fixed effect per machine
    adjusted = [h for h in heads if h["row"].get("machines", 1) >= 2
                and h["row"].get("machine_adjusted_rel") == h["row"].get("machine_adjusted_rel")]
    v["machine-adjusted"] = _join([
        f"{tables.tex(h['model'])} in {tables.tex(h['environment'])}: "
        f"{tables.pct(h['row'].machine_adjusted_rel)}\\,\\% "
        f"[{tables.pct(h['row'].machine_adjusted_ci_low)}, "
        f"{tables.pct(h['row'].machine_adjusted_ci_high)}]" for h in adjusted]) or "--"
    mdes = [100 * h["row"].get("mde_rel", math.nan) for h in heads
            if h["verdict"] == "inconclusive"]
    mdes = [m for m in mdes if m == m]
    v["hl-mde-min"] = tables.num(min(mdes), 2) if mdes else "--"
    v["hl-mde-max"] = tables.num(max(mdes), 2) if mdes else "--"
    # start-up: an environment whose launch is slower for every model (decisions.every_model:
    # Bonferroni-corrected, and never 'every model' with one)
    starts = {env: decisions.every_model(g[g.metric == "startup_s"], alpha)
              for env, g in results.groupby("environment", sort=False)}
    v["startup-present"] = any(r["present"] for r in starts.values())
    for claim, key in (("every model", "startup-robust"), ("the one model", "startup-one")):
        held = {e: r for e, r in starts.items() if r["claim"] == claim}
        v[key] = bool(held)
        if held and not (v["startup-robust"] and claim == "the one model"):
            v["startup-envs"] = tables.tex(_join(list(held)))
            v["startup-min"] = tables.num(min(r["min"] for r in held.values()), 2)
            v["startup-max"] = tables.num(max(r["max"] for r in held.values()), 2)
            v["startup-n"] = sum(r["n"] for r in held.values())
            v["startup-significant"] = sum(r["significant"] for r in held.values())
    v["startup-one"] = v["startup-one"] and not v["startup-robust"]
    v["startup-caveat"] = caveat_text(
        decisions.caveats_for(aa.get("startup_s"), "startup_s" in errors),
        tables.in_prose(reg.get("startup_s"), "startup_s"), res_pct)
    equivalent_metrics = [m for m, g in results.groupby("metric", sort=False)
                          if all(decisions.verdict(r, "none", alpha).word == "equivalent"
                                 for _, r in g.iterrows())]
    v["any-equivalent-metric"] = bool(equivalent_metrics)
    v["equivalent-metrics"] = tables.tex(_join([
        tables.in_prose(reg.get(m), m) for m in equivalent_metrics])) or "--"
    v["equivalent-caveat"] = _group_caveat(
        [(decisions.Verdict("equivalent", decisions.caveats_for(aa.get(m), m in errors)),
          tables.in_prose(reg.get(m), m)) for m in equivalent_metrics], res_pct)
    for _, r in all_results.iterrows():
        key = f"{r.model}/{r.environment}/{r.metric}"
        v[f"rel/{key}"] = (tables.pct(r.rel_overhead) if r.rel_overhead == r.rel_overhead
                           else tables.NOT_ESTIMABLE)
        v[f"rel-ci/{key}"] = (f"[{tables.pct(r.rel_ci_low)}, {tables.pct(r.rel_ci_high)}]"
                              if r.rel_ci_low == r.rel_ci_low else f"[{tables.NOT_ESTIMABLE}]")
        v[f"p/{key}"] = tables.pval(r.p)
        v[f"p-bh/{key}"] = tables.pval(r.p_bh)
        v[f"test/{key}"] = r.primary_test
    return v


def where_ran_values(campaign: Campaign, runs: pd.DataFrame) -> dict[str, Any]:
    """Where each environment ran (a VM, a container), from its probe's markers."""
    from containertax.analysis.aggregate import read_records

    recs = [rec for _, rec in read_records(campaign.root)]
    return hostmarkers.values(recs, campaign.reference, environment_order(campaign, runs))


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
            "raw-scale-metrics": tables.tex(_join([tables.in_prose(reg.get(m), m)
                                                   for m in raw])) or "--"}


def margin_values(margin: float) -> dict[str, str]:
    """The equivalence band on the log scale, +-log(1 + m), as the ratio band it is:
    [1/(1 + m) - 1, m], [-4.76 %, +5 %] at m = 0.05 (not a symmetric +-5 %)."""
    low, high = f"{100 * (1 / (1 + margin) - 1):+.3g}", f"{100 * margin:+.3g}"
    return {"margin": f"{100 * margin:g}", "margin-ratio": f"{1 + margin:g}",
            "margin-low": low, "margin-high": high,
            "margin-band": f"[${low}$\\,\\%, ${high}$\\,\\%]"}


IMPORT_ORDERS = ("interleaved", "sequential", "unknown")


def import_study_values(campaign: Campaign) -> dict[str, Any]:
    """How the paper names an imported study (analysis.import_study: title, source,
    citation, order), so that main.tex names no study of its own. The citation is a BibTeX
    key, kept as the command that cites it ('' where the study has no entry)."""
    study = campaign.analysis.get("import_study") or {}
    title = (study.get("title") or campaign.raw.get("description")
             or Path(campaign.analysis["import_csv"]).name)
    key = study.get("citation")
    order = study.get("order", "unknown")
    return {"description": tables.tex(title),
            "import-source": tables.tex(study.get("source", "")) or "--",
            "has-import-source": bool(study.get("source")),
            "import-cited": bool(key),
            "import-citep": f" \\citep{{{key}}}" if key else "",
            "import-citet": f"\\citet{{{key}}}" if key else "",
            **{f"order-{o}": order == o for o in IMPORT_ORDERS}}


def cpuset_values(found: dict[str, Any]) -> dict[str, Any]:
    """Which cores `cpuset_cpus: performance` gave each environment (facts.from_records:
    resolved on the machine that ran them), for the design's sentence; no sentence, not
    an empty one, where no environment asked for them."""
    cpusets = found.get("cpusets") or {}
    parts = [f"{tables.tex(env)} on CPUs {tables.tex(', '.join(cores))}"
             for env, cores in cpusets.items()]
    return {"has-cpuset": bool(parts), "cpuset-list": "; ".join(parts) or "--"}


def memory_source_values(found: dict[str, Any], runs: pd.DataFrame) -> dict[str, Any]:
    """Where peak resident memory came from (the records' inside.max_rss_source): the
    workload process's own VmHWM, the largest child's ru_maxrss (a probe that only launches
    the benchmark), or, in records from before the fix, ru_maxrss inherited across
    fork+exec, kept as max_rss_rusage_mib and never compared."""
    sources = set(found.get("rss_sources", ()))
    metrics = set(runs["metric"])
    return {"rss-vmhwm": "VmHWM" in sources and "max_rss_mib" in metrics,
            "rss-children": "ru_maxrss_children" in sources and "max_rss_mib" in metrics,
            "rss-legacy": "max_rss_rusage_mib" in metrics}


def primary_test_values(campaign: Campaign) -> dict[str, Any]:
    """The pre-specified primary test (analysis.primary_test), for the methods."""
    test = campaign.analysis["primary_test"]
    n = campaign.repetitions if not campaign.is_import else 0
    return {"primary-paired-t": test == "paired_t", "primary-signflip": test == "signflip",
            "signflip-min-p": tables.num(2.0 ** (1 - n), 3) if n else "--"}


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
    rows = [r for r in cal.get("comparisons", []) if r.get("family") == "calibration"]
    label = {m: tables.in_prose(i, m) for m, i in (reg or {}).items()}
    replicas = replicas or {}
    if not replicas and rows:
        replicas = {str(r["environment"]): str(r["reference"]) for r in rows}
    v: dict[str, Any] = {"aa-status": status, "aa-count": len(rows),
                         "aa-each": "".join(f"\\aaitem{{{i}}}" for i in range(1, len(rows) + 1)),
                         "aa-replicas": tables.tex(_join(list(replicas))) or "--",
                         "aa-originals": tables.tex(_join(list(dict.fromkeys(
                             replicas.values())))) or "--",
                         "aa-n": len(replicas),
                         "aa-alpha": cal.get("alpha", "--"),
                         "aa-resolution": f"{100 * cal.get('resolution', 0.02):g}"}
    for word in AA_STATUSES:
        v[f"aa-{word.replace(' ', '-')}"] = status == word
    # per metric, every family: the metrics whose verdicts carry the A/A's caveat
    per_metric = cal.get("metrics") or {}
    for word, statuses in (("failed", ("failed",)),
                           ("unresolved", ("inconclusive", "cannot fail")),
                           ("passed", ("passed",))):
        names = [label.get(m, m) for m, st in per_metric.items() if st in statuses]
        v[f"aa-{word}-metrics"] = tables.tex(_join(names)) or "--"
        v[f"aa-any-{word}-metric"] = bool(names)
    v["aa-metric-list"] = tables.tex("; ".join(
        f"{label.get(m, m)}: {st}" for m, st in per_metric.items())) or "--"
    for i, r in enumerate(rows, 1):
        v[f"aa/{i}/model"] = tables.tex(r["model"])
        v[f"aa/{i}/metric"] = tables.tex(label.get(r["metric"], r["metric"]))
        v[f"aa/{i}/env"] = tables.tex(r["environment"])
        v[f"aa/{i}/ref"] = tables.tex(r["reference"])
        v[f"aa/{i}/rel"] = tables.pct(r["rel_overhead"])
        v[f"aa/{i}/ci"] = f"{tables.pct(r['rel_ci_low'])}, {tables.pct(r['rel_ci_high'])}"
        v[f"aa/{i}/test"] = tables.tex(r.get("primary_test", "--"))
        v[f"aa/{i}/p"] = tables.pval(r.get("p", math.nan))
        v[f"aa/{i}/p-bonf"] = tables.pval(r.get("p_bonferroni", math.nan))
        v[f"aa/{i}/p-tost"] = tables.pval(r.get("tost_resolution_p", math.nan))
        v[f"aa/{i}/status"] = tables.tex(r.get("aa_status", "--"))
        v[f"aa/{i}/significant"] = bool(r.get("p_bonferroni", math.nan) < cal.get("alpha", 0))
    return v


def run_numbers(campaign: Campaign, kept_csv: Path, comparisons_csv: Path,
                quality_json: Path, out_numbers: Path, out_quality: Path,
                order_csv: Path | None = None) -> None:
    """Every value and condition the text of paper/main.tex quotes (\\ctx, \\ifctx)."""
    runs = read_table(kept_csv)
    results = read_table(comparisons_csv)
    q = records.read_json(quality_json)
    reg = metric_registry(campaign)
    a = campaign.analysis
    head = headline(campaign, runs)
    cells = runs.drop_duplicates(["model", "environment", "repetition"])
    envs = environment_order(campaign, runs)
    present_envs = [e for e in envs if e in set(runs["environment"])]
    v: dict[str, Any] = {
        "campaign": tables.tex(campaign.name),
        "runs": len(cells),
        "models": runs["model"].nunique(),
        "model-list": tables.tex(_join(list(dict.fromkeys(runs["model"])))),
        "environments": len(present_envs),
        "environment-list": tables.tex(_join(present_envs)),
        "others": tables.tex(_join([e for e in present_envs if e != campaign.reference])),
        "reference": tables.tex(campaign.reference),
        "alpha": a["alpha"],
        **margin_values(a["equivalence_margin"]),
        "resamples": f"{a['bootstrap_resamples']:,}".replace(",", "\\,"),
        "excluded": len(q["excluded"]),
        "findings": len(q["findings"]),
        **outlier_values(runs),
        "headline-metric": tables.tex(tables.in_prose(reg[head], head)) if head else "--",
        "metrics": len(analysed_metrics(campaign, runs)),
        "has-memory": bool(set(tables.MEMORY_METRICS) & set(runs["metric"])),
        **primary_test_values(campaign),
        **_design_values(campaign, runs),
        **clock_values(q),
        **order.macros(order_balance(campaign, order_csv), campaign.schedule["design"]),
        **_result_values(campaign, results, runs, q),
        **calibration_macros(q.get("calibration") or {"status": "none"}, reg,
                             campaign.replicas),
        **sequential.macros(campaign, runs, lambda m: tables.in_prose(reg[m], m)
                            if m in reg else m),  # none without a stopping rule
    }
    for (model, env, metric), g in runs.groupby(["model", "environment", "metric"]):
        mean = g["value"].mean()
        v[f"mean/{model}/{env}/{metric}"] = tables.num(mean) if not math.isnan(mean) else "--"
    records.atomic_write_text(out_numbers, tables.macros(v))
    records.atomic_write_text(out_quality, _quality_tex(q, reg))
