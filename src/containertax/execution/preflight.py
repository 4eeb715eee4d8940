"""Before any cell: can every environment start the workload here, and what is this system?

A campaign of days must not discover on day two that one environment cannot start; each
environment is checked on its own so that one broken environment blocks only its cells.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

from containertax import runtimes, workloads
from containertax.campaign.config import Campaign
from containertax.core import records
from containertax.core.errors import ContainertaxError
from containertax.execution import environments, hostmemory, probing, provenance


class PreflightError(ContainertaxError, RuntimeError):
    """The environment cannot run this campaign's workload; the message says why and how."""


def host_limit_problems(campaign: Campaign, env_id: str) -> list[str]:
    """ulimits above the host's hard limits: refused by some hosts even for root."""
    return runtimes.docker.host_limit_problems(env_id, campaign.environment(env_id).spec)


def shm_with_host_ipc(campaign: Campaign, env_id: str) -> list[str]:
    """--shm-size does nothing with --ipc host (runtimes/docker.py)."""
    return runtimes.docker.shm_with_host_ipc(env_id, campaign.environment(env_id).spec)


def runtime_problems(env_id: str, runtime: runtimes.Runtime, spec: dict[str, Any]) -> None:
    """What the kind needs of the host (its declaration): root, its binaries, and what its
    `host_problems` finds missing."""
    name = runtime.label(spec)
    if runtime.needs_root and os.geteuid() != 0:
        raise PreflightError(
            f"environment {env_id}: {name} needs root here (mount namespaces, or the "
            "runtime's own store); run snakemake as root or remove the environment from the "
            "config.")
    missing = [b for b in runtime.binaries or () if shutil.which(b) is None]
    if missing:
        raise PreflightError(
            f"environment {env_id}: {name} needs {', '.join(missing)}, not found on this "
            "host. Fix: install it (scripts/setup.sh installs Debian's podman, charliecloud "
            "and util-linux; docs/environments.md), or remove the environment.")
    lacking = runtime.host_problems(spec) if runtime.host_problems else []
    if lacking:
        raise PreflightError(f"environment {env_id}: " + " ".join(lacking))


def page_cache_problems(campaign: Campaign) -> list[str]:
    """Where the page cache cannot be dropped: a warning (auto), or no cell at all
    (required) rather than every run failing after its gate."""
    mode = campaign.raw["memory"]["drop_page_cache"]
    permitted, why = hostmemory.drop_permitted()
    if mode == "never" or permitted:
        return []
    if mode == "required":
        raise PreflightError(
            f"memory.drop_page_cache is 'required' but {why}. Fix: run the campaign as root on "
            f"the host, or set memory.drop_page_cache: auto in {campaign.source}.")
    return [f"the page cache cannot be dropped here ({why}); runs record their memory state"]


# quantisation x architecture on a GPU generation that TensorRT-LLM's registry and support
# matrix allow but nobody has shown to run: preflight passes them, marked at risk, so a
# rehearsal is read with that in mind. FP8 MoE on SM12x (GB10 = SM 12.1): the fused-MoE
# backends TRTLLM-Gen and CuteDSL have no SM120 kernels (maintainers in NVIDIA/TensorRT-LLM
# PR #11997, "Ungate fused MoE for SM120/SM121", closed unmerged); FP8/MXFP8 MoE kernel
# gaps on SM121 are reported elsewhere too (flashinfer-ai/flashinfer #5238,
# vllm-project/vllm #43906).
MOE = {"MixtralForCausalLM", "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM",
       "DeepseekV3ForCausalLM", "PhiMoEForCausalLM"}
AT_RISK = [
    {"architectures": MOE, "quantisations": {"FP8", "FP8_BLOCK_SCALES", "MXFP8"}, "major": 12,
     "why": "FP8 mixture-of-experts kernels are unverified on SM12x (TensorRT-LLM PR #11997: "
            "no SM120 kernels in the TRTLLM-Gen and CuteDSL fused-MoE backends)",
     "fallback": "an NVFP4 checkpoint of the model, or BF16 where it fits in memory "
                 "(docs/dgx-spark.md, 'Models at risk')"},
]


def at_risk(models: list[dict[str, Any]], capability: Any) -> list[dict[str, Any]]:
    """The models whose architecture and quantisation are unverified on this GPU
    generation (AT_RISK), each with the reason and a fallback."""
    if not capability:
        return []
    major = int(capability[0])
    out = []
    for m in models:
        arch = (m.get("architectures") or [None])[0]
        quant = str(m.get("checkpoint_quantization") or m.get("quantization") or "").upper()
        for rule in AT_RISK:
            if major == rule["major"] and arch in rule["architectures"] \
                    and quant in rule["quantisations"]:
                out.append({"model": m["id"], "architecture": arch, "quantisation": quant,
                            "compute_capability": list(capability), "why": rule["why"],
                            "fallback": rule["fallback"]})
    return out


def check_environment(campaign: Campaign, env_id: str) -> dict[str, Any]:
    """Start the workload's check mode in the environment; return what it reports."""
    env = campaign.environment(env_id)
    facts: dict[str, Any] = {"environment": env_id, "kind": env.kind, "utc": records.utc_now()}
    runtime = runtimes.get(env.kind)
    warnings = runtime.warnings(env_id, env.spec) if runtime.warnings else []
    warnings += page_cache_problems(campaign)
    for warning in warnings:
        logging.getLogger("containertax").warning("preflight %s: %s", env_id, warning)
    runtime_problems(env_id, runtime, env.spec)
    launcher = environments.launcher(campaign, env_id)
    try:
        facts.update(launcher.preflight())
    except environments.EnvironmentFailure as exc:
        raise PreflightError(str(exc)) from None
    work = campaign.paths.work(f"preflight-{env_id}").resolve()
    if work.exists():
        shutil.rmtree(work)
    checks = {}
    for model in campaign.models:  # one check per workload kind the campaign uses
        kind = campaign.workload_kind(model.id)
        if kind not in checks:
            checks[kind] = _check_workload(campaign, env_id, work, kind, model.id, warnings)
    shutil.rmtree(work, ignore_errors=True)
    first = next(iter(checks.values()))
    for kind, c in checks.items():
        for flag in c.get("omitted_flags") or []:
            logging.getLogger("containertax").warning(
                "preflight %s: this release's --help lacks %s (optional in its dialect): "
                "the %s runs leave it out", env_id, flag, kind)
    risky = [r for c in checks.values()
             for r in at_risk(c.get("models") or [], c.get("compute_capability"))]
    for r in risky:
        logging.getLogger("containertax").warning(
            "preflight %s: model %s at risk: %s %s on compute capability %s: %s; fallback: %s",
            env_id, r["model"], r["architecture"], r["quantisation"],
            ".".join(map(str, r["compute_capability"])), r["why"], r["fallback"])
    facts.update({
        "at_risk": risky,
        "ok": True,
        "warnings": warnings,
        "startup_wall_s": first["wall_s"],
        "resolved": first["resolved"],
        "inside": first["inside"],
        "checks": checks,
    })
    return facts


def _check_workload(campaign: Campaign, env_id: str, work: Path, kind: str, model_id: str,
                    warnings: list[str]) -> dict[str, Any]:
    workload = workloads.get(kind)
    extra = workload.check_argv(
        [(m.id, campaign.workload_params(m.id)) for m in campaign.models
         if campaign.workload_kind(m.id) == kind]) if workload.check_argv else []
    try:
        launched = probing.launch_probe(
            campaign, env_id, kind, campaign.workload_params(model_id), work,
            label=f"preflight/{env_id}", timeout_s=300, check=True, extra_argv=extra,
            out_name="check.json")
    except workloads.WorkloadError as exc:
        raise PreflightError(f"environment {env_id}: {exc}") from None
    except environments.EnvironmentFailure as exc:
        hint = f" ({'; '.join(warnings)})" if warnings else ""
        named = str(exc) if str(exc).startswith("environment ") else f"environment {env_id}: {exc}"
        raise PreflightError(f"{named}{hint}") from None
    outcome, check = launched.outcome, launched.result
    if outcome.returncode != 0 or check is None:
        full = work / "check.output.txt"
        records.atomic_write_text(full, outcome.output)
        error = probe_error(outcome.output)
        raise PreflightError(
            f"environment {env_id}: the workload check '{' '.join(launched.argv)}' failed with "
            f"status {outcome.returncode}:\n{error}\n"
            f"{_blame(campaign, env_id, model_id, error, outcome.returncode)} (The whole "
            f"output: {full}.)")
    return {"kind": kind, "wall_s": outcome.wall_s, "resolved": outcome.resolved,
            "inside": {"environment": check.get("environment"), "software": check.get("software")},
            **{k: check[k] for k in ("gpu", "models", "dialect", "compute_capability",
                                     "model_registry", "omitted_flags") if k in check}}


TRACEBACK = "Traceback (most recent call last):"


def probe_error(output: str, limit: int = 1500) -> str:
    """What a failed probe said, without its Python traceback: what it printed before one,
    and the exception that ended it (its lines that are not the traceback's indented
    frames); a person reads the error, the frames stay in the whole output's file."""
    text = output.strip()
    if TRACEBACK not in text:
        return text[-limit:] or "(no output)"
    before, _, rest = text.partition(TRACEBACK)
    last = rest.rsplit(TRACEBACK, 1)[-1]
    exc = [line for line in last.splitlines() if line.strip() and not line[:1].isspace()
           and not line.startswith("During handling of the above exception")]
    said = "\n".join([*before.strip().splitlines()[-5:], *exc])
    return said[-limit:]


def _blame(campaign: Campaign, env_id: str, model_id: str, error: str, code: int) -> str:
    """The fix, for the key the failure points at: a workload value the probe's error
    quotes (e.g. a dtype this environment's torch lacks), else the environment's software
    (a missing module or interpreter), else both, without guessing."""
    params = campaign.workload_params(model_id)
    index = next(i for i, m in enumerate(campaign.models) if m.id == model_id)
    quoted = sorted(k for k, v in params.items() if isinstance(v, str | int)
                    and not isinstance(v, bool)
                    and (f"'{v}'" in error or f'"{v}"' in error))
    if quoted:
        keys = ", ".join(f"workload.{k} (or models[{index}].{k}) = {params[k]!r}"
                         for k in quoted)
        return (f"The probe's error names the value of {keys}: fix that key in "
                f"{campaign.source}, or the environment that lacks it.")
    env = (f"environments.{env_id}.python (the interpreter) or environments.{env_id}.image "
           "(the software)")
    if code in (126, 127) or any(w in error for w in ("ModuleNotFoundError", "ImportError",
                                                      "No such file or directory")):
        return f"The environment lacks what the workload needs: fix {env} in {campaign.source}."
    return (f"Fix the environment ({env}) or the workload parameters on the command line "
            f"(workload.*, models[{index}]) in {campaign.source}.")


def run_argv(campaign: Campaign, env_id: str, kind: str) -> list[str]:
    """A run's extra argv from its environment's preflight record (Workload.run_argv):
    what preflight found of this release that the run must follow."""
    workload = workloads.get(kind)
    path = campaign.paths.preflight(env_id)
    if workload.run_argv is None or not path.exists():
        return []
    check = (records.read_json(path).get("checks") or {}).get(kind) or {}
    return workload.run_argv(check)


def system(campaign: Campaign) -> dict[str, Any]:
    return {
        "campaign": campaign.name,
        "utc": records.utc_now(),
        "config_source": campaign.source,
        "config_hash": campaign.config_hash(),
        "config": campaign.raw,
        **provenance.system_facts(),
    }


def write_environment(campaign: Campaign, env_id: str, out: Path) -> None:
    records.write_json(out, check_environment(campaign, env_id))
