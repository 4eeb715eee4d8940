"""trtllm-bench inside the environment under test (the TensorRT-LLM image's own tools).

Finds the TensorRT-LLM version installed here and runs the benchmark in that release's
dialect (the host sends one command per dialect); checks the dataset the workflow wrote
before any run against its sha256; keeps the report, the per-request rows and the lines
of the whole log the host parses (containertax.workloads.trtllm).
Check mode (preflight): the version and dialect, every flag against the tool's own
--help, every checkpoint's architecture against the image's model registry and its
quantisation against what the config declares and what this GPU supports.
"""

import time

# first statement: the launcher's clock minus T_ENTER is start-up latency; T_ENTER_MONO
# opens the run's timeline (probe_common.mark)
T_ENTER, T_ENTER_MONO = time.time(), time.monotonic()

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

from memview import free_bytes, memory_view  # noqa: E402
from probe_common import finish, header, mark, write_atomic  # noqa: E402

mark("enter", T_ENTER_MONO)

KEY_LINE = re.compile(r"paged KV cache|Peak memory during memory usage profiling|"
                      r"TensorRT[- ]LLM [Vv]ersion|Throughput|Latency|"
                      r"Average|Number of|\[(?:TPOT|TTFT|GTPS|Latency)\]|Per User|Per GPU")
# quantisations a GPU generation runs with the PyTorch backend: the hardware support matrix
# of TensorRT-LLM's features/quantization documentation (1.1-1.3; sm120 = GB10's family)
QUANT_SUPPORT = {
    12: {"NVFP4", "MXFP4", "FP8", "FP8_KV"},
    10: {"NVFP4", "MXFP4", "FP8", "FP8_BLOCK_SCALES", "FP8_KV", "W4A8_AWQ", "W4A16_AWQ",
         "W4A8_GPTQ", "W4A16_GPTQ"},
    9: {"FP8", "FP8_BLOCK_SCALES", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_KV", "W4A8_AWQ",
        "W4A16_AWQ", "W4A8_GPTQ", "W4A16_GPTQ"},
    8.9: {"FP8", "FP8_KV", "W4A8_AWQ", "W4A16_AWQ", "W4A8_GPTQ", "W4A16_GPTQ"},
    8: {"FP8_KV", "W4A16_AWQ", "W4A16_GPTQ"},
}
QUANT_ALIASES = {"awq": "W4A16_AWQ", "gptq": "W4A16_GPTQ", "fp8": "FP8", "nvfp4": "NVFP4",
                 "modelopt_fp4": "NVFP4", "mxfp4": "MXFP4"}


def version():
    try:
        from importlib.metadata import version as v

        return v("tensorrt_llm")
    except Exception:  # noqa: BLE001 - absent or unreadable: reported as None
        return None


def version_key(text):
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?(?:\.?(rc|a|b|dev|post)\.?(\d+))?", text.strip())
    if not m:
        return None
    major, minor, patch, tag, num = m.groups()
    pre = {"dev": 0, "a": 1, "b": 2, "rc": 3, None: 4, "post": 5}[tag]
    return int(major), int(minor), int(patch or 0), pre, int(num or 0)


def pick_dialect(found, dialects):
    """The host's dialect for this version (same rule as containertax.workloads.trtllm)."""
    key = version_key(found) if found else None
    if key is None:
        return None, (f"TensorRT-LLM version not found here (importlib.metadata "
                      f"'tensorrt_llm': {found!r}); is this the TensorRT-LLM image?")
    fitting = [d for d in dialects if version_key(d["first"]) <= key]
    if not fitting:
        names = ", ".join(d["name"] for d in dialects)
        return None, (f"TensorRT-LLM {found} is older than the release lines this workflow "
                      f"speaks ({names}); use an image with 1.0 or later")
    return fitting[-1], None


def read(path):
    with open(path) as fh:
        return fh.read()


def checkpoint_config(path):
    try:
        with open(os.path.join(path, "config.json")) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


def checkpoint_quantization(path):
    """What a Hugging Face checkpoint says it is quantised as: ModelOpt's
    hf_quant_config.json (quantization.quant_algo), else config.json's quantization_config."""
    try:
        with open(os.path.join(path, "hf_quant_config.json")) as fh:
            algo = json.load(fh).get("quantization", {}).get("quant_algo")
        if algo:
            return str(algo)
    except (OSError, ValueError):
        pass
    q = checkpoint_config(path).get("quantization_config") or {}
    return str(q.get("quant_algo") or q.get("quant_method")) if (
        q.get("quant_algo") or q.get("quant_method")) else None


def squash(text):
    return "".join(ch for ch in text.lower() if ch.isalnum())


def quant_supported(algo, capability):
    """None when this GPU runs `algo`, else why not (the support matrix)."""
    if not algo or capability is None:
        return None
    name = QUANT_ALIASES.get(algo.lower(), algo.upper())
    major, minor = capability
    gen = 8.9 if (major, minor) == (8, 9) else major
    supported = QUANT_SUPPORT.get(gen)
    if supported is None or name in supported:
        return None
    return (f"quantisation {algo} ({name}) is not supported by TensorRT-LLM on compute "
            f"capability {major}.{minor} (its hardware support matrix); pick a checkpoint in "
            f"one of {sorted(supported)}")


def model_registry():
    """Architectures the image's PyTorch backend registers (register_auto_model), or None
    where this release keeps them elsewhere."""
    try:
        import tensorrt_llm._torch.models  # noqa: F401 - registers every model class
        from tensorrt_llm._torch.models import modeling_utils as mu
    except Exception:  # noqa: BLE001 - no registry to check against: said in the record
        return None
    for name in ("MODEL_CLASS_MAPPING", "_MODEL_CLASS_REGISTRY"):
        table = getattr(mu, name, None)
        if isinstance(table, dict) and table:
            return sorted(table)
    return None


def check_models(models, capability, registry):
    """Every model's checkpoint visible here, its architecture registered, its
    quantisation the declared one and one this GPU runs."""
    problems = []
    for m in models:
        path = m.get("model_path")
        if not path:
            continue  # a Hugging Face name: trtllm-bench resolves it (cache or download)
        if not os.path.isfile(os.path.join(path, "config.json")):
            problems.append(f"model {m['id']}: no checkpoint at {path} (no config.json) in this "
                            "environment; check models[].model_path and the mount of its folder")
            continue
        archs = checkpoint_config(path).get("architectures") or []
        m["architectures"] = archs
        if registry is not None and archs and archs[0] not in registry:
            problems.append(f"model {m['id']}: architecture {archs[0]} is not in this "
                            "TensorRT-LLM's model registry (PyTorch backend); choose a model "
                            "it supports (models[] in the config)")
        declared, found = m.get("quantization"), checkpoint_quantization(path)
        m["checkpoint_quantization"] = found
        if declared and not found:
            problems.append(f"model {m['id']}: declared quantization {declared!r} but {path} is "
                            "not a quantised checkpoint (no hf_quant_config.json or "
                            "quantization_config); trtllm-bench's PyTorch backend reads "
                            "pre-quantised checkpoints (e.g. ModelOpt's), it does not quantise")
        elif declared and found and squash(found) not in squash(declared) \
                and squash(declared) not in squash(found):
            problems.append(f"model {m['id']}: declared quantization {declared!r} but {path} "
                            f"says {found!r}")
        why = quant_supported(found, capability)
        if why:
            problems.append(f"model {m['id']}: {why}")
    return problems


def gpu_visible():
    """The GPU as the image's own torch sees it: (name, (major, minor)), or (None, None)."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None, None
        return torch.cuda.get_device_name(0), tuple(torch.cuda.get_device_capability(0))
    except Exception:  # noqa: BLE001 - no torch or no driver: no GPU here
        return None, None


def flatten(segments):
    return [word for segment in segments for word in segment]


def help_commands(command_lists):
    """Each (sub)command's --help (the commands before it, with their flags, then its name
    and --help), once, with the flags to look up there."""
    helps = {}
    for segments in command_lists:
        for i, segment in enumerate(segments):
            argv = (*flatten(segments[:i]), segment[0], "--help")
            helps.setdefault(argv, []).extend(w for w in segment[1:] if w.startswith("--"))
    return helps


def unknown_flags(command_lists, log_path, optional=()):
    """(problems, omitted): flags of each (sub)command that its own --help does not list,
    a TensorRT-LLM whose command line differs from the dialect chosen for its version;
    the dialect's optional flags (e.g. --no-telemetry, absent from early 1.3 release
    candidates) are not problems but left out of the run (omitted)."""
    problems, omitted = [], []
    for argv, flags in help_commands(command_lists).items():
        with open(log_path, "a") as log:
            log.write(f"$ {' '.join(argv)}\n")
        try:
            proc = subprocess.run(list(argv), capture_output=True, text=True)
        except FileNotFoundError:
            return [f"{argv[0]} is not on PATH in this environment (is this the TensorRT-LLM "
                    "image? environments.<id>.image)"], omitted
        with open(log_path, "a") as log:
            log.write(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            problems.append(f"'{' '.join(argv)}' failed ({proc.returncode}): "
                            f"{(proc.stdout + proc.stderr).strip()[-500:]}")
            continue
        for flag in dict.fromkeys(flags):
            if re.search(re.escape(flag) + r"(?![\w-])", proc.stdout):
                continue
            if flag in optional:
                omitted.append(flag)
                continue
            problems.append(f"trtllm-bench {argv[-2]} has no {flag} here (its --help does "
                            "not list it): this TensorRT-LLM's command line differs")
    return problems, omitted


def without(segments, omitted):
    """The command without the optional flags this release lacks (preflight found them)."""
    return [[w for w in segment if w not in omitted] for segment in segments]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def dataset_check(path):
    """(sidecar facts, problem): the dataset exists here with the bytes the host wrote."""
    try:
        meta = json.loads(read(path + ".json"))
    except (OSError, ValueError):
        return None, (f"dataset {path} (or its .json sidecar) is missing here: the workflow's "
                      "dataset rule writes it before any run (run snakemake, and check that "
                      "workload.dataset_dir is mounted at the same path in this environment)")
    if not os.path.exists(path) or sha256(path) != meta.get("sha256"):
        return meta, f"dataset {path} does not match the sha256 in {path}.json: rewritten?"
    return meta, None


# The engine's KV-cache sizing in its log: after the profiling run it reads
# torch.cuda.mem_get_info() and logs "Memory dynamically allocated during inference (inside
# torch) in memory usage profiling", then _cal_max_tokens logs "Peak memory during memory
# usage profiling ..." (tensorrt_llm/_torch/pyexecutor/_util.py estimate_max_tokens,
# NVIDIA/TensorRT-LLM d8ae02caed59708512e5aa578a09bb09f365bfed; 1.1's log has the second)
SIZING_LINE = re.compile(r"Memory dynamically allocated during inference|"
                         r"Peak memory during memory usage profiling")
SAMPLE_S = 0.2


def run(argv, log_path, sample=None, poll_s=SAMPLE_S):
    """Run the engine into its log. With `sample` (a memory view): one view every poll_s
    until the sizing line appears in the log, keeping the last view taken before it (read
    at most poll_s before the engine logged its sizing) and the first after; no sampling
    afterwards, so the measured requests run beside nothing of the probe's. Returns
    (status, seconds, {"before": view, "after": view, "lag_s": s} or None)."""
    t0 = time.perf_counter()
    with open(log_path, "a") as log:
        start = log.tell()
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        if sample is None:
            return proc.wait(), time.perf_counter() - t0, None
        sizing, last, seen_at, tail = None, None, None, ""
        with open(log_path, errors="replace") as reader:
            reader.seek(start)
            while proc.poll() is None:
                view, taken = sample(), time.perf_counter()
                tail = (tail + reader.read())[-4096:]
                if SIZING_LINE.search(tail):
                    # the line was written after `last` was taken (it was not in the log
                    # then) and before `view`'s read of the log finished
                    sizing = {"before": last[0] if last else None, "after": view,
                              "lag_s": round(taken - last[1], 3) if last else None}
                    seen_at = taken
                    break
                last = (view, taken)
                time.sleep(poll_s)
        rc = proc.wait()
    if sizing is not None:
        sizing["seen_after_start_s"] = round(seen_at - t0, 3)
    return rc, time.perf_counter() - t0, sizing


def load_json(path):
    return json.loads(read(path)) if os.path.exists(path) else None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--dataset", required=True)
    p.add_argument("--bench", required=True, help="JSON list of dialects, each with the "
                   "command's segments (command and its flags)")
    p.add_argument("--expect", default="{}", help="JSON: input_len, output_len, num_requests")
    p.add_argument("--check", action="store_true")
    p.add_argument("--check-models", default="[]", help="JSON list of the models to check")
    p.add_argument("--dataset-dir", help="the shared dataset folder (checked readable)")
    p.add_argument("--kv-max-tokens", type=int, help="the pinned-KV arm: write "
                   "kv_cache_config.max_tokens into the options file the command names")
    p.add_argument("--omit-flags", default="[]", help="JSON list: the dialect's optional "
                   "flags this release's --help lacks (preflight's omitted_flags)")
    args = p.parse_args(argv)
    work = os.path.dirname(args.out)
    if args.kv_max_tokens is not None:  # TensorRT-LLM's KvCacheConfig.max_tokens
        with open(os.path.join(work, "kv-cache-pinned.yaml"), "w") as fh:
            fh.write(f"kv_cache_config:\n  max_tokens: {args.kv_max_tokens}\n")
    log_path = os.path.join(work, "trtllm-bench.log")
    found = version()
    result = header("trtllm", T_ENTER, 0.0, {"tensorrt_llm": found})
    dialect, problem = pick_dialect(found, json.loads(args.bench))
    result["dialect"] = dialect and {k: v for k, v in dialect.items() if k != "segments"}
    if args.check:
        problems = [problem] if problem else []
        bench = json.loads(args.bench)[-1] if dialect is None else dialect
        unknown, omitted = unknown_flags([bench["segments"]], log_path,
                                         tuple(bench.get("optional") or ()))
        problems += unknown
        result["omitted_flags"] = omitted
        backend = bench["segments"][1][bench["segments"][1].index("--backend") + 1]
        if dialect and backend not in dialect["backends"]:
            problems.append(f"backend {backend!r} is not one of TensorRT-LLM {found}'s "
                            f"{dialect['backends']} (workload.backend)")
        name, capability = gpu_visible()
        result["gpu"], result["compute_capability"] = name, capability
        registry = model_registry()
        result["model_registry"] = registry
        models = json.loads(args.check_models)
        problems += check_models(models, capability, registry)
        if name is None:
            problems.append("no GPU visible to the image's torch (chroot: gpu: true; docker: "
                            "options.gpus, or nvidia_devices + nvidia_libraries)")
        if args.dataset_dir and not os.access(args.dataset_dir, os.R_OK):
            problems.append(f"dataset folder {args.dataset_dir} is missing or not readable "
                            "here (workload.dataset_dir and its mount)")
        if problems:
            print("\n".join(problems), file=sys.stderr)
            return 4
        result["models"] = models
        write_atomic(args.out, result)
        return 0
    if problem:
        print(problem, file=sys.stderr)
        return 4
    result["dataset"], problem = dataset_check(args.dataset)
    if problem:
        print(problem, file=sys.stderr)
        return 3
    omitted = [f for f in json.loads(args.omit_flags) if f in (dialect.get("optional") or ())]
    result["omitted_flags"] = omitted
    argv_ = flatten(without(dialect["segments"], omitted))
    result["bench_argv"] = argv_
    # the memory the engine sizes its KV cache from: read just before it starts, then every
    # SAMPLE_S until its sizing line, keeping the view just before that line (its own view
    # at sizing is the line itself, memorychain.engine_view); no NVML in the samples
    before = memory_view()
    rc, result["bench_s"], sizing = run(argv_, log_path,
                                        sample=lambda: memory_view(nvml=False))
    seen = (sizing or {}).get("before") or before
    free, source = free_bytes(seen)
    result["memory_chain"] = {
        "engine": "trtllm-bench",
        "seen_when": "at_sizing" if sizing and sizing.get("before") else "before_launch",
        "sized_at": seen, "free_bytes": free, "free_source": source,
        "before_launch": before, "after_sizing": (sizing or {}).get("after"),
        "sizing_lag_s": (sizing or {}).get("lag_s"),
        "after_run": memory_view(nvml=False)}
    oom = (result["memory_chain"]["after_run"].get("cgroup") or {}).get("events", {})
    log = read(log_path)
    result["log_tail"] = log[-20000:]
    result["log_key_lines"] = [ln for ln in log.splitlines() if KEY_LINE.search(ln)][-400:]
    sub = dialect["segments"][1]
    result["report"] = load_json(sub[sub.index("--report_json") + 1])
    requests = load_json(sub[sub.index("--request_json") + 1]) if "--request_json" in sub \
        else None
    result["requests"] = [{k: v for k, v in r.items() if k != "output"}
                          for r in requests] if requests else None
    result["expected"] = json.loads(args.expect)
    if rc != 0:
        print(log[-3000:], file=sys.stderr)
        if oom.get("oom_kill"):
            cg = result["memory_chain"]["after_run"]["cgroup"]
            print(f"trtllm-bench (status {rc}) ran in a memory cgroup whose OOM killer killed "
                  f"{oom['oom_kill']} process(es) (memory.events oom_kill; limit "
                  f"{cg.get('max_bytes')} bytes, peak {cg.get('peak_bytes')} bytes): the "
                  "environment's memory limit, not the engine, ended the run", file=sys.stderr)
        return rc
    return finish(args.out, result, children=True)  # children: trtllm-bench's own RSS


if __name__ == "__main__":
    sys.exit(main())
