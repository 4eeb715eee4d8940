"""Lanes: one campaign spread over several GPUs (and hosts), each GPU a strictly serial
lane with its own gate, cooldown and ledger.

A lane runs whole blocks (repetitions), so that every paired comparison of a block is
made on one GPU; repetitions go to lanes in turn (1 -> first lane, 2 -> second, ...), which
gives every model the same number of blocks on every lane (within one) and lets the
analysis adjust for the machine. Without `lanes` in the config the campaign has one
implicit lane on `thermal.device`, and runs exactly as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from containertax.campaign.config import Campaign

IMPLICIT = "main"  # the id of the one lane of a config without `lanes`


@dataclass(frozen=True)
class Lane:
    id: str
    gpu: int | str  # NVML index or UUID ("GPU-...", "MIG-...")
    host: str | None = None
    cpuset: str | None = None
    slurm: dict[str, Any] = field(default_factory=dict)
    implicit: bool = False

    @property
    def resource(self) -> str:
        """The Snakemake resource (limit 1) that every step of this lane's cells takes."""
        return f"lane_{self.id}"

    @property
    def ledger(self) -> str:
        """The lane's own ledger, relative to the campaign root: lanes on different hosts
        never write one file (no cross-host lock needed on a shared filesystem)."""
        return "ledger.jsonl" if self.implicit else f"ledger.{self.id}.jsonl"

    @property
    def run_lock(self) -> str:
        return ".run.lock" if self.implicit else f".run.{self.id}.lock"

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "gpu": self.gpu, "host": self.host, "cpuset": self.cpuset,
                "implicit": self.implicit}


def lanes(campaign: Campaign) -> tuple[Lane, ...]:
    configured = campaign.raw.get("lanes")
    if not configured:
        return (Lane(IMPLICIT, campaign.thermal.get("device", 0), implicit=True),)
    return tuple(Lane(str(lane["id"]), lane["gpu"], lane.get("host"), lane.get("cpuset"),
                      dict(lane.get("slurm") or {})) for lane in configured)


def lane_of(campaign: Campaign, repetition: int) -> Lane:
    """The lane of a repetition (block): repetitions are dealt to lanes in turn."""
    all_lanes = lanes(campaign)
    return all_lanes[(repetition - 1) % len(all_lanes)]


def lane_by_id(campaign: Campaign, lane_id: str) -> Lane:
    return next(lane for lane in lanes(campaign) if lane.id == lane_id)


def check(data: dict[str, Any], source: str) -> list[str]:
    """Semantic problems of the `lanes` key (the schema checks the shapes)."""
    problems: list[str] = []
    configured = data.get("lanes") or []
    ids = [str(lane.get("id")) for lane in configured]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        problems.append(f"key 'lanes': duplicate id(s) {dupes}; every lane id must be unique.")
    places = [(lane.get("host"), str(lane.get("gpu"))) for lane in configured]
    twice = sorted({f"{h or 'this host'}:{g}" for h, g in places if places.count((h, g)) > 1})
    if twice:
        problems.append(f"key 'lanes': GPU(s) {twice} named by more than one lane; two lanes on "
                        "one GPU would measure each other's load. Give each lane its own GPU.")
    reps = data.get("repetitions", 0)
    if configured and reps < len(configured):
        problems.append(f"key 'lanes': {len(configured)} lanes but only {reps} repetitions; "
                        "a lane runs whole repetitions, so give at least one per lane.")
    return problems


def estimated_wall_s(campaign: Campaign, per_cell_s: float, n_lanes: int) -> float:
    """The campaign's wall time on n lanes, from a cell's time (gate + run + cooldown):
    whole repetitions are dealt to lanes, so the busiest lane has ceil(reps / n) of them."""
    cells_per_rep = len(campaign.models) * len(campaign.environments)
    return per_cell_s * cells_per_rep * math.ceil(campaign.repetitions / max(1, n_lanes))
