"""What the paper's methods say about environments and workloads comes from the records:
here the committed records measured on the H100 (results/h100/raw), whose container mounts
the host's software read-only and gets the GPU as device nodes."""

from __future__ import annotations

import json

import pandas as pd

from containertax.analysis import facts
from containertax.analysis.metrics import REGISTRY
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


def test_workload_parameters_read_as_words_not_python():
    """The h100-engine-gqa record printed 'attn implementation sdpa gqa; ... coordinate
    descent False' and its compile cache under the checkout's absolute path."""
    rec = json.loads((REPO / "results" / "h100-engine-gqa" / "raw" / "llama3-8b" / "docker"
                      / "rep001.json").read_text())
    params = facts.workload_row(rec)["params"]
    assert "coordinate-descent tuning off" in params and "False" not in params
    assert "attention PyTorch SDPA (grouped-query)" in params
    assert "_" not in params and "attn implementation" not in params
    mounts = facts.environment_row(rec)["mounts"]
    assert "the campaign's compile-cache folder as /containertax/cache" in mounts
    assert "/work/" not in mounts


def test_software_is_named_once():
    from containertax.analysis.report import software_words

    assert software_words("blas", "blas,blas") == "BLAS (libblas)"
    assert software_words("blas", "openblas") == "BLAS openblas"
    assert software_words("numpy", "1.24.2") == "NumPy 1.24.2"


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


def test_start_up_is_robust_only_when_every_interval_is_above_zero():
    rows = pd.DataFrame({"metric": "startup_s", "rel_ci_low": [1.9, 2.0], "p_bh": [0.01, 0.25],
                         "rel_overhead": [2.4, 2.6], "mean_env": [0.22, 0.24],
                         "mean_ref": [0.06, 0.07]})
    found = facts.robust_difference(rows, "startup_s", 0.05)
    assert found["robust"] and found["significant"] == 1
    assert round(found["min"], 2) == 0.16 and round(found["max"], 2) == 0.17
    rows.loc[1, "rel_ci_low"] = -0.1
    assert not facts.robust_difference(rows, "startup_s", 0.05)["robust"]
    assert REGISTRY["startup_s"].direction == "lower"
