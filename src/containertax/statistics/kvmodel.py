"""Does an environment's effect on the KV cache remain once the free memory at sizing is
accounted for?

An engine sizes its KV cache as a fraction of the memory it finds free (TensorRT-LLM:
free_gpu_memory_fraction x free; memview.py). On a GB10 the CUDA driver's free memory
follows the kernel's MemFree, which counts the page cache as used (unsloth PR #10705: a
60 GiB file took CUDA's free memory from 103.25 to 41.52 GiB), so a container whose runs
start with a fuller page cache sizes a smaller cache for a reason that is not the
container (eugr/spark-vllm-docker PR #286: 9.5 GiB of KV cache instead of 40+ GiB in a
container). Per model, two estimates of each environment's difference in KV cache (GiB)
from the reference, side by side:

  plain     the mean per-block difference with its t interval (the design's comparison)
  adjusted  statsmodels OLS  kv ~ C(environment) + free (an analysis of covariance), the
            environment's coefficient with its t interval: the difference at equal free
            memory at sizing. No block effects: within a block free memory differs mostly
            by environment (the very confound asked about), so with them the slope would
            rest on the noise alone; across blocks free memory drifts by itself

free is what the machine reported when the engine sized: the device's free memory (CUDA)
where the record has it, else MemFree, in GiB (the record names which). Decision table:
  plain interval excludes 0, adjusted includes 0   explained by free memory at sizing
  adjusted interval excludes 0                     remains with free memory accounted for
  both include 0                                   no difference shown
  no interval                                      not estimable (why in `reason`)
(an interval "excludes 0" only beyond RESOLUTION_GIB, 1 MiB, on either side)
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pandas as pd

from containertax.statistics.comparisons import paired_estimate

GIB = 2**30
NAN = math.nan
# Below this an adjusted or plain difference counts as none, whatever its interval: an
# engine sizes its cache in blocks far larger, and the stand-in's int() leaves residuals of
# a byte, whose interval of a few 1e-10 GiB could otherwise "exclude zero"
RESOLUTION_GIB = 2**-10  # 1 MiB
COLUMNS = ["model", "environment", "reference", "covariate", "n_blocks", "plain_est",
           "plain_low", "plain_high", "adj_est", "adj_low", "adj_high", "adj_p", "slope",
           "verdict", "reason"]


def kv_bytes(chain: dict[str, Any]) -> float | None:
    """The KV cache the engine sized: the stand-in's sized cache (its allocation is capped
    so that a test never takes most of a shared machine), else what the engine allocated."""
    if chain.get("engine") == "kvstandin" and chain.get("kv_cache_sized_bytes") is not None:
        return float(chain["kv_cache_sized_bytes"])
    value = chain.get("kv_cache_bytes")
    return None if value is None else float(value)


def free_at_sizing(chain: dict[str, Any]) -> tuple[float | None, str]:
    """Free memory as the machine reported it at sizing: CUDA's, else MemFree (bytes)."""
    seen = chain.get("seen") or {}
    cuda = (seen.get("cuda") or {}).get("free_bytes")
    if cuda is not None:
        return float(cuda), "CUDA free memory"
    free = seen.get("mem_free_bytes")
    return (None, "MemFree") if free is None else (float(free), "MemFree")


def frame(chains: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per run: model, environment, block, kv_gib, free_gib, covariate. `chains`:
    dicts with model, environment, block and the record's memory_chain under 'chain'."""
    rows = []
    for c in chains:
        chain = c.get("chain") or {}
        kv = kv_bytes(chain)
        free, name = free_at_sizing(chain)
        if kv is None:
            continue
        rows.append({"model": c["model"], "environment": c["environment"],
                     "block": c["block"], "kv_gib": kv / GIB,
                     "free_gib": NAN if free is None else free / GIB, "covariate": name})
    return pd.DataFrame(rows, columns=["model", "environment", "block", "kv_gib", "free_gib",
                                       "covariate"])


def from_records(records: list[Any]) -> pd.DataFrame:
    """frame() of raw records (RawRecord) that carry a memory chain."""
    return frame([{"model": r.cell.model, "environment": r.cell.environment,
                   "block": r.cell.block if r.cell.block is not None else r.cell.repetition,
                   "chain": r.memory_chain} for r in records if r.memory_chain])


def _verdict(plain: tuple[float, float], adjusted: tuple[float, float]) -> str:
    def excludes_zero(ci: tuple[float, float]) -> bool:
        return ci[0] > RESOLUTION_GIB or ci[1] < -RESOLUTION_GIB

    if excludes_zero(adjusted):
        return "remains with free memory accounted for"
    if excludes_zero(plain):
        return "explained by free memory at sizing"
    return "no difference shown"


def adjusted(d: pd.DataFrame, env: str, ref: str, alpha: float) -> dict[str, float | str]:
    """The environment's coefficient in kv ~ C(environment) + free (OLS)."""
    import statsmodels.formula.api as smf

    d = d.dropna(subset=["kv_gib", "free_gib"])
    if d["free_gib"].nunique() < 2:
        return {"est": NAN, "low": NAN, "high": NAN, "p": NAN, "slope": NAN,
                "reason": "free memory at sizing did not vary"}
    data = d.assign(env=(d.environment == env).astype(float))
    terms = "kv_gib ~ env + free_gib"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a perfect fit: statsmodels warns, the result stands
        fit = smf.ols(terms, data=data).fit()
    if fit.df_resid < 1:
        return {"est": float(fit.params.get("env", NAN)), "low": NAN, "high": NAN, "p": NAN,
                "slope": float(fit.params.get("free_gib", NAN)),
                "reason": "no residual degrees of freedom (too few blocks)"}
    ci = fit.conf_int(alpha).loc["env"]
    return {"est": float(fit.params["env"]), "low": float(ci.iloc[0]),
            "high": float(ci.iloc[1]), "p": float(fit.pvalues["env"]),
            "slope": float(fit.params["free_gib"]), "reason": ""}


def analyse(kv: pd.DataFrame, reference: str, alpha: float = 0.05) -> pd.DataFrame:
    """Per model and environment against the reference: the plain and the adjusted
    difference in KV cache (GiB) and the decision table's verdict."""
    rows = []
    for model, g in kv.groupby("model", sort=False):
        for env in [e for e in dict.fromkeys(g.environment) if e != reference]:
            pair = g[g.environment.isin([env, reference])]
            w = pair.pivot_table(index="block", columns="environment", values="kv_gib")
            blocks = w.dropna().index if env in w and reference in w else []
            pair = pair[pair.block.isin(blocks)]
            diff = (w.loc[blocks, env] - w.loc[blocks, reference]).to_numpy(float) \
                if len(blocks) else np.array([])
            plain = paired_estimate(diff, alpha)
            adj = adjusted(pair, env, reference, alpha)
            why = adj["reason"] or ("" if math.isfinite(plain["low"]) else
                                    "fewer than two complete blocks, or no variation")
            finite = all(math.isfinite(float(x)) for x in
                         (plain["low"], plain["high"], adj["low"], adj["high"]))
            rows.append({
                "model": model, "environment": env, "reference": reference,
                "covariate": pair["covariate"].iloc[0] if len(pair) else "",
                "n_blocks": len(blocks), "plain_est": plain["est"], "plain_low": plain["low"],
                "plain_high": plain["high"], "adj_est": adj["est"], "adj_low": adj["low"],
                "adj_high": adj["high"], "adj_p": adj["p"], "slope": adj["slope"],
                "verdict": (_verdict((plain["low"], plain["high"]),
                                     (float(adj["low"]), float(adj["high"])))
                            if finite else "not estimable"),
                "reason": why})
    return pd.DataFrame(rows, columns=COLUMNS)
