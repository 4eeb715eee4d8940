"""Lanes: one campaign spread over several GPUs (and hosts), each GPU a strictly serial
lane with its own gate, cooldown and ledger.

A lane runs whole blocks (repetitions), so that every paired comparison of a block is
made on one GPU; repetitions are dealt to lanes (deal), which gives every model the
same number of blocks on every lane (within one), spreads the design's sequences over the
lanes, and lets the analysis adjust for the machine. Without `lanes` in the config the
campaign has one implicit lane on `thermal.device`, and runs exactly as before.
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


def deal(n_lanes: int, sequences: list[int]) -> list[int]:
    """The lane (index) of each repetition, given the design sequence each one runs: always
    to a lane with the fewest repetitions so far (counts balanced within one), among those
    the one that has run this sequence least, so that every lane runs the design's
    sequences alike (plain turns with 2 lanes and the ABBA design would give one lane only
    AB and the other only BA, confounding the lane with the order)."""
    totals = [0] * n_lanes
    seen: list[dict[int, int]] = [{} for _ in range(n_lanes)]
    out = []
    for seq in sequences:
        lane = min(range(n_lanes), key=lambda k: (totals[k], seen[k].get(seq, 0), k))
        totals[lane] += 1
        seen[lane][seq] = seen[lane].get(seq, 0) + 1
        out.append(lane)
    return out


def lane_by_id(campaign: Campaign, lane_id: str) -> Lane:
    return next(lane for lane in lanes(campaign) if lane.id == lane_id)


SLURM_KEYS = ("slurm_partition", "constraint", "gres", "slurm_extra")


def slurm_resources(lane: Lane) -> dict[str, str]:
    """The lane's placement as resources of snakemake-executor-plugin-slurm: its node
    (slurm.nodelist, else host) goes into slurm_extra, which the plugin passes to sbatch."""
    s = lane.slurm
    nodelist = s.get("nodelist") or lane.host
    extra = " ".join(x for x in (f"--nodelist={nodelist}" if nodelist else "",
                                 s.get("extra", "")) if x)
    return {"slurm_partition": s.get("partition", ""), "constraint": s.get("constraint", ""),
            "gres": s.get("gres", ""), "slurm_extra": extra}


def estimated_wall_s(campaign: Campaign, per_cell_s: float, n_lanes: int) -> float:
    """The campaign's wall time on n lanes, from a cell's time (gate + run + cooldown):
    whole repetitions are dealt to lanes, so the busiest lane has ceil(reps / n) of them."""
    cells_per_rep = len(campaign.models) * len(campaign.environments)
    return per_cell_s * cells_per_rep * math.ceil(campaign.repetitions / max(1, n_lanes))
