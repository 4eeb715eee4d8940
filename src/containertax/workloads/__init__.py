"""What runs in an environment and how its output becomes metrics with units.

A workload builds the probe command (identical in every environment, only the paths of
the probe and work folders are the environment's) and turns the probe's JSON into rows.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from containertax.workloads import trtllm

if TYPE_CHECKING:
    from containertax.campaign.config import Campaign

PROBE_DIR = Path(__file__).resolve().parent / "probe"
KINDS = ("matmul", "transformers", "microbench", "trtllm")


class WorkloadError(ValueError):
    """A workload that cannot be built from the config, or output that cannot be read."""


@dataclass(frozen=True)
class Metric:
    name: str
    value: float
    unit: str


MATMUL_DEFAULTS = {"warmup": 2, "repeats": 10, "dtype": "float64", "threads": 1, "seed": 0,
                   "backend": "numpy", "device": "cuda"}
TRANSFORMERS_DEFAULTS = {"dtype": "bfloat16", "device": "cuda", "attn_implementation": "sdpa",
                         "batch_size": 8, "input_len": 512, "output_len": 128, "warmup": 1,
                         "requests": 5, "decoding": "plain", "seed": 0, "threads": 1}
TRTLLM_DEFAULTS = {**trtllm.DEFAULTS, "threads": 1}
MICROBENCH_DEFAULTS = {"copy_mib": 256, "dtype": "float32", "warmup": 10, "repeats": 100,
                       "threads": 1}
DEFAULTS = {"matmul": MATMUL_DEFAULTS, "transformers": TRANSFORMERS_DEFAULTS,
            "microbench": MICROBENCH_DEFAULTS, "trtllm": TRTLLM_DEFAULTS}
# integer parameters and their minimum, per workload
INTEGERS = {
    "matmul": {"size": 1, "warmup": 0, "repeats": 1, "threads": 1},
    "transformers": {"batch_size": 1, "input_len": 1, "output_len": 2, "warmup": 0,
                     "requests": 1, "threads": 1},
    "microbench": {"copy_mib": 1, "warmup": 0, "repeats": 2, "threads": 1},
    "trtllm": {"num_requests": 1, "input_len": 1, "output_len": 1, "warmup": 0, "tp": 1},
}
DECODING = ("plain", "static", "compiled")


def _int_problem(campaign: Campaign, i: int, model: str, key: str, value: Any,
                 minimum: int) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
        return None
    if key == "size":
        return (f"{campaign.source}: key 'models[{i}].size' (model {model}) must be a positive "
                f"integer: the side of the square matrices (e.g. size: 1024), got {value!r}.")
    return (f"{campaign.source}: key 'workload.{key}' (or 'models[{i}].{key}') (model {model}) "
            f"must be an integer >= {minimum}, got {value!r}.")


def _transformers_problems(campaign: Campaign, i: int, model: str,
                           params: dict[str, Any]) -> list[str]:
    problems = []
    has_config, has_path = "model_config" in params, "model_path" in params
    if has_config == has_path:
        problems.append(
            f"{campaign.source}: model {model} (models[{i}]) needs exactly one of "
            "'model_config' (a mapping with model_type and config fields: random weights, "
            "nothing downloaded) and 'model_path' (a local checkpoint folder).")
    elif has_config and not (isinstance(params["model_config"], dict)
                             and isinstance(params["model_config"].get("model_type"), str)):
        problems.append(
            f"{campaign.source}: key 'models[{i}].model_config' (model {model}) must be a "
            "mapping with a 'model_type' (e.g. llama, qwen2) and that model's config fields.")
    if params.get("decoding", "plain") not in DECODING:
        problems.append(
            f"{campaign.source}: key 'workload.decoding' (or 'models[{i}].decoding') must be "
            f"one of {list(DECODING)}, got {params['decoding']!r}.")
    return problems


def kind_of(campaign: Campaign, model_id: str) -> str:
    """A model's workload kind: its own 'kind' key, else workload.kind."""
    return str(campaign.model(model_id).params.get("kind", campaign.workload["kind"]))


def check_params(campaign: Campaign) -> None:
    """Semantic checks of workload parameters, named by config key."""
    problems: list[str] = []
    for i, model in enumerate(campaign.models):
        kind = kind_of(campaign, model.id)
        if kind not in INTEGERS:
            continue  # planned workloads: the plan is valid, preflight says they cannot run yet
        params = {**DEFAULTS[kind], **campaign.workload_params(model.id)}
        for key, minimum in INTEGERS[kind].items():
            problem = _int_problem(campaign, i, model.id, key, params.get(key), minimum)
            if problem:
                problems.append(problem)
        if kind == "transformers":
            problems += _transformers_problems(campaign, i, model.id, params)
        if kind == "trtllm":
            for key in ("model", "dataset_dir"):
                if not isinstance(params.get(key), str):
                    problems.append(
                        f"{campaign.source}: model {model.id} (models[{i}]) needs '{key}' "
                        "(trtllm: 'model' = Hugging Face name or local path as trtllm-bench "
                        "takes it; 'dataset_dir' = a folder mounted at the same path in every "
                        "environment, where each model's dataset is prepared once).")
    if problems:
        raise WorkloadError("\n".join(problems))


def matmul_argv(p: dict[str, Any], python: str, probe: Path, out: Path,
                check: bool = False) -> list[str]:
    argv = [python, str(probe / "matmul.py"), "--out", str(out)]
    if check:
        return [*argv, "--backend", str(p["backend"]), "--device", str(p["device"]), "--check"]
    return [*argv, *_flags(p, ["size", "warmup", "repeats", "dtype", "seed", "backend",
                               "device"])]


def _flags(p: dict[str, Any], keys: list[str]) -> list[str]:
    out: list[str] = []
    for key in keys:
        out += [f"--{key.replace('_', '-')}", str(p[key])]
    return out


def transformers_argv(p: dict[str, Any], python: str, probe: Path, out: Path,
                      check: bool = False) -> list[str]:
    argv = [python, str(probe / "llm.py"), "--out", str(out), "--device", str(p["device"])]
    if check:
        return [*argv, "--check"]
    model = (["--model-config", json.dumps(p["model_config"], sort_keys=True)]
             if "model_config" in p else ["--model-path", str(p["model_path"])])
    return [*argv, *model, *_flags(p, ["dtype", "attn_implementation", "batch_size",
                                       "input_len", "output_len", "warmup", "requests",
                                       "decoding", "seed"])]


def microbench_argv(p: dict[str, Any], python: str, probe: Path, out: Path,
                    check: bool = False) -> list[str]:
    argv = [python, str(probe / "microbench.py"), "--out", str(out)]
    if check:
        return [*argv, "--check"]
    return [*argv, *_flags(p, ["copy_mib", "dtype", "warmup", "repeats"])]


def thread_env(params: dict[str, Any]) -> dict[str, str]:
    """The same CPU thread count everywhere; without it each library picks its own."""
    n = str(params["threads"])
    return {k: n for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


def trtllm_argv(p: dict[str, Any], python: str, probe: Path, out: Path,
                check: bool = False) -> list[str]:
    dataset = f"{p['dataset_dir']}/{trtllm.dataset_name(p)}"
    argv = [python, str(probe / "trtllm.py"), "--out", str(out), "--dataset", dataset,
            "--prepare", json.dumps(trtllm.dataset_segments(p, dataset)),
            "--bench", json.dumps(trtllm.bench_segments(p, dataset,
                                                        str(out.parent / "report.json")))]
    return [*argv, "--check", "--dataset-dir", str(p["dataset_dir"])] if check else argv


def trtllm_check_models(campaign: Campaign) -> list[dict[str, Any]]:
    """What preflight checks of every trtllm model inside each environment."""
    keys = ("model", "model_path", "quantization")
    return [{"id": m.id, **{k: v for k, v in campaign.workload_params(m.id).items() if k in keys}}
            for m in campaign.models if kind_of(campaign, m.id) == "trtllm"]


ARGV = {"matmul": matmul_argv, "transformers": transformers_argv,
        "microbench": microbench_argv, "trtllm": trtllm_argv}


def build(kind: str, params: dict[str, Any], python: str, probe: Path, out: Path,
          check: bool = False) -> tuple[list[str], dict[str, str]]:
    """argv and environment variables of the probe for one run (or a preflight check)."""
    if kind in ARGV:
        p = {**DEFAULTS[kind], **params}
        return ARGV[kind](p, python, probe, out, check), thread_env(p)
    raise WorkloadError(f"unknown workload kind {kind!r}")


def _process_metrics(probe: dict[str, Any], launched_unix: float, wall_s: float) -> list[Metric]:
    """What every probe measures about its own process."""
    return [
        Metric("process_wall_s", wall_s, "s"),
        Metric("startup_s", probe["t_enter_unix"] - launched_unix, "s"),
        Metric("import_s", probe["import_s"], "s"),
        Metric("max_rss_mib", probe["max_rss_kib"] / 1024.0, "MiB"),
    ]


def _device_memory(probe: dict[str, Any]) -> list[Metric]:
    out = []
    if probe.get("peak_device_bytes"):
        out.append(Metric("peak_memory_gib", probe["peak_device_bytes"] / 2**30, "GiB"))
    if probe.get("peak_reserved_bytes"):
        out.append(Metric("peak_reserved_gib", probe["peak_reserved_bytes"] / 2**30, "GiB"))
    return out


def matmul_metrics(probe: dict[str, Any], launched_unix: float, wall_s: float) -> list[Metric]:
    iters = probe["iteration_s"]
    n = probe["size"]
    median = statistics.median(iters)
    return [
        Metric("compute_time_s", statistics.fmean(iters), "s"),
        Metric("compute_time_median_s", median, "s"),
        Metric("compute_gflops", 2.0 * n**3 / median / 1e9, "GFLOP/s"),
        Metric("compute_total_s", sum(iters), "s"),
        *_process_metrics(probe, launched_unix, wall_s),
        Metric("alloc_s", probe["alloc_s"], "s"),
        *_device_memory(probe),
    ]


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default method)."""
    v = sorted(values)
    pos = (len(v) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def measured_requests(probe: dict[str, Any]) -> list[dict[str, Any]]:
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


def output_tokens(probe: dict[str, Any]) -> int:
    """Tokens generated inside the measured window (energy per token divides by this)."""
    return sum(request_summary(r)["tokens"] for r in measured_requests(probe))


def transformers_metrics(probe: dict[str, Any], launched_unix: float,
                         wall_s: float) -> list[Metric]:
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
        *_process_metrics(probe, launched_unix, wall_s),
        *_device_memory(probe),
    ]


def microbench_metrics(probe: dict[str, Any], launched_unix: float,
                       wall_s: float) -> list[Metric]:
    nbytes = probe["copy_bytes"]
    out = [Metric(f"{d}_gbps", nbytes / statistics.median(probe["copy_s"][d]) / 1e9, "GB/s")
           for d in ("h2d", "d2h")]
    out += [Metric(f"{name}_us", statistics.median(times) * 1e6, "us")
            for name, times in probe["conv_s"].items()]
    return out + _process_metrics(probe, launched_unix, wall_s) + _device_memory(probe)


def trtllm_metrics(probe: dict[str, Any], launched_unix: float, wall_s: float) -> list[Metric]:
    log = probe.get("log_tail", "")
    values = trtllm.parse_report(probe["report"]) if probe.get("report") else trtllm.parse_log(log)
    values.update(trtllm.kv_cache(log) or {})
    units = {"token_throughput": "tok/s", "request_throughput": "req/s",
             "kv_cache_gib": "GiB", "kv_cache_tokens": "tokens"}
    return [Metric(k, v, units.get(k, "s")) for k, v in values.items()] + [
        Metric("benchmark_s", probe["bench_s"], "s"),
        *_process_metrics(probe, launched_unix, wall_s)]


PARSERS = {"matmul": matmul_metrics, "transformers": transformers_metrics,
           "microbench": microbench_metrics, "trtllm": trtllm_metrics}


def metrics(kind: str, probe: dict[str, Any], launched_unix: float, wall_s: float) -> list[Metric]:
    if kind not in PARSERS:
        raise WorkloadError(f"no metrics parser for workload {kind!r}")
    try:
        return PARSERS[kind](probe, launched_unix, wall_s)
    except trtllm.TrtllmOutputError as exc:
        raise WorkloadError(str(exc)) from None
    except (KeyError, TypeError, IndexError, ZeroDivisionError,
            statistics.StatisticsError) as exc:
        raise WorkloadError(f"{kind} probe output is incomplete: {exc!r}") from None


def requests_rows(kind: str, probe: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-request (per-iteration) data, for percentiles computed from the raw values."""
    if kind == "matmul":
        return [{"index": i, "latency_s": t} for i, t in enumerate(probe["iteration_s"])]
    if kind == "transformers":
        rows = []
        for r in measured_requests(probe):
            s = request_summary(r)
            rows.append({"index": r["index"], "latency_s": r["latency_s"], "ttft_s": s["ttft_s"],
                         "itl_mean_s": statistics.fmean(s["gaps"]) if s["gaps"] else "",
                         "tokens": s["tokens"]})
        return rows
    return []


def detail(kind: str, probe: dict[str, Any]) -> dict[str, Any]:
    """Raw timings the metrics were computed from, kept in the record."""
    if kind == "transformers":
        return {"model": probe.get("model"), "decoding": probe.get("decoding"),
                "measure_window_unix": probe.get("measure_window_unix"),
                "requests": probe.get("requests")}
    if kind == "trtllm":
        return {"engine": trtllm.engine_facts(probe.get("report"), probe.get("log_tail", "")),
                "report": probe.get("report"), "prepared_dataset_here":
                probe.get("prepared_dataset_here", False)}
    if kind == "microbench":
        return {k: probe.get(k) for k in ("copy_bytes", "copy_s", "conv_s", "conv_dtype",
                                          "warmup", "repeats")}
    return {}
