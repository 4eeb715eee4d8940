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
    # LLM inference
    MetricInfo("token_throughput", "tok/s", "higher", "Token throughput",
               "output tokens per second of busy time", "decreasing"),
    MetricInfo("request_throughput", "req/s", "higher", "Request throughput",
               "sequences completed per second of busy time", "decreasing"),
    MetricInfo("ttft_s", "s", "lower", "Time to first token", "mean time to first token"),
    MetricInfo("itl_s", "s", "lower", "Inter-token latency", "mean inter-token latency"),
    MetricInfo("itl_p50_s", "s", "lower", "Inter-token latency p50",
               "median gap between decoding steps"),
    MetricInfo("itl_p99_s", "s", "lower", "Inter-token latency p99",
               "99th percentile gap between decoding steps (linear interpolation)"),
    MetricInfo("request_latency_s", "s", "lower", "Request latency",
               "mean time of one request (a batch decoded together)", "increasing"),
    MetricInfo("model_build_s", "s", "lower", "Model build time",
               "building (random weights) or loading the model onto the device", "increasing"),
    MetricInfo("energy_per_token_j", "J", "lower", "Energy per token",
               "GPU energy over the measured requests / tokens generated", "increasing"),
    MetricInfo("peak_memory_gib", "GiB", "lower", "Peak memory",
               "peak device memory allocated by torch", "increasing"),
    MetricInfo("peak_reserved_gib", "GiB", "lower", "Peak reserved memory",
               "peak device memory reserved by torch's caching allocator", "increasing"),
    # Memory of the host (and of the GPU, where NVML reports it) around and during a run
    MetricInfo("mem_available_before_gib", "GiB", "none", "MemAvailable before",
               "host MemAvailable as the run starts (after the page-cache drop, if any)"),
    MetricInfo("mem_available_after_gib", "GiB", "none", "MemAvailable after",
               "host MemAvailable right after the process exits"),
    MetricInfo("host_mem_used_peak_gib", "GiB", "lower", "Peak host memory in use",
               "peak of MemTotal - MemAvailable during the run (10 Hz); on unified memory "
               "this includes the GPU's allocations", "increasing"),
    MetricInfo("host_mem_rise_gib", "GiB", "lower", "Host memory taken by the run",
               "peak in use during the run minus in use at its start", "increasing"),
    MetricInfo("gpu_mem_peak_gib", "GiB", "lower", "Peak GPU memory (NVML)",
               "peak device memory in use, all processes (10 Hz)", "increasing"),
    # TensorRT-LLM (trtllm-bench's own numbers; percentiles are its index-based ones)
    MetricInfo("kv_cache_gib", "GiB", "higher", "KV-cache size",
               "paged KV cache TensorRT-LLM allocated (its log line)", "increasing"),
    MetricInfo("kv_cache_tokens", "tokens", "higher", "KV-cache capacity",
               "tokens the paged KV cache holds (its log line)"),
    MetricInfo("benchmark_s", "s", "lower", "Benchmark time",
               "trtllm-bench's run, engine start included", "increasing"),
    MetricInfo("trtllm_total_latency_s", "s", "lower", "Total latency",
               "first request start to last request end (trtllm-bench)", "increasing"),
    MetricInfo("trtllm_request_latency_p50_s", "s", "lower", "Request latency p50",
               "trtllm-bench's p50 (sorted(v)[int(n/2)])"),
    MetricInfo("trtllm_request_latency_p99_s", "s", "lower", "Request latency p99",
               "trtllm-bench's p99 (sorted(v)[int(0.99 n)])"),
    MetricInfo("trtllm_ttft_p50_s", "s", "lower", "TTFT p50", "trtllm-bench's p50"),
    MetricInfo("trtllm_ttft_p99_s", "s", "lower", "TTFT p99", "trtllm-bench's p99"),
    # GPU microbenchmarks
    MetricInfo("h2d_gbps", "GB/s", "higher", "Host-to-device bandwidth",
               "pinned copy, median of the timed copies"),
    MetricInfo("d2h_gbps", "GB/s", "higher", "Device-to-host bandwidth",
               "pinned copy, median of the timed copies"),
    *[MetricInfo(f"{name}_us", "us", "lower", f"Convolution {label}",
                 "DeepBench forward convolution, median of the timed calls")
      for name, label in [("conv_341x79x32_n4_k32_5x10_s2", "341x79x32 N4 K32 5x10 s2"),
                          ("conv_224x224x3_n1_k64_7x7_s2", "224x224x3 N1 K64 7x7 s2"),
                          ("conv_56x56x256_n1_k128_1x1_s2", "56x56x256 N1 K128 1x1 s2"),
                          ("conv_7x7x512_n2_k2048_1x1_s1", "7x7x512 N2 K2048 1x1 s1")]],
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
