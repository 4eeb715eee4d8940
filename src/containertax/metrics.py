"""The metric registry: every table and figure takes its label, unit and direction here.

direction says which way is better ('lower', 'higher', or 'none' for descriptive metrics
such as utilisation); size_trend says how a physically plausible metric moves as the model
(problem) grows, which the data-quality report checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MetricInfo:
    name: str
    unit: str
    direction: str
    label: str
    description: str
    size_trend: str | None = None  # 'increasing', 'decreasing' or None


_BUILTIN = [
    MetricInfo("compute_time_s", "s", "lower", "Compute time per product",
               "mean time of one timed matrix product, inside the process", "increasing"),
    MetricInfo("compute_time_median_s", "s", "lower", "Median compute time per product",
               "median time of one timed matrix product", "increasing"),
    MetricInfo("compute_gflops", "GFLOP/s", "higher", "Compute throughput",
               "2 n^3 / median product time"),
    MetricInfo("compute_total_s", "s", "lower", "Total compute time",
               "sum of the timed products", "increasing"),
    MetricInfo("process_wall_s", "s", "lower", "Process wall time",
               "launch to exit measured on the host, container creation included",
               "increasing"),
    MetricInfo("startup_s", "s", "lower", "Start-up latency",
               "launch until the probe's first statement"),
    MetricInfo("import_s", "s", "lower", "Import time", "time to import the framework"),
    MetricInfo("alloc_s", "s", "lower", "Allocation time", "time to create the inputs",
               "increasing"),
    MetricInfo("max_rss_mib", "MiB", "lower", "Peak resident memory",
               "peak resident set size of the process", "increasing"),
    MetricInfo("latency_s", "s", "lower", "Request latency",
               "per-request (per-iteration) latency, from per-request data"),
    # GPU telemetry of a run (NVML, on the host)
    MetricInfo("gpu_energy_j", "J", "lower", "GPU energy",
               "energy counter difference over the run"),
    MetricInfo("gpu_power_mean_w", "W", "none", "Mean GPU power", "mean of the 10 Hz samples"),
    MetricInfo("gpu_util_mean_pct", "%", "none", "Mean GPU utilisation",
               "mean of the 10 Hz samples"),
    # Imported results (Sani et al. 2025)
    MetricInfo("time_s", "s", "lower", "Run time", "reported run time of one run"),
    MetricInfo("gpu_util_pct", "%", "none", "GPU utilisation",
               "mean GPU utilisation during the run (nvidia-smi)"),
    # LLM inference (later workloads)
    MetricInfo("token_throughput", "tok/s", "higher", "Token throughput",
               "output tokens per second", "decreasing"),
    MetricInfo("request_throughput", "req/s", "higher", "Request throughput",
               "requests per second", "decreasing"),
    MetricInfo("ttft_s", "s", "lower", "Time to first token", "time to first token"),
    MetricInfo("itl_s", "s", "lower", "Inter-token latency", "mean inter-token latency"),
    MetricInfo("peak_memory_gib", "GiB", "lower", "Peak memory", "peak device memory",
               "increasing"),
]
REGISTRY: dict[str, MetricInfo] = {m.name: m for m in _BUILTIN}


def registry(extra: dict[str, dict[str, Any]] | None = None) -> dict[str, MetricInfo]:
    """The built-in registry plus metrics a campaign config defines (analysis.metrics)."""
    reg = dict(REGISTRY)
    for name, spec in (extra or {}).items():
        reg[name] = MetricInfo(
            name,
            spec["unit"],
            spec.get("direction", "lower"),
            spec.get("label", name),
            spec.get("description", ""),
            spec.get("size_trend"),
        )
    return reg
