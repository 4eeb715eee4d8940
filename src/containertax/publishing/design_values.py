"""The values numbers.tex gives the paper's methods: the design as it ran (blocks, order,
thermal gate, cooldown, sensor, machines, page cache, where each environment ran), an
imported study's names, and the outlier rule's thresholds. Values and conditions only:
the sentences are in paper/main.tex.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from containertax import runtimes
from containertax.campaign.config import Campaign
from containertax.publishing import facts, tables
from containertax.statistics import facts as stats_facts
from containertax.statistics import hostmarkers, quality, texts
from containertax.statistics.policy import environment_order

# the gate's sensor (thermal.sensor) as the methods name it: 'the GPU (NVML) sensor'
SENSOR_WORDS = {"nvml": "GPU (NVML)", "cpu": "CPU"}


def campaign_facts(campaign: Campaign, runs: pd.DataFrame) -> dict[str, Any]:
    """The campaign's facts (statistics/facts.py) as the findings rule wrote them, else
    computed here (a step called outside the workflow)."""
    found = stats_facts.read(campaign.paths.facts)
    return found if found.get("models") else stats_facts.build(campaign, runs)


def block_values(campaign: Campaign, runs: pd.DataFrame) -> dict[str, Any]:
    """How many times each model ran in every environment (its complete blocks, from the
    facts table): one number where every model ran as often, else each model's count."""
    models = campaign_facts(campaign, runs).get("models") or {}
    counts = {model: int(v["blocks"]) for model, v in models.items()}
    uniform = len(set(counts.values())) <= 1
    return {"blocks-uniform": uniform,
            "blocks-each": next(iter(counts.values())) if counts else 0,
            "blocks-per-model": texts.tex(tables.join_words([
                f"{model} {n} {'time' if n == 1 else 'times'}"
                for model, n in counts.items()])) or "--"}


def design_values(campaign: Campaign, runs: pd.DataFrame) -> dict[str, Any]:
    """The design as it ran: blocks, order, gate, cooldown, sensor, machines."""
    if campaign.is_import:
        blocks = runs.groupby(["model", "environment"])["repetition"].nunique()
        return {"imported": True,
                "repetitions-import": tables.join_words(sorted({str(int(reps))
                                                                for reps in blocks})),
                "gate-constant": False, "random-weights": False,
                **import_study_values(campaign),
                **import_count_values(campaign),
                # nothing is known of how the source read peak memory
                **memory_source_values({}, runs)}
    thermal, sched = campaign.thermal, campaign.schedule
    sensors = sorted(set(runs["sensor"].dropna())) if "sensor" in runs else []
    cells = runs.drop_duplicates(["model", "environment", "repetition"])
    waits = cells["gate_waited_s"].dropna() if "gate_waited_s" in cells else pd.Series()
    n_machines = runs["machine"].nunique() if "machine" in runs else 1
    found = facts.from_records(campaign.root)
    # the Docker SDK's containers: the sentences on host software and device nodes speak of
    # the Docker Engine's launch (runtimes/docker.py)
    docker = [env for env in found["environments"]
              if runtimes.get(env["kind"]).launcher == "docker"]
    host_dirs = sorted({folder for env in docker for folder in env["host_dirs"].split(", ")
                        if folder})
    return {
        "imported": False,
        "repetitions": campaign.repetitions,
        **block_values(campaign, runs),
        "design-williams": sched["design"] == "williams",
        "design-alternating": sched["design"] == "alternating",
        "design-random": sched["design"] == "random",
        "models-interleaved": sched.get("models") == "interleaved",
        "sensor-none": sensors in ([], ["none"]),
        "sensor": texts.tex("/".join(SENSOR_WORDS.get(sensor, sensor) for sensor in sensors
                             if sensor != "none")
                             or SENSOR_WORDS.get(thermal["sensor"], thermal["sensor"])),
        "threshold": f"{thermal['threshold_c']:g}",
        "min-interval": f"{thermal['min_interval_s']:g}",
        "has-stability": bool(thermal.get("stability_s")),
        "stability": f"{thermal.get('stability_s') or 0:g}",
        "cooldown": f"{thermal['cooldown_s']:g}",
        **cooldown_record_values(campaign),
        "cooldown-adaptive": thermal.get("cooldown", "fixed") == "adaptive",
        "adaptive-band": f"{thermal.get('adaptive', {}).get('band_c', 0):g}",
        "adaptive-min": f"{thermal.get('adaptive', {}).get('min_s', 0):g}",
        "adaptive-max": f"{thermal.get('adaptive', {}).get('max_s', 0):g}",
        "telemetry-hz": f"{campaign.telemetry['hz']:g}",
        # constant as printed (figures.gate_waits draws no figure then): one sentence
        "gate-constant": bool(len(waits)) and tables.distinct_as_printed(waits) == 1,
        "gate-wait": tables.num(float(waits.median())) if len(waits) else "--",
        "gate-wait-max": tables.num(float(waits.max())) if len(waits) else "--",
        "n-machines": n_machines,
        # host names only: lent or cloned machines may share one (the runs' GPUs, by UUID,
        # are told apart; two GPUs under one host name may be one host or two)
        "n-hosts": len(found["hosts"]),
        "host-names": texts.tex(tables.join_words(found["hosts"])) or "--",
        "n-gpus": len(found["gpus"]),
        "gpu": bool(found["gpus"]),
        "gpu-names": texts.tex(tables.join_words(sorted(set(found["gpus"].values())))) or "--",
        **split_block_values(runs),
        "random-weights": any(load["random_weights"] for load in found["workloads"]),
        "container-host-software": bool({"/usr", "/opt"} & set(host_dirs)),
        "container-host-dirs": texts.tex(tables.join_words(host_dirs)) if host_dirs else "--",
        "has-docker": bool(docker),
        # whether any environment ran natively, by its records: a campaign of container
        # set-ups only (h200-factorial) has no 'native and containerised runs'
        "has-native": native_ran(found),
        **declared_mount_values(campaign),
        "docker-device-nodes": any("device nodes" in env["gpu"] for env in docker),
        **page_cache_values(campaign, runs),
        **where_ran_values(campaign, runs),
        **cpuset_values(found),
        **memory_source_values(found, runs),
    }


def cooldown_record_values(campaign: Campaign) -> dict[str, Any]:
    """Runs whose cooldown left no record beside them (raw/<model>/<env>/<rep>.cooldown.json):
    'after every run a cooldown follows' is the design, and h100-sani-cold's last run has
    none (the lent machine's call ended during it)."""
    raw = campaign.paths.raw_dir
    runs = [p for p in raw.glob("*/*/rep*.json")
            if p.name.count(".") == 1 and not p.parts[-3].startswith(".")] \
        if raw.is_dir() else []
    missing = [p for p in runs if not p.with_name(f"{p.stem}.cooldown.json").exists()]
    return {"cooldown-missing": len(missing), "cooldown-runs": len(runs),
            "cooldown-missing-each": texts.tex(", ".join(
                f"{p.parts[-3]}/{p.parts[-2]}/{p.stem}" for p in sorted(missing))) or "--"}


def native_ran(found: dict[str, Any]) -> bool:
    """Whether any environment of the records (facts.from_records) ran natively: its kind
    runs the host's own processes, no image (the kind's declaration, never its name)."""
    return any(runtimes.get(env["kind"]).needs_image is False for env in found["environments"])


def declared_mount_values(campaign: Campaign) -> dict[str, Any]:
    """The mounts a config declared on purpose (environments.<id>.mount_reasons: /etc, a
    socket, a results folder ... which check refuses otherwise), each with its reason: the
    reader learns what the process under test could reach."""
    declared = [f"{env.id}: {host} ({reason})" for env in campaign.environments
                if not env.spec.get("replica_of")
                for host, reason in sorted((env.spec.get("mount_reasons") or {}).items())]
    return {"has-declared-mounts": bool(declared),
            "declared-mounts": texts.tex("; ".join(declared)) if declared else "--"}


def outlier_values(runs: pd.DataFrame) -> dict[str, Any]:
    """The outlier rule's thresholds at this campaign's usual group size n and number of
    environments k (each table is judged at its own: statistics/quality.py)."""
    data = runs[runs["value"].astype(float).abs().lt(math.inf)]
    if data.empty:
        return {"outlier-n": "--", "outlier-k": "--", "outlier-pooled-z": "--",
                "outlier-own-z": "--", "outlier-level": "--"}
    count = int(data.groupby(["model", "metric", "environment"]).size().mode().iloc[0])
    envs_per_table = int(data.groupby(["model", "metric"])["environment"].nunique()
                         .mode().iloc[0])
    own, pooled = quality.outlier_cuts(count, envs_per_table)
    return {"outlier-n": count, "outlier-k": envs_per_table,
            "outlier-pooled-z": f"{pooled:g}",
            "outlier-own-z": f"{own:g}", "outlier-level": f"{quality.outlier_level(count):g}"}


def page_cache_values(campaign: Campaign, runs: pd.DataFrame) -> dict[str, Any]:
    """What the page cache was before the runs: dropped, kept, or not recorded."""
    cells = runs.drop_duplicates(["model", "environment", "repetition"])
    states = cells["page_cache"].fillna("") if "page_cache" in cells else pd.Series(dtype=str)
    count, dropped = len(cells), int((states == "dropped").sum())
    kept = int((states == "kept").sum())
    return {"page-cache-all-dropped": dropped == count,
            "page-cache-unrecorded": dropped + kept == 0,
            "page-cache-dropped": dropped, "page-cache-kept": kept,
            "page-cache-mode": texts.tex(campaign.raw.get("memory", {}).get(
                "drop_page_cache", "auto"))}


def clock_values(quality_report: dict[str, Any]) -> dict[str, Any]:
    """The threat item on clocks lowered inside the measured windows (quality's
    throttled_window findings: any reason over clocks.THRESHOLD of any run's window)."""
    hits = [finding["details"] for finding in quality_report["findings"]
            if finding["check"] == "throttled_window"]
    words = "; ".join(f"{hit['words']}: {hit['range_pct']} of the {hit['window']} "
                      + ("in every run" if hit["runs"] == hit["of_runs"]
                         else f"in {hit['runs']} of {hit['of_runs']} runs")
                      for hit in hits)
    return {"clock-throttled": bool(hits), "clock-throttle-words": tables.unbroken_pct(
        texts.tex(words)) or "--"}


def where_ran_values(campaign: Campaign, runs: pd.DataFrame) -> dict[str, Any]:
    """Where each environment ran (a VM, a container), from its probe's markers."""
    from containertax.statistics.aggregate import read_records

    recs = [rec for _, rec in read_records(campaign.root)]
    return hostmarkers.values(recs, campaign.reference, environment_order(campaign, runs))


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
    return {"description": texts.tex(title),
            "import-source": texts.tex(study.get("source", "")) or "--",
            "has-import-source": bool(study.get("source")),
            "import-cited": bool(key),
            "import-citep": f" \\citep{{{key}}}" if key else "",
            "import-citet": f"\\citet{{{key}}}" if key else "",
            **{f"order-{known}": order == known for known in IMPORT_ORDERS}}


def import_count_values(campaign: Campaign) -> dict[str, Any]:
    """What the import step did to the table (paths.IMPORT_REPORT, written by the run's
    import step): the exact copies it dropped (analysis.import_duplicates: drop) and the
    runs it numbered by start time (analysis.import_repeats: number_by_start), so that the
    data section says how the analysed rows differ from the source's."""
    try:
        counts = json.loads(campaign.paths.import_report.read_text())
    except (OSError, ValueError):
        counts = {}
    counts = counts if isinstance(counts, dict) else {}
    dropped, renumbered = (int(counts.get(k) or 0) for k in ("copies_dropped",
                                                              "runs_renumbered"))
    return {"import-rows-read": int(counts.get("rows_read") or 0),
            "import-dropped": dropped, "has-import-dropped": dropped > 0,
            "import-renumbered": renumbered, "has-import-renumbered": renumbered > 0}


def cpuset_values(found: dict[str, Any]) -> dict[str, Any]:
    """Which cores `cpuset_cpus: performance` gave each environment (facts.from_records:
    resolved on the machine that ran them), for the design's sentence; no sentence, not
    an empty one, where no environment asked for them."""
    cpusets = found.get("cpusets") or {}
    parts = [f"{texts.tex(env)} on CPUs {texts.tex(', '.join(cores))}"
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


def split_block_values(runs: pd.DataFrame) -> dict[str, Any]:
    """How many blocks ran on more than one machine, and which (quality.split_blocks): the
    methods say 'one block' or 'N blocks' by them (h100-stopping-exact said 'Some blocks'
    of qwen2-0.5b's block 3 alone)."""
    split = quality.split_blocks(runs) if "machine" in runs else {}
    each = [f"{model} block{'s' if len(blocks) > 1 else ''} "
            f"{tables.join_words(str(b) for b in blocks)}" for model, blocks in split.items()]
    count = sum(len(blocks) for blocks in split.values())
    return {"blocks-split": count > 0, "blocks-split-count": count,
            "blocks-split-each": texts.tex("; ".join(each)) or "--"}

