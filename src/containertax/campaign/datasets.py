"""Files the workflow writes before any run and the cells read (the synthetic datasets of
trtllm models, today): each workload kind declares the ones a model's parameters need
(Workload.datasets); this module collects them, knowing no kind by name."""

from __future__ import annotations

from containertax import workloads
from containertax.campaign.config import Campaign


def of_model(campaign: Campaign, model: str) -> list[str]:
    """The datasets a model's cells read (none for workloads without one)."""
    w = workloads.get(campaign.workload_kind(model))
    return list(w.datasets({**w.defaults, **campaign.workload_params(model)})
                if w.datasets else [])


def all_datasets(campaign: Campaign) -> dict[str, str]:
    """path -> the (first) model whose parameters make it (the dataset rule's inputs)."""
    out: dict[str, str] = {}
    for m in campaign.models:
        for path in of_model(campaign, m.id):
            out.setdefault(path, m.id)
    return out
