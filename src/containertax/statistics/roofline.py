"""Numbers checked against physics (issue #40): a decode step reads at least the model's
active weights once (and each sequence's KV cache), so one sequence cannot decode faster
than the device's memory bandwidth over those bytes, and a batch of B sequences cannot
produce more than B times the bound of a step that reads the weights once and B caches.

    per-sequence rate  <= BW / (W + KV)          (from the inter-token latency, 1 / itl_s)
    aggregate rate     <= B * BW / (W + B * KV)  (token_throughput, where the batch is known)

W = active parameters x bytes per parameter, KV = KV bytes per token x the tokens a
sequence holds while it decodes (0 where the config gives none: the bound is then looser,
never wrong). A run above its bound is impossible: a mismeasured latency, a wrong model
size or an import's unit error, reported as an error in the quality section; each model's
median fraction of its bound is reported too (a low fraction is a finding as well).
Configured in analysis.roofline (config/README.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from containertax.statistics.finding import Finding

# Peak memory bandwidth, bytes/s, from the vendors' specifications:
#   GB10 (DGX Spark): 273 GB/s, LPDDR5x (nvidia.com/en-us/products/workstations/dgx-spark,
#     "memory bandwidth 273 GB/s")
#   H100 SXM5: 3.35 TB/s HBM3; H100 PCIe: 2.0 TB/s HBM2e (nvidia.com/en-us/data-center/h100,
#     the datasheet's table)
#   H200 SXM: 4.8 TB/s HBM3e (nvidia.com/en-us/data-center/h200)
#   RTX 4090: 1008 GB/s GDDR6X, 21 Gbps on a 384-bit bus
#     (nvidia.com/en-us/geforce/graphics-cards/40-series/rtx-4090, full specifications)
BANDWIDTH = {"gb10": 273e9, "h100-sxm": 3.35e12, "h100-pcie": 2.0e12, "h200": 4.8e12,
             "rtx-4090": 1.008e12}
DEVICE_WORDS = {"gb10": "GB10 (DGX Spark)", "h100-sxm": "H100 SXM", "h100-pcie": "H100 PCIe",
                "h200": "H200", "rtx-4090": "RTX 4090"}


@dataclass(frozen=True)
class ModelBytes:
    """What one decode step of one model reads: active parameters (billions), bits per
    parameter, KV bytes per token and the tokens a sequence holds, and the batch."""

    active_params_b: float
    bits: float
    kv_bytes_per_token: float = 0.0
    context_tokens: float = 0.0
    batch: int | None = None

    @property
    def weight_bytes(self) -> float:
        return self.active_params_b * 1e9 * self.bits / 8

    @property
    def kv_bytes(self) -> float:
        return self.kv_bytes_per_token * self.context_tokens

    def sequence_bound(self, bandwidth: float) -> float:
        """Tokens/s one sequence can reach at most (a batch of one: the loosest bound)."""
        return bandwidth / (self.weight_bytes + self.kv_bytes)

    def aggregate_bound(self, bandwidth: float) -> float | None:
        """Tokens/s a batch can reach at most; None where the batch is not known."""
        if not self.batch:
            return None
        return self.batch * bandwidth / (self.weight_bytes + self.batch * self.kv_bytes)


def models(spec: dict[str, Any]) -> dict[str, ModelBytes]:
    return {str(m): ModelBytes(**v) for m, v in (spec.get("models") or {}).items()}


def findings(runs: pd.DataFrame, spec: dict[str, Any] | None) -> list[Finding]:
    """The roofline check of an annotated run table (quality.annotate), configured by
    analysis.roofline: errors for runs above the bound, one info finding per model with
    its median fraction of the bound. None configured: no findings."""
    if not spec:
        return []
    device = str(spec["device"])
    bandwidth = BANDWIDTH[device]
    tolerance = float(spec.get("tolerance", 0.05))
    where = f"{DEVICE_WORDS[device]}'s {bandwidth / 1e9:g} GB/s"
    out: list[Finding] = []
    ok = runs[~runs["flag_non_finite"]] if "flag_non_finite" in runs else runs
    for model, size in models(spec).items():
        g = ok[ok["model"] == model]
        itl = g[(g["metric"] == "itl_s") & (g["value"] > 0)]
        seq_bound = size.sequence_bound(bandwidth)
        rate = 1.0 / itl["value"]
        over = itl[rate > seq_bound * (1 + tolerance)]
        if len(over):
            best = float(rate.max())
            out.append(Finding(
                "roofline", "error",
                f"{model}: {len(over)} run(s) decode one sequence faster than memory bandwidth "
                f"allows: up to {best:.1f} tok/s (inter-token latency "
                f"{1e3 / best:.2f} ms) against at most {seq_bound:.1f} tok/s "
                f"({1e3 / seq_bound:.2f} ms) from {size.weight_bytes / 1e9:.1f} GB of weights "
                f"read per token at {where}: impossible; check the latency's unit, the "
                "model's size and what was measured", len(over),
                {"model": model, "bound_tok_s": seq_bound, "tolerance": tolerance,
                 "rows": over[["model", "environment", "repetition", "value"]]
                 .to_dict("records")[:20]}))
        agg_bound = size.aggregate_bound(bandwidth)
        thr = g[g["metric"] == "token_throughput"]
        if agg_bound is not None and len(thr):
            above = thr[thr["value"] > agg_bound * (1 + tolerance)]
            if len(above):
                out.append(Finding(
                    "roofline", "error",
                    f"{model}: {len(above)} run(s) produce more tokens than a batch of "
                    f"{size.batch} can at {where}: up to {float(above['value'].max()):.1f} "
                    f"tok/s against at most {agg_bound:.1f} tok/s: impossible", len(above),
                    {"model": model, "bound_tok_s": agg_bound, "batch": size.batch}))
        if len(itl):
            fraction = float((rate / seq_bound).median())
            out.append(Finding(
                "roofline_fraction", "info",
                f"{model}: one sequence decodes at {100 * fraction:.0f} % of its "
                f"memory-bandwidth bound (median {float(rate.median()):.1f} tok/s against "
                f"{seq_bound:.1f} tok/s at {where})",
                len(itl), {"model": model, "fraction": fraction, "bound_tok_s": seq_bound}))
    return out
