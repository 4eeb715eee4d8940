"""Gate and cooldown: the two waits around a cell's run, each one ledger entry at start and
end. Apart from the run (execution/cells.py) so that these steps start without importing
the run's machinery (environments, probes, telemetry, the workload registry).
"""

from __future__ import annotations

import errno
import logging
import platform
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from containertax.campaign import lanes, schedule
from containertax.campaign.config import Campaign
from containertax.core import records
from containertax.core.cell import Cell
from containertax.core.errors import ContainertaxError
from containertax.execution import thermal

log = logging.getLogger("containertax")


class RunFailed(ContainertaxError, RuntimeError):
    """The process under test failed; the message holds the tail of its output."""


class StorageFailure(ContainertaxError, RuntimeError):
    """A cell's files could not be written (results folder full, read-only, ...)."""


def describe(exc: BaseException) -> str:
    """One line for the ledger and the log; a full or read-only disk says so and where."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS,
                                                   errno.EACCES, errno.EPERM):
        where = f" {exc.filename}" if exc.filename else ""
        return (f"cannot write{where}: {exc.strerror}. The results folder is full or not "
                "writable; free space or fix its permissions, then run snakemake again "
                "(only the cells without a record run).")
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def find_cell(campaign: Campaign, model: str, env: str, rep: str) -> Cell:
    """The cell as the campaign's written schedule places it (schedule.written_cell): the
    schedule step wrote it from the plan before any gate (it is the gate's input, and a
    changed config writes it again), so a step does not plan the campaign again."""
    return schedule.written_cell(campaign, model, env, int(rep))


@contextmanager
def ledgered(campaign: Campaign, step: str, cell: Cell) -> Iterator[dict[str, Any]]:
    """Append start and end (ok or failed, with the error) of one attempt at a step."""
    attempt = records.new_attempt_id()
    base = {"step": step, "attempt": attempt, **asdict(cell)}
    ledger = lane_of(campaign, cell).ledger
    records.append_ledger(campaign.root, {**base, "event": "start"}, ledger)
    info: dict[str, Any] = {"attempt": attempt}
    t0 = time.monotonic()
    try:
        yield info
    except BaseException as exc:
        try:
            records.append_ledger(
                campaign.root,
                {**base, "event": "end", "status": "failed", "error": describe(exc),
                 "duration_s": round(time.monotonic() - t0, 3), **info.get("ledger", {})},
                ledger,
            )
        except OSError as ledger_exc:  # the ledger's own disk is full or read-only
            log.error("the ledger could not record this failure: %s", describe(ledger_exc))
        if isinstance(exc, OSError):
            raise StorageFailure(describe(exc)) from None
        raise
    try:  # the step's output is written: nothing after it may fail the step (Snakemake
        # would delete the outputs of a failed job, a raw record among them)
        records.append_ledger(
            campaign.root,
            {**base, "event": "end", "status": "ok",
             "duration_s": round(time.monotonic() - t0, 3), **info.get("ledger", {})},
            ledger,
        )
    except OSError as exc:
        log.error("the ledger could not record this success: %s", describe(exc))


def lane_of(campaign: Campaign, cell: Cell) -> lanes.Lane:
    return lanes.lane_by_id(campaign, cell.lane) if cell.lane else lanes.lanes(campaign)[0]


def sensor_for(campaign: Campaign, lane: lanes.Lane | None = None) -> thermal.Sensor:
    """The lane's GPU (thermal.device without lanes), or the configured fallback."""
    t = campaign.thermal
    return thermal.open_sensor(t["sensor"], lane.gpu if lane is not None else t["device"])


def check_host(lane: lanes.Lane) -> None:
    """A lane bound to a host runs there only (a wrong SLURM placement fails early)."""
    here = {socket.gethostname(), socket.gethostname().split(".")[0], socket.getfqdn()}
    if lane.host and lane.host not in here:
        raise RunFailed(f"lane {lane.id} is bound to host {lane.host} (lanes[].host) but runs "
                        f"on {socket.gethostname()}; fix the lane's host or its slurm placement.")


def lane_gpu(lane: lanes.Lane, sensor: thermal.Sensor) -> dict[str, Any]:
    """The lane's GPU as its environments must see it: the UUID and the device node's
    minor number where NVML knows the GPU, else the configured index."""
    if isinstance(sensor, thermal.NvmlSensor):
        uuid = sensor.describe()["gpu_uuid"]
        try:
            minor = int(sensor.nvml.nvmlDeviceGetMinorNumber(sensor.handle))
        except Exception:  # NVML NotSupported (e.g. integrated GPUs): pass every node
            minor = None
        return {"visible": uuid, "uuid": uuid, "minor": minor}
    return {"visible": str(lane.gpu), "uuid": None, "minor": None}


def gate(campaign: Campaign, model: str, env: str, rep: str, out: Path) -> None:
    cell = find_cell(campaign, model, env, rep)
    with ledgered(campaign, "gate", cell) as info:
        check_host(lane_of(campaign, cell))
        outcome = wait_gate(campaign, lane_of(campaign, cell))
        waited = outcome["waited_s"]
        log.info("gate open after %.1f s (%s, %s C)", waited, outcome["sensor"],
                 outcome["temperature_c"])
        if adaptive(campaign):  # the first gate of a campaign (or machine) measures it
            lane = lane_of(campaign, cell)
            baseline = idle_baseline(campaign, sensor_for(campaign, lane), lane) or {}
            waited += baseline.pop("measured_here_s", 0.0)
        info["ledger"] = {"waited_s": round(waited, 3)}
        records.write_json(out, outcome)


def adaptive(campaign: Campaign) -> bool:
    return campaign.thermal.get("cooldown", "fixed") == "adaptive"


def _sensor_identity(sensor: thermal.Sensor) -> dict[str, Any]:
    return {"host": platform.node(), **sensor.describe()}


def idle_baseline(campaign: Campaign, sensor: thermal.Sensor, lane: lanes.Lane,
                  measure: bool = True) -> dict[str, Any] | None:
    """The idle temperature an adaptive cooldown returns to: measured once, at the first
    gate of the campaign, and again wherever the sensor is another one (a later visit to
    another machine). Kept in the campaign folder; every cooldown record copies it. A
    cooldown never measures it (the chip is hot then): without one it gets None."""
    path = campaign.paths.baseline
    if not lane.implicit:  # each lane's GPU has its own idle temperature
        path = path.with_name(f"{path.stem}.{lane.id}{path.suffix}")
    identity = _sensor_identity(sensor)
    if path.exists():
        known = records.read_json(path)
        if known.get("identity") == identity:
            return known
    if not measure:
        return None
    settings = thermal.AdaptiveSettings.from_config(campaign.thermal)
    t0 = time.monotonic()
    measured = thermal.idle_baseline(sensor, settings.baseline_s, campaign.thermal["poll_s"])
    baseline = {**measured, "identity": identity}
    records.write_json(path, baseline)
    log.info("idle baseline %s C (median of %.0f s of readings)", baseline["baseline_c"],
             settings.baseline_s)
    return {**baseline, "measured_here_s": time.monotonic() - t0}


def wait_gate(campaign: Campaign, lane: lanes.Lane) -> dict[str, Any]:
    sensor = sensor_for(campaign, lane)
    settings = thermal.GateSettings.from_config(campaign.thermal)
    outcome = thermal.wait_gate(sensor, settings,
                                thermal.last_run_end(campaign.root, lane.ledger))
    outcome["passed_utc"] = records.utc_now()
    outcome["sensor_info"] = sensor.describe()
    return outcome


def cool(campaign: Campaign, model: str, env: str, rep: str, out: Path) -> None:
    """Wait out the cooldown and record it in raw/ beside the record (written once, like
    the record, by whichever attempt gets there first); `out` says the cell is finished."""
    cell = find_cell(campaign, model, env, rep)
    paths = campaign.paths.cell_labelled(model, env, rep)
    done = paths.cooldown
    if paths.ran.exists() and not paths.raw.exists():  # its run's outcome outlived the
        # record (moved aside?)
        paths.ran.unlink()
        raise RunFailed(f"{paths.raw} is missing although its run step ended; this cell "
                        "runs again with the next invocation.")
    if done.exists():  # e.g. a fresh clone of committed records asked for this cell
        records.write_json(out, {**records.read_json(done), "cooldown_file": str(done)})
        return
    with ledgered(campaign, "cooldown", cell) as info:
        t = campaign.thermal
        lane = lane_of(campaign, cell)
        sensor = sensor_for(campaign, lane)
        if adaptive(campaign):
            baseline = idle_baseline(campaign, sensor, lane, measure=False) or {}
            outcome = thermal.adaptive_cooldown(
                sensor, thermal.AdaptiveSettings.from_config(t), baseline.get("baseline_c"),
                t["poll_s"])
            outcome["baseline"] = {k: v for k, v in baseline.items() if k != "trace"} or None
            log.info("cooldown %s after %.1f s: %s C (baseline %s C)", outcome["ended_by"],
                     outcome["waited_s"], outcome["end_c"], baseline.get("baseline_c"))
        else:
            outcome = thermal.cooldown(sensor, t["cooldown_s"], t["poll_s"])
        info["ledger"] = {"waited_s": outcome["waited_s"]}
        outcome["ended_utc"] = records.utc_now()
        try:
            records.write_json(done, outcome, overwrite=False)
        except records.RecordExistsError:  # an orphaned cooldown of this cell got there first
            log.warning("%s was written meanwhile (an orphaned cooldown); kept as it is", done)
        records.write_json(out, {**records.read_json(done), "cooldown_file": str(done)})
