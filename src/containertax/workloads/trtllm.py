"""TensorRT-LLM's `trtllm-bench`: the command lines a run uses, and what its output says.

No TensorRT-LLM here: the commands follow TensorRT-LLM's documentation and CLI, and the
parsers follow its source, in the two output shapes that exist:

- JSON report (`--report_json`), written by `ReportUtility.get_statistics_dict` in
  tensorrt_llm/bench/dataclasses/reporting.py (NVIDIA/TensorRT-LLM, e.g. commit 0249976):
  sections engine, machine, world_info, request_info, performance and, when streaming,
  streaming_metrics; times in ms, throughputs per second.
- Log only (early trtllm-bench, same file at commit 3856265): a "PERFORMANCE OVERVIEW"
  block with "Token Throughput (tokens/sec)", "Request Throughput (req/sec)", "Total
  Latency (ms)" and, when streaming, "STREAMING STATISTICS" averages.

The KV-cache size comes from the log line that cpp/tensorrt_llm/batch_manager/
kvCacheManager.cpp prints: "[MemUsageChange] Allocated %0.2f GiB for max tokens in paged
KV cache (%d).". Percentiles are TensorRT-LLM's own (PercentileStats.from_iterable in
tensorrt_llm/bench/dataclasses/statistics.py: sorted(values)[int(n * q)], no
interpolation); this module reports them as they are and says so in each metric's name
(trtllm_*).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from containertax.workloads.base import (
    MEMORY_TOLERANCE,
    Metric,
    MetricInfo,
    Probe,
    Where,
    Workload,
    WorkloadError,
    process_metrics,
)

DEFAULTS: dict[str, Any] = {
    "mode": "throughput", "backend": "pytorch", "num_requests": 1000, "input_len": 128,
    "output_len": 128, "concurrency": None, "max_batch_size": None, "max_num_tokens": None,
    "warmup": 2, "streaming": True, "kv_cache_free_gpu_mem_fraction": None,
    "extra_llm_api_options": None, "seed": 0, "tp": 1,
}
KV_LINE = re.compile(r"Allocated ([0-9.]+) GiB for max tokens in paged KV cache \((\d+)\)")
VERSION_LINE = re.compile(r"TensorRT[- ]LLM [Vv]ersion:\s*(\S+)")
LOG_FIELDS = {
    "token_throughput": r"Token Throughput \(tokens/sec\):\s*([0-9.]+)",
    "request_throughput": r"Request Throughput \(req/sec\):\s*([0-9.]+)",
    "total_latency_ms": r"Total Latency \(ms\):\s*([0-9.]+)",
    "avg_request_latency_ms": r"Average request latency \(ms\):\s*([0-9.]+)",
    "avg_ttft_ms": r"Average time-to-first-token (?:\[TTFT\] )?\(ms\):\s*([0-9.]+)",
    "avg_itl_ms": r"Average inter-token latency (?:\[ITL\] )?\(ms\):\s*([0-9.]+)",
}


class TrtllmOutputError(ValueError):
    """trtllm-bench output this parser does not recognise; the message says which."""


def dataset_name(p: dict[str, Any]) -> str:
    """One file per model and dataset parameters: a changed length or seed is a new file."""
    p = {**DEFAULTS, **p}
    model = re.sub(r"[^A-Za-z0-9._-]+", "_", str(p["model"])).strip("_")
    return (f"{model}-in{p['input_len']}-out{p['output_len']}-n{p['num_requests']}"
            f"-seed{p['seed']}.jsonl")


def model_args(p: dict[str, Any]) -> list[str]:
    args = ["--model", str(p["model"])]
    if p.get("model_path"):
        args += ["--model_path", str(p["model_path"])]
    return args


def flatten(segments: list[list[str]]) -> list[str]:
    return [word for segment in segments for word in segment]


def dataset_segments(p: dict[str, Any], out: str) -> list[list[str]]:
    """A fixed-length synthetic dataset (token-norm-dist with zero spread), seeded, made
    once per model and read by every environment. prepare-dataset takes its tokenizer from
    --model before --model_path (tensorrt_llm/bench/dataset/prepare_dataset.py:
    `ctx.obj.model or ctx.obj.checkpoint_path`), so a local checkpoint goes in --model: no
    download on an offline machine."""
    p = {**DEFAULTS, **p}
    return [["trtllm-bench", "--model", str(p.get("model_path") or p["model"])],
            ["prepare-dataset", "--output", out, "--random-seed", str(p["seed"])],
            ["token-norm-dist", "--num-requests", str(p["num_requests"]),
             "--input-mean", str(p["input_len"]), "--input-stdev", "0",
             "--output-mean", str(p["output_len"]), "--output-stdev", "0"]]


def bench_segments(p: dict[str, Any], dataset: str, report: str) -> list[list[str]]:
    """`trtllm-bench ... throughput|latency` from the config's parameters."""
    p = {**DEFAULTS, **p}
    sub = [str(p["mode"]), "--dataset", dataset, "--backend", str(p["backend"]),
           "--num_requests", str(p["num_requests"]), "--warmup", str(p["warmup"]),
           "--report_json", report]
    if p["mode"] == "throughput":
        for key in ("max_batch_size", "max_num_tokens", "concurrency"):
            if p.get(key) is not None:
                sub += [f"--{key}", str(p[key])]
        if p["streaming"]:
            sub.append("--streaming")
    if p["tp"] != 1:
        sub += ["--tp", str(p["tp"])]
    if p.get("kv_cache_free_gpu_mem_fraction") is not None:
        sub += ["--kv_cache_free_gpu_mem_fraction", str(p["kv_cache_free_gpu_mem_fraction"])]
    if p.get("extra_llm_api_options"):
        sub += ["--extra_llm_api_options", str(p["extra_llm_api_options"])]
    return [["trtllm-bench", *model_args(p)], sub]


def kv_cache(log: str) -> dict[str, float] | None:
    """The last KV-cache allocation in the log (one per executor start)."""
    found = KV_LINE.findall(log)
    if not found:
        return None
    gib, tokens = found[-1]
    return {"kv_cache_gib": float(gib), "kv_cache_tokens": float(tokens)}


def parse_report(report: dict[str, Any]) -> dict[str, float]:
    """Metrics of a JSON report (seconds, tokens/s, requests/s)."""
    try:
        perf = report["performance"]
        out = {
            "token_throughput": perf["system_output_throughput_tok_s"],
            "request_throughput": perf["request_throughput_req_s"],
            "request_latency_s": perf["avg_request_latency_ms"] / 1e3,
            "trtllm_total_latency_s": perf["total_latency_ms"] / 1e3,
        }
        pct = perf.get("request_latency_percentiles_ms") or {}
        for q in ("p50", "p99"):
            if q in pct:
                out[f"trtllm_request_latency_{q}_s"] = pct[q] / 1e3
        stream = report.get("streaming_metrics")
        if stream:
            out["ttft_s"] = stream["avg_ttft_ms"] / 1e3
            out["itl_s"] = stream["avg_tpot_ms"] / 1e3
            for q in ("p50", "p99"):
                if q in stream.get("ttft_percentiles", {}):
                    out[f"trtllm_ttft_{q}_s"] = stream["ttft_percentiles"][q] / 1e3
    except (KeyError, TypeError) as exc:
        raise TrtllmOutputError(
            f"trtllm-bench report lacks {exc}: not the report_json layout of "
            "tensorrt_llm/bench/dataclasses/reporting.py this parser knows") from None
    return {k: float(v) for k, v in out.items()}


def parse_log(log: str) -> dict[str, float]:
    """Metrics of a log-only run (early trtllm-bench without --report_json)."""
    raw = {k: float(m.group(1)) for k, rx in LOG_FIELDS.items() if (m := re.search(rx, log))}
    if "token_throughput" not in raw or "request_throughput" not in raw:
        raise TrtllmOutputError("no 'PERFORMANCE OVERVIEW' throughput lines in the "
                                "trtllm-bench log and no JSON report")
    out = {"token_throughput": raw["token_throughput"],
           "request_throughput": raw["request_throughput"]}
    if "total_latency_ms" in raw:
        out["trtllm_total_latency_s"] = raw["total_latency_ms"] / 1e3
    if "avg_request_latency_ms" in raw:
        out["request_latency_s"] = raw["avg_request_latency_ms"] / 1e3
    if "avg_ttft_ms" in raw:
        out["ttft_s"] = raw["avg_ttft_ms"] / 1e3
    if "avg_itl_ms" in raw:
        out["itl_s"] = raw["avg_itl_ms"] / 1e3
    return out


def engine_facts(report: dict[str, Any] | None, log: str) -> dict[str, Any]:
    """Version and engine details for provenance."""
    facts: dict[str, Any] = dict((report or {}).get("engine") or {})
    if "version" not in facts and (m := VERSION_LINE.search(log)):
        facts["version"] = m.group(1)
    if report and report.get("world_info"):
        facts["world_info"] = report["world_info"]
    return facts


# --- the workload kind, as the registry (containertax.workloads) lists it --------------


def argv(p: dict[str, Any], python: str, probe: Path, out: Path, check: bool) -> list[str]:
    dataset = f"{p['dataset_dir']}/{dataset_name(p)}"
    cmd = [python, str(probe / "trtllm.py"), "--out", str(out), "--dataset", dataset,
           "--prepare", json.dumps(dataset_segments(p, dataset)),
           "--bench", json.dumps(bench_segments(p, dataset, str(out.parent / "report.json")))]
    return [*cmd, "--check", "--dataset-dir", str(p["dataset_dir"])] if check else cmd


def metrics(probe: Probe, launched_unix: float, wall_s: float) -> list[Metric]:
    log = probe.get("log_tail", "")
    try:
        values = parse_report(probe["report"]) if probe.get("report") else parse_log(log)
    except TrtllmOutputError as exc:
        raise WorkloadError(str(exc)) from None
    values.update(kv_cache(log) or {})
    units = {"token_throughput": "tok/s", "request_throughput": "req/s",
             "kv_cache_gib": "GiB", "kv_cache_tokens": "tokens"}
    return [Metric(k, v, units.get(k, "s")) for k, v in values.items()] + [
        Metric("benchmark_s", probe["bench_s"], "s"),
        *process_metrics(probe, launched_unix, wall_s)]


def detail(probe: Probe) -> dict[str, Any]:
    return {"engine": engine_facts(probe.get("report"), probe.get("log_tail", "")),
            "report": probe.get("report"),
            "prepared_dataset_here": probe.get("prepared_dataset_here", False)}


def problems(params: dict[str, Any], where: Where) -> list[str]:
    return [f"{where.source}: model {where.model} (models[{where.index}]) needs '{key}' "
            "(trtllm: 'model' = Hugging Face name or local path as trtllm-bench takes it; "
            "'dataset_dir' = a folder mounted at the same path in every environment, where "
            "each model's dataset is prepared once)."
            for key in ("model", "dataset_dir") if not isinstance(params.get(key), str)]


def check_argv(models: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Preflight checks every trtllm model's checkpoint inside each environment, not only
    the first's."""
    keys = ("model", "model_path", "quantization")
    return ["--check-models", json.dumps(
        [{"id": model_id, **{k: v for k, v in params.items() if k in keys}}
         for model_id, params in models])]


WORKLOAD = Workload(
    kind="trtllm",
    probe="trtllm.py",
    defaults={**DEFAULTS, "threads": 1},
    integers={"num_requests": 1, "input_len": 1, "output_len": 1, "warmup": 0, "tp": 1},
    argv=argv,
    metrics=metrics,
    detail=detail,
    problems=problems,
    check_argv=check_argv,
    metric_info=(
        # TensorRT-LLM gives the KV cache a fraction of the memory left after the weights:
        # the larger the model, the smaller the cache
        MetricInfo("kv_cache_gib", "GiB", "higher", "KV-cache size",
                   "paged KV cache TensorRT-LLM allocated (its log line)", "decreasing",
                   MEMORY_TOLERANCE),
        MetricInfo("kv_cache_tokens", "tokens", "higher", "KV-cache capacity",
                   "tokens the paged KV cache holds (its log line)", "decreasing",
                   MEMORY_TOLERANCE),
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
    ),
)
