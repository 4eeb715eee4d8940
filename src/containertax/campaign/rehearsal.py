"""A rehearsal before a campaign of days: every model in every environment once, with few
requests, then a go/no-go table.

The rehearsal is its own campaign (`<name>-rehearsal`, its own results folder): its records
never enter the study's analysis. It runs the real workflow (preflight, datasets, gates,
runs, cooldowns) for the first block of cells, then reads what happened: whether each
cell started and finished, its memory and KV cache, its duration, that duration projected to
the full number of requests against the model's timeout (a cell that did not run: from the
same model's run in another environment, else counted at its timeout, said so), the whole
campaign's wall time (runs + gates + cooldowns) and disk, and that time without and with a
stopping rule (the config's, or the one it could add: campaign/stopping.py's plan).
"""

from __future__ import annotations

import copy
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from containertax import runtimes, workloads
from containertax.campaign import datasets, schedule, stopping
from containertax.campaign.config import Campaign, load_campaign, load_file
from containertax.campaign.paths import CampaignPaths
from containertax.core import packaged, records

SNAKEFILE = packaged.snakefile()
MODELS_DOC = "docs/dgx-spark.md"
OOM = ("out of memory", "outofmemory", "oom", "cudaerrormemoryallocation", "status 137",
       "killed")


def derive(campaign: Campaign, requests: int | None = None) -> dict[str, Any]:
    """The rehearsal campaign: one repetition, few requests per model, short cooldowns."""
    raw = copy.deepcopy(campaign.raw)
    raw.pop("based_on", None)
    raw["campaign"] = f"{campaign.name}-rehearsal"
    raw["description"] = f"Rehearsal of {campaign.name} (few requests, one repetition)"
    raw["repetitions"] = 2  # the schema's minimum; only block 1 runs (run())
    for model in raw["models"]:
        w = workloads.get(campaign.workload_kind(model["id"]))
        if w.rehearsal is not None:  # the parameter that sets how much work a run does
            key, few = w.rehearsal.key, w.rehearsal.few
            full = campaign.workload_params(model["id"]).get(key, w.defaults[key])
            model[key] = min(int(full), requests or few)
    for spec in raw.get("environments", {}).values():
        # options another campaign has not derived yet (phase 2B for docker_optimised):
        # rehearsed with the options written in the config (the baseline's), said so
        if (spec.get("options_source") or {}).get("pending"):
            spec.pop("options_source")
            spec["declared_by_hand"] = True
    t = raw["thermal"]
    t["cooldown_s"] = min(t["cooldown_s"], 10)
    t["min_interval_s"] = 0  # the gate still waits for temperature: that wait is measured
    return raw


def run(config_path: Path, requests: int | None = None, workdir: Path | None = None,
        snakemake_args: list[str] | None = None) -> dict[str, Any]:
    """Derive, run the rehearsal's cells with Snakemake, and judge it."""
    from containertax.campaign.config import load_file

    campaign = load_file(config_path)
    derived = derive(campaign, requests)
    rehearsal = load_campaign(derived, str(config_path))
    workdir = workdir or Path.cwd()
    root = workdir / rehearsal.root if not rehearsal.root.is_absolute() else rehearsal.root
    root.mkdir(parents=True, exist_ok=True)
    cfg = CampaignPaths(root).rehearsal_config
    records.atomic_write_text(cfg, yaml.safe_dump(derived, sort_keys=False))
    block = schedule.block_targets(rehearsal, {1})  # one run of every model x environment
    argv = [sys.executable, "-m", "snakemake", "--snakefile", str(SNAKEFILE), "--directory",
            str(workdir), *block, *(snakemake_args or []), "--configfile", str(cfg)]
    proc = subprocess.run(argv, cwd=workdir)
    result = judge(campaign, load_campaign(derived, str(cfg)), root)
    result["snakemake_returncode"] = proc.returncode
    records.atomic_write_text(CampaignPaths(root).rehearsal_json,
                              json.dumps(result, indent=1) + "\n")
    records.atomic_write_text(CampaignPaths(root).rehearsal_md, render(result) + "\n")
    return result


def _metrics(rec: dict[str, Any]) -> dict[str, float]:
    return {m["name"]: m["value"] for m in rec.get("metrics", [])}


def _measured_s(kind: str, m: dict[str, float], count: int) -> float:
    """The part of a run that scales with the number of requests (or repeats), as the
    kind declares it (Workload.rehearsal)."""
    r = workloads.get(kind).rehearsal
    return r.measured_s(m, count) if r is not None else 0.0


STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


def _errors(log: Path) -> list[str]:
    """Each ERROR message of a step's log with its continuation lines (a preflight's
    message lists the probe's problems on the lines after its first)."""
    if not log.exists():
        return []
    found: list[list[str]] = []
    current: list[str] | None = None
    for line in log.read_text(errors="replace").splitlines():
        if STAMP.match(line):
            current = None
            if " ERROR " in line:
                current = [line.split(" ERROR ", 1)[1]]
                found.append(current)
        elif current is not None and line.strip():
            current.append(line.strip())
    return ["\n".join(block) for block in found]


def _about(message: str, model_id: str) -> str:
    """The lines of a multi-line error about this model, else its first lines: the row
    names its own cause, and another model's where that one blocked the environment."""
    lines = message.splitlines()
    mine = [ln for ln in lines if ln.startswith(f"model {model_id}:")]
    if mine:
        return " ".join(mine) + (f" See {MODELS_DOC} for a fallback checkpoint."
                                 if any("quantisation" in ln for ln in mine) else "")
    others = [ln for ln in lines if re.match(r"model \S+:", ln)]
    if others:
        return "blocked by another model's check: " + " ".join(others)
    return " ".join(lines[:3])


def _image_missing(image: str) -> bool | None:
    """Whether the local Docker Engine lacks the image (None: no engine to ask)."""
    try:
        import docker
    except ImportError:
        return None
    try:
        docker.from_env(timeout=10).images.get(image)
    except docker.errors.ImageNotFound:
        return True
    except Exception:  # noqa: BLE001 - no engine to ask: unknown, not missing
        return None
    return False


def why_not_run(study: Campaign, root: Path, model_id: str, env_id: str) -> str:
    """The real cause of a cell that did not run, with its fix: the environment's preflight
    error, else what kept preflight from running (the checkpoint, the image, a dataset)."""
    errors = _errors(root / "logs" / "preflight" / f"{env_id}.log")
    if errors:
        return "preflight failed: " + _about(errors[0], model_id)
    causes = []
    index = next(i for i, m in enumerate(study.models) if m.id == model_id)
    path = study.workload_params(model_id).get("model_path")
    if path and not Path(path, "config.json").is_file():
        causes.append(
            f"model {model_id}: no checkpoint at {path} (no config.json on this host). Fix: "
            f"download it into {path} ({MODELS_DOC}, section 2) or correct "
            f"models[{index}].model_path in {study.source}")
    env = study.environment(env_id)
    if runtimes.get(env.kind).needs_image and env.image:
        exported = _errors(CampaignPaths(root).rootfs_log(env.image))
        if exported:
            causes.append("exporting the image failed: " + " ".join(exported[0].splitlines()))
        elif _image_missing(env.image):
            causes.append(
                f"image '{env.image}' is not in the local Docker Engine. Fix: docker pull "
                f"{env.image} (or build/load it), or correct environments.{env_id}.image in "
                f"{study.source}")
    for log in sorted((root / "logs").glob("dataset*/**/*.log")):
        for message in _errors(log):
            if path and str(path) in message and causes:
                continue  # the missing checkpoint, named above
            causes.append("the dataset step failed (every environment's preflight waits for "
                          "it): " + " ".join(message.splitlines()))
    if causes:
        return "preflight did not run: " + "; ".join(c.rstrip(".") for c in causes)
    return ("preflight did not run and no step logged an error: see Snakemake's output "
            f"(and {root / 'logs'})")


def _size(paths: list[Path]) -> int:
    total = 0
    for p in paths:
        if p.is_file():
            total += p.stat().st_size
        elif p.is_dir():
            total += sum(f.stat().st_size for f in p.rglob("*") if f.is_file()
                         and not f.is_symlink())
    return total


def judge(study: Campaign, rehearsal: Campaign, root: Path) -> dict[str, Any]:
    """One row per model x environment, and the study's projected wall time and disk."""
    ledger = records.cell_events(records.read_ledger(root))  # a move aside is no cell's
    failures: dict[tuple[str, str], str] = {}
    for e in ledger:
        if e.get("event") == "end" and e.get("status") == "failed":
            failures[(e["model"], e["environment"])] = f"{e['step']}: {e.get('error', '')}"
    t = study.thermal
    rows = []
    for model in study.models:
        kind = study.workload_kind(model.id)
        params = study.workload_params(model.id)
        timeout = float(params.get("timeout_s", study.workload["timeout_s"]))
        r = workloads.get(kind).rehearsal
        key = r.key if r is not None else None
        full = int(params.get(key, workloads.get(kind).defaults.get(key, 1))) if key else 1
        few = int(rehearsal.workload_params(model.id).get(key, full)) if key else 1
        for env in study.environments:
            cell = rehearsal.paths.cell(model.id, env.id, 1)
            paths = {"raw": cell.raw, "telemetry": cell.telemetry, "requests": cell.requests,
                     "run_log": cell.run_log}
            preflight = CampaignPaths(root).preflight(env.id).exists()
            risk = [r for r in (records.read_json(CampaignPaths(root).preflight(env.id))
                                .get("at_risk") or [] if preflight else [])
                    if r["model"] == model.id]
            row: dict[str, Any] = {"model": model.id, "environment": env.id,
                                   "model_path": params.get("model_path"),
                                   "preflight": preflight, "ran": paths["raw"].exists(),
                                   "timeout_s": timeout, "requests": f"{few}/{full}"}
            if risk:
                row["at_risk"] = f"{risk[0]['why']}; fallback: {risk[0]['fallback']}"
            why = failures.get((model.id, env.id))
            if row["ran"]:
                rec = records.read_json(paths["raw"])
                m = _metrics(rec)
                wall = m.get("process_wall_s", float("nan"))
                measured = _measured_s(kind, m, few)
                projected = wall - measured + measured * full / max(few, 1)
                gate = records.read_json(paths["raw"]).get("gate", {})
                row.update(
                    fits="yes", kv_cache_gib=m.get("kv_cache_gib"),
                    host_mem_peak_gib=m.get("host_mem_used_peak_gib"),
                    duration_s=round(wall, 1), projected_s=round(projected, 1),
                    gate_wait_s=float(gate.get("waited_s", 0.0)),
                    disk_bytes=_size([paths[k] for k in ("raw", "telemetry", "requests",
                                                         "run_log")]))
                row["go"] = projected < timeout
                row["why"] = "" if row["go"] else (
                    f"projected {projected:.0f} s > timeout_s {timeout:.0f} s: would time out")
                if risk:
                    row["why"] = "; ".join(w for w in (row["why"], "at risk: "
                                                       + row["at_risk"]) if w)
            else:
                text = (why or "").lower()
                row.update(fits="no (out of memory)" if any(w in text for w in OOM) else "?",
                           go=False, why=why or (why_not_run(study, root, model.id, env.id)
                                                 if not preflight else "did not run"))
            rows.append(row)
    ran = [r for r in rows if r["ran"]]
    _project_unrun(rows, ran)
    gate_temp = (sum(r["gate_wait_s"] for r in ran) / len(ran)) if ran else 0.0
    overhead = _harness_overhead(ledger, ran, rehearsal.thermal["cooldown_s"])
    per_cell_wait = (t["cooldown_s"] + max(0.0, t["min_interval_s"] - t["cooldown_s"])
                     + gate_temp + overhead)
    run_s = sum(r["projected_s"] for r in rows)
    wall = study.repetitions * (run_s + len(rows) * per_cell_wait)
    record_bytes = sum(r["disk_bytes"] * r["projected_s"] / max(r["duration_s"], 1e-9)
                       for r in ran)  # telemetry grows with the run
    static = _size([p for p in CampaignPaths(root).rootfs_dir.glob("*") if p.is_dir()])
    datasets = _dataset_bytes(study, rehearsal)
    sources = [r["projected_from"] for r in rows]
    block_s = len(rows) * per_cell_wait + run_s  # one block: every model x environment once
    return {
        "study": study.name, "rehearsal": rehearsal.name, "root": str(root),
        "rows": rows, "go": all(r["go"] for r in rows),
        "estimate": {
            "cells": study.repetitions * len(rows),
            "run_s": round(study.repetitions * run_s, 1),
            "cooldown_s_per_cell": t["cooldown_s"],
            "gate_s_per_cell": abs(round(per_cell_wait - t["cooldown_s"] - overhead, 1)),
            "harness_s_per_cell": round(overhead, 1),
            "wall_s": round(wall, 1), "wall_days": round(wall / 86400, 2),
            "projected_from_run": sources.count(THIS_RUN),
            "projected_from_other_environment": sum(s.startswith(OTHER) for s in sources),
            "counted_at_timeout": sources.count(AT_TIMEOUT),
            "disk_records_bytes": int(study.repetitions * record_bytes),
            "disk_rootfs_bytes": static, "disk_datasets_bytes": datasets,
        },
        "stopping": _stopping(study, block_s),
    }


def study_estimate(result: dict[str, Any], campaigns: list[Campaign]) -> list[dict[str, Any]]:
    """Each campaign of a study, timed from one rehearsal (of the study's widest campaign):
    per cell, its model's projected run (the longest over the environments rehearsed, else
    its timeout) plus the rehearsal's cooldown, minimum-interval, gate and workflow time per
    cell, times the campaign's repetitions and environments. A model the rehearsal did not
    time takes the run of the same checkpoint (model_path) where one was timed: phase 2F's
    arms (llama-3-8b-pinned-cold, ...) are the rehearsed models under other ids, and were
    counted at their 8000 s timeouts (issue #45). A factorial campaign's declared
    alternative (factorial.alternative, not run) follows its row, timed the same way
    (`alternative_of` names the campaign it would replace); every row carries its wall time
    under a stopping rule (`stopping`: its own, else the default rule)."""
    e = result["estimate"]
    per_cell_wait = e["cooldown_s_per_cell"] + e["gate_s_per_cell"] + e["harness_s_per_cell"]
    runs: dict[str, float] = {}
    by_path: dict[str, float] = {}
    for row in result["rows"]:
        runs[row["model"]] = max(runs.get(row["model"], 0.0), float(row["projected_s"]))
        if row.get("model_path"):
            by_path[row["model_path"]] = max(by_path.get(row["model_path"], 0.0),
                                             float(row["projected_s"]))

    def projected(c: Campaign, model: str) -> float | None:
        return runs.get(model, by_path.get(c.workload_params(model).get("model_path") or ""))

    def timed(c: Campaign) -> dict[str, Any]:
        t = c.thermal
        wait = max(float(t["cooldown_s"]), float(t["min_interval_s"])) - float(
            e["cooldown_s_per_cell"]) + per_cell_wait
        cells = c.repetitions * len(c.environments) * len(c.models)
        each = {m.id: projected(c, m.id) for m in c.models}
        run_s = c.repetitions * len(c.environments) * sum(
            float(c.workload_params(m.id).get("timeout_s", c.workload["timeout_s"]))
            if each[m.id] is None else each[m.id] for m in c.models)
        wall_s = round(run_s + cells * wait, 1)
        return {"campaign": c.name, "cells": cells, "run_s": round(run_s, 1),
                "wait_s": round(cells * wait, 1), "wall_s": wall_s,
                "from_timeout": [m.id for m in c.models if each[m.id] is None],
                "from_checkpoint": [m.id for m in c.models
                                    if m.id not in runs and each[m.id] is not None],
                "stopping": _stopping_range(c, wall_s)}

    out = []
    for c in campaigns:
        out.append(timed(c))
        alternative = c.alternative()
        if alternative is not None:
            out.append({**timed(load_file(alternative)), "alternative_of": c.name,
                        "config": alternative.name})
    return out


def _stopping_range(c: Campaign, wall_s: float) -> dict[str, Any]:
    """A campaign's wall time under a stopping rule, from every model stopping at the first
    look to every model running all its blocks: its own rule (`stopping:`), else the rule it
    could add (stopping.default_stopping). Blocks are the campaign's cost unit: each runs
    every cell once, so the time scales with the blocks run."""
    own = bool(c.raw.get("stopping"))
    stop = c.raw.get("stopping") if own else stopping.default_stopping(c.raw)
    if stop is None:
        return {"rule": None, "why": (
            f"the default rule's first look, block {stopping.default_first_look(c.raw)} "
            f"(whole design periods, at least the "
            f"{stopping.min_blocks_exact(float(c.analysis.get('alpha', 0.05)))} blocks the "
            f"exact tests need), is not before its last, {c.repetitions}")}
    first = stopping.Rule.from_config({**c.raw, "stopping": stop}).looks()[0]
    return {"rule": "own" if own else "default", "min_blocks": first,
            "max_blocks": c.repetitions,
            "min_s": round(wall_s * first / c.repetitions, 1), "max_s": wall_s}


def render_study(rows: list[dict[str, Any]]) -> str:
    """The study's campaigns and their wall time, gates and cooldowns included; beside
    each, its wall time under a stopping rule; a factorial campaign's declared alternative
    on the line after it, and the study's total with either."""
    lines = ["| campaign | runs | runs' time | cooldowns, intervals, gates, workflow | "
             "wall time | with a stopping rule |", "|---|---|---|---|---|---|"]
    for r in rows:
        note = f" (at timeout: {', '.join(r['from_timeout'])})" if r["from_timeout"] else ""
        if r.get("from_checkpoint"):
            note += (f" (from the run of the same checkpoint: "
                     f"{', '.join(r['from_checkpoint'])})")
        name = r["campaign"]
        if r.get("alternative_of"):
            name += (f" (one at a time, the declared alternative, not run: "
                     f"{r['config']})")
        lines.append(f"| {name} | {r['cells']} | {_dur(r['run_s'])}{note} | "
                     f"{_dur(r['wait_s'])} | {_dur(r['wall_s'])} | "
                     f"{_stopping_words(r.get('stopping'))} |")
    plan = [r for r in rows if not r.get("alternative_of")]
    total = sum(r["wall_s"] for r in plan)
    lines += ["", f"{'Study' if len(plan) > 1 else 'Campaign'}: "
              f"{sum(r['cells'] for r in plan)} runs, {_dur(total)} "
              f"({total / 86400:.1f} days) one campaign after another."]
    low = sum(r["stopping"]["min_s"] if (r.get("stopping") or {}).get("rule")
              else r["wall_s"] for r in plan)
    if low < total:
        lines.append(f"With each campaign's stopping rule (its own, else the default): "
                     f"{_dur(low)} to {_dur(total)}, from every model stopping at its first "
                     "look to every model running all its blocks.")
    by_name = {r["campaign"]: r for r in plan}
    for alt in (r for r in rows if r.get("alternative_of")):
        mine = by_name[alt["alternative_of"]]
        runs = sum(r["cells"] for r in plan) - mine["cells"] + alt["cells"]
        wall = total - mine["wall_s"] + alt["wall_s"]
        lines.append(f"With {alt['alternative_of']}'s declared alternative ({alt['config']}, "
                     f"{alt['cells']} runs) instead of its factorial ({mine['cells']} runs): "
                     f"{runs} runs, {_dur(wall)} ({wall / 86400:.1f} days).")
    return "\n".join(lines)


def _stopping_words(s: dict[str, Any] | None) -> str:
    if not s:
        return ""
    if s["rule"] is None:
        return f"none: {s['why']}"
    which = "its rule" if s["rule"] == "own" else "the default rule"
    return (f"{which}: {_dur(s['min_s'])} to {_dur(s['max_s'])} (blocks "
            f"{s['min_blocks']} to {s['max_blocks']})")


THIS_RUN = "this run"
OTHER = "the run in "
AT_TIMEOUT = "timeout, not measured"


def _project_unrun(rows: list[dict[str, Any]], ran: list[dict[str, Any]]) -> None:
    """A row that did not run is projected from the same model's run in another
    environment (the same work: a container's cost is what the study measures, not the
    runtime's order of magnitude), else counted at its timeout, the most a run may take."""
    for row in rows:
        if row["ran"]:
            row["projected_from"] = THIS_RUN
            continue
        same = [r for r in ran if r["model"] == row["model"]]
        if same:
            longest = max(same, key=lambda r: r["projected_s"])
            row["projected_s"] = longest["projected_s"]
            row["projected_from"] = OTHER + longest["environment"]
            if longest["projected_s"] >= row["timeout_s"]:
                row["why"] += (f"; projected {longest['projected_s']:.0f} s (from "
                               f"{longest['environment']}) > timeout_s "
                               f"{row['timeout_s']:.0f} s: would time out too")
        else:
            row["projected_s"] = row["timeout_s"]
            row["projected_from"] = AT_TIMEOUT


def _stopping(study: Campaign, block_s: float) -> dict[str, Any]:
    """The campaign's time without a stopping rule and with one: the config's rule, or the
    one it could add (stopping.default_stopping), expected for each planning SD of a
    comparison with no true difference and with a clear one (stopping.plan)."""
    comparisons = len(study.environments) - 1
    plan = stopping.plan(study.raw, comparisons)
    out: dict[str, Any] = {**plan, "block_s": round(block_s, 1),
                           "without_s": round(study.repetitions * block_s, 1)}
    if plan["rule"] is not None:
        out["min_s"] = round(plan["rule"]["looks"][0] * block_s, 1)
        for sc in out["scenarios"]:
            sc["wall_s"] = round(sc["expected_blocks"] * block_s, 1)
            sc["saved_pct"] = round(100 * (1 - sc["expected_blocks"] / study.repetitions), 1)
    return out


def _harness_overhead(ledger: list[dict[str, Any]], ran: list[dict[str, Any]],
                      cooldown_s: float) -> float:
    """Per cell, the time the workflow itself takes (Snakemake jobs, the steps' start-up):
    gate start to cooldown end, less the run, the gate's wait and the cooldown."""
    from datetime import datetime

    spans: dict[tuple[str, str], list[datetime]] = {}
    for e in ledger:
        if (e.get("step"), e.get("event")) in (("gate", "start"), ("cooldown", "end")):
            spans.setdefault((e["model"], e["environment"]), []).append(
                datetime.fromisoformat(e["utc"]))
    extra = []
    for r in ran:
        times = spans.get((r["model"], r["environment"]), [])
        if len(times) >= 2:
            total = (max(times) - min(times)).total_seconds()
            extra.append(max(0.0, total - r["duration_s"] - r["gate_wait_s"] - cooldown_s))
    return sum(extra) / len(extra) if extra else 0.0


def _dataset_bytes(study: Campaign, rehearsal: Campaign) -> int:
    """The full datasets' size, scaled from the rehearsal's (one JSON line per request)."""
    total = 0.0
    for path, model in datasets.all_datasets(rehearsal).items():
        w = workloads.get(rehearsal.workload_kind(model))
        if Path(path).exists() and w.rehearsal is not None:
            key = w.rehearsal.key
            few = rehearsal.workload_params(model)[key]
            full = study.workload_params(model).get(key, w.defaults[key])
            total += Path(path).stat().st_size * full / few
    return int(total)


def _fmt(v: Any, spec: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return format(v, spec) if spec else str(v)


def _dur(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _bytes(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _why(row: dict[str, Any]) -> str:
    """The row's cause, with its risk where preflight marked the model at risk."""
    why = str(row.get("why", ""))
    if row.get("at_risk") and "at risk" not in why:
        why = "; ".join(w for w in (why, f"at risk: {row['at_risk']}") if w)
    return why


def render(result: dict[str, Any]) -> str:
    """The go/no-go table and the estimate, as Markdown (printed and written)."""
    head = ["model", "environment", "starts", "ran", "fits in memory", "KV cache GiB",
            "requests", "duration s", "projected s", "timeout s", "go", "why not"]
    lines = [f"# Rehearsal of {result['study']} ({result['rehearsal']}: {result['root']})", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in result["rows"]:
        cells = [r["model"], r["environment"], _fmt(r["preflight"]), _fmt(r["ran"]),
                 r.get("fits", "?"), _fmt(r.get("kv_cache_gib"), ".2f"), r["requests"],
                 _fmt(r.get("duration_s"), ".1f"), _projected(r),
                 _fmt(r["timeout_s"], ".0f"), "GO" if r["go"] else "NO-GO",
                 _why(r).replace("|", "/").replace("\n", " ")[:400]]
        lines.append("| " + " | ".join(cells) + " |")
    e = result["estimate"]
    counted = (f" ({e['projected_from_other_environment']} cell(s) projected from the same "
               "model in another environment, "
               f"{e['counted_at_timeout']} counted at their timeout)"
               if e["projected_from_other_environment"] or e["counted_at_timeout"] else "")
    lines += ["", f"Campaign {result['study']}: {e['cells']} runs; runs {_dur(e['run_s'])} + "
              f"per run {e['cooldown_s_per_cell']:g} s cooldown, {e['gate_s_per_cell']:g} s "
              f"gate and {e['harness_s_per_cell']:g} s workflow = {_dur(e['wall_s'])} "
              f"({e['wall_days']:g} days){counted}.",
              f"Disk: records {_bytes(e['disk_records_bytes'])}, exported root filesystems "
              f"{_bytes(e['disk_rootfs_bytes'])}, datasets {_bytes(e['disk_datasets_bytes'])}.",
              *_render_stopping(result["stopping"]),
              f"Verdict: {'GO' if result['go'] else 'NO-GO'}"]
    return "\n".join(lines)


def _projected(row: dict[str, Any]) -> str:
    """The projected duration, and where it comes from when not from this row's run."""
    value = _fmt(row.get("projected_s"), ".1f")
    source = row.get("projected_from", THIS_RUN)
    if source == THIS_RUN:
        return value
    return f"at most {value} ({source})" if source == AT_TIMEOUT else f"{value} ({source})"


def _render_stopping(s: dict[str, Any]) -> list[str]:
    """Without and with a stopping rule: the minimum and the expected campaign time."""
    head = f"Without a stopping rule: {_dur(s['without_s'])} (every block)."
    if s["rule"] is None:
        return ["", head + f" With one: {s['why']}."]
    r = s["rule"]
    which = ("the config's stopping rule" if r["from_config"] else
             "a stopping rule (not in the config: add `stopping: "
             + ", ".join(f"{k}: {v}" for k, v in r["stopping"].items()).join("{}") + "`)")
    lines = ["", head + f" With {which}, {r['spending']} spending, looks after "
             f"{', '.join(map(str, r['looks']))} blocks: at least {_dur(s['min_s'])} (every "
             "model stopping at its first look); expected, simulated per model with "
             f"{s['comparisons']} comparison(s) of one metric each (planning values of the "
             "per-block SD, not measurements):", "",
             "| per-block SD of a log ratio | true difference | expected blocks | "
             "campaign time | saved |", "|---|---|---|---|---|"]
    for sc in s["scenarios"]:
        lines.append(f"| {100 * sc['sd']:g} % | {100 * sc['effect']:g} % | "
                     f"{sc['expected_blocks']:.1f} | {_dur(sc['wall_s'])} | "
                     f"{sc['saved_pct']:g} % |")
    # the planning SDs as run CVs (a block's log ratio of two runs: SD = CV sqrt 2); the
    # rehearsal runs one block and measures no CV, so these are the CVs it can name
    cvs = sorted({sc["sd"] / math.sqrt(2) for sc in s["scenarios"]})
    warned = [w for cv in cvs if (w := stopping.noise_warning(
        cv, f"per-block SD {100 * cv * math.sqrt(2):g} %, a planning value, not measured"))]
    lines += ["", stopping.noise_words(), *warned]
    lines += ["", "Proposed for the first look: per planning SD, the looks and spending "
              "function with the fewest expected blocks under no true difference (same "
              "alpha, exact boundaries; a config takes it as its `stopping:`):", "",
              "| per-block SD of a log ratio | stopping | looks | expected blocks | "
              "O'Brien-Fleming every period |", "|---|---|---|---|---|"]
    for p in s.get("proposals", []):
        keys = "{" + ", ".join(f"{k}: {v:g}" if isinstance(v, float) else f"{k}: {v}"
                               for k, v in p["stopping"].items()) + "}"
        lines.append(f"| {100 * p['sd']:g} % | `{keys}` | "
                     f"{', '.join(map(str, p['looks']))} | {p['expected_blocks']:.1f} | "
                     f"{p['default_expected_blocks']:.1f} |")
    return [*lines, ""]
