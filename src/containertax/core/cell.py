"""One cell of a campaign: a (model, environment, repetition) run at its place in the
schedule (containertax.campaign.schedule writes and reads them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cell:
    position: int
    model: str
    environment: str
    repetition: int
    block: int
    sequence: int
    lane: str = ""  # campaign.lanes: the lane (GPU) that runs this cell's block
