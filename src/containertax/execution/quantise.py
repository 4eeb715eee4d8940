"""The step that makes a quantised checkpoint (the workflow's rule quantise,
workflow/rules/quantise.smk; which checkpoints a campaign needs, and their markers, are
planned in campaign/quantise.py).

Why a rule: no one publishes FP8 checkpoints of Mixtral-8x7B or Qwen2.5-72B that
TensorRT-LLM's PyTorch backend reads, and trtllm-bench does not quantise. The checkpoint is
made once, on the host, by TensorRT Model Optimizer's hf_ptq.py in the campaign's
TensorRT-LLM image, at the model's model_path, before any preflight or run that reads it;
every environment (native chroot, Docker, ...) then reads those same bytes (parity: no
environment quantises for itself). The step checks what it made says the declared
quantisation and writes a completion marker beside it with the command, its time and size.

The quantiser can be replaced by a TEST DOUBLE (`CONTAINERTAX_HF_PTQ`, a program taking
hf_ptq.py's arguments, e.g. tests/doubles/hf_ptq): the marker then says so, and `doctor`
fails such a checkpoint, so no measured run reads a stand-in's weights unnoticed. hf_ptq.py
itself has not been run by this project (no GPU that runs it here).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import time
from pathlib import Path

from containertax.campaign import quantise as planned
from containertax.core.errors import ContainertaxError
from containertax.core.records import atomic_write_text
from containertax.workloads import checkpoints

DOUBLE_ENV = "CONTAINERTAX_HF_PTQ"
log = logging.getLogger("containertax")


class QuantiseError(ContainertaxError):
    """The quantiser failed, or what it wrote is not the declared checkpoint."""


def recipe(model: str, qformat: str | None = None) -> checkpoints.Quantised:
    """The model's quantisation recipe, in the given format (default: SOURCES')."""
    q = checkpoints.SOURCES.get(model)
    if not isinstance(q, checkpoints.Quantised):
        raise QuantiseError(f"model {model}: not a checkpoint made by quantisation "
                            "(workloads/checkpoints.py SOURCES); fetch it instead")
    return dataclasses.replace(q, qformat=qformat) if qformat else q


def argv(model: str, dest: str, image: str, qformat: str | None = None
         ) -> tuple[list[str], str]:
    """The quantiser's command line, and what ran it ('hf_ptq.py in IMAGE', or the test
    double named by CONTAINERTAX_HF_PTQ)."""
    q = recipe(model, qformat)
    base = checkpoints.base_path(q, dest)
    double = os.environ.get(DOUBLE_ENV)
    if double:
        return [double, *checkpoints.hf_ptq_args(q, base, dest)], f"TEST DOUBLE {double}"
    return checkpoints.quantise_argv(q, base, dest, image), (
        f"hf_ptq.py of Model Optimizer {checkpoints.MODELOPT} in {image}")


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def quantise(model: str, dest: str, image: str, log_path: str,
             qformat: str | None = None) -> dict[str, object]:
    """Run the quantiser (its output appended to log_path), check the checkpoint it wrote,
    then write the marker; returns the marker's content."""
    words, quantiser = argv(model, dest, image, qformat)
    q = recipe(model, qformat)
    base = checkpoints.base_path(q, dest)
    if not Path(base, "config.json").is_file():
        raise QuantiseError(f"model {model}: no base checkpoint at {base} (no config.json); "
                            f"fetch it: {checkpoints.download_command(q.base, base)}")
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    log.info("quantising %s (%s) into %s: %s", model, q.qformat, dest, quantiser)
    start = time.time()
    with open(log_path, "a") as fh:
        fh.write(f"$ {subprocess.list2cmdline(words)}\n")
        fh.flush()
        rc = subprocess.run(words, stdout=fh, stderr=subprocess.STDOUT, check=False).returncode
    took = time.time() - start
    if rc != 0:
        raise QuantiseError(f"model {model}: the quantiser ({quantiser}) exited with status "
                            f"{rc}; its output is in {log_path}")
    found = checkpoints.quantisation(Path(dest))
    if not Path(dest, "config.json").is_file() or not checkpoints.matches(q.qformat, found):
        raise QuantiseError(f"model {model}: the quantiser exited 0 but {dest} is "
                            f"{found or 'not a quantised checkpoint'} (config.json, "
                            f"hf_quant_config.json), not {q.qformat}; see {log_path}")
    if not any(Path(dest).glob("*.safetensors")):
        raise QuantiseError(f"model {model}: no .safetensors in {dest}; see {log_path}")
    done: dict[str, object] = {
        "model": model, "base": base, "checkpoint": dest, "qformat": q.qformat,
        "quant_algo": found, "quantiser": quantiser, "test_double": quantiser.startswith(
            "TEST DOUBLE"), "command": words, "seconds": round(took, 1),
        "bytes": folder_bytes(Path(dest)), "finished": time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    atomic_write_text(Path(planned.marker(dest)), json.dumps(done, indent=2) + "\n")
    log.info("quantised %s: %s in %.0f s, %.1f GB", model, found, took,
             float(done["bytes"]) / 1e9)  # type: ignore[arg-type]
    return done


def made_by_double(dest: str) -> bool:
    """Whether the checkpoint's marker says a test double made it."""
    try:
        return bool(json.loads(Path(planned.marker(dest)).read_text()).get("test_double"))
    except (OSError, ValueError, AttributeError):
        return False
