"""The memory chain of a run: what the engine saw when it sized its KV cache (free memory,
the memory cgroup's limit and accounting, MemAvailable and the page cache) and the cache
it got, per run and environment.

Why: the published Phase 1 found the container's KV cache 40-63 % smaller on GB10 unified
memory; the suspected cause is the container's memory cgroup entering what the engine
calls free. The probe reads the inputs from inside the environment
(workloads/probe/memview.py); this module turns them into the raw record's `memory_chain`
and the paper's table. The stand-in engine (workloads/probe/kvstandin.py) runs the chain
without a GPU.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from containertax import workloads
from containertax.campaign.config import Campaign
from containertax.execution import environments

GIB = 2**30
# TensorRT-LLM's own view, KvCacheCreator._cal_max_tokens (tensorrt_llm/_torch/pyexecutor/
# _util.py): "Peak memory during memory usage profiling (torch + non-torch): %.2f GiB,
# available KV cache memory when calculating max tokens: %.2f GiB, fraction is set %s, ...
# device total memory %.2f GiB" (the fraction and total only in later versions)
ENGINE_LINE = re.compile(
    r"Peak memory during memory usage profiling \(torch \+ non-torch\): ([\d.]+) GiB, "
    r"available KV cache memory when calculating max tokens: ([\d.]+) GiB"
    r"(?:, fraction is set ([\d.]+))?(?:.*?device total memory ([\d.]+) GiB)?")


def engine_view(lines: list[str]) -> dict[str, float] | None:
    """The last sizing line of TensorRT-LLM's log: its peak, total and available memory."""
    found = None
    for line in lines:
        m = ENGINE_LINE.search(line)
        if m:
            found = {"peak_gib": float(m[1]), "available_kv_gib": float(m[2]),
                     "fraction": float(m[3]) if m[3] else None,
                     "device_total_gib": float(m[4]) if m[4] else None}
    return found


def from_probe(probe: dict[str, Any], metrics: dict[str, float]) -> dict[str, Any] | None:
    """The record's memory_chain from a probe's output (None where the probe recorded
    none: workloads without a KV cache, records before it)."""
    chain = probe.get("memory_chain")
    if not chain:
        return None
    seen = chain.get("sized_at") or {}
    out: dict[str, Any] = {
        "engine": chain.get("engine"),
        "seen_when": chain.get("seen_when", "at_sizing"),
        "seen": seen,
        "free_bytes": chain.get("free_bytes"),
        "free_source": chain.get("free_source"),
        "fraction": chain.get("fraction"),
        "kv_cache_sized_bytes": chain.get("kv_cache_sized_bytes"),
        "kv_cache_bytes": chain.get("kv_cache_allocated_bytes"),
        "device": chain.get("device", "host"),
        "engine_view": engine_view(probe.get("log_key_lines") or []),
        "after": chain.get("after_allocation"),
        # trtllm: the view before launch, the first after its sizing line, how far apart
        # the views around the line were, and the cgroup after the run
        "before_launch": chain.get("before_launch"),
        "after_sizing": chain.get("after_sizing"),
        "sizing_lag_s": chain.get("sizing_lag_s"),
        "after_run": chain.get("after_run"),
    }
    if out["kv_cache_bytes"] is None and metrics.get("kv_cache_gib") is not None:
        out["kv_cache_bytes"] = int(metrics["kv_cache_gib"] * GIB)  # trtllm: from its log
    out["cgroup_accounting"] = cgroup_accounting(out)
    return out


# cgroup peak / the engine's own memory (its profiling peak + its KV cache): at or above
# COUNTED the memory limit sees the engine's allocations; at or below NOT_COUNTED it does
# not (on GB10 it is reported that cgroup v2 does not see CUDA allocations: issue #45)
COUNTED, NOT_COUNTED = 0.8, 0.3


def cgroup_accounting(chain: dict[str, Any]) -> dict[str, Any] | None:
    """Does the environment's memory limit bound the engine? Its cgroup's peak after the run
    against the engine's own memory; None without a limit (nothing to bound), without the
    cgroup's peak, or without the engine's sizing line."""
    cg = (chain.get("after_run") or {}).get("cgroup") or {}
    view = chain.get("engine_view") or {}
    limit, peak = cg.get("max_bytes"), cg.get("peak_bytes")
    if limit is None or peak is None or view.get("peak_gib") is None:
        return None
    engine = view["peak_gib"] * GIB + (chain.get("kv_cache_bytes") or 0)
    ratio = peak / engine if engine else None
    verdict = ("unknown" if ratio is None else "counted" if ratio >= COUNTED
               else "not counted" if ratio <= NOT_COUNTED else "unclear")
    return {"limit_bytes": limit, "cgroup_peak_bytes": peak, "engine_bytes": int(engine),
            "ratio": None if ratio is None else round(ratio, 3), "verdict": verdict,
            "oom_kill": (cg.get("events") or {}).get("oom_kill")}


def run_standin(campaign: Campaign, env_id: str, work: Path, fraction: float = 0.9,
                max_alloc_mib: int = 64, timeout_s: float = 120.0, device: str = "host",
                free: str = "mem_available") -> dict[str, Any]:
    """The stand-in engine once in an environment; its memory chain and the launch's
    resolved facts (telemetry opt-out, entrypoint, limits). device "cuda": sized from
    torch.cuda.mem_get_info() as TensorRT-LLM does (the environment's python has torch)."""
    launcher = environments.launcher(campaign, env_id)
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o777)
    probe_in, work_in = launcher.inside(workloads.PROBE_DIR, work)
    # natively the configured python where the config names one (a GPU config's has torch)
    python = (launcher.env.spec.get("python") or sys.executable
              if launcher.runtime.launcher == "process" else launcher.env.python)
    out = work / "kvstandin.json"
    out.unlink(missing_ok=True)
    argv = [python, str(probe_in / "kvstandin.py"), "--out", str(work_in / out.name),
            "--fraction", str(fraction), "--max-alloc-mib", str(max_alloc_mib),
            "--device", device, "--free", free]
    outcome = launcher.run(environments.Launch(
        argv=argv, probe_dir=workloads.PROBE_DIR, work_dir=work, timeout_s=timeout_s,
        label=f"kvstandin/{env_id}"))
    if outcome.returncode != 0 or not out.exists():
        raise environments.EnvironmentFailure(
            f"environment {env_id}: the stand-in engine failed (status {outcome.returncode}): "
            f"{outcome.output[-800:]}")
    probe = json.loads(out.read_text())
    chain = from_probe(probe, {})
    assert chain is not None  # the stand-in always writes one
    return {"environment": env_id, "kind": launcher.kind, "memory_chain": chain,
            "options": launcher.env.spec.get("options", {}),
            "telemetry": outcome.resolved.get("telemetry")}


def _gib(value: Any) -> str:
    return "--" if value is None else f"{value / GIB:.2f}"


def chain_rows(records: list[Any]) -> list[dict[str, str]]:
    """One row per model and environment (the mean of its runs' values)."""
    import pandas as pd

    rows = []
    for rec in records:
        chain = getattr(rec, "memory_chain", None)
        if not chain:
            continue
        seen = chain.get("seen") or {}
        cg = seen.get("cgroup") or {}
        rows.append({"model": rec.cell.model, "environment": rec.cell.environment,
                     "avail": seen.get("mem_available_bytes"), "cached": seen.get("cached_bytes"),
                     "cg_max": cg.get("max_bytes"), "cg_cur": cg.get("current_bytes"),
                     "free": chain.get("free_bytes"), "kv": chain.get("kv_cache_bytes")})
    if not rows:
        return []
    frame = pd.DataFrame(rows)
    values = ["avail", "cached", "cg_max", "cg_cur", "free", "kv"]
    frame[values] = frame[values].apply(pd.to_numeric, errors="coerce")  # None -> NaN
    means = frame.groupby(["model", "environment"], sort=False)[values].mean()
    return [{"model": m, "environment": e,
             **{k: _gib(None if pd.isna(v) else v) for k, v in row.items()}}
            for (m, e), row in means.iterrows()]


def trtllm_when(records: list[Any]) -> str:
    """When trtllm-bench's chains were read, as the records say (records before the
    sampling at sizing was built read it just before start-up)."""
    whens = [c.get("seen_when") for rec in records
             if (c := getattr(rec, "memory_chain", None)) and c.get("engine") == "trtllm-bench"]
    at, before = whens.count("at_sizing"), len(whens) - whens.count("at_sizing")
    if not whens or not at:
        return "just before start-up for \\texttt{trtllm-bench}"
    sized = ("at sizing for \\texttt{trtllm-bench} too (the last view, sampled every "
             "0.2~s, before its sizing line appeared in its log)")
    return sized if not before else (f"{sized} in {at} runs and just before its start-up "
                                     f"in {before}")


def chain_table(records: list[Any]) -> str:
    """The paper's memory-chain table (tables/memory-chain.tex): empty without records that
    carry the chain, so the paper shows it only where it was measured."""
    rows = chain_rows(records)
    if not rows:
        return ""

    def tt(s: str) -> str:
        return "\\texttt{" + s.replace("_", "\\_") + "}"

    body = "\n".join(
        f"{tt(r['model'])} & {tt(r['environment'])} & {r['avail']} & {r['cached']} & "
        f"{r['cg_max']} & {r['cg_cur']} & {r['free']} & {r['kv']} \\\\" for r in rows)
    return (
        "\\paragraph{From free memory to the KV cache.} Table~\\ref{tab:memory-chain} shows, "
        "per model and environment, what the engine could see when it sized its KV cache "
        "(read inside the environment, at sizing by the stand-in engine and "
        f"{trtllm_when(records)}, whose own view is its log: the host's "
        "available memory and page cache, the memory cgroup's limit and usage; `--' where "
        "there is none) and the cache it allocated, in GiB, mean over the runs.\n"
        "\\begin{table}[htbp]\\centering\\small\n"
        "\\caption{Memory chain: free memory at sizing $\\rightarrow$ KV cache (GiB).}"
        "\\label{tab:memory-chain}\n"
        "\\begin{tabular}{llrrrrrr}\\toprule\n"
        "model & environment & available & cached & cgroup limit & cgroup usage & free & "
        "KV cache \\\\\\midrule\n" + body + "\n\\bottomrule\\end{tabular}\n\\end{table}\n")
