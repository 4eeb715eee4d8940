"""Which quantised checkpoints a campaign needs made, where, and their completion markers:
the planning of the workflow's rules fetch_base and quantise (workflow/rules/quantise.smk),
pure functions of the config. Planning imports no execution module (the workflow plans on
any machine); running the quantiser is execution/quantise.py."""

from __future__ import annotations

from dataclasses import dataclass

from containertax.campaign.config import Campaign
from containertax.workloads import checkpoints

MARKER_SUFFIX = ".quantised.json"


@dataclass(frozen=True)
class Job:
    """One quantised checkpoint: the model (Hugging Face name), where it goes, its base
    folder and the image whose Model Optimizer makes it."""

    model: str
    dest: str
    base: str
    image: str
    qformat: str

    @property
    def marker(self) -> str:
        return marker(self.dest)

    @property
    def log(self) -> str:
        return self.dest + ".quantise.log"

    @property
    def fetch_log(self) -> str:
        return self.base + ".fetch.log"


def marker(dest: str) -> str:
    """The completion marker beside the checkpoint folder (Snakemake forbids a rule's
    output inside its own directory output)."""
    return dest + MARKER_SUFFIX


def jobs(campaign: Campaign) -> dict[str, Job]:
    """checkpoint folder -> its job, for each model whose checkpoint is made here
    (checkpoints.SOURCES says Quantised)."""
    image = next((e.image for e in campaign.environments if e.image), checkpoints.DEFAULT_IMAGE)
    out: dict[str, Job] = {}
    for m in campaign.models:
        p = campaign.workload_params(m.id)
        q = checkpoints.SOURCES.get(str(p.get("model", "")))
        if isinstance(q, checkpoints.Quantised) and p.get("model_path"):
            dest = str(p["model_path"])
            # the config's quantization (e.g. nvfp4, the fallback for Mixtral on GB10)
            qformat = str(p.get("quantization") or q.qformat).lower()
            out[dest] = Job(str(p["model"]), dest, checkpoints.base_path(q, dest), image,
                            qformat)
    return out


def fetch_command(base: str, planned: dict[str, Job]) -> str:
    """The download of a base folder that one of the planned jobs reads."""
    job = next(j for j in planned.values() if j.base == base)
    q = checkpoints.SOURCES[job.model]
    assert isinstance(q, checkpoints.Quantised)
    return checkpoints.download_command(q.base, base)
