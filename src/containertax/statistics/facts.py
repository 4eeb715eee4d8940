"""The campaign's facts, computed once from its records (stats/facts.json, written by the
findings rule beside stats/findings.csv): what every sentence of the paper that states a
count, a metric's name, a quantifier or which runs compiled draws from, and what the
review's claims audit re-derives the PDF's text against.

Per model: the blocks it ran (complete and analysed), the metric its rule decided on (the
first primary metric), the look where it stopped, the GPUs of each block and the blocks
split across GPUs, its workload's parameters, and whether it compiles. Per campaign: the
runs that compiled, each detected from its own record's evidence (never by its position
in a visit), and the tree that measured (the records' provenance, not the checkout that
builds the paper).

A run compiled when its record says so: torch.compile's counters show a cache miss of the
compiled graph (FX graph or AOT autograd), where the probe recorded counters; else, where
it did not, its first warm-up request took more than COMPILE_FACTOR times the median first
warm-up request of the model's runs (compiling the decoding step costs a multiple of a
warm start; a cache hit does not). A record with neither is not claimed to have compiled.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from containertax.core import records

if TYPE_CHECKING:
    from containertax.campaign.config import Campaign

# a first warm-up request this many times the model's median is a compilation (h100
# campaigns: 35-58 s compiling against 7-19 s loading the cache)
COMPILE_FACTOR = 2.0
# the workload parameters the paper names a workload by
WORKLOAD_PARAMS = ("size", "dtype", "batch_size", "input_len", "output_len", "decoding")
COMPILED_COLUMNS = ["model", "environment", "repetition", "block", "evidence",
                    "first_request_s"]


def _cache_misses(counters: dict[str, Any] | None) -> int | None:
    """Misses of the compiled graph's caches in torch.compile's counters; None without
    counters (a probe before them)."""
    if not isinstance(counters, dict) or not counters:
        return None
    inductor = counters.get("inductor") or {}
    aot = counters.get("aot_autograd") or {}
    return int(inductor.get("fxgraph_cache_miss", 0) or 0) + int(
        aot.get("autograd_cache_miss", 0) or 0)


def record_evidence(root: Path) -> pd.DataFrame:
    """One row per record: model, environment, repetition, block, the first warm-up
    request's latency (NaN without one), the counters' cache misses (NaN without
    counters), the tree that measured, and the GPU."""
    from containertax.statistics.aggregate import machine_of, read_records

    rows = []
    for _, rec in read_records(root):
        d = rec.to_dict()
        detail = d.get("detail") or {}
        warm = [r.get("latency_s") for r in detail.get("requests") or []
                if isinstance(r, dict) and r.get("warmup")]
        misses = _cache_misses(detail.get("compile_counters"))
        git = (d.get("provenance") or {}).get("git") or {}
        cell = d["cell"]
        rows.append({"model": str(cell["model"]), "environment": cell["environment"],
                     "repetition": int(cell["repetition"]),
                     "block": int(cell.get("block") or cell["repetition"]),
                     "first_request_s": float(warm[0]) if warm and warm[0] is not None
                     else math.nan,
                     "cache_misses": math.nan if misses is None else float(misses),
                     "commit": str(git.get("commit") or "")[:7],
                     "dirty": git.get("dirty"), "machine": machine_of(rec)})
    return pd.DataFrame(rows, columns=["model", "environment", "repetition", "block",
                                       "first_request_s", "cache_misses", "commit",
                                       "dirty", "machine"])


def compiled(evidence: pd.DataFrame, compiles: dict[str, bool]) -> pd.DataFrame:
    """The runs that compiled (COMPILED_COLUMNS), from each record's own evidence
    (module docstring); `compiles`: model -> whether its workload compiles at all."""
    out = []
    for model, g in evidence.groupby("model", sort=False):
        if not compiles.get(str(model)):
            continue
        median = g["first_request_s"].median()
        for r in g.itertuples():
            if r.cache_misses == r.cache_misses:  # counters recorded: they decide
                if r.cache_misses > 0:
                    out.append((r, f"{int(r.cache_misses)} compile cache misses"))
            elif (r.first_request_s == r.first_request_s and median == median
                  and r.first_request_s > COMPILE_FACTOR * median):
                out.append((r, f"first warm-up request {r.first_request_s:.1f} s against "
                               f"the model's median {median:.1f} s"))
    rows = [{"model": str(r.model), "environment": r.environment,
             "repetition": int(r.repetition), "block": int(r.block), "evidence": why,
             "first_request_s": r.first_request_s} for r, why in out]
    return pd.DataFrame(rows, columns=COMPILED_COLUMNS)


def _blocks(runs: pd.DataFrame, model: str, n_envs: int) -> tuple[int, int]:
    """(blocks with a run of every environment, blocks with any run) of one model."""
    g = runs[runs["model"].astype(str) == model]
    if g.empty:
        return 0, 0
    key = "block" if "block" in g and g["block"].notna().all() else "repetition"
    per = g.drop_duplicates(["environment", key]).groupby(key)["environment"].nunique()
    return int((per >= n_envs).sum()), int(len(per))


def build(campaign: Campaign, runs: pd.DataFrame) -> dict[str, Any]:
    """The facts of one campaign (module docstring) from its kept runs and its records."""
    from containertax import workloads
    from containertax.statistics import policy, quality, sequential

    envs = list(dict.fromkeys(runs["environment"])) if not runs.empty else []
    primary = policy.primary_metrics(campaign, runs) if not runs.empty else {}
    evidence = (pd.DataFrame(columns=["model"]) if campaign.is_import
                else record_evidence(campaign.root))
    stops: dict[str, dict[str, Any]] = {}
    if campaign.raw.get("stopping") and not runs.empty:
        for r in sequential.last_state(campaign, runs):
            stops[str(r["model"])] = {"look": int(r["look"]), "blocks": int(r["blocks"]),
                                      "decision": str(r["decision"])}
    models: dict[str, Any] = {}
    compiles: dict[str, bool] = {}
    for model in dict.fromkeys(runs["model"].astype(str)) if not runs.empty else []:
        complete, any_ = _blocks(runs, model, len(envs))
        if model in {m.id for m in campaign.models} and not campaign.is_import:
            kind = campaign.workload_kind(model)
            params = campaign.workload_params(model)
            compiles[model] = workloads.uses_compile_cache(kind, params)
        else:  # an imported model: no workload of this project
            kind, params, compiles[model] = "", {}, False
        mine = evidence[evidence["model"] == model] if "machine" in evidence else evidence
        gpus = {int(b): sorted(set(g["machine"])) for b, g in mine.groupby("block")} if len(
            mine) else {}
        split = quality.split_blocks(mine).get(model, []) if len(mine) else []
        stop = stops.get(model, {})
        models[model] = {
            "blocks": complete, "blocks_any": any_,
            "analysed_blocks": int(stop.get("blocks", complete)),
            "primary_metric": (primary.get(model) or [None])[0],
            "primary_metrics": list(primary.get(model) or []),
            "stop_look": stop.get("look"), "stop_decision": stop.get("decision"),
            "gpus_per_block": {str(b): len(u) for b, u in gpus.items()},
            "split_blocks": split,
            "kind": kind, "compiles": compiles[model],
            "workload": {k: params[k] for k in WORKLOAD_PARAMS
                         if isinstance(params.get(k), str | int | float)}}
    comp = compiled(evidence, compiles) if len(evidence) > 1 else pd.DataFrame(
        columns=COMPILED_COLUMNS)
    trees = (evidence[["commit", "dirty"]].drop_duplicates().to_dict("records")
             if "commit" in evidence else [])
    return {"campaign": campaign.name, "environments": envs, "models": models,
            "compiled_runs": comp.to_dict("records"),
            "measuring_trees": [{"commit": t["commit"], "dirty": bool(t["dirty"])
                                 if t["dirty"] is not None else None}
                                for t in trees if t["commit"]]}


# Metrics a compiling run distorts (it pays for torch.compile inside the process)
STEADY_METRICS = ("process_wall_s", "gpu_energy_j")


def compiled_runs(campaign: Campaign) -> pd.DataFrame:
    """The runs of a campaign that compiled (COMPILED_COLUMNS), from its records."""
    from containertax import workloads

    if campaign.is_import:
        return pd.DataFrame(columns=COMPILED_COLUMNS)
    compiles = {m.id: workloads.uses_compile_cache(campaign.workload_kind(m.id),
                                                   campaign.workload_params(m.id))
                for m in campaign.models}
    if not any(compiles.values()):  # none can have compiled: no record need be read
        return pd.DataFrame([], columns=COMPILED_COLUMNS)
    return compiled(record_evidence(campaign.root), compiles)


def write(campaign: Campaign, runs: pd.DataFrame, out: Path) -> None:
    """stats/facts.json (the findings rule)."""
    records.write_json(out, build(campaign, runs))


def read(path: Path) -> dict[str, Any]:
    """stats/facts.json as the findings rule wrote it; {} where there is none (a build
    from before the facts table)."""
    import json

    if not path.exists():
        return {}
    return json.loads(path.read_text())


def compiled_frame(facts: dict[str, Any]) -> pd.DataFrame:
    """The runs that compiled as a table (COMPILED_COLUMNS)."""
    frame = pd.DataFrame(facts.get("compiled_runs") or [], columns=COMPILED_COLUMNS)
    frame["model"] = frame["model"].astype(str)
    return frame
