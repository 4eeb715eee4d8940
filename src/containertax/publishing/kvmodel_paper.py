"""The paper's parts of the KV-cache model (statistics/kvmodel.py computes them): the table
inside tables/memory-chain.tex and the values main.tex's memory section quotes."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from containertax.publishing import tables
from containertax.statistics import texts


def _gib(x: float) -> str:
    return "--" if not math.isfinite(x) else texts.tex(f"{x:+.2f}")


def table(results: pd.DataFrame) -> str:
    """The paper's table (inside tables/memory-chain.tex): plain and adjusted side by side."""
    if results.empty:
        return ""
    body = [[texts.tex(r.model), texts.tex(r.environment), texts.tex(r.covariate),
             f"{_gib(r.plain_est)} [{_gib(r.plain_low)}, {_gib(r.plain_high)}]",
             f"{_gib(r.adj_est)} [{_gib(r.adj_low)}, {_gib(r.adj_high)}]",
             texts.tex(r.verdict)] for r in results.itertuples()]
    return tables.booktabs(
        ["Model", "Env.", "Free memory", "Plain (GiB)", "Adjusted (GiB)", "Verdict"], body,
        r"llL{0.12\linewidth}rrL{0.2\linewidth}", "tab:kv-covariate")


def values(results: pd.DataFrame) -> dict[str, Any]:
    """What main.tex's memory section quotes: the comparisons per verdict."""
    if results.empty:
        return {}
    out: dict[str, Any] = {"has-kv-covariate": 1}
    for key, word in (("kv-explained", "explained by free memory at sizing"),
                      ("kv-remains", "remains with free memory accounted for"),
                      ("kv-none", "no difference shown")):
        hit = results[results.verdict == word]
        out[f"{key}-n"] = len(hit)
        out[key] = tables.join_words(
            f"{texts.tex(r.model)} in {texts.tex(r.environment)} "
            f"({_gib(r.plain_est)}~GiB plain, {_gib(r.adj_est)}~GiB adjusted)"
            for r in hit.itertuples()) or "none"
    return out
