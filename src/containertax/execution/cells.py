"""The three steps of a cell (gate, run, cooldown), each one ledger entry at start and end;
the run is here, gate and cooldown in execution/gating.py (callers import them there).

A failed step leaves no output but its log and its ledger lines; a failed run also
removes its gate token so that the next invocation gates the cell again.
"""

from __future__ import annotations

import csv
import hashlib
import io
import logging
import os
import shutil
import socket
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from containertax import workloads
from containertax.campaign import lanes
from containertax.campaign.config import Campaign
from containertax.campaign.paths import ORPHANED, CellPaths
from containertax.core import rawrecord, records
from containertax.core.cell import Cell
from containertax.core.metric import Metric
from containertax.execution import (
    compilecache,
    environments,
    hostmemory,
    memorychain,
    preflight,
    probing,
    provenance,
    thermal,
)
from containertax.execution.gating import (
    RunFailed,
    StorageFailure,
    find_cell,
    lane_gpu,
    lane_of,
    ledgered,
    sensor_for,
    wait_gate,
)
from containertax.execution.gpu import NvmlGpu
from containertax.execution.telemetry import Sampler
from containertax.workloads import timeline
from containertax.workloads.base import HostFacts

log = logging.getLogger("containertax")


def page_cache_mode(campaign: Any, params: dict[str, Any]) -> str:
    """memory.drop_page_cache, or a model's own arm (models[].page_cache, issue #40):
    dropped = required (a cold arm that did not drop would measure the other arm), inherited
    = never."""
    arm = params.get("page_cache")
    return {"dropped": "required", "inherited": "never"}.get(
        str(arm), campaign.raw["memory"]["drop_page_cache"])


def gpu_for(sensor: thermal.Sensor) -> NvmlGpu | None:
    """Full GPU telemetry wherever the thermal sensor is the GPU's own."""
    if isinstance(sensor, thermal.NvmlSensor):
        return NvmlGpu(sensor.device, nvml=sensor.nvml)
    return None


GPU_METRICS = [("energy_j", "gpu_energy_j", "J"), ("power_mean_w", "gpu_power_mean_w", "W"),
               ("gpu_util_mean_pct", "gpu_util_mean_pct", "%")]


def _fresh_gate(campaign: Campaign, gate_path: Path, lane: lanes.Lane) -> dict[str, Any]:
    """The gate outcome this run may rely on. A token from before the lane's latest run
    (left by an interrupted invocation) no longer says anything about the chip: gate again."""
    token = records.read_json(gate_path)
    last = thermal.last_run_end(campaign.root, lane.ledger)
    passed = datetime.fromisoformat(token["passed_utc"])
    age = (datetime.now(UTC) - passed).total_seconds()
    if (last is not None and last > passed) or age > campaign.thermal["poll_s"] + 120:
        log.warning("gate token %s is stale (age %.0f s); gating again", gate_path, age)
        token = wait_gate(campaign, lane)
        token["regated"] = True
    return token


def _write_csv_text(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    if rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return buf.getvalue()


def run(campaign: Campaign, model: str, env: str, rep: str, gate_path: Path,
        out: Path, log_path: Path | None = None) -> None:
    """Measure one cell, exactly once: its record is written once, by whichever attempt
    gets there first, and an attempt that finds it written is done without measuring.

    The campaign-wide run lock is held from before the record check to after the record
    is linked in, so an orphaned attempt (its snakemake killed, the step still running) is
    waited for, never measured beside; the check after the lock makes the waiting attempt
    succeed on the orphan's record instead of failing (whereupon Snakemake would delete
    the failed job's outputs: that very record)."""
    cell = find_cell(campaign, model, env, rep)
    paths = campaign.paths.cell_labelled(model, env, rep)
    try:
        lock = campaign.root / lane_of(campaign, cell).run_lock
        with records.locked(lock):
            if _already_recorded(campaign, cell, paths):
                gate_path.unlink(missing_ok=True)
                records.write_json(out, {"record": str(paths.raw), "measured": False})
                return
            with ledgered(campaign, "run", cell) as info:
                _run_locked(campaign, cell, paths, gate_path, log_path, info)
                records.write_json(out, {"record": str(paths.raw), "measured": True,
                                         "attempt": info["attempt"]})
    except BaseException:
        gate_path.unlink(missing_ok=True)
        raise


def _already_recorded(campaign: Campaign, cell: Cell, paths: CellPaths) -> bool:
    """The record exists (written by an earlier or orphaned attempt): say so in the ledger
    and leave it as it is."""
    if not paths.raw.exists():
        return False
    try:
        attempt = records.read_json(paths.raw).get("attempt")
    except (OSError, ValueError):
        attempt = None
    log.warning("%s already exists (attempt %s): this cell is done; not measured again",
                paths.raw, attempt)
    records.append_ledger(campaign.root, {"step": "run", "event": "skipped",
                                          "reason": "record exists", "record_attempt": attempt,
                                          **asdict(cell)}, lane_of(campaign, cell).ledger)
    return True


def _set_aside_orphans(campaign: Campaign, paths: CellPaths, info: dict[str, Any]) -> None:
    """The record is missing (deleted or moved by hand, or a cut attempt): its side files
    still in raw/ (.cooldown.json, .telemetry.csv, ...) belong to no record now, and the
    new record must not be paired with them (a stale cooldown would end this cell without
    a cooldown of its own): move them aside, named in the ledger, never deleted."""
    folder = campaign.paths.aside(ORPHANED, records.aside_stamp())
    moved = records.move_aside(paths.side_files, campaign.paths.raw_dir, folder)
    if moved:
        log.warning("%s is missing; its side files were moved aside to %s: %s", paths.raw,
                    folder, ", ".join(p.name for p in moved))
        info["ledger"] = {**info.get("ledger", {}), "moved_aside": [str(p) for p in moved]}


def _run_locked(campaign: Campaign, cell: Cell, paths: CellPaths, gate_path: Path,
                log_path: Path | None, info: dict[str, Any]) -> None:
    started = records.utc_now()
    _set_aside_orphans(campaign, paths, info)
    lane = lane_of(campaign, cell)
    gate_outcome = _fresh_gate(campaign, gate_path, lane)
    kind = campaign.workload_kind(cell.model)
    workload = workloads.get(kind)
    params = campaign.workload_params(cell.model)
    for name in environments.stop_orphaned_containers(campaign):
        log.warning("removed container %s, left by a killed run of this campaign", name)
    work = campaign.paths.work(info["attempt"]).resolve()
    label = f"{cell.model}/{cell.environment}/rep{paths.label}"
    timeout_s = params["timeout_s"]  # the model's own, else workload.timeout_s
    # the compile cache by the model's declared arm (shared: compiled once per campaign,
    # loaded by every later run of any environment; cold; per_environment)
    cache, cache_state = (compilecache.prepare(campaign, cell.model, cell.environment, params)
                          if workloads.uses_compile_cache(kind, params) else (None, None))
    sensor = sensor_for(campaign, lane)
    gpu = lane_gpu(lane, sensor)
    # configured lanes: the process sees only the lane's GPU and cores
    visible = {} if lane.implicit else {"gpu": gpu["visible"], "gpu_minor": gpu["minor"],
                                        "cpuset": lane.cpuset}
    t_drop = time.monotonic()
    try:
        memory = hostmemory.before_run(page_cache_mode(campaign, params))
    except hostmemory.PageCacheError as exc:
        raise RunFailed(str(exc)) from None
    page_cache_s = round(time.monotonic() - t_drop, 4)  # deliberate: sync + drop
    log.info("page cache %s; MemAvailable %.1f GiB", "dropped" if memory["drop"]["dropped"]
             else f"kept ({memory['drop']['reason']})",
             memory["before_kib"].get("MemAvailable", 0) / 2**20)
    with Sampler(sensor, campaign.telemetry["hz"], gpu=gpu_for(sensor)) as sampler:
        launched = probing.launch_probe(campaign, cell.environment, kind, params, work,
                                        label=label, timeout_s=timeout_s, cache=cache,
                                        extra_argv=preflight.run_argv(
                                            campaign, cell.environment, kind),
                                        **visible)
    outcome = launched.outcome
    if cache_state is not None:
        compilecache.finish(campaign, cell.model, cell.environment, params)
        memory["compile_cache"] = cache_state
    memory["after_kib"] = hostmemory.meminfo()
    full = disk_full_line(outcome.output)
    if full is not None:  # one line, not the process's traceback twice around it
        raise StorageFailure(f"{label} in environment {cell.environment}: {full}. The "
                             "results folder is full: free space, then run snakemake again "
                             f"(only the cells without a record run; work folder {work}).")
    log.info("process output:\n%s", outcome.output.rstrip())
    info["ledger"] = {**info.get("ledger", {}), "wall_s": round(outcome.wall_s, 4),
                      "page_cache_s": page_cache_s}
    if outcome.timed_out or outcome.returncode != 0:
        tail = "\n".join(outcome.output.strip().splitlines()[-15:])
        why = (f"timed out after timeout_s = {timeout_s} s" if outcome.timed_out
               else f"exited with status {outcome.returncode}")
        raise RunFailed(f"{label} in environment {cell.environment} {why}; "
                        f"work folder kept at {work}. Last output:\n{tail}")
    probe = launched.result
    if probe is None:
        raise RunFailed(f"{label}: the probe wrote no {work / 'result.json'}; output:\n"
                        f"{outcome.output}")
    metric_rows = workloads.metrics(kind, probe, outcome.launched_unix, outcome.wall_s)
    telemetry = sampler.summary()
    metric_rows += [Metric(name, telemetry[key], unit) for key, name, unit in GPU_METRICS
                    if telemetry.get(key) is not None]
    metric_rows += _window_energy(workload, probe, sampler, telemetry)
    metric_rows += _host_metrics(kind, probe, sampler, telemetry)
    metric_rows += _memory_metrics(memory, telemetry)
    # the launcher's marks and the probe's, on one clock: the phases of the wall time
    run_timeline = timeline.build(outcome.marks, probe, outcome.wall_s)
    metric_rows += timeline.metrics(run_timeline)
    info["ledger"]["workload_s"] = round(outcome.wall_s, 4)
    record = rawrecord.RawRecord(
        campaign=campaign.name,
        cell=cell,
        attempt=info["attempt"],
        status="ok",
        started_utc=started,
        ended_utc=records.utc_now(),
        launched_unix=outcome.launched_unix,
        exited_unix=outcome.exited_unix,
        gate={k: v for k, v in gate_outcome.items() if k != "trace"},
        gate_trace=gate_outcome.get("trace", []),
        environment={**launched.launcher.describe(), "resolved": outcome.resolved,
                     "phases_s": outcome.phases_s},
        workload={"kind": kind, "params": params, "argv": launched.argv, "env": launched.env},
        metrics=[Metric(m.name, float(m.value), m.unit) for m in metric_rows],  # numpy -> JSON
        detail=workloads.detail(kind, probe),
        telemetry=telemetry,
        memory=memory,
        inside={"environment": probe.get("environment"), "software": probe.get("software"),
                "checksum": probe.get("checksum"),
                "max_rss_source": probe.get("max_rss_source")},
        provenance={"host": provenance.host(), "git": provenance.git(),
                    "config_hash": campaign.config_hash(), "config_source": campaign.source,
                    # where the environment's options came from (derived or by hand)
                    "options_source": campaign.environment(cell.environment).spec.get(
                        "options_source")},
        files={"telemetry": paths.telemetry.name, "requests": paths.requests.name,
               "run_log": paths.run_log.name},
        lane={**lane.describe(), "gpu_uuid": gpu["uuid"], "visible": visible.get("gpu"),
              "hostname": socket.gethostname(),
              "slurm_job_id": os.environ.get("SLURM_JOB_ID")},
        memory_chain=memorychain.from_probe(probe, {m.name: float(m.value)
                                                    for m in metric_rows}),
        timeline=run_timeline,
    )
    paths.raw.parent.mkdir(parents=True, exist_ok=True)  # no rule's output makes it
    telemetry_tmp = paths.telemetry.with_name(paths.telemetry.name + ".partial")
    sampler.write_csv(telemetry_tmp)
    records.atomic_write_text(paths.requests,
                              _write_csv_text(workloads.requests_rows(kind, probe)))
    telemetry_tmp.replace(paths.telemetry)
    if log_path is not None and log_path.exists():
        paths.run_log.unlink(missing_ok=True)  # a read-only one of a cut attempt
        shutil.copyfile(log_path, paths.run_log)
    for done in (paths.telemetry, paths.requests, paths.run_log):
        if done.exists():
            done.chmod(0o444)
    rawrecord.write_record(paths.raw, record)  # last: the commit point
    # the record's content as written, in the run's ledger event: the analysis compares it
    # (campaign/integrity.py), so a record edited afterwards is named, never analysed
    info["ledger"]["record_sha256"] = hashlib.sha256(paths.raw.read_bytes()).hexdigest()
    shutil.rmtree(work, ignore_errors=True)


DISK_FULL = ("No space left on device", "Disk quota exceeded")


def disk_full_line(output: str) -> str | None:
    """The line of a process's output that says its disk is full (the probe's own one
    line, or the last line of a traceback), None where none does."""
    lines = [line.strip() for line in output.splitlines()
             if any(words in line for words in DISK_FULL)]
    return lines[-1] if lines else None


def _memory_metrics(memory: dict[str, Any], telemetry: dict[str, Any]) -> list[Metric]:
    rows = hostmemory.metrics(memory, telemetry.get("mem_used_peak_mib"))
    if telemetry.get("gpu_mem_used_peak_mib") is not None:  # named by its source
        name = ("gpu_proc_mem_peak_gib" if telemetry.get("gpu_mem_source") == "nvml_processes"
                else "gpu_mem_peak_gib")
        rows.append((name, telemetry["gpu_mem_used_peak_mib"] / 1024, "GiB"))
    return [Metric(*row) for row in rows]


def _window_energy(workload: workloads.Workload, probe: dict[str, Any], sampler: Sampler,
                   telemetry: dict[str, Any]) -> list[Metric]:
    """GPU energy of the measured requests alone (warm-up, model build and start-up
    excluded), from the host's NVML samples, per generated token, for workloads that
    count the tokens of their measured window."""
    window = probe.get("measure_window_unix")
    if workload.window_tokens is None or not window or sampler.gpu is None:
        return []
    energy = sampler.window_energy_j(window[0], window[1])
    telemetry["window_energy_j"] = energy
    if energy is None:
        return []
    return [Metric("energy_per_token_j", energy / workload.window_tokens(probe), "J")]


def _host_metrics(kind: str, probe: dict[str, Any], sampler: Sampler,
                  telemetry: dict[str, Any]) -> list[Metric]:
    """The metrics the kind computes on the host (Workload.host_metrics, each registered in
    its metric_info, whose unit it takes): today transformers' decoding step against
    reading its weights once at the GPU's peak memory bandwidth (a data-sheet figure, or
    NVML's memory clock x bus width; the record says which)."""
    w = workloads.get(kind)
    if not w.host_metrics or sampler.gpu is None:
        return []
    peak, source = sampler.gpu.peak_bandwidth()
    telemetry["memory_bandwidth"] = {"peak_bytes_per_s": peak, "source": source}
    host = HostFacts(peak_memory_bytes_per_s=peak)
    units = {m.name: m.unit for m in w.metric_info}
    out = []
    for name, compute in w.host_metrics.items():
        value = compute(probe, host) if peak else None
        if value is not None:
            out.append(Metric(name, value, units[name]))
    return out
