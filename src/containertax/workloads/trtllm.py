"""TensorRT-LLM's `trtllm-bench`: the releases it supports, the command line each speaks,
the synthetic dataset it reads, and what its output says.

No TensorRT-LLM runs on this project's machines: everything here follows TensorRT-LLM's
source and documentation (NVIDIA/TensorRT-LLM; tests/data/trtllm/README.md names the file
and commit behind every fixture):

- Dataset: one JSON object per line, `{"task_id": i, "input_ids": [...], "output_tokens":
  n}` (tensorrt_llm/bench/dataset/utils.py `generate_text_dataset`, read by
  tensorrt_llm/bench/utils/data.py `create_dataset_from_stream`, which takes `input_ids`
  as they are). It is written here, on the host, by the workflow's `dataset` rule: no
  release needs `prepare-dataset` (absent before 1.2) and no measured run carries it.
- Model: `--model` is always a Hugging Face *name* and the checkpoint goes in
  `--model_path`: from 1.2 `BenchmarkEnvironment.verify_model_name`
  (tensorrt_llm/bench/dataclasses/general.py) rejects a `--model` that is an existing path.
- JSON report (`--report_json`): `ReportUtility.get_statistics_dict` in
  tensorrt_llm/bench/dataclasses/reporting.py: sections engine, machine, world_info,
  request_info, performance, streaming_metrics (when streaming), dataset; times in ms.
  Per-request rows (`--request_json`, `get_request_info`): RequestRecord fields, ns.
- Log only: 0.x "PERFORMANCE OVERVIEW" (`Token Throughput` = output tokens/s, `Average
  inter-token latency`) and 1.x (`Total Output Throughput`; `Total Token Throughput` is
  input + output; `time-per-output-token [TPOT]` is TensorRT-LLM's per-request
  inter-token latency, (end - first token) / (tokens - 1)).
- KV cache: the line cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp prints, "[MemUsageChange]
  Allocated %0.2f GiB for max tokens in paged KV cache (%d)."; the PyTorch backend logs
  one allocation while it profiles memory and the final one after: the last counts.
Percentiles are TensorRT-LLM's own (PercentileStats.from_iterable: sorted(values)[int(n*q)],
no interpolation) and carry its name (trtllm_*).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from containertax.core.errors import ContainertaxError
from containertax.core.metric import Metric
from containertax.workloads.base import (
    MEMORY_TOLERANCE,
    MetricInfo,
    Probe,
    Rehearsal,
    Where,
    Workload,
    WorkloadError,
    never,
    process_metrics,
)

DEFAULTS: dict[str, Any] = {
    "mode": "throughput", "backend": "pytorch", "num_requests": 1000, "input_len": 128,
    "output_len": 128, "concurrency": None, "max_batch_size": None, "max_num_tokens": None,
    "warmup": 2, "streaming": True, "kv_cache_free_gpu_mem_fraction": None,
    "extra_llm_api_options": None, "seed": 0, "tp": 1, "vocab_size": None,
    # the pinned-KV arm (issue #40): a fixed KV cache of this many tokens, TensorRT-LLM's
    # KvCacheConfig.max_tokens (llm-api reference, KvCacheConfig), written by the probe into
    # an --extra_llm_api_options file in its work folder. TensorRT-LLM takes the smaller of
    # max_tokens and free_gpu_memory_fraction x free memory, so the arm is pinned only
    # where max_tokens is the smaller: the record's kv_cache_tokens shows whether it was
    "kv_cache_max_tokens": None,
}
KV_PINNED_FILE = "kv-cache-pinned.yaml"  # in the probe's work folder
KV_LINE = re.compile(r"Allocated ([0-9.]+) GiB for max tokens in paged KV cache \((\d+)\)")
VERSION_LINE = re.compile(r"TensorRT[- ]LLM [Vv]ersion:\s*(\S+)")
# the lines of a long trtllm-bench log the host parses: the probe keeps every one of them
# from the whole log (the KV line comes early, before thousands of progress lines)
KEY_LINE = re.compile(r"paged KV cache|TensorRT[- ]LLM [Vv]ersion|Throughput|Latency|"
                      r"Average|Number of|\[(?:TPOT|TTFT|GTPS|Latency)\]|Per User|Per GPU")


@dataclass(frozen=True)
class Dialect:
    """What one line of TensorRT-LLM releases accepts (sources: tests/data/trtllm/README.md)."""

    name: str
    first: str                    # first release of this dialect
    backends: tuple[str, ...]     # throughput --backend choices
    telemetry_flag: bool          # trtllm-bench --no-telemetry (usage telemetry on by default)
    prepare_dataset: bool         # has `prepare-dataset` (not used here; recorded)
    model_must_be_name: bool      # general.py verify_model_name
    # flags passed only where the release's own --help lists them: preflight (and `doctor`)
    # check --help, and a run leaves out those it lacks. --no-telemetry came with
    # TensorRT-LLM PR #12384 (opened 2026-03-20): earlier 1.3 release candidates lack it,
    # and their usage telemetry is off through the variables (launch.PROJECT_ENV) alone
    optional: tuple[str, ...] = ()


DIALECTS = (
    Dialect("1.0", "1.0.0rc0", ("pytorch", "_autodeploy", "tensorrt"), False, False, False),
    Dialect("1.1", "1.1.0rc0", ("pytorch", "_autodeploy", "tensorrt"), False, False, False),
    Dialect("1.2", "1.2.0rc0", ("pytorch", "_autodeploy", "tensorrt"), False, True, True),
    Dialect("1.3", "1.3.0rc0", ("pytorch", "_autodeploy"), True, True, True,
            ("--no-telemetry",)),
)
BACKENDS = tuple(dict.fromkeys(b for d in DIALECTS for b in d.backends))  # any release's
SUPPORTED = "1.0, 1.1 (1.1.0rc3 = spark-single-gpu-dev), 1.2 and 1.3"


class TrtllmOutputError(ValueError):
    """trtllm-bench output this parser does not recognise; the message says which."""


def version_key(version: str) -> tuple[int, int, int, int, int]:
    """'1.1.0rc3' -> (1, 1, 0, 0, 3); a final release sorts after its release candidates."""
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?(?:\.?(rc|a|b|dev|post)\.?(\d+))?", version.strip())
    if not m:
        raise ValueError(f"not a TensorRT-LLM version: {version!r}")
    major, minor, patch, tag, num = m.groups()
    pre = {"dev": 0, "a": 1, "b": 2, "rc": 3, None: 4, "post": 5}[tag]
    return int(major), int(minor), int(patch or 0), pre, int(num or 0)


def dialect_for(version: str) -> Dialect:
    """The newest dialect whose first release is not after `version`."""
    key = version_key(version)
    chosen = [d for d in DIALECTS if version_key(d.first) <= key]
    if not chosen:
        raise ValueError(f"TensorRT-LLM {version} is older than the releases this workflow "
                         f"speaks ({SUPPORTED})")
    if key[:2] > version_key(DIALECTS[-1].first)[:2]:
        # newer than any dialect written here: the newest one, checked against --help
        return DIALECTS[-1]
    return chosen[-1]


def dataset_name(p: dict[str, Any]) -> str:
    """One file per model and dataset parameters: a changed length or seed is a new file."""
    p = {**DEFAULTS, **p}
    model = re.sub(r"[^A-Za-z0-9._-]+", "_", str(p["model"])).strip("_")
    return (f"{model}-in{p['input_len']}-out{p['output_len']}-n{p['num_requests']}"
            f"-seed{p['seed']}.jsonl")


def dataset_path(p: dict[str, Any]) -> str:
    return f"{p['dataset_dir']}/{dataset_name(p)}"


def model_args(p: dict[str, Any]) -> list[str]:
    """--model NAME [--model_path CHECKPOINT]: accepted by every supported release."""
    args = ["--model", str(p["model"])]
    if p.get("model_path"):
        args += ["--model_path", str(p["model_path"])]
    return args


def flatten(segments: list[list[str]]) -> list[str]:
    return [word for segment in segments for word in segment]


def bench_segments(p: dict[str, Any], dataset: str, report: str, requests: str,
                   dialect: Dialect = DIALECTS[-1]) -> list[list[str]]:
    """`trtllm-bench ... throughput|latency` in one release line's dialect."""
    p = {**DEFAULTS, **p}
    top = ["trtllm-bench", *model_args(p)]
    if dialect.telemetry_flag:
        top.append("--no-telemetry")  # from 1.3 usage telemetry is sent by default
    sub = [str(p["mode"]), "--dataset", dataset, "--backend", str(p["backend"]),
           "--num_requests", str(p["num_requests"]), "--warmup", str(p["warmup"]),
           "--report_json", report]
    if p["mode"] == "throughput":
        sub += ["--request_json", requests]
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
    elif p.get("kv_cache_max_tokens") is not None:
        sub += ["--extra_llm_api_options", str(Path(report).parent / KV_PINNED_FILE)]
    return [top, sub]


def help_commands(segments: list[list[str]]) -> dict[tuple[str, ...], list[str]]:
    """Each (sub)command's --help argv (the commands before it with their flags, then its
    name and --help) and the flags to look up there (the probe does the same inside the
    environment: probe/trtllm.py help_commands)."""
    helps: dict[tuple[str, ...], list[str]] = {}
    for i, segment in enumerate(segments):
        argv = (*flatten(segments[:i]), segment[0], "--help")
        helps.setdefault(argv, []).extend(w for w in segment[1:] if w.startswith("--"))
    return helps


def listed(flag: str, help_text: str) -> bool:
    """Whether a --help text lists the flag (as a whole word: --model is not --model_path)."""
    return re.search(re.escape(flag) + r"(?![\w-])", help_text) is not None


def flag_verdict(dialect: Dialect, helps: dict[tuple[str, ...], str],
                 segments: list[list[str]]) -> tuple[list[str], list[str]]:
    """(missing, omitted): the flags a release's --help texts lack, split into those the
    run cannot do without and the dialect's optional ones, which a run leaves out."""
    missing: list[str] = []
    omitted: list[str] = []
    for argv, flags in help_commands(segments).items():
        text = helps.get(argv, "")
        for flag in dict.fromkeys(flags):
            if not listed(flag, text):
                (omitted if flag in dialect.optional else missing).append(flag)
    return missing, omitted


def omit_flags(segments: list[list[str]], omitted: list[str]) -> list[list[str]]:
    """The command without the optional flags this release lacks (flags without a value)."""
    return [[w for w in segment if w not in omitted] for segment in segments]


def bench_by_dialect(p: dict[str, Any], dataset: str, report: str,
                     requests: str) -> list[dict[str, Any]]:
    """Every dialect's command, for the probe to pick by the version it finds inside."""
    return [{**asdict(d), "segments": bench_segments(p, dataset, report, requests, d)}
            for d in DIALECTS]


# --- the synthetic dataset (host side, before any run) ---

class DatasetError(ContainertaxError, ValueError):
    """The dataset cannot be made from this config and checkpoint; the message says why."""


def vocabulary(p: dict[str, Any]) -> dict[str, Any]:
    """Token ids to draw from: [0, vocab) less the special tokens, from the checkpoint's
    config.json (vocab_size, eos/bos/pad ids) and tokenizer.json (its base vocabulary and
    added tokens) where present; `vocab_size` in the config overrides the size."""
    path = p.get("model_path")
    info: dict[str, Any] = {"source": [], "special_ids": []}
    cfg: dict[str, Any] = {}
    if path and Path(path, "config.json").is_file():
        cfg = json.loads(Path(path, "config.json").read_text())
        cfg = cfg.get("text_config", cfg) if "vocab_size" not in cfg else cfg
        info["source"].append(str(Path(path, "config.json")))
    size = p.get("vocab_size") or cfg.get("vocab_size")
    if not size:
        raise DatasetError(
            f"model {p['model']}: no vocabulary size: models[].model_path ({path}) has no "
            "config.json with vocab_size on this host. Fix: give the checkpoint folder as "
            "model_path (the same path on the host and in every environment), or set "
            "models[].vocab_size.")
    special: set[int] = set()
    for key in ("eos_token_id", "bos_token_id", "pad_token_id"):
        v = cfg.get(key)
        special.update(v if isinstance(v, list) else [v] if isinstance(v, int) else [])
    tok = Path(path, "tokenizer.json") if path else None
    if tok is not None and tok.is_file():
        data = json.loads(tok.read_text())
        base = len((data.get("model") or {}).get("vocab") or {})
        if base:
            size = min(int(size), base)
        special.update(int(t["id"]) for t in data.get("added_tokens", []) if t.get("special"))
        info["source"].append(str(tok))
    info["vocab_size"] = int(size)
    info["special_ids"] = sorted(i for i in special if 0 <= i < int(size))
    return info


def dataset_lines(p: dict[str, Any], vocab: dict[str, Any]) -> list[str]:
    """num_requests requests of exactly input_len random token ids and output_len output
    tokens, seeded: the same bytes on every machine."""
    import numpy as np

    p = {**DEFAULTS, **p}
    allowed = np.setdiff1d(np.arange(vocab["vocab_size"]), np.array(vocab["special_ids"], int))
    rng = np.random.default_rng(int(p["seed"]))
    draws = rng.choice(allowed, size=(int(p["num_requests"]), int(p["input_len"])))
    return [json.dumps({"task_id": i, "input_ids": [int(t) for t in row],
                        "output_tokens": int(p["output_len"])}, separators=(",", ":"))
            for i, row in enumerate(draws)]


def write_dataset(p: dict[str, Any], out: Path) -> dict[str, Any]:
    """The dataset file and its sidecar (<file>.json: parameters, vocabulary, sha256),
    each written atomically; the probe checks the sha256 inside the environment."""
    p = {**DEFAULTS, **p}
    vocab = vocabulary(p)
    text = "\n".join(dataset_lines(p, vocab)) + "\n"
    meta = {"format": "trtllm-bench --dataset JSONL (task_id, input_ids, output_tokens)",
            "model": p["model"], "model_path": p.get("model_path"),
            "num_requests": int(p["num_requests"]), "input_len": int(p["input_len"]),
            "output_len": int(p["output_len"]), "seed": int(p["seed"]),
            "vocab_size": vocab["vocab_size"], "excluded_special_ids": vocab["special_ids"],
            "vocab_source": vocab["source"],
            "sha256": hashlib.sha256(text.encode()).hexdigest(), "bytes": len(text.encode())}
    out.parent.mkdir(parents=True, exist_ok=True)
    for path, body in ((out, text), (sidecar(out), json.dumps(meta, indent=1) + "\n")):
        tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
        tmp.write_text(body)
        tmp.replace(path)
    return meta


def sidecar(dataset: Path) -> Path:
    return dataset.with_name(dataset.name + ".json")


# --- output ---

PCT = ("p50", "p90", "p95", "p99", "minimum", "maximum")
UNITS = {"token_throughput": "tok/s", "total_token_throughput": "tok/s",
         "per_user_output_throughput": "tok/s", "per_gpu_output_throughput": "tok/s",
         "per_user_generation_speed": "tok/s", "request_throughput": "req/s",
         "concurrency": "requests", "input_len_actual": "tokens",
         "output_len_actual": "tokens", "requests_completed": "requests",
         "kv_cache_gib": "GiB", "kv_cache_tokens": "tokens"}


def unit(name: str) -> str:
    if name in UNITS:
        return UNITS[name]
    if name.startswith("trtllm_gen_tps_"):
        return "tok/s"
    return "s"


def _percentiles(out: dict[str, float], prefix: str, table: dict[str, Any] | None,
                 scale: float) -> None:
    for q in PCT:
        if table and table.get(q) is not None:
            out[f"{prefix}_{q}" + ("_s" if scale != 1.0 else "")] = table[q] * scale


def parse_report(report: dict[str, Any]) -> dict[str, float]:
    """Every number of a JSON report: seconds, tokens/s, requests/s, tokens."""
    try:
        perf = report["performance"]
        out = {
            "token_throughput": perf["system_output_throughput_tok_s"],
            "request_throughput": perf["request_throughput_req_s"],
            "request_latency_s": perf["avg_request_latency_ms"] / 1e3,
            "trtllm_total_latency_s": perf["total_latency_ms"] / 1e3,
        }
        for key, name in (("system_total_throughput_tok_s", "total_token_throughput"),
                          ("output_throughput_per_user_tok_s", "per_user_output_throughput"),
                          ("output_throughput_per_gpu_tok_s", "per_gpu_output_throughput")):
            if perf.get(key) is not None:
                out[name] = perf[key]
        _percentiles(out, "trtllm_request_latency",
                     perf.get("request_latency_percentiles_ms"), 1e-3)
        req = report.get("request_info") or {}
        for key, name in (("avg_num_concurrent_requests", "concurrency"),
                          ("avg_input_length", "input_len_actual"),
                          ("avg_output_length", "output_len_actual"),
                          ("num_requests", "requests_completed")):
            if req.get(key) is not None:
                out[name] = req[key]
        stream = report.get("streaming_metrics")
        if stream:
            out["ttft_s"] = stream["avg_ttft_ms"] / 1e3
            out["itl_s"] = stream["avg_tpot_ms"] / 1e3  # TPOT: per-request inter-token latency
            if stream.get("token_output_speed_tok_s") is not None:
                out["per_user_generation_speed"] = stream["token_output_speed_tok_s"]
            _percentiles(out, "trtllm_ttft", stream.get("ttft_percentiles"), 1e-3)
            _percentiles(out, "trtllm_itl", stream.get("tpot_percentiles"), 1e-3)
            _percentiles(out, "trtllm_gen_tps", stream.get("gen_tps_percentiles"), 1.0)
    except (KeyError, TypeError) as exc:
        raise TrtllmOutputError(
            f"trtllm-bench report lacks {exc}: not the report_json layout of "
            "tensorrt_llm/bench/dataclasses/reporting.py this parser knows") from None
    return {k: float(v) for k, v in out.items()}


NUM = r"\s*:?\s*([0-9.]+(?:[eE][-+]?\d+)?)"
LOG_FIELDS = {  # 1.x wording first; (?m)^ keeps 0.x "Token Throughput" off "Total Token ..."
    "request_throughput": r"Request Throughput \(req/sec\):" + NUM,
    "token_throughput": r"(?m)(?:^Token Throughput|Total Output Throughput) \(tokens/sec\):"
                        + NUM,
    "total_token_throughput": r"Total Token Throughput \(tokens/sec\):" + NUM,
    "total_latency_ms": r"Total Latency \(ms\):" + NUM,
    "avg_request_latency_ms": r"Average request latency \(ms\):" + NUM,
    "per_user_output_throughput": r"Per User Output Throughput \[w/ ctx\] \(tps/user\):" + NUM,
    "per_gpu_output_throughput": r"Per GPU Output Throughput \(tps/gpu\):" + NUM,
    "per_user_generation_speed": r"Per User Output Speed \(tps/user\):" + NUM,
    "avg_ttft_ms": r"Average time-to-first-token (?:\[TTFT\] )?\(ms\):" + NUM,
    "avg_itl_ms": r"Average (?:inter-token latency (?:\[ITL\] )?|time-per-output-token "
                  r"\[TPOT\] )\(ms\):" + NUM,
    "concurrency": r"Number of concurrent requests:" + NUM,
    "input_len_actual": r"Average Input Length \(tokens\):" + NUM,
    "output_len_actual": r"Average Output Length \(tokens\):" + NUM,
    "requests_completed": r"Number of requests:" + NUM,
}
LOG_PCT = re.compile(r"\[(TPOT|TTFT|GTPS|Latency)\]\s+(MINIMUM|MAXIMUM|P50|P90|P95|P99)\s*:\s*"
                     r"([0-9.]+)")
LOG_PCT_NAME = {"TPOT": ("trtllm_itl", 1e-3), "TTFT": ("trtllm_ttft", 1e-3),
                "GTPS": ("trtllm_gen_tps", 1.0), "Latency": ("trtllm_request_latency", 1e-3)}


def parse_log(log: str) -> dict[str, float]:
    """Metrics of a log without a JSON report (0.x trtllm-bench, or a report not written)."""
    raw = {k: float(m.group(1)) for k, rx in LOG_FIELDS.items() if (m := re.search(rx, log))}
    if "token_throughput" not in raw or "request_throughput" not in raw:
        raise TrtllmOutputError("no 'PERFORMANCE OVERVIEW' throughput lines in the "
                                "trtllm-bench log and no JSON report")
    scaled = {"total_latency_ms": ("trtllm_total_latency_s", 1e-3),
              "avg_request_latency_ms": ("request_latency_s", 1e-3),
              "avg_ttft_ms": ("ttft_s", 1e-3), "avg_itl_ms": ("itl_s", 1e-3)}
    out = {scaled.get(k, (k, 1.0))[0]: v * scaled.get(k, (k, 1.0))[1] for k, v in raw.items()}
    for kind, q, value in LOG_PCT.findall(log):
        prefix, scale = LOG_PCT_NAME[kind]
        key = "minimum" if q == "MINIMUM" else "maximum" if q == "MAXIMUM" else q.lower()
        out[f"{prefix}_{key}" + ("_s" if scale != 1.0 else "")] = float(value) * scale
    return out


def check_lengths(values: dict[str, float], expected: dict[str, Any] | None) -> None:
    """The run measured the requests asked for: every request exactly input_len tokens in
    and output_len out (trtllm-bench disables EOS by default, eos_id -1)."""
    if not expected:
        return
    for name, key in (("input_len_actual", "input_len"), ("output_len_actual", "output_len")):
        if name in values and abs(values[name] - float(expected[key])) > 1e-6 * expected[key]:
            raise TrtllmOutputError(
                f"trtllm-bench measured an average {key.replace('_len', '')} length of "
                f"{values[name]:g} tokens, but workload.{key} = {expected[key]}: the run did "
                "not measure the configured requests (dataset, or EOS reached early?)")
    if "requests_completed" in values and values["requests_completed"] != float(
            expected["num_requests"]):
        raise TrtllmOutputError(
            f"trtllm-bench completed {values['requests_completed']:g} requests, but "
            f"workload.num_requests = {expected['num_requests']}")


def kv_cache(log: str) -> dict[str, float] | None:
    """The last KV-cache allocation in the log (the first may be the memory profiling's)."""
    found = KV_LINE.findall(log)
    if not found:
        return None
    gib, tokens = found[-1]
    return {"kv_cache_gib": float(gib), "kv_cache_tokens": float(tokens)}


def request_rows(requests: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """--request_json entries (RequestRecord, times in ns) as rows in seconds."""
    rows = []
    for r in requests or []:
        rows.append({"index": r.get("id", len(rows)),
                     "latency_s": r["end_to_end_latency"] / 1e9,
                     "ttft_s": r["time_to_first_token"] / 1e9,
                     "itl_mean_s": r["intertoken_latency"] / 1e9,
                     "tokens": r.get("output_tokens", r.get("num_total_output_tokens")),
                     "input_tokens": r.get("num_input_tokens")})
    return rows


def engine_facts(report: dict[str, Any] | None, log: str) -> dict[str, Any]:
    """Version, engine, machine, world and dataset sections for provenance."""
    facts: dict[str, Any] = dict((report or {}).get("engine") or {})
    if "version" not in facts and (m := VERSION_LINE.search(log)):
        facts["version"] = m.group(1)
    for section in ("world_info", "machine", "dataset", "request_info"):
        if report and report.get(section) is not None:
            facts[section] = report[section]
    return facts


# --- the workload kind, as the registry (containertax.workloads) lists it --------------


def argv(p: dict[str, Any], python: str, probe: Path, out: Path, check: bool) -> list[str]:
    """The probe with one benchmark command per TensorRT-LLM release line: the probe picks
    the one for the version it finds in the environment."""
    dataset = dataset_path(p)
    bench = bench_by_dialect(p, dataset, str(out.parent / "report.json"),
                             str(out.parent / "requests.json"))
    expect = {k: p[k] for k in ("input_len", "output_len", "num_requests")}
    cmd = [python, str(probe / "trtllm.py"), "--out", str(out), "--dataset", dataset,
           "--bench", json.dumps(bench), "--expect", json.dumps(expect)]
    if p.get("kv_cache_max_tokens") is not None:
        cmd += ["--kv-max-tokens", str(int(p["kv_cache_max_tokens"]))]
    return [*cmd, "--check", "--dataset-dir", str(p["dataset_dir"])] if check else cmd


def _log(probe: Probe) -> str:
    return "\n".join([*probe.get("log_key_lines", []), probe.get("log_tail", "")])


def metrics(probe: Probe, launched_unix: float, wall_s: float) -> list[Metric]:
    log = _log(probe)
    try:
        values = parse_report(probe["report"]) if probe.get("report") else parse_log(log)
        check_lengths(values, probe.get("expected"))
    except TrtllmOutputError as exc:
        raise WorkloadError(str(exc)) from None
    values.update(kv_cache(log) or {})
    return [Metric(k, v, unit(k)) for k, v in values.items()] + [
        Metric("benchmark_s", probe["bench_s"], "s"),
        *process_metrics(probe, launched_unix, wall_s)]


def detail(probe: Probe) -> dict[str, Any]:
    return {"engine": engine_facts(probe.get("report"), _log(probe)),
            "version": (probe.get("software") or {}).get("tensorrt_llm"),
            "dialect": probe.get("dialect"), "bench_argv": probe.get("bench_argv"),
            "omitted_flags": probe.get("omitted_flags") or [],
            "dataset": probe.get("dataset"), "report": probe.get("report")}


def rows(probe: Probe) -> list[dict[str, Any]]:
    return request_rows(probe.get("requests"))


def problems(params: dict[str, Any], where: Where) -> list[str]:
    found = [f"{where.source}: model {where.model} (models[{where.index}]) needs '{key}' "
             "(trtllm: 'model' = the Hugging Face name; 'dataset_dir' = a host folder mounted "
             "at the same path in every environment, where the workflow writes each model's "
             "dataset once, before any run)."
             for key in ("model", "dataset_dir") if not isinstance(params.get(key), str)]
    pinned = params.get("kv_cache_max_tokens")
    if pinned is not None and (not isinstance(pinned, int) or isinstance(pinned, bool)
                               or pinned < 1):
        found.append(f"{where.source}: key 'models[{where.index}].kv_cache_max_tokens' (model "
                     f"{where.model}) must be a whole number of tokens >= 1, got {pinned!r}.")
    if pinned is not None and params.get("extra_llm_api_options"):
        found.append(f"{where.source}: model {where.model} (models[{where.index}]) sets both "
                     "'kv_cache_max_tokens' and 'extra_llm_api_options'; the pinned-KV arm "
                     "writes its own options file. Fix: put kv_cache_config.max_tokens in "
                     "that file, or drop one of the two keys.")
    name = str(params.get("model", ""))
    if name.startswith(("/", "./", "../", "~")):
        found.append(f"{where.source}: key 'models[{where.index}].model' (model {where.model}) "
                     f"is a path ({name}); trtllm-bench 1.2 and later reject a path as "
                     "--model. Fix: 'model' = the Hugging Face name, 'model_path' = the "
                     "checkpoint folder.")
    if not str(params.get("dataset_dir", "/")).startswith("/"):
        found.append(f"{where.source}: key 'workload.dataset_dir' (model {where.model}) must "
                     "be an absolute path (the same on the host and in every environment), "
                     f"got {params['dataset_dir']!r}.")
    return found


def check_argv(models: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Preflight checks every trtllm model's checkpoint inside each environment, not only
    the first's."""
    keys = ("model", "model_path", "quantization")
    return ["--check-models", json.dumps(
        [{"id": model_id, **{k: v for k, v in params.items() if k in keys}}
         for model_id, params in models])]


def run_argv(check: dict[str, Any]) -> list[str]:
    """The optional flags preflight found missing from this environment's release, for
    the probe to leave out of the run (Dialect.optional)."""
    omitted = check.get("omitted_flags") or []
    return ["--omit-flags", json.dumps(omitted)] if omitted else []


def _pct_info(prefix: str, label: str, what: str) -> tuple[MetricInfo, ...]:
    return tuple(MetricInfo(f"{prefix}_{q}_s", "s", "lower", f"{label} {q}",
                            f"trtllm-bench's {q} of {what} (sorted(v)[int(n q)])")
                 for q in ("p50", "p90", "p99"))


WORKLOAD = Workload(
    kind="trtllm",
    probe="trtllm.py",
    defaults={**DEFAULTS, "threads": 1},
    integers={"num_requests": 1, "input_len": 1, "output_len": 1, "warmup": 0, "tp": 1},
    choices={"mode": ("throughput", "latency"), "backend": BACKENDS},
    argv=argv,
    metrics=metrics,
    requests_rows=rows,
    detail=detail,
    problems=problems,
    check_argv=check_argv,
    run_argv=run_argv,
    required=frozenset({"model", "model_path", "dataset_dir", "quantization"}),
    compiles=never,
    primary=(("token_throughput",),),
    words="LLM inference (TensorRT-LLM)",
    rehearsal=Rehearsal("num_requests", 32,
                        lambda m, n: m.get("trtllm_total_latency_s", 0.0)),
    host_metrics={},
    datasets=lambda p: [dataset_path(p)],
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
        *_pct_info("trtllm_request_latency", "Request latency", "request latency"),
        *_pct_info("trtllm_ttft", "TTFT", "time to first token"),
        *_pct_info("trtllm_itl", "ITL", "per-request time per output token"),
        MetricInfo("total_token_throughput", "tok/s", "higher", "Total token throughput",
                   "input plus output tokens per second (trtllm-bench)"),
        MetricInfo("per_user_output_throughput", "tok/s", "higher",
                   "Output throughput per user",
                   "mean over requests of output tokens per second, first token included"),
        MetricInfo("concurrency", "requests", "higher", "Requests in flight",
                   "mean number of concurrent requests (trtllm-bench)"),
    ),
)
