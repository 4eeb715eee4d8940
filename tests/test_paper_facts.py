"""What the paper's methods say about environments and workloads comes from the records:
here the committed records measured on the H100 (results/h100/raw), whose container mounts
the host's software read-only and gets the GPU as device nodes."""

from __future__ import annotations

import json

import pandas as pd

from containertax.analysis import facts
from tests.conftest import REPO

RAW = REPO / "results" / "h100" / "raw"


def record(model: str, env: str) -> dict:
    return json.loads((RAW / model / env / "rep01.json").read_text())


def test_the_h100_container_is_described_from_its_resolved_settings():
    docker = facts.environment_row(record("qwen2-0.5b", "docker"))
    assert docker["host_dirs"] == "/etc, /opt, /usr, /usr/local/nvidia"
    assert docker["read_only"] and "/containertax" not in docker["mounts"]  # harness left out
    assert docker["gpu"].startswith("6 device nodes") and "nvidiactl" in docker["gpu"]
    assert docker["flags"] == "--ipc host --network none"
    assert "IPC" not in docker["isolation"]  # --ipc host shares it
    native = facts.environment_row(record("qwen2-0.5b", "native"))
    assert native["gpu"] == "direct (host driver)" and native["mounts"] == "none"


def test_a_workload_lists_only_the_parameters_its_probe_reads():
    matmul = facts.workload_row(record("matmul-10k", "native"))
    assert "n 10000" in matmul["params"] and "batch" not in matmul["params"]
    llm = facts.workload_row(record("llama3-8b", "native"))
    assert llm["random_weights"] and "32 layers" in llm["params"]
    assert "batch 8" in llm["params"] and "output tokens 128" in llm["params"]


def test_a_model_without_the_headline_metric_takes_its_first_speed_metric():
    """A matrix product has no token throughput; its peak memory (equal in every run, no
    interval) says nothing about speed, so the median compute time is its headline."""
    results = pd.DataFrame([
        {"model": "matmul-10k", "metric": "peak_memory_gib", "rel_ci_low": float("nan")},
        {"model": "matmul-10k", "metric": "compute_time_median_s", "rel_ci_low": -0.01},
    ])
    metrics = ["token_throughput", "peak_memory_gib", "compute_time_median_s"]
    assert facts.headline_metric_of(results, "token_throughput", metrics) == \
        "compute_time_median_s"
