"""The raw record: what one measured run leaves, the data that can never be measured again.

Its contract is workflow/schemas/record.schema.yaml. The run step builds a RawRecord and
writes it with write_record (validated, atomic, never overwritten); every reader (the
aggregation, the paper's system table, tests) goes through read_record, which migrates an
older version in memory (the file stays as it was written) and validates it, so a damaged
or hand-edited record stops the analysis with its file and key named.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from containertax.core import packaged, records
from containertax.core.cell import Cell
from containertax.core.errors import ContainertaxError
from containertax.core.metric import Metric

SCHEMA_VERSION = 4
OPTIONAL = ("lane",)  # fields a record may lack (written before lanes existed)
SCHEMA_PATH = packaged.schema("record.schema.yaml")


class RecordError(ContainertaxError, ValueError):
    """A raw record that does not satisfy the schema; the message names file and key."""


@dataclass(frozen=True)
class RawRecord:
    """One run, as written by the run step (schema version 4)."""

    campaign: str
    cell: Cell
    attempt: str
    status: str
    started_utc: str
    ended_utc: str
    launched_unix: float
    exited_unix: float
    gate: dict[str, Any]
    gate_trace: list[Any]
    environment: dict[str, Any]
    workload: dict[str, Any]
    metrics: list[Metric]
    detail: dict[str, Any]
    telemetry: dict[str, Any]
    memory: dict[str, Any] | None
    inside: dict[str, Any]
    provenance: dict[str, Any]
    files: dict[str, str]
    lane: dict[str, Any] | None = None  # campaign.lanes: id, GPU (UUID), host, SLURM job
    # what the engine saw when it sized its KV cache and what it got (memorychain)
    memory_chain: dict[str, Any] | None = None
    # the run's marks on CLOCK_MONOTONIC and its phases (workloads/timeline.py)
    timeline: dict[str, Any] | None = None
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return {"schema_version": data.pop("schema_version"), **data}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RawRecord:
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data or
                  f.name not in OPTIONAL}
        values["cell"] = Cell(**data["cell"])
        values["metrics"] = [Metric(**m) for m in data["metrics"]]
        return cls(**values)

    @property
    def hostname(self) -> str:
        return str(self.provenance["host"].get("hostname"))

    def metric_values(self) -> dict[str, float]:
        return {m.name: m.value for m in self.metrics}


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 grew while it ran: the oldest records lack 'detail' (the H100 matmul
    campaign), later ones 'memory' (before the page-cache state was recorded)."""
    return {**data, "schema_version": 2, "detail": data.get("detail") or {},
            "memory": data.get("memory")}


def _v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    """Version 3 adds memory_chain (free memory at KV-cache sizing -> KV cache); records
    before it did not measure it: null, never a guess."""
    return {**data, "schema_version": 3, "memory_chain": data.get("memory_chain")}


def _v3_to_v4(data: dict[str, Any]) -> dict[str, Any]:
    """Version 4 adds timeline (the run's marks on CLOCK_MONOTONIC and its phases); records
    before it took no marks: null, never reconstructed from their other times."""
    return {**data, "schema_version": 4, "timeline": data.get("timeline")}


# version -> the function that lifts a record of that version by one
MIGRATIONS = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4}


@cache
def schema() -> dict[str, Any]:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def _key(path: Any) -> str:
    parts = [f"[{p}]" if isinstance(p, int) else f".{p}" for p in path]
    return "".join(parts).lstrip(".") or "(top level)"


def validate(data: dict[str, Any], source: str) -> None:
    """Raise RecordError naming the source and the first offending key."""
    import jsonschema  # noqa: PLC0415 - only the steps that write or read records need it

    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        problems = "; ".join(f"key '{_key(e.absolute_path)}': {e.message}" for e in errors[:5])
        raise RecordError(
            f"{source}: not a valid raw record (schema {SCHEMA_PATH.name}, version "
            f"{SCHEMA_VERSION}): {problems}. Raw records are never edited by hand: move the "
            "file aside (with its .telemetry.csv, .requests.csv and .log) to run that cell "
            "again.")


def migrate(data: dict[str, Any], source: str) -> dict[str, Any]:
    version = data.get("schema_version")
    if version == SCHEMA_VERSION:
        return data
    if version not in MIGRATIONS:
        raise RecordError(
            f"{source}: key 'schema_version' is {version!r}; this containertax reads versions "
            f"{sorted([*MIGRATIONS, SCHEMA_VERSION])}. Use the containertax that wrote it.")
    while data.get("schema_version") != SCHEMA_VERSION:
        data = MIGRATIONS[data["schema_version"]](data)
    return data


def read_record(path: Path) -> RawRecord:
    """A raw record from its file: migrated to the current version and validated."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path}: not JSON ({exc}); raw records are written atomically, "
                          "so this file was changed after the run.") from None
    if not isinstance(data, dict):
        raise RecordError(f"{path}: key '(top level)' must be an object")
    data = migrate(data, str(path))
    validate(data, str(path))
    return RawRecord.from_dict(data)


def write_record(path: Path, record: RawRecord) -> None:
    """Validate, then write atomically; an existing record is never overwritten."""
    data = record.to_dict()
    validate(json.loads(json.dumps(data, default=str)), f"record for {path}")
    records.write_json(path, data, overwrite=False)
