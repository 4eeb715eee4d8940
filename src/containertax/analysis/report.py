"""The analysis stage, from runs.csv to the paper's generated parts: quality, statistics
per model, family-wide correction, figures, tables, numbers.

Everything here reads tidy tables (a campaign's runs.csv or an imported CSV), so a study
this workflow did not run goes through exactly the same steps.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from containertax.analysis import importer, quality, tables
from containertax.analysis.metrics import MetricInfo, registry
from containertax.campaign.config import Campaign
from containertax.execution import records


class AnalysisError(RuntimeError):
    """Nothing to analyse; the message says why."""


def metric_registry(campaign: Campaign) -> dict[str, MetricInfo]:
    return registry(campaign.analysis.get("define_metrics"))


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
    path = Path(campaign.analysis["import_csv"])
    frame = importer.read_tidy(path)
    importer.check_against(frame, path, metric_registry(campaign), campaign.reference)
    return frame


def environment_order(campaign: Campaign, runs: pd.DataFrame) -> list[str]:
    envs = [e.id for e in campaign.environments] or list(dict.fromkeys(runs["environment"]))
    return [campaign.reference] + [e for e in envs if e != campaign.reference]


# --- rule: quality -------------------------------------------------------------------


def run_quality(campaign: Campaign, runs_csv: Path, out_dir: Path) -> None:

    table = read_table(runs_csv)
    if table is None:
        raise AnalysisError(f"{runs_csv} holds no runs: there are no raw records under "
                            f"{campaign.paths.raw_dir} yet (run the campaign first).")
    runs = quality.annotate(table)
    expected = None if campaign.is_import else campaign.repetitions
    findings = quality.check(runs, metric_registry(campaign), expected_reps=expected,
                             model_sizes=model_sizes(campaign, table),
                             alpha=campaign.analysis["alpha"])
    rules = campaign.analysis["exclude"]
    kept, dropped = quality.exclude(runs, rules)
    if kept.empty:
        raise AnalysisError(f"every value of {runs_csv} was excluded (analysis.exclude = "
                            f"{rules}, plus non-finite values); nothing is left to analyse.")
    calibration, aa_findings = quality.calibration(a_a(campaign, kept),
                                                   campaign.analysis["alpha"])
    findings = aa_findings + findings  # the instrument's calibration first
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


def a_a(campaign: Campaign, kept: pd.DataFrame) -> pd.DataFrame:
    """The A/A comparisons (replicas against what they copy), corrected within their
    families: the same code and plan as the statistics rule."""
    if not campaign.replicas:
        return pd.DataFrame()
    from containertax.analysis import comparisons as st

    plan = comparison_plan(campaign, kept)
    aa_envs = set(campaign.replicas) | set(campaign.replicas.values())
    runs = kept[kept.environment.isin(aa_envs)]
    results = st.analyse(runs, st.Settings.from_config(campaign.analysis, campaign.reference),
                         analysed_metrics(campaign, runs), plan)
    if results.empty:
        return results
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
    for model, (out, out_desc) in outputs.items():
        runs = all_runs[all_runs.model == model] if all_runs is not None else pd.DataFrame()
        requests = None if all_requests is None else all_requests[all_requests.model == model]
        metrics = analysed_metrics(campaign, runs) if not runs.empty else []
        results = st.analyse(runs, settings, metrics, plan) if metrics else pd.DataFrame()
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
    from containertax.analysis import figures

    runs = read_table(kept_csv)
    results = read_table(comparisons_csv)
    reg = metric_registry(campaign)
    envs = environment_order(campaign, runs)
    head = headline(campaign, runs)
    out_dir.mkdir(parents=True, exist_ok=True)
    made: list[tuple[str, str, bool]] = []

    def add(name: str, caption: str | None, wide: bool = True) -> None:
        if caption:
            made.append((name, caption, wide))

    if head and results is not None:
        add("forest", figures.forest(results, head, reg.get(head),
                                     campaign.analysis["equivalence_margin"],
                                     out_dir / "forest.pdf"), wide=False)
    for metric in analysed_metrics(campaign, runs):
        add(f"dist-{metric}", figures.distributions(runs, metric, reg.get(metric), envs,
                                                   out_dir / f"dist-{metric}.pdf"))
    add("latency-cdf", figures.latency_cdf(read_table(requests_csv), envs,
                                           out_dir / "latency-cdf.pdf"))
    trace, title = (None, "") if campaign.is_import else _longest_telemetry(campaign)
    add("telemetry", figures.telemetry_trace(trace, title, out_dir / "telemetry.pdf"), False)
    if head:
        add("drift", figures.drift(runs, head, reg.get(head), envs, out_dir / "drift.pdf"))
    add("gate-waits", figures.gate_waits(runs, envs, out_dir / "gate-waits.pdf"), wide=False)
    parts = []
    for name, caption, wide in made:
        env = "figure*" if wide else "figure"
        width = r"\textwidth" if wide else r"\columnwidth"
        parts.append(f"\\begin{{{env}}}[htbp]\n\\centering\n\\includegraphics[width={width}]"
                     f"{{figures/{name}.pdf}}\n\\caption{{{caption}}}\n\\label{{fig:{name}}}\n"
                     f"\\end{{{env}}}\n")
    records.atomic_write_text(out_tex, "\n".join(parts))


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
            f"{k} {v}" for k, v in inside.items() if isinstance(v, str)))
        note("Snakemake", host.get("packages", {}).get("snakemake"))
        note("Git commit", (rec.provenance.get("git", {}).get("commit") or "")[:12])
        note("Config hash", rec.provenance.get("config_hash"))
    return {k: "; ".join(sorted(v)) for k, v in seen.items()}


def run_tables(campaign: Campaign, kept_csv: Path, comparisons_csv: Path, desc_csv: Path,
               out_dir: Path) -> None:
    reg = metric_registry(campaign)
    metrics = analysed_metrics(campaign, read_table(kept_csv))
    desc = read_table(desc_csv)
    results = read_table(comparisons_csv)
    out_dir.mkdir(parents=True, exist_ok=True)
    records.atomic_write_text(out_dir / "descriptives.tex",
                              tables.descriptives_table(desc, reg, metrics) if desc is not None
                              else "")
    records.atomic_write_text(out_dir / "inferential.tex",
                              tables.inferential_table(results, reg) if results is not None
                              else "")
    records.atomic_write_text(out_dir / "system.tex",
                              tables.system_table(system_facts(campaign)))
    records.atomic_write_text(out_dir / "memory.tex",
                              tables.memory_table(read_table(kept_csv), reg))


def page_cache_text(campaign: Campaign, runs: pd.DataFrame) -> str:
    """What the page cache was before the runs: dropped, kept, or not recorded."""
    cells = runs.drop_duplicates(["model", "environment", "repetition"])
    states = cells["page_cache"].fillna("") if "page_cache" in cells else pd.Series(dtype=str)
    n, dropped = len(cells), int((states == "dropped").sum())
    kept = int((states == "kept").sum())
    mode = tables.tex(campaign.raw.get("memory", {}).get("drop_page_cache", "auto"))
    if dropped == n:
        return (f"Before every run the page cache was dropped (sync, then drop\\_caches; "
                f"memory.drop\\_page\\_cache: {mode}), so every environment started from "
                "the same cache state; MemAvailable was recorded before and after each run.")
    if dropped + kept == 0:
        return ("The page-cache state before the runs was not recorded (records written "
                "before the workflow recorded it).")
    return (f"The page cache was dropped before {dropped} of {n} runs and could not be (or "
            f"was not to be) dropped before {kept} (memory.drop\\_page\\_cache: {mode}; the "
            "raw records say why), so cached files may favour later runs; MemAvailable was "
            "recorded before and after each run.")


def _quality_tex(q: dict[str, Any]) -> str:
    findings = q["findings"]
    lines = []
    if not findings:
        lines.append("No check found a problem.")
    else:
        lines.append("\\begin{itemize}")
        for f in findings:
            item = (f"\\textbf{{{tables.tex(f['check'])}}} ({tables.tex(f['severity'])}): "
                    f"{tables.tex(f['message'])}")
            if f["severity"] == "error":  # what makes the analysis untrustworthy: in red
                item = f"\\textcolor{{red}}{{{item}}}"
            lines.append(f"\\item {item}")
        lines.append("\\end{itemize}")
    rules = q["exclude_rules"]
    dropped = q["excluded"]
    lines.append(
        f"Exclusion rule: {tables.tex(', '.join(rules)) if rules else 'none'} "
        f"(non-finite values are always excluded); {len(dropped)} of {q['n_rows']} values "
        "were excluded.")
    if dropped:
        lines.append("\\begin{itemize}")
        for d in dropped[:40]:
            why = ", ".join(k[5:] for k, v in d.items() if k.startswith("flag_") and v)
            lines.append(f"\\item {tables.tex(d['model'])}/{tables.tex(d['environment'])}/"
                         f"rep {d['repetition']}, {tables.tex(d['metric'])} = "
                         f"{tables.num(d['value'])}: {tables.tex(why)}")
        if len(dropped) > 40:
            lines.append(f"\\item and {len(dropped) - 40} more (see quality.json)")
        lines.append("\\end{itemize}")
    return "\n".join(lines) + "\n"


def aa_text(campaign: Campaign, sentence: str) -> str:
    """The A/A design, for the methods."""
    if not campaign.replicas:
        return sentence
    pairs = ", ".join(f"{tables.tex(r)} is a replica of {tables.tex(o)}"
                      for r, o in campaign.replicas.items())
    return (f"Before any comparison is read, the instrument is checked against itself: {pairs} "
            "(the same settings under its own id, scheduled in the blocks like every other "
            "environment). It is compared with the environment it copies by the primary "
            "analysis below, corrected within its own family (Bonferroni); a significant "
            "difference in a primary metric would mean the workflow reports differences "
            f"that are not there. {sentence}")


def statistics_text(campaign: Campaign, rule: str) -> str:
    """The pre-specified analysis, from the settings in force (so the text cannot drift
    from the code)."""
    a = campaign.analysis
    resamples = f"{a['bootstrap_resamples']:,}".replace(",", "\\,")
    design = (
        "The analysis was fixed before the data were seen. Each repetition is a block "
        "holding one run of every environment, and every comparison is made within blocks, "
        "on the logarithm of the per-block ratio environment/reference, so that drift "
        "between blocks (temperature, page cache, background load) cancels. The estimate is "
        "the geometric mean of the per-block ratios minus one, with a 95\\,\\% $t$ interval; "
        f"the primary test is {rule}. Without complete blocks, Welch's $t$ on log values "
        "gives the interval and the test. ")
    if campaign.is_import:
        design = (
            "The analysis was fixed before the data were seen. Where the imported runs carry "
            "no blocks, the environments are compared as independent groups on log values: "
            "the estimate is the ratio of geometric means minus one, and Welch's $t$ gives "
            "its 95\\,\\% interval and the primary test (with blocks, the per-block log "
            f"ratios and {rule}). ")
    return (
        design + "No normality pretest chooses a test. "
        "The primary metrics of every environment against the reference form the primary "
        "family, the only one the abstract counts; every other metric forms a secondary "
        "family, and A/A replicas against their original the calibration family; each "
        "family is corrected on its own with Bonferroni and with Benjamini-Hochberg at "
        f"$\\alpha = {a['alpha']}$. A metric that restates another (request throughput is "
        "token throughput divided by the tokens of a request) is not tested again. "
        "Secondary columns in the machine-readable results: Welch's $t$ and Mann-Whitney "
        "$U$ on the raw values, the exact sign-flip test (smallest attainable $p$ "
        "$2^{1-n}$ with $n$ blocks), Wilcoxon, the ratio of arithmetic means with a "
        f"percentile bootstrap interval ({resamples} resamples, blocks resampled together), "
        "and signed Cohen's $d$ and Hedges' $g$. Equivalence is tested with two one-sided "
        "$t$ tests on the same log scale and design, with a margin of "
        f"$\\pm{100 * a['equivalence_margin']:g}$\\,\\%. The minimum detectable effect at "
        "80\\,\\% power is reported for every comparison.")


def calibration_macros(cal: dict[str, Any],
                       reg: dict[str, MetricInfo] | None = None) -> dict[str, Any]:
    """The A/A verdict for the text: a status, a 0/1 flag and a sentence (red on failure)."""
    status = cal.get("status", "none")
    rows = [r for r in cal.get("comparisons", []) if r.get("family") == "calibration"]
    label = {m: i.label.lower() for m, i in (reg or {}).items()}
    detail = "; ".join(
        f"{tables.tex(r['model'])}, {tables.tex(label.get(r['metric'], r['metric']))}: "
        f"{tables.pct(r['rel_overhead'])}\\,\\% [{tables.pct(r['rel_ci_low'])}, "
        f"{tables.pct(r['rel_ci_high'])}], $p_\\mathrm{{Bonf}}$ {tables.pval(r['p_bonferroni'])}"
        for r in rows)
    pair = (f"{tables.tex(rows[0]['environment'])} against {tables.tex(rows[0]['reference'])}"
            if rows else "")
    sentence = {
        "none": "This campaign ran no A/A replica, so the instrument's false-positive rate "
                "was not checked on it.",
        "passed": f"The A/A control ({pair}: identical settings) shows no significant "
                  f"difference ({detail}), as an honest instrument should.",
        "failed": f"\\textcolor{{red}}{{\\textbf{{Instrument failure:}} the A/A control ({pair}: "
                  f"identical settings) differs significantly ({detail}); no comparison of "
                  "this campaign can be trusted until the cause is found.}}",
        "cannot fail": f"The A/A control ({pair}) cannot show a significant difference at "
                       f"this number of blocks ({detail}), so it does not calibrate the "
                       "instrument.",
        "untested": "The A/A control has no testable comparison.",
    }[status]
    return {"aa-status": status, "aa-failed": int(status == "failed"),
            "aa-sentence": sentence}


def run_numbers(campaign: Campaign, kept_csv: Path, comparisons_csv: Path,
                quality_json: Path, out_numbers: Path, out_quality: Path) -> None:
    runs = read_table(kept_csv)
    results = read_table(comparisons_csv)
    q = records.read_json(quality_json)
    reg = metric_registry(campaign)
    a = campaign.analysis
    head = headline(campaign, runs)
    runs_per_cell = runs.drop_duplicates(["model", "environment", "repetition"])
    rule_text = {
        "paired_t": "the $t$ test of the mean per-block log ratio (one-sample $t$ on "
                    "$\\log(x_b/y_b)$, $n-1$ degrees of freedom), the same $t$ that gives the "
                    "interval, so a comparison is significant exactly when its interval "
                    "excludes zero",
        "signflip": "the exact sign-flip test of the mean per-block log ratio (all $2^n$ sign "
                    "patterns of $\\log(x_b/y_b)$; no distributional assumption; its "
                    "smallest attainable $p$ is $2^{1-n}$)",
    }[a["primary_test"]]
    v: dict[str, Any] = {
        "campaign": tables.tex(campaign.name),
        "runs": len(runs_per_cell),
        "models": runs["model"].nunique(),
        "environments": runs["environment"].nunique(),
        "reference": tables.tex(campaign.reference),
        "alpha": a["alpha"],
        "margin": f"{100 * a['equivalence_margin']:g}",
        "resamples": f"{a['bootstrap_resamples']:,}".replace(",", "\\,"),
        "primary-rule": rule_text,
        "excluded": len(q["excluded"]),
        "findings": len(q["findings"]),
        "headline-metric": tables.tex(reg[head].label.lower()) if head else "--",
        "family": 0, "significant-bh": 0, "significant-bonf": 0, "equivalent": 0,
        "secondary-family": 0, "secondary-significant-bh": 0, "primary-metrics": "--",
        "overhead-min": "--", "overhead-max": "--",
    }
    if campaign.is_import:
        v["design-text"] = (
            "These are imported results of a study this workflow did not run ("
            + tables.tex(campaign.raw.get("description", campaign.analysis["import_csv"]))
            + "). Their design (order of runs, warm-up, thermal state, what the timing "
            "includes) is as the source reports it; the analysis can add tests, effect sizes "
            "and intervals but cannot remove confounds built into the measurement.")
    else:
        t = campaign.thermal
        sensors = sorted(set(runs["sensor"].dropna())) if "sensor" in runs else []
        if sensors == ["none"]:
            gate = ("No temperature sensor was available, so before every run the gate waited "
                    f"only until {t['min_interval_s']:g}\\,s had passed since the previous run")
        else:
            gate = ("Before every run a thermal gate waits until the "
                    f"{tables.tex('/'.join(sensors) or t['sensor'])} sensor reads below "
                    f"{t['threshold_c']:g}\\,$^\\circ$C and at least "
                    f"{t['min_interval_s']:g}\\,s have passed since the previous run")
            if t.get("stability_s"):
                gate += (f", every reading for the last {t['stability_s']:g}\\,s having been "
                         "below that threshold")
        n_machines = runs["machine"].nunique() if "machine" in runs else 1
        split = any(f.check == "block_split" for f in quality.machines(runs))
        machines_text = (
            " All runs were made on one machine (one GPU)." if n_machines == 1 else
            f" The runs were made on {n_machines} machines (GPU UUIDs in the system table); "
            + ("some blocks were split between machines (see the data-quality section)"
               if split else "every block ran on one machine")
            + ", and a machine-adjusted relative difference (a fixed effect per machine on "
            "log values) is in the machine-readable results beside the plain one.")
        v["page-cache-text"] = page_cache_text(campaign, runs)
        v["repetitions"] = campaign.repetitions
        v["design"] = campaign.schedule["design"]
        v["design-text"] = (
            f"Each model runs {campaign.repetitions} times in every environment; repetition "
            "$i$ of a model is a block holding one run of every environment, so the analysis "
            "can pair runs within blocks. The order of environments within blocks follows a "
            f"counterbalanced {tables.tex(campaign.schedule['design'])} design, so that slow "
            "drift of temperature, page cache or background load cannot favour one "
            f"environment. {gate}; "
            f"after every run a cooldown of {t['cooldown_s']:g}\\,s follows. Telemetry is "
            f"sampled on the host at {campaign.telemetry['hz']:g}\\,Hz, outside the "
            "environment under test." + machines_text)
    v.update(calibration_macros(q.get("calibration") or {"status": "none"}, reg))
    v["aa-text"] = aa_text(campaign, v["aa-sentence"])
    v["statistics-text"] = statistics_text(campaign, rule_text)
    if results is not None:
        alpha = a["alpha"]
        fam = results["family"] if "family" in results else pd.Series("primary",
                                                                       index=results.index)
        prim, sec = results[fam == "primary"], results[fam == "secondary"]
        v["family"] = int(prim["p"].notna().sum())
        v["significant-bh"] = int((prim["p_bh"] < alpha).sum())
        v["significant-bonf"] = int((prim["p_bonferroni"] < alpha).sum())
        v["equivalent"] = int((prim["tost_p"] < alpha).sum())
        v["secondary-family"] = int(sec["p"].notna().sum())
        v["secondary-significant-bh"] = int((sec["p_bh"] < alpha).sum())
        v["primary-metrics"] = tables.tex(", ".join(
            reg[m].label.lower() if m in reg else m for m in dict.fromkeys(prim["metric"])))
        h = results[(results.metric == head) & fam.isin(["primary", "secondary"])]
        if not h.empty:
            v["overhead-min"] = tables.pct(h["rel_overhead"].min())
            v["overhead-max"] = tables.pct(h["rel_overhead"].max())
        for _, r in results.iterrows():
            key = f"{r.model}/{r.environment}/{r.metric}"
            v[f"rel/{key}"] = tables.pct(r.rel_overhead)
            v[f"rel-ci/{key}"] = f"[{tables.pct(r.rel_ci_low)}, {tables.pct(r.rel_ci_high)}]"
            v[f"p/{key}"] = tables.pval(r.p)
            v[f"p-bh/{key}"] = tables.pval(r.p_bh)
            v[f"test/{key}"] = r.primary_test
    for (model, env, metric), g in runs.groupby(["model", "environment", "metric"]):
        mean = g["value"].mean()
        v[f"mean/{model}/{env}/{metric}"] = tables.num(mean) if not math.isnan(mean) else "--"
    records.atomic_write_text(out_numbers, tables.macros(v))
    records.atomic_write_text(out_quality, _quality_tex(q))
