"""Where each checkpoint of the DGX Spark suite comes from: the command that fetches it (or
makes it, where no one publishes it), whether it is gated and its licence page, and its
size: the one home `containertax doctor`, scripts/setup-spark.sh (through `doctor`'s fix
column) and docs/dgx-spark.md draw on.

Sizes are estimates (parameters x bytes per weight, from the model cards' parameter counts),
not measurements: nothing was downloaded here. Gated repositories are those whose Hugging
Face page asks to accept a licence or share contact details before download (Meta's Llama,
Google's Gemma, Mistral AI's models), as their pages said when this was written.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

GB = 10**9
# what TensorRT-LLM's Hugging Face loader reads: config, generation config, tokenizer,
# ModelOpt's hf_quant_config.json, the safetensors shards and their index (quoted: the
# shell must not expand them)
INCLUDE = ("*.json", "*.safetensors", "tokenizer*", "*.model")


@dataclass(frozen=True)
class Published:
    """A repository on Hugging Face."""

    repo: str
    bytes: int
    gated: bool = False
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True)
class Quantised:
    """A checkpoint no one publishes: TensorRT Model Optimizer's post-training
    quantisation of a base model, in the TensorRT-LLM image, as NVIDIA's DGX Spark
    nvfp4-quantization playbook runs it (hf_ptq.py exporting a unified Hugging Face
    checkpoint)."""

    base: str
    qformat: str
    bytes: int          # the output
    base_bytes: int     # the BF16 base model, downloaded first
    hours: str          # an estimate: the playbook's 1.5-3 h is dominated by the download
    gated: bool = False


SOURCES: dict[str, Published | Quantised] = {
    "Qwen/Qwen2-1.5B-Instruct": Published("Qwen/Qwen2-1.5B-Instruct", 3 * GB),
    "google/gemma-3-1b-it": Published("google/gemma-3-1b-it", 2 * GB, gated=True),
    "microsoft/Phi-3-mini-4k-instruct": Published("microsoft/Phi-3-mini-4k-instruct", 8 * GB),
    "mistralai/Mistral-7B-Instruct-v0.3": Published(
        "mistralai/Mistral-7B-Instruct-v0.3", 15 * GB, gated=True,
        exclude=("consolidated.safetensors",)),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": Published(
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", 15 * GB),
    "meta-llama/Meta-Llama-3-8B-Instruct": Published(
        "meta-llama/Meta-Llama-3-8B-Instruct", 16 * GB, gated=True, exclude=("original/*",)),
    "nvidia/Llama-3.3-70B-Instruct-FP4": Published("nvidia/Llama-3.3-70B-Instruct-FP4",
                                                   40 * GB),
    "nvidia/Llama-3.1-8B-Instruct-FP8": Published("nvidia/Llama-3.1-8B-Instruct-FP8", 9 * GB),
    # no FP8 checkpoint for TensorRT-LLM is published: made from the BF16 base
    "mistralai/Mixtral-8x7B-Instruct-v0.1": Quantised(
        "mistralai/Mixtral-8x7B-Instruct-v0.1", "fp8", 47 * GB, 93 * GB, "1.5-3 h",
        gated=True),
    "Qwen/Qwen2.5-72B-Instruct": Quantised("Qwen/Qwen2.5-72B-Instruct", "fp8", 73 * GB,
                                           145 * GB, "2-4 h"),
}
# Model Optimizer release the playbook pins (nvidia/nvfp4-quantization/README.md)
MODELOPT = "0.45.0"


@dataclass(frozen=True)
class Source:
    """How a model's checkpoint gets to its model_path."""

    command: str
    licence: str | None
    download_bytes: int


def download_command(repo: str, dest: str, exclude: tuple[str, ...] = ()) -> str:
    """`hf download` (huggingface_hub's CLI in .venv) of only what the loader reads."""
    words = [".venv/bin/hf", "download", repo]
    for pattern in INCLUDE:
        words += ["--include", pattern]
    for pattern in exclude:
        words += ["--exclude", pattern]
    words += ["--local-dir", dest]
    return " ".join(shlex.quote(w) for w in words)


# hf_ptq.py's arguments, as its argparse declares them at NVIDIA/Model-Optimizer commit
# 9196696d328f09718767c0f2a9a10735a6bf1451 (examples/llm_ptq/hf_ptq.py): --pyt_ckpt_path (a
# local folder or a Hugging Face name), --qformat (fp8, nvfp4, ...), --kv_cache_qformat
# (none, fp8, nvfp4, ...; default fp8), --export_path; the unified Hugging Face export writes
# config.json with its quantization_config and hf_quant_config.json beside the shards.
KV_QFORMATS = ("fp8", "nvfp4")


def base_path(q: Quantised, dest: str) -> str:
    """Where the BF16 base model is downloaded: beside the quantised checkpoint, under the
    base repository's own name (/models/Mixtral-8x7B-Instruct-v0.1 for
    /models/Mixtral-8x7B-Instruct-v0.1-FP8)."""
    return str(Path(dest).parent / q.base.rsplit("/", 1)[-1])


def hf_ptq_args(q: Quantised, base: str, dest: str) -> list[str]:
    """hf_ptq.py's arguments: the local base folder in, the unified checkpoint out."""
    kv = q.qformat if q.qformat in KV_QFORMATS else "none"
    return ["--pyt_ckpt_path", base, "--qformat", q.qformat, "--kv_cache_qformat", kv,
            "--export_path", dest]


def quantise_argv(q: Quantised, base: str, dest: str, image: str) -> list[str]:
    """Model Optimizer's PTQ in the TensorRT-LLM image (the playbook's Step 5), reading the
    base folder and exporting to `dest` (their folders bound at the same paths; the Hugging
    Face cache for hf_ptq.py's calibration datasets)."""
    binds = dict.fromkeys([str(Path(base).parent), str(Path(dest).parent)])
    inner = (f"git clone -b {MODELOPT} --single-branch https://github.com/NVIDIA/"
             "Model-Optimizer.git /app/Model-Optimizer && cd /app/Model-Optimizer && "
             "pip install -e '.[hf]' && cd examples/llm_ptq && python hf_ptq.py "
             + shlex.join(hf_ptq_args(q, base, dest)))
    argv = ["docker", "run", "--rm", "--gpus", "all", "--ipc=host", "--ulimit", "memlock=-1",
            "--ulimit", "stack=67108864"]
    for folder in binds:
        argv += ["-v", f"{folder}:{folder}"]
    argv += ["-v", f"{Path.home()}/.cache/huggingface:/root/.cache/huggingface", "-e",
             "HF_TOKEN", image, "bash", "-c", inner]
    return argv


def quantise_command(q: Quantised, dest: str, image: str) -> str:
    """The base model's download, then its quantisation (what the workflow's rules
    fetch_base and quantise run), as one line a user could type."""
    base = base_path(q, dest)
    return (f"{download_command(q.base, base)} && "
            f"{shlex.join(quantise_argv(q, base, dest, image))}")


def licence_page(repo: str) -> str:
    return f"https://huggingface.co/{repo}"


DEFAULT_IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc13"


def source_of(model: str, dest: str, quantization: str | None,
              image: str = DEFAULT_IMAGE) -> Source:
    """The command that puts `model`'s checkpoint at `dest`; a model not in SOURCES is
    fetched under its own name (size unknown: 0)."""
    known = SOURCES.get(model)
    if isinstance(known, Quantised):
        return Source(f"{quantise_command(known, dest, image)}  # ~{known.hours}, "
                      f"{(known.base_bytes + known.bytes) / GB:.0f} GB (BF16 base + output)",
                      licence_page(known.base) if known.gated else None,
                      known.base_bytes + known.bytes)
    if isinstance(known, Published):
        return Source(download_command(known.repo, dest, known.exclude),
                      licence_page(known.repo) if known.gated else None, known.bytes)
    return Source(download_command(model, dest), None, 0)


def quantisation(path: Path) -> str | None:
    """What a checkpoint says it is quantised as: ModelOpt's hf_quant_config.json
    (quantization.quant_algo), else config.json's quantization_config (the probe's rule,
    workloads/probe/trtllm.py checkpoint_quantization, read on the host)."""
    try:
        algo = json.loads((path / "hf_quant_config.json").read_text()).get(
            "quantization", {}).get("quant_algo")
        if algo:
            return str(algo)
    except (OSError, ValueError):
        pass
    try:
        q = json.loads((path / "config.json").read_text()).get("quantization_config") or {}
    except (OSError, ValueError):
        return None
    found = q.get("quant_algo") or q.get("quant_method")
    return str(found) if found else None


def squash(text: str | None) -> str:
    return "".join(ch for ch in (text or "").lower() if ch.isalnum())


def matches(declared: str | None, found: str | None) -> bool:
    """The probe's rule: either name contains the other (nvfp4 ~ NVFP4, fp8 ~ FP8)."""
    if not declared:
        return found is None
    return bool(found) and (squash(found) in squash(declared)
                            or squash(declared) in squash(found))
