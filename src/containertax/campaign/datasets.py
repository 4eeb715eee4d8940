"""Files the workflow writes before any run and the cells read: the synthetic datasets of
trtllm models (containertax.workloads.trtllm writes them), one per model and parameters."""

from __future__ import annotations

from containertax.campaign.config import Campaign


def all_datasets(campaign: Campaign) -> dict[str, str]:
    """path -> the model whose parameters make it (the dataset rule's inputs)."""
    from containertax.workloads import trtllm

    return trtllm.datasets(campaign)


def of_model(campaign: Campaign, model: str) -> list[str]:
    """The dataset a model's cells read (none for workloads without one)."""
    if campaign.workload_kind(model) != "trtllm":
        return []
    from containertax.workloads import trtllm

    return [trtllm.dataset_path({**trtllm.WORKLOAD.defaults,
                                 **campaign.workload_params(model)})]
