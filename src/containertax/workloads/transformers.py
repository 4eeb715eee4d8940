"""LLM inference with Hugging Face transformers (random-initialised or local weights):
per-step timestamps give time to first token, inter-token latency and throughput."""

from __future__ import annotations

import json
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
    WorkloadError,
    device_memory,
    flags,
    no_datasets,
    process_metrics,
)

DECODING = ("auto", "plain", "static", "compiled", "engine")
COMPILING = ("compiled", "engine")  # decoding modes that use torch.compile's cache
COMPILE_MODES = ("reduce-overhead", "max-autotune")  # torch.compile modes of the engine step
DTYPES = ("bfloat16", "float16", "float32", "float64")
# transformers' attention implementations, and the probe's own: auto and sdpa_gqa (above)
ATTENTION = ("auto", "sdpa", "sdpa_gqa", "eager", "flex_attention", "flash_attention_2")


def decoding_of(params: dict[str, Any]) -> str:
    """The decoding mode a run uses: 'auto' is the engine on a GPU (static KV cache, one
    compiled CUDA-graph step) and plain decoding elsewhere (a CPU has no CUDA graphs)."""
    mode = str(params.get("decoding", "auto"))
    if mode == "auto":
        return "engine" if str(params.get("device", "cuda")).startswith("cuda") else "plain"
    return mode


def attention_of(params: dict[str, Any]) -> str:
    """The attention a run uses: 'auto' is the probe's sdpa_gqa under engine decoding (each
    cached K/V head read once, as an engine's attention does; transformers' sdpa copies it
    per query head) and transformers' sdpa otherwise."""
    name = str(params.get("attn_implementation", "auto"))
    if name == "auto":
        return "sdpa_gqa" if decoding_of(params) == "engine" else "sdpa"
    return name


def argv(p: dict[str, Any], python: str, probe: Path, out: Path, check: bool) -> list[str]:
    cmd = [python, str(probe / "llm.py"), "--out", str(out), "--device", str(p["device"])]
    if check:
        return [*cmd, "--check"]
    model = (["--model-config", json.dumps(p["model_config"], sort_keys=True)]
             if "model_config" in p else ["--model-path", str(p["model_path"])])
    return [*cmd, *model, *flags(p, ["dtype", "batch_size", "input_len", "output_len",
                                     "warmup", "requests", "seed"]),
            "--attn-implementation", attention_of(p), "--decoding", decoding_of(p),
            *engine_flags(p)]


def engine_flags(p: dict[str, Any]) -> list[str]:
    """How the engine's step is compiled (only the engine compiles a step of its own)."""
    if decoding_of(p) != "engine":
        return []
    return ["--compile-mode", str(p["compile_mode"]),
            "--coordinate-descent" if p["coordinate_descent"] else "--no-coordinate-descent"]


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default method)."""
    v = sorted(values)
    pos = (len(v) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def measured_requests(probe: Probe) -> list[dict[str, Any]]:
    rows = [r for r in probe["requests"] if not r["warmup"]]
    if not rows:
        raise WorkloadError("the transformers probe measured no request (requests: 0?)")
    return rows


def request_summary(r: dict[str, Any]) -> dict[str, Any]:
    """Time to first token, inter-token gaps and tokens of one request (a batch of
    sequences decoded together: every sequence gets its token at the same step)."""
    steps = r["step_s"]
    gaps = [b - a for a, b in zip(steps, steps[1:], strict=False)]
    return {"ttft_s": steps[0], "gaps": gaps, "tokens": r["batch_size"] * r["output_len"],
            "sequences": r["batch_size"], "latency_s": r["latency_s"]}


def output_tokens(probe: Probe) -> int:
    """Tokens generated inside the measured window (energy per token divides by this)."""
    return sum(request_summary(r)["tokens"] for r in measured_requests(probe))


def decode_step_s(probe: Probe) -> float:
    """Median time of one decoding step (the gaps between steps) over the measured
    requests: the prefill (time to first token) is not a decoding step."""
    return percentile([g for r in measured_requests(probe) for g in request_summary(r)["gaps"]],
                      50)


def roofline_pct(probe: Probe, peak_bytes_per_s: float) -> float | None:
    """How close one decoding step comes to reading the weights once at the memory's peak
    bandwidth: bytes of weights a step reads / median step time / peak bandwidth, in %.
    Decoding a small batch is bound by that read, so 100 % is the ceiling."""
    nbytes = (probe.get("model") or {}).get("weight_bytes_per_step")
    if not nbytes or not peak_bytes_per_s:
        return None
    return 100.0 * nbytes / decode_step_s(probe) / peak_bytes_per_s


def metrics(probe: Probe, launched_unix: float, wall_s: float) -> list[Metric]:
    summaries = [request_summary(r) for r in measured_requests(probe)]
    busy = sum(s["latency_s"] for s in summaries)
    gaps = [g for s in summaries for g in s["gaps"]]
    return [
        Metric("token_throughput", sum(s["tokens"] for s in summaries) / busy, "tok/s"),
        Metric("request_throughput", sum(s["sequences"] for s in summaries) / busy, "req/s"),
        Metric("ttft_s", statistics.fmean(s["ttft_s"] for s in summaries), "s"),
        Metric("itl_s", statistics.fmean(gaps), "s"),
        Metric("itl_p50_s", percentile(gaps, 50), "s"),
        Metric("itl_p99_s", percentile(gaps, 99), "s"),
        Metric("request_latency_s", busy / len(summaries), "s"),
        Metric("model_build_s", probe["build_s"], "s"),
        *process_metrics(probe, launched_unix, wall_s),
        *device_memory(probe),
    ]


def requests_rows(probe: Probe) -> list[dict[str, Any]]:
    rows = []
    for r in measured_requests(probe):
        s = request_summary(r)
        rows.append({"index": r["index"], "latency_s": r["latency_s"], "ttft_s": s["ttft_s"],
                     "itl_mean_s": statistics.fmean(s["gaps"]) if s["gaps"] else "",
                     "tokens": s["tokens"]})
    return rows


def detail(probe: Probe) -> dict[str, Any]:
    return {"model": probe.get("model"), "decoding": probe.get("decoding"),
            "compile": probe.get("compile"),
            "compile_cache": probe.get("compile_cache"),
            "compile_counters": probe.get("compile_counters"),
            "compile_breakdown": probe.get("compile_breakdown"),
            "autotune_census": probe.get("autotune_census"),
            "measure_window_unix": probe.get("measure_window_unix"),
            "requests": probe.get("requests")}


def problems(params: dict[str, Any], where: Where) -> list[str]:
    out = []
    has_config, has_path = "model_config" in params, "model_path" in params
    if has_config == has_path:
        out.append(
            f"{where.source}: model {where.model} (models[{where.index}]) needs exactly one of "
            "'model_config' (a mapping with model_type and config fields: random weights, "
            "nothing downloaded) and 'model_path' (a local checkpoint folder).")
    elif has_config and not (isinstance(params["model_config"], dict)
                             and isinstance(params["model_config"].get("model_type"), str)):
        out.append(
            f"{where.source}: key 'models[{where.index}].model_config' (model {where.model}) "
            "must be a mapping with a 'model_type' (e.g. llama, qwen2) and that model's "
            "config fields.")
    if not isinstance(params.get("coordinate_descent", False), bool):
        out.append(
            f"{where.source}: key 'workload.coordinate_descent' (or "
            f"'models[{where.index}].coordinate_descent') must be true or false, got "
            f"{params['coordinate_descent']!r}.")
    return out


WORKLOAD = Workload(
    kind="transformers",
    probe="llm.py",
    defaults={"dtype": "bfloat16", "device": "cuda", "attn_implementation": "auto",
              "batch_size": 8, "input_len": 512, "output_len": 128, "warmup": 1,
              "requests": 5, "decoding": "auto", "compile_mode": "reduce-overhead",
              "coordinate_descent": False, "seed": 0, "threads": 1},
    integers={"batch_size": 1, "input_len": 1, "output_len": 2, "warmup": 0, "requests": 1,
              "threads": 1},
    argv=argv,
    metrics=metrics,
    requests_rows=requests_rows,
    detail=detail,
    problems=problems,
    choices={"dtype": DTYPES, "device": TORCH_DEVICES, "attn_implementation": ATTENTION,
             "decoding": DECODING, "compile_mode": COMPILE_MODES},
    window_tokens=output_tokens,
    required=frozenset({"model_config", "model_path"}),
    compiles=lambda p: decoding_of(p) in COMPILING,
    primary=(("token_throughput",),),
    words="LLM inference (transformers)",
    rehearsal=Rehearsal("requests", 2,
                        lambda m, n: m.get("request_latency_s", 0.0) * n),
    host_metrics={"hbm_roofline_pct":
                  lambda probe, host: roofline_pct(probe, host.peak_memory_bytes_per_s or 0.0)},
    datasets=no_datasets,
    metric_info=(
        MetricInfo("token_throughput", "tok/s", "higher", "Token throughput",
                   "output tokens per second of busy time", "decreasing"),
        MetricInfo("hbm_roofline_pct", "%", "higher", "Memory roofline of a decoding step",
                   "weights a decoding step reads / median step time / peak memory bandwidth"),
        MetricInfo("request_throughput", "req/s", "higher", "Request throughput",
                   "sequences completed per second of busy time", "decreasing",
                   restates="token_throughput"),
        MetricInfo("ttft_s", "s", "lower", "Time to first token", "mean time to first token"),
        MetricInfo("itl_s", "s", "lower", "Inter-token latency", "mean inter-token latency"),
        MetricInfo("itl_p50_s", "s", "lower", "Inter-token latency p50",
                   "median gap between decoding steps"),
        MetricInfo("itl_p99_s", "s", "lower", "Inter-token latency p99",
                   "99th percentile gap between decoding steps (linear interpolation)"),
        MetricInfo("request_latency_s", "s", "lower", "Request latency",
                   "mean time of one request (a batch decoded together)", "increasing"),
        MetricInfo("model_build_s", "s", "lower", "Model build time",
                   "building (random weights) or loading the model onto the device",
                   "increasing"),
        MetricInfo("energy_per_token_j", "J", "lower", "Energy per token",
                   "GPU energy over the measured requests / tokens generated", "increasing"),
    ),
)
