"""All raw records of a campaign as one tidy table: one row per run and metric.

This table is the seam to the statistics: everything downstream reads runs.csv (or an
imported table of the same shape), never the raw JSON.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from containertax.campaign import integrity
from containertax.campaign.paths import CampaignPaths
from containertax.core import records
from containertax.core.errors import ContainertaxError
from containertax.core.metric import Metric
from containertax.core.rawrecord import RawRecord, read_record
from containertax.statistics import clocks
from containertax.workloads import timeline
from containertax.workloads.metric_registry import REGISTRY

COLUMNS = [
    "campaign", "model", "environment", "repetition", "block", "position", "sequence",
    "attempt", "started_utc", "host", "metric", "value", "unit", "gate_waited_s",
    "temperature_max_c", "throttled_s", "sensor", "config_hash", "machine", "page_cache",
    "lane", "image_id",
    "start_temperature_c", "since_last_run_s",
    *clocks.COLUMNS,  # clock events inside the measured window (statistics/clocks.py)
]


def machine_of(rec: RawRecord) -> str:
    """The physical device a run measured: the GPU's UUID where NVML saw one, else the
    host name. A campaign spread over visits may land on different GPUs."""
    gpu = rec.telemetry.get("gpu") or {}
    return str(gpu.get("uuid") or rec.hostname)


def image_of(rec: RawRecord) -> str:
    """The id of the image a run used ('' for native): the same tag may name another image
    later in a campaign (a rebuild on a fresh machine), so each run says which it ran."""
    image = ((rec.environment or {}).get("resolved") or {}).get("image")
    return str(image.get("id") or "") if isinstance(image, dict) else ""


def page_cache_of(rec: RawRecord) -> str:
    """'dropped' or 'kept' before the run; '' where the record predates the memory state."""
    drop = (rec.memory or {}).get("drop")
    return "" if drop is None else ("dropped" if drop.get("dropped") else "kept")


def read_records(root: Path, skip: frozenset[Path] = frozenset()
                 ) -> list[tuple[Path, RawRecord]]:
    """Every raw record of a campaign but those in `skip` (outside its schedule:
    integrity.unscheduled_records), validated (containertax.core.rawrecord)."""
    paths = CampaignPaths(root)
    present = [path for path in paths.raw_records() if path not in skip]
    integrity.verify_for_analysis(paths, present)  # edited, foreign or misnamed: named
    return [(path, read_record(path)) for path in present]


def metric_name(rec: RawRecord, name: str) -> str:
    """A record from before the probes stated their peak-RSS source measured ru_maxrss,
    which a child inherits across fork+exec (natively, the harness's peak): it keeps its
    value under a name of its own and is never compared as max_rss_mib."""
    if name == "max_rss_mib" and not (rec.inside or {}).get("max_rss_source"):
        return "max_rss_rusage_mib"
    return name


def metrics_of(rec: RawRecord) -> list[Metric]:
    """A record's metrics, its phases recomputed from its timeline's marks (the raw data:
    workloads/timeline.py defines the phases once, for records of any date)."""
    found = timeline.metrics(rec.timeline)
    if not found:
        return list(rec.metrics)
    return [m for m in rec.metrics if not m.name.startswith(timeline.PREFIX)] + found


class MetricValueError(ContainertaxError, ValueError):
    """A record's metric whose value its registry line refuses (a type or a sign)."""


def checked(path: Path, metrics: list[Metric]) -> list[Metric]:
    """Each registered metric's value type- and sign-checked (MetricInfo.value_problem):
    a string or a negative time stops the analysis naming the record, metric and fix."""
    for m in metrics:
        info = REGISTRY.get(m.name)
        problem = info.value_problem(m.value) if info else None
        if problem:
            raise MetricValueError(
                f"{path}: metric {m.name} {problem}. The workload module that measured it "
                "wrote a wrong value: fix its metrics() (workloads/), move this record out "
                "of raw/ and run its cell again.")
    return metrics


def tidy(root: Path, skip: frozenset[Path] = frozenset()) -> pd.DataFrame:
    rows = []
    for path, rec in read_records(root, skip):
        cell = rec.cell
        window = clocks.of_record(path, rec)
        for m in checked(path, metrics_of(rec)):
            rows.append({
                "campaign": rec.campaign,
                "model": cell.model,
                "environment": cell.environment,
                "repetition": cell.repetition,
                "block": cell.block,
                "position": cell.position,
                "sequence": cell.sequence,
                "attempt": rec.attempt,
                "started_utc": rec.started_utc,
                "host": rec.hostname,
                "metric": metric_name(rec, m.name),
                "value": m.value,
                "unit": m.unit,
                "gate_waited_s": rec.gate.get("waited_s"),
                "temperature_max_c": rec.telemetry.get("temperature_max_c"),
                "throttled_s": rec.telemetry.get("throttled_s"),
                "sensor": rec.gate.get("sensor"),
                "config_hash": rec.provenance.get("config_hash"),
                "machine": machine_of(rec),
                "page_cache": page_cache_of(rec),
                "lane": (rec.lane or {}).get("id", ""),  # '' before lanes existed
                "image_id": image_of(rec),
                # the chip's state when the run began: the gate's last reading and the
                # time since the previous run ended (quality.thermal_dependence)
                "start_temperature_c": rec.gate.get("temperature_c"),
                "since_last_run_s": rec.gate.get("since_last_run_s"),
                **window,
            })
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return frame.sort_values(["position", "metric"], kind="stable").reset_index(drop=True)


def requests_tidy(root: Path, skip: frozenset[Path] = frozenset()) -> pd.DataFrame:
    """Per-request rows of every run, for percentiles from the raw values."""
    frames = []
    for path, rec in read_records(root, skip):
        req = path.with_name(rec.files["requests"])
        if req.exists() and req.stat().st_size:
            f = pd.read_csv(req)
            f.insert(0, "repetition", rec.cell.repetition)
            f.insert(0, "environment", rec.cell.environment)
            f.insert(0, "model", rec.cell.model)
            frames.append(f)
    cols = ["model", "environment", "repetition", "index", "latency_s"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)


def write(root: Path, out: Path, out_requests: Path | None = None,
          skip: frozenset[Path] = frozenset()) -> pd.DataFrame:
    """runs.csv (and requests.csv) of every record but those in `skip`: records outside
    the campaign's schedule are never analysed (the workflow moves them aside first)."""
    frame = tidy(root, skip)
    text = frame.to_csv(index=False)
    records.atomic_write_text(out, text)
    records.hash_written(root, out, "aggregate", text)  # edited afterwards: refused
    if out_requests is not None:
        records.atomic_write_text(out_requests, requests_tidy(root, skip).to_csv(index=False))
    return frame
