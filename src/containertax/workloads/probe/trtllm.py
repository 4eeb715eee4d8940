"""trtllm-bench inside the environment under test (the TensorRT-LLM image's own tools).

Prepares the model's dataset once (the first environment to need it writes it into the
shared, mounted dataset folder; every later run of every environment reads that file), then
runs the benchmark with its report written to the work folder and its log captured: the
host parses both (containertax.workloads.trtllm).
"""

import time

T_ENTER = time.time()  # first statement: the launcher's clock minus this is start-up latency

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

from probe_common import finish, header, write_atomic  # noqa: E402


def version() -> str | None:
    try:
        from importlib.metadata import version as v

        return v("tensorrt_llm")
    except Exception:  # noqa: BLE001 - absent or unreadable: reported as None
        return None


def read(path: str) -> str:
    with open(path) as fh:
        return fh.read()


def checkpoint_quantization(path: str) -> str | None:
    """What a Hugging Face checkpoint says it is quantised as: ModelOpt's
    hf_quant_config.json (quantization.quant_algo), else config.json's quantization_config."""
    try:
        with open(os.path.join(path, "hf_quant_config.json")) as fh:
            algo = json.load(fh).get("quantization", {}).get("quant_algo")
        if algo:
            return str(algo)
    except (OSError, ValueError):
        pass
    try:
        with open(os.path.join(path, "config.json")) as fh:
            q = json.load(fh).get("quantization_config") or {}
        return str(q["quant_method"]) if q.get("quant_method") else None
    except (OSError, ValueError):
        return None


def squash(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def check_models(models: list) -> list:
    """Every model's checkpoint visible here, with the quantisation the config declares."""
    problems = []
    for m in models:
        path = m.get("model_path")
        if not path:
            continue  # a Hugging Face name: trtllm-bench resolves it (cache or download)
        if not os.path.isfile(os.path.join(path, "config.json")):
            problems.append(f"model {m['id']}: no checkpoint at {path} (no config.json) in this "
                            "environment; check models[].model_path and the mount of its folder")
            continue
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
    return problems


def gpu_visible() -> str | None:
    """The GPU as the image's own torch sees it; None where it sees none."""
    try:
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001 - no torch or no driver: no GPU here
        return None


def flatten(segments: list) -> list:
    return [word for segment in segments for word in segment]


def help_commands(command_lists: list) -> dict:
    """Each (sub)command's --help (the commands before it, with their flags, then its name
    and --help), once, with the flags to look up there."""
    helps: dict = {}
    for segments in command_lists:
        for i, segment in enumerate(segments):
            argv = (*flatten(segments[:i]), segment[0], "--help")
            helps.setdefault(argv, []).extend(w for w in segment[1:] if w.startswith("--"))
    return helps


def unknown_flags(command_lists: list, log_path: str) -> list:
    """Flags of each (sub)command that its own --help does not list: a TensorRT-LLM whose
    command line differs from the one these commands were written for."""
    problems = []
    for argv, flags in help_commands(command_lists).items():
        with open(log_path, "a") as log:
            log.write(f"$ {' '.join(argv)}\n")
        try:
            proc = subprocess.run(list(argv), capture_output=True, text=True)
        except FileNotFoundError:
            return [f"{argv[0]} is not on PATH in this environment (is this the TensorRT-LLM "
                    "image? environments.<id>.image)"]
        with open(log_path, "a") as log:
            log.write(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            problems.append(f"'{' '.join(argv)}' failed ({proc.returncode}): "
                            f"{(proc.stdout + proc.stderr).strip()[-500:]}")
            continue
        for flag in dict.fromkeys(flags):
            if not re.search(re.escape(flag) + r"(?![\w-])", proc.stdout):
                problems.append(f"trtllm-bench {argv[-2]} has no {flag} here (its --help does "
                                "not list it): this TensorRT-LLM's command line differs")
    return problems


def run(argv: list, log_path: str) -> tuple[int, float]:
    t0 = time.perf_counter()
    with open(log_path, "a") as log:
        rc = subprocess.call(argv, stdout=log, stderr=subprocess.STDOUT)
    return rc, time.perf_counter() - t0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--dataset", required=True)
    p.add_argument("--prepare", required=True,
                   help="JSON list of command segments (command and its flags) that writes "
                   "the dataset")
    p.add_argument("--bench", required=True, help="JSON segments of the benchmark")
    p.add_argument("--check", action="store_true")
    p.add_argument("--check-models", default="[]", help="JSON list of the models to check")
    p.add_argument("--dataset-dir", help="the shared dataset folder (checked writable)")
    args = p.parse_args(argv)
    work = os.path.dirname(args.out)
    log_path = os.path.join(work, "trtllm-bench.log")
    result = header("trtllm", T_ENTER, 0.0, {"tensorrt_llm": version()})
    if args.check:
        models = json.loads(args.check_models)
        problems = unknown_flags([json.loads(args.prepare), json.loads(args.bench)], log_path)
        problems += check_models(models)
        result["gpu"] = gpu_visible()
        if result["gpu"] is None:
            problems.append("no GPU visible to the image's torch (chroot: gpu: true; docker: "
                            "options.gpus, or nvidia_devices + nvidia_libraries)")
        if args.dataset_dir and not os.access(args.dataset_dir, os.W_OK):
            problems.append(f"dataset folder {args.dataset_dir} is missing or not writable "
                            "here (workload.dataset_dir and its mount)")
        if problems:
            print("\n".join(problems), file=sys.stderr)
            return 4
        result["models"] = models
        write_atomic(args.out, result)
        return 0
    if not os.path.exists(args.dataset):
        rc, result["prepare_s"] = run(flatten(json.loads(args.prepare)), log_path)
        if rc != 0 or not os.path.exists(args.dataset):
            print(read(log_path)[-3000:], file=sys.stderr)
            return rc or 3
        result["prepared_dataset_here"] = True
    rc, result["bench_s"] = run(flatten(json.loads(args.bench)), log_path)
    log = read(log_path)
    result["log_tail"] = log[-20000:]
    report = os.path.join(work, "report.json")
    result["report"] = json.loads(read(report)) if os.path.exists(report) else None
    if rc != 0:
        print(log[-3000:], file=sys.stderr)
        return rc
    return finish(args.out, result, children=True)  # children: trtllm-bench's own RSS


if __name__ == "__main__":
    sys.exit(main())
