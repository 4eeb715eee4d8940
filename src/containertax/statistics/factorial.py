"""Effects of a factorial campaign (config `factorial:`, campaign/factorial.py).

Per model and metric, on the log scale (an effect is a ratio, as every comparison here):
ordinary least squares of log(value) on the factors coded -1/+1, the estimable two-factor
interactions (one term per alias chain that holds no main effect) and the blocks (each
block runs every design row once, so block effects leave the factor effects unchanged and
take slow drift out of the error). An effect is high minus low, 2 x the coefficient; its
ratio exp(effect) - 1 is the metric's relative change when the factor goes from its low to
its high level, averaged over the other factors' levels (Box, Hunter & Hunter 2005, ch. 5).

The family is a model's effects on one metric: Holm's adjusted p values decide which
effects differ from zero, and Bonferroni-adjusted intervals (simultaneous at 1 - alpha)
are printed. Equivalence to no effect: the Bonferroni-adjusted 1 - 2 alpha interval (TOST
at alpha, m times) lies inside +-analysis.resolution_pct. An unreplicated design (one
block) has no error degrees of freedom once saturated: its effects are judged against
Lenth's (1989) pseudo standard error, PSE = 1.5 x the median of the |effects| below
2.5 x s0, s0 = 1.5 x median |effect|, with m/3 degrees of freedom.

A design whose runs do not estimate every term (rows missing from a single block) gives
every term the verdict 'not estimable', never a least-squares guess. Only the design rows
enter the model; the declared environments (the reference, its A/A
replica) are analysed by the ordinary comparisons.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from containertax.campaign import factorial
from containertax.campaign.config import Campaign

COLUMNS = ["model", "metric", "term", "kind", "factors", "aliases", "method", "n_runs",
           "n_blocks", "df", "effect_log", "se_log", "t", "p", "p_holm", "ci_low_log",
           "ci_high_log", "eq_low_log", "eq_high_log", "rel", "rel_low", "rel_high",
           "verdict", "resolution_pct", "m"]


def lenth_pse(effects: np.ndarray) -> float:
    """Lenth's pseudo standard error of a set of contrasts (Lenth 1989)."""
    a = np.abs(np.asarray(effects, dtype=float))
    if a.size == 0:
        return float("nan")
    s0 = 1.5 * float(np.median(a))
    small = a[a < 2.5 * s0]
    return 1.5 * float(np.median(small)) if small.size else float("nan")


def _holm(p: np.ndarray) -> np.ndarray:
    from statsmodels.stats.multitest import multipletests

    ok = np.isfinite(p)
    out = np.full_like(p, np.nan, dtype=float)
    if ok.any():
        out[ok] = multipletests(p[ok], method="holm")[1]
    return out


def fit(frame: pd.DataFrame, design: factorial.Design, alpha: float,
        resolution_pct: float) -> pd.DataFrame:
    """The effects of one model's one metric. `frame`: environment, block, value (design
    rows only). Non-positive or missing values are left out (a log is undefined)."""
    from statsmodels.regression.linear_model import OLS  # not statsmodels.api: all of it
    from statsmodels.tools.tools import add_constant

    letters = {f.letter: f for f in design.factors}
    data = frame[np.isfinite(frame["value"]) & (frame["value"] > 0)].copy()
    rows = [design.row_of(str(e)) for e in data["environment"]]
    data = data[[r is not None for r in rows]]
    rows = [r for r in rows if r is not None]
    terms = design.estimable()
    chains = {c[0]: c for c in design.aliases(2)}
    out: list[dict[str, Any]] = []
    blocks = sorted(data["block"].unique()) if len(data) else []
    if len(data) == 0:
        return pd.DataFrame(columns=COLUMNS)
    x = pd.DataFrame({t: [math.prod(r[ch] for ch in t) for r in rows] for t in terms},
                     index=data.index, dtype=float)
    if len(blocks) > 1:
        dummies = pd.get_dummies(data["block"].astype(str), prefix="block", drop_first=True,
                                 dtype=float)
        x = pd.concat([x, dummies], axis=1)
    x = add_constant(x, has_constant="add")
    y = np.log(data["value"].astype(float))
    rank = np.linalg.matrix_rank(x.to_numpy())
    df_resid = len(y) - rank
    m = len(terms)
    if rank < x.shape[1]:  # rows missing (a block cut short): some terms not estimable
        return pd.DataFrame([{
            "term": t, "kind": "main" if len(t) == 1 else "interaction",
            "factors": ":".join(letters[ch].id for ch in t),
            "aliases": " = ".join(":".join(letters[ch].id for ch in w)
                                  for w in chains.get(t, [t])[1:]),
            "method": "not estimable", "n_runs": len(y), "n_blocks": len(blocks),
            "verdict": "not estimable", "resolution_pct": resolution_pct, "m": m}
            for t in terms], columns=[c for c in COLUMNS if c not in ("model", "metric")])
    if df_resid > 0 and len(blocks) > 1 and rank == x.shape[1]:
        res = OLS(y, x).fit()
        eff = 2 * res.params[terms].to_numpy()
        se = 2 * res.bse[terms].to_numpy()
        df = float(res.df_resid)
        method = "ols"
    else:  # unreplicated (or rank-deficient): contrasts judged by Lenth's PSE
        coef, *_ = np.linalg.lstsq(x.to_numpy(), y.to_numpy(), rcond=None)
        eff = 2 * coef[1:1 + m]
        pse = lenth_pse(eff)
        se = np.full(m, pse)
        df = m / 3
        method = "lenth"
    with np.errstate(divide="ignore", invalid="ignore"):
        t = eff / se
    p = 2 * sps.t.sf(np.abs(t), df) if df > 0 else np.full(m, np.nan)
    p_holm = _holm(np.asarray(p, dtype=float))
    q_ci = sps.t.ppf(1 - alpha / (2 * m), df) if df > 0 else float("nan")
    q_eq = sps.t.ppf(1 - alpha / m, df) if df > 0 else float("nan")
    band = math.log1p(resolution_pct / 100)
    for i, term in enumerate(terms):
        lo, hi = eff[i] - q_ci * se[i], eff[i] + q_ci * se[i]
        elo, ehi = eff[i] - q_eq * se[i], eff[i] + q_eq * se[i]
        if np.isfinite(p_holm[i]) and p_holm[i] < alpha:
            verdict = "difference"
        elif np.isfinite(elo) and -band < elo and ehi < band:
            verdict = "equivalent"
        else:
            verdict = "inconclusive"
        out.append({
            "term": term, "kind": "main" if len(term) == 1 else "interaction",
            "factors": ":".join(letters[ch].id for ch in term),
            "aliases": " = ".join(":".join(letters[ch].id for ch in w)
                                  for w in chains.get(term, [term])[1:]),
            "method": method, "n_runs": len(y), "n_blocks": len(blocks), "df": df,
            "effect_log": eff[i], "se_log": se[i], "t": t[i], "p": p[i],
            "p_holm": p_holm[i], "ci_low_log": lo, "ci_high_log": hi,
            "eq_low_log": elo, "eq_high_log": ehi, "rel": math.expm1(eff[i]),
            "rel_low": math.expm1(lo), "rel_high": math.expm1(hi), "verdict": verdict,
            "resolution_pct": resolution_pct, "m": m})
    return pd.DataFrame(out)


def effects(campaign: Campaign, kept: pd.DataFrame, metrics: dict[str, list[str]]
            ) -> pd.DataFrame:
    """Every model's effects on its given metrics (model -> metrics)."""
    design = factorial.design_of(campaign.raw, campaign.source)
    if design is None:
        return pd.DataFrame(columns=COLUMNS)
    alpha = campaign.analysis["alpha"]
    res = campaign.analysis["resolution_pct"]
    parts = []
    for model, names in metrics.items():
        for metric in names:
            sub = kept[(kept["model"].astype(str) == model) & (kept["metric"] == metric)]
            one = fit(sub[["environment", "block", "value"]], design, alpha, res)
            if len(one):
                one.insert(0, "metric", metric)
                one.insert(0, "model", model)
                parts.append(one)
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)
    return frame[COLUMNS]


def half_normal(frame: pd.DataFrame, out: Path, title: str) -> None:
    """Daniel's half-normal plot of one model's effects on one metric: |effect| against
    half-normal quantiles; effects off the line through the small ones are active."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = frame.assign(abs_eff=frame["effect_log"].abs()).sort_values("abs_eff")
    m = len(d)
    q = sps.norm.ppf(0.5 + 0.5 * (np.arange(1, m + 1) - 0.5) / m)
    fig, ax = plt.subplots(figsize=(4.2, 3.2))
    colours = ["tab:red" if v == "difference" else "tab:blue" if v == "equivalent"
               else "0.4" for v in d["verdict"]]
    ax.scatter(q, 100 * d["abs_eff"], c=colours, s=18, zorder=3)
    for qi, (_, r) in zip(q, d.iterrows(), strict=True):
        if r["verdict"] == "difference" or qi == q[-1]:
            ax.annotate(r["factors"], (qi, 100 * r["abs_eff"]), fontsize=9,
                        xytext=(3, 2), textcoords="offset points")
    pse = lenth_pse(d["effect_log"].to_numpy())
    if np.isfinite(pse):
        ax.plot([0, q[-1]], [0, 100 * pse * q[-1]], color="0.6", lw=0.8, ls="--")
    ax.set_xlabel("half-normal quantile")
    ax.set_ylabel("|effect| (log scale, x100)")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
