"""One cell of a campaign: a (model, environment, repetition) run at its place in the
schedule (containertax.campaign.schedule writes and reads them)."""

from __future__ import annotations

import re
from dataclasses import dataclass

# What a model id may hold: it names files and Snakemake wildcards (the model wildcard of
# workflow/rules/common.smk), and the paper sets it as it is (imports are held to it too)
ID_RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
ID_WORDS = ("letters A-Z a-z, digits, '_', '.' and '-', starting with a letter or digit "
            "(ids name files and Snakemake wildcards)")


@dataclass(frozen=True)
class Cell:
    position: int
    model: str
    environment: str
    repetition: int
    block: int
    sequence: int
    lane: str = ""  # campaign.lanes: the lane (GPU) that runs this cell's block
