"""The metric registry: every table and figure takes its label, unit and direction here.

It lives with the workloads (not the analysis) so that config validation, one layer up,
reads it without importing the analysis.

Each workload module declares the metrics only it measures (containertax.workloads); the
ones every run shares (its process, GPU telemetry, host memory) and those of imported
studies are listed here. See MetricInfo for what the fields mean.
"""

from __future__ import annotations

from typing import Any

from containertax import workloads
from containertax.workloads import timeline
from containertax.workloads.base import MEMORY_TOLERANCE, MetricInfo

__all__ = ["PRIMARY_BY_KIND", "REGISTRY", "MetricInfo", "registry"]

# The primary family's default metrics per workload kind, as each kind declares them
# (Workload.primary: per group, the first one present wins). analysis.primary_metrics
# overrides them.
PRIMARY_BY_KIND: dict[str, list[list[str]]] = {
    kind: [list(group) for group in w.primary or ()] for kind, w in workloads.REGISTRY.items()}

_SHARED = [
    MetricInfo("process_wall_s", "s", "lower", "Process wall time",
               "launch to exit measured on the host, container creation included",
               "increasing"),
    MetricInfo("startup_s", "s", "lower", "Start-up latency",
               "launch until the probe's first statement"),
    MetricInfo("import_s", "s", "lower", "Import time", "time to import the framework"),
    MetricInfo("max_rss_mib", "MiB", "lower", "Peak resident memory",
               "peak resident set of the workload process: VmHWM from /proc/self/status "
               "(its own address space; trtllm: the largest child's ru_maxrss)", "increasing",
               MEMORY_TOLERANCE),
    MetricInfo("max_rss_rusage_mib", "MiB", "none", "Peak RSS (ru_maxrss, legacy)",
               "records before the VmHWM fix: getrusage ru_maxrss, which a child inherits "
               "from its launcher across fork+exec; not comparable between environments",
               comparable=False),
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
    # a sampled percentage (share of samples with the GPU busy), not a ratio scale: never
    # compared as a log ratio; the discussion reports its difference in percentage points
    MetricInfo("gpu_util_pct", "%", "none", "GPU utilisation",
               "mean GPU utilisation during the run (nvidia-smi)", comparable=False),
    # device memory of the torch probes
    MetricInfo("peak_memory_gib", "GiB", "lower", "Peak memory",
               "peak device memory allocated by torch", "increasing", MEMORY_TOLERANCE),
    MetricInfo("peak_reserved_gib", "GiB", "lower", "Peak reserved memory",
               "peak device memory reserved by torch's caching allocator", "increasing",
               MEMORY_TOLERANCE),
    # Memory of the host (and of the GPU, where NVML reports it) around and during a run
    MetricInfo("mem_available_before_gib", "GiB", "none", "MemAvailable before",
               "host MemAvailable as the run starts (after the page-cache drop, if any)"),
    MetricInfo("mem_available_after_gib", "GiB", "none", "MemAvailable after",
               "host MemAvailable right after the process exits"),
    MetricInfo("host_mem_used_peak_gib", "GiB", "lower", "Peak host memory in use",
               "peak of MemTotal - MemAvailable during the run (10 Hz); on unified memory "
               "this includes the GPU's allocations", "increasing", MEMORY_TOLERANCE),
    MetricInfo("host_mem_rise_gib", "GiB", "lower", "Host memory taken by the run",
               "peak in use during the run minus in use at its start", "increasing",
               MEMORY_TOLERANCE, sign="any"),  # others' memory may be freed meanwhile
    MetricInfo("gpu_mem_peak_gib", "GiB", "lower", "Peak GPU memory (NVML)",
               "peak device memory in use, all processes (10 Hz)", "increasing",
               MEMORY_TOLERANCE),
    MetricInfo("gpu_proc_mem_peak_gib", "GiB", "lower", "Peak GPU memory of processes (NVML)",
               "peak of the compute processes' GPU memory, NVML per-process accounting "
               "(where the device query is not supported, GB10)", "increasing",
               MEMORY_TOLERANCE),
]
# The phases of a run's timeline (workloads/timeline.py): they add up to process_wall_s
_PHASES = [MetricInfo(p.metric, "s", "lower", p.label, p.description)
           for p in timeline.PHASES]
REGISTRY: dict[str, MetricInfo] = {m.name: m for m in [*workloads.metric_info(), *_SHARED,
                                                        *_PHASES]}

# Series of a run's host-side telemetry trace (telemetry.csv columns), for its figure.
TELEMETRY: dict[str, MetricInfo] = {m.name: m for m in [
    MetricInfo("temperature_c", "°C", "none", "Temperature", "gate sensor, 10 Hz"),
    MetricInfo("cpu_util_pct", "%", "none", "CPU utilisation", "host, all cores"),
    MetricInfo("mem_used_mib", "MiB", "none", "Host memory in use", "MemTotal - MemAvailable"),
    MetricInfo("power_w", "W", "none", "GPU power", "NVML"),
    MetricInfo("sm_clock_mhz", "MHz", "none", "SM clock", "NVML"),
]}

# Units as records spell them (ASCII) and as a reader expects them.
_DISPLAY_UNIT = {"us": "µs", "deg_c": "°C"}


def display_unit(unit: str) -> str:
    return _DISPLAY_UNIT.get(unit, unit)


def axis_label(info: MetricInfo | None, name: str) -> str:
    """'Label (unit)' for a figure axis; a metric the registry lacks is an error, so a raw
    column name never reaches a figure."""
    if info is None:
        raise KeyError(f"metric {name!r} is not in the metric registry (workloads/"
                       "metric_registry.py or analysis.define_metrics of the config): it has "
                       "no label or unit")
    return f"{info.label} ({display_unit(info.unit)})"


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
            spec.get("size_tolerance", 0.02),
            sign="any",  # a metric the config defines says nothing of its sign
        )
    return reg
