"""Square matrix products (numpy or torch): compute time and throughput per product."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from containertax.core.metric import Metric
from containertax.workloads.base import (
    TORCH_DEVICES,
    MetricInfo,
    Probe,
    Rehearsal,
    Where,
    Workload,
    device_memory,
    flags,
    never,
    no_datasets,
    process_metrics,
)


def argv(p: dict[str, Any], python: str, probe: Path, out: Path, check: bool) -> list[str]:
    cmd = [python, str(probe / "matmul.py"), "--out", str(out)]
    if check:
        return [*cmd, "--backend", str(p["backend"]), "--device", str(p["device"]),
                "--dtype", str(p["dtype"]), "--check"]
    return [*cmd, *flags(p, ["size", "warmup", "repeats", "dtype", "seed", "backend",
                             "device"])]


def metrics(probe: Probe, launched_unix: float, wall_s: float) -> list[Metric]:
    iters = probe["iteration_s"]
    n = probe["size"]
    median = statistics.median(iters)
    return [
        Metric("compute_time_s", statistics.fmean(iters), "s"),
        Metric("compute_time_median_s", median, "s"),
        Metric("compute_gflops", 2.0 * n**3 / median / 1e9, "GFLOP/s"),
        Metric("compute_total_s", sum(iters), "s"),
        *process_metrics(probe, launched_unix, wall_s),
        Metric("alloc_s", probe["alloc_s"], "s"),
        *device_memory(probe),
    ]


def requests_rows(probe: Probe) -> list[dict[str, Any]]:
    return [{"index": i, "latency_s": t} for i, t in enumerate(probe["iteration_s"])]


BACKENDS = ("numpy", "torch")
DTYPES = ("float64", "float32", "float16", "bfloat16")  # bfloat16: torch only


def problems(params: dict[str, Any], where: Where) -> list[str]:
    out = []
    size = params.get("size")
    if not (isinstance(size, int) and not isinstance(size, bool) and size >= 1):
        out.append(f"{where.source}: key 'models[{where.index}].size' (model {where.model}) "
                   "must be a positive integer: the side of the square matrices (e.g. size: "
                   f"1024), got {size!r}.")
    if params.get("dtype") == "bfloat16" and params.get("backend") == "numpy":
        out.append(f"{where.source}: key 'workload.dtype' (or 'models[{where.index}].dtype') "
                   f"(model {where.model}): numpy has no bfloat16; set backend: torch or "
                   f"another dtype {[d for d in DTYPES if d != 'bfloat16']}.")
    return out


WORKLOAD = Workload(
    kind="matmul",
    probe="matmul.py",
    defaults={"warmup": 2, "repeats": 10, "dtype": "float64", "threads": 1, "seed": 0,
              "backend": "numpy", "device": "cuda"},
    integers={"warmup": 0, "repeats": 1, "threads": 1},
    argv=argv,
    metrics=metrics,
    requests_rows=requests_rows,
    problems=problems,
    choices={"dtype": DTYPES, "backend": BACKENDS, "device": TORCH_DEVICES},
    required=frozenset({"size"}),
    compiles=never,
    primary=(("compute_time_s", "compute_time_median_s"),),
    words="square matrix product",
    rehearsal=Rehearsal("repeats", 3, lambda m, n: m.get("compute_total_s", 0.0)),
    host_metrics={},
    datasets=no_datasets,
    metric_info=(
        MetricInfo("compute_time_s", "s", "lower", "Compute time per product",
                   "mean time of one timed matrix product, inside the process", "increasing"),
        MetricInfo("compute_time_median_s", "s", "lower", "Median compute time per product",
                   "median time of one timed matrix product", "increasing"),
        MetricInfo("compute_gflops", "GFLOP/s", "higher", "Compute throughput",
                   "2 n^3 / median product time", restates="compute_time_median_s"),
        MetricInfo("compute_total_s", "s", "lower", "Total compute time",
                   "sum of the timed products", "increasing", restates="compute_time_s"),
        MetricInfo("alloc_s", "s", "lower", "Allocation time", "time to create the inputs",
                   "increasing"),
    ),
)
