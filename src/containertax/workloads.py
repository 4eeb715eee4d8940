"""What runs in an environment and how its output becomes metrics with units.

A workload builds the probe command (identical in every environment, only the paths of
the probe and work folders are the environment's) and turns the probe's JSON into rows.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from containertax.config import Campaign

PROBE_DIR = Path(__file__).resolve().parent / "probe"
NOT_YET = {
    "transformers": "the GPU issue (Hugging Face transformers on the GPU)",
    "trtllm": "the TensorRT-LLM issue (trtllm-bench on DGX Spark)",
    "microbench": "the GPU issue (convolution kernels, pinned bandwidth)",
}


class WorkloadError(ValueError):
    """A workload that cannot be built from the config, or output that cannot be read."""


@dataclass(frozen=True)
class Metric:
    name: str
    value: float
    unit: str


MATMUL_DEFAULTS = {"warmup": 2, "repeats": 10, "dtype": "float64", "threads": 1, "seed": 0,
                   "backend": "numpy", "device": "cuda"}


def check_params(campaign: Campaign) -> None:
    """Semantic checks of workload parameters, named by config key."""
    kind = campaign.workload["kind"]
    if kind != "matmul":
        return  # planned workloads: the plan is valid, preflight says they cannot run yet
    for i, model in enumerate(campaign.models):
        params = campaign.workload_params(model.id)
        size = params.get("size")
        if not isinstance(size, int) or size < 1:
            raise WorkloadError(
                f"{campaign.source}: key 'models[{i}].size' (model {model.id}) must be a "
                "positive integer: the side of the square matrices (e.g. size: 1024)."
            )
        for key in ("warmup", "repeats", "threads"):
            value = params.get(key, MATMUL_DEFAULTS[key])
            if not isinstance(value, int) or value < (1 if key != "warmup" else 0):
                raise WorkloadError(
                    f"{campaign.source}: key 'workload.{key}' (or models[{i}].{key}) must be "
                    f"an integer >= {1 if key != 'warmup' else 0}, got {value!r}."
                )


def matmul_argv(params: dict[str, Any], python: str, probe: Path, out: Path,
                check: bool = False) -> list[str]:
    p = {**MATMUL_DEFAULTS, **params}
    argv = [python, str(probe / "matmul.py"), "--out", str(out)]
    if check:
        return [*argv, "--backend", str(p["backend"]), "--device", str(p["device"]), "--check"]
    return [
        *argv,
        "--size", str(p["size"]),
        "--warmup", str(p["warmup"]),
        "--repeats", str(p["repeats"]),
        "--dtype", str(p["dtype"]),
        "--seed", str(p["seed"]),
        "--backend", str(p["backend"]),
        "--device", str(p["device"]),
    ]


def thread_env(params: dict[str, Any]) -> dict[str, str]:
    """The same BLAS thread count everywhere; without it each library picks its own."""
    n = str({**MATMUL_DEFAULTS, **params}["threads"])
    return {k: n for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


def build(kind: str, params: dict[str, Any], python: str, probe: Path, out: Path,
          check: bool = False) -> tuple[list[str], dict[str, str]]:
    """argv and environment variables of the probe for one run (or a preflight check)."""
    if kind == "matmul":
        return matmul_argv(params, python, probe, out, check), thread_env(params)
    if kind in NOT_YET:
        raise WorkloadError(
            f"workload '{kind}' is part of the study design but not implemented in this "
            f"version; it arrives with {NOT_YET[kind]}. Use workload kind 'matmul' for now."
        )
    raise WorkloadError(f"unknown workload kind {kind!r}")


def matmul_metrics(probe: dict[str, Any], launched_unix: float, wall_s: float) -> list[Metric]:
    iters = probe["iteration_s"]
    n = probe["size"]
    median = statistics.median(iters)
    return [
        Metric("compute_time_s", statistics.fmean(iters), "s"),
        Metric("compute_time_median_s", median, "s"),
        Metric("compute_gflops", 2.0 * n**3 / median / 1e9, "GFLOP/s"),
        Metric("compute_total_s", sum(iters), "s"),
        Metric("process_wall_s", wall_s, "s"),
        Metric("startup_s", probe["t_enter_unix"] - launched_unix, "s"),
        Metric("import_s", probe["import_s"], "s"),
        Metric("alloc_s", probe["alloc_s"], "s"),
        Metric("max_rss_mib", probe["max_rss_kib"] / 1024.0, "MiB"),
    ] + ([Metric("peak_memory_gib", probe["peak_device_bytes"] / 2**30, "GiB")]
         if probe.get("peak_device_bytes") else [])


def metrics(kind: str, probe: dict[str, Any], launched_unix: float, wall_s: float) -> list[Metric]:
    if kind == "matmul":
        try:
            return matmul_metrics(probe, launched_unix, wall_s)
        except (KeyError, TypeError, ZeroDivisionError, statistics.StatisticsError) as exc:
            raise WorkloadError(f"matmul probe output is incomplete: {exc!r}") from None
    raise WorkloadError(f"no metrics parser for workload {kind!r}")


def requests_rows(kind: str, probe: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-request (per-iteration) data, for percentiles computed from the raw values."""
    if kind == "matmul":
        return [{"index": i, "latency_s": t} for i, t in enumerate(probe["iteration_s"])]
    return []
