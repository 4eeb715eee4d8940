"""Where the time goes: each phase of the runs' timelines (workloads/timeline.py) per
environment against its reference, paired by block.

The comparisons themselves are ordinary rows of comparisons.csv in the family `phases`
(A/A pairs: `calibration-phases`), tested and corrected like every other family; this
module adds what a phase needs besides a relative difference: the difference in seconds
per block with its t interval (phases add up, ratios do not), the stacked figure, the
paper's table and the values its section "Where the time goes" (paper/phases.tex) quotes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from containertax.analysis import decisions, tables
from containertax.analysis.comparisons import PHASES_AA_FAMILY, PHASES_FAMILY, paired_estimate
from containertax.workloads.metric_registry import MetricInfo
from containertax.workloads.timeline import PHASES

ORDER = [p.metric for p in PHASES]
WALL = "process_wall_s"


def _seconds(x: float, digits: int = 3) -> str:
    if not math.isfinite(x):
        return "--"
    text = f"{x:+.{digits}f}"
    return text[1:] if float(text) == 0 else text


def triplet_ms(est: float, low: float, high: float) -> str:
    """'est [low, high]' in milliseconds, with the decimals (0 to 3) that give the smaller
    of the estimate and the interval's width two significant digits: a phase of a few
    microseconds is not printed as 0."""
    values = [v * 1000 for v in (est, low, high)]
    width = values[2] - values[1]
    finite = [abs(v) for v in (values[0], width) if math.isfinite(v) and v != 0]
    d = int(min(3, max(0, 1 - math.floor(math.log10(min(finite)))))) if finite else 1
    return f"{_seconds(values[0], d)} [{_seconds(values[1], d)}, {_seconds(values[2], d)}]"


def abs_texts(metric: str, est: float, low: float, high: float) -> tuple[str, str, str]:
    """The printed (estimate, low, high) of a phase's (or the wall time's) difference in
    milliseconds: the texts findings.csv holds and the paper prints, in the table and the
    text alike."""
    est_t, rest = triplet_ms(est, low, high).split(" ", 1)
    low_t, high_t = rest.strip("[]").split(", ")
    return est_t, low_t, high_t


def paired_seconds(runs: pd.DataFrame, metric: str, env: str, ref: str,
                   alpha: float) -> dict[str, float]:
    """Mean per-block difference env - ref in the metric's unit, its t interval and the
    number of complete blocks (comparisons.paired_estimate on the raw scale)."""
    d = runs[(runs.metric == metric) & runs.environment.isin([env, ref])]
    if d.empty or "block" not in d:
        return {"est": math.nan, "low": math.nan, "high": math.nan, "n": 0}
    w = d.pivot_table(index=["model", "block"], columns="environment", values="value")
    if env not in w or ref not in w:
        return {"est": math.nan, "low": math.nan, "high": math.nan, "n": 0}
    diff = (w[env] - w[ref]).dropna().to_numpy(float)
    e = paired_estimate(diff, alpha)
    return {"est": e["est"], "low": e["low"], "high": e["high"], "n": len(diff)}


def rows(runs: pd.DataFrame, results: pd.DataFrame | None, alpha: float,
         reg: dict[str, MetricInfo]) -> list[dict[str, Any]]:
    """One row per model, compared environment and phase (then the wall time): both means,
    the difference in seconds with its interval, and the comparison's verdict (decision
    table, BH within the phases family)."""
    if results is None or results.empty or "family" not in results:
        return []
    found = results[results.family.isin([PHASES_FAMILY, PHASES_AA_FAMILY])]
    out = []
    for (model, env, ref), group in found.groupby(["model", "environment", "reference"],
                                                  sort=False):
        model_runs = runs[runs.model == model]
        aa = bool((group.family == PHASES_AA_FAMILY).any())  # the wall row's family is not
        by_metric = {r.metric: r for r in group.itertuples()}
        wall = results[(results.model == model) & (results.environment == env)
                       & (results.reference == ref) & (results.metric == WALL)]
        for metric in [m for m in ORDER if m in by_metric] + [WALL]:
            r = by_metric.get(metric)
            if r is None and wall.empty:
                continue
            r = r if r is not None else next(wall.itertuples())
            # computed once, by findings.build (abs_* columns); a plain comparisons.csv
            # (no findings table yet) has them computed here the same way
            secs = ({"est": float(r.abs_diff), "low": float(r.abs_low),
                     "high": float(r.abs_high), "n": int(float(r.abs_blocks))}
                    if math.isfinite(float(getattr(r, "abs_blocks", math.nan)))
                    else paired_seconds(model_runs, metric, env, ref, alpha))
            out.append({
                "model": model, "environment": env, "reference": ref, "metric": metric,
                "label": reg[metric].label if metric in reg else metric,
                "aa": aa,
                "mean_ref": float(r.mean_ref), "mean_env": float(r.mean_env),
                "diff_s": secs["est"], "diff_low": secs["low"], "diff_high": secs["high"],
                "n_blocks": secs["n"], "rel": float(r.rel_overhead),
                "rel_low": float(r.rel_ci_low), "rel_high": float(r.rel_ci_high),
                "p_bh": float(getattr(r, "p_bh", math.nan)),
                "verdict": decisions.verdict(r, "lower", alpha).word,
            })
    return out


def table(found: list[dict[str, Any]]) -> str:
    """tables/phases.tex: every phase of every comparison, then the wall time, under a line
    naming the model and the comparison."""
    if not found:
        return ""
    body: list[list[str]] = []
    current = None
    for r in found:
        key = (r["model"], r["environment"], r["reference"])
        if key != current:
            current = key
            body.append([f"\\multicolumn{{6}}{{l}}{{\\textit{{{tables.tex(r['model'])}: "
                         f"{tables.tex(r['environment'])} against "
                         f"{tables.tex(r['reference'])}}}}}"])
        body.append([
            tables.tex(r["label"]), tables.num(r["mean_ref"], 3), tables.num(r["mean_env"], 3),
            triplet_ms(r["diff_s"], r["diff_low"], r["diff_high"]),
            tables.pval(r["p_bh"]), tables.tex(r["verdict"])])
    return tables.longtable(
        ["Phase", "Ref.\\ (s)", "Env.\\ (s)", "Diff.\\ (ms) [95\\,\\% CI]",
         "$p_\\mathrm{BH}$", "Verdict"], body,
        r"L{0.2\linewidth}rrrrl", "tab:phases", size=r"\small")


def figure(found: list[dict[str, Any]], path: Path) -> bool:
    """Each environment's mean phases stacked into its wall time (left), and each phase's
    difference from the reference in seconds with its 95 % interval (right), for the first
    model's comparisons (A/A included)."""
    import matplotlib.pyplot as plt

    from containertax.analysis.figures import WIDTH, _save

    found = [r for r in found if r["model"] == found[0]["model"]] if found else []
    phases = [r for r in found if r["metric"] != WALL]
    if not phases:
        return False
    envs = list(dict.fromkeys([phases[0]["reference"]] + [r["environment"] for r in phases]))
    labels = list(dict.fromkeys(r["label"] for r in phases))
    means: dict[str, dict[str, float]] = {e: {} for e in envs}
    for r in phases:
        means[r["reference"]].setdefault(r["label"], r["mean_ref"])
        means[r["environment"]][r["label"]] = r["mean_env"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(WIDTH, 0.5 * max(len(labels), 2 * len(envs))
                                                     + 1.6), layout="constrained",
                                      gridspec_kw={"width_ratios": [1, 1.2]})
    colours = plt.get_cmap("tab20")(np.linspace(0, 1, max(len(labels), 2)))
    for i, env in enumerate(envs):
        start = 0.0
        for j, label in enumerate(labels):
            width = means[env].get(label, 0.0)
            left.barh(i, width, left=start, color=colours[j],
                      label=label if i == 0 else None)
            start += width
    left.set_yticks(range(len(envs)), envs)
    left.invert_yaxis()
    left.set_xlabel("Mean time (s)", loc="right")
    comps = list(dict.fromkeys(r["environment"] for r in phases))
    step = 0.8 / max(len(comps), 1)
    for k, env in enumerate(comps):
        for j, label in enumerate(labels):
            r = next((x for x in phases if x["environment"] == env and x["label"] == label),
                     None)
            if r is None or not math.isfinite(r["diff_s"]):
                continue
            y = j - 0.4 + step * (k + 0.5)
            lo, hi = r["diff_low"], r["diff_high"]
            xerr = ([[r["diff_s"] - lo], [hi - r["diff_s"]]]
                    if math.isfinite(lo) and math.isfinite(hi) else None)
            right.errorbar([r["diff_s"]], [y], xerr=xerr, fmt="o", ms=3, capsize=2,
                           color=f"C{k}", label=f"{env} - {r['reference']}" if j == 0 else None)
    right.axvline(0, color="0.4", lw=0.8)
    right.set_yticks(range(len(labels)), labels)
    right.invert_yaxis()
    right.set_xlabel("Difference per block (s)", loc="right")
    handles, names = [], []
    for ax in (left, right):
        h, n = ax.get_legend_handles_labels()
        handles += h
        names += n
    fig.legend(handles, names, loc="outside lower center", ncol=3, frameon=False)
    _save(fig, path)
    return True


def _phrase(r: dict[str, Any]) -> str:
    est, rest = triplet_ms(r["diff_s"], r["diff_low"], r["diff_high"]).split(" ", 1)
    return f"{r['label'].lower()} ({est}~ms {rest})"


def values(campaign: Any, found: list[dict[str, Any]], runs: pd.DataFrame,
           prior: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """What paper/phases.tex quotes, for the first compared environment (no A/A) of the
    first model: the wall time's difference, the phases that differ (overhead or
    advantage after BH within the family), those equivalent, the rest; the largest gap
    between a run's phases and its wall time; and a prior study's end-to-end gap where the
    campaign names one whose quantity is a run's time (resources/prior_work.yaml)."""
    main = [r for r in found if not r["aa"]]
    if not main:
        return {}
    first = main[0]
    mine = [r for r in main if r["model"] == first["model"]
            and r["environment"] == first["environment"]]
    phases_ = [r for r in mine if r["metric"] != WALL]
    wall = next((r for r in mine if r["metric"] == WALL), None)
    differ = [r for r in phases_ if r["verdict"] in ("overhead", "advantage")]
    same = [r for r in phases_ if r["verdict"] == "equivalent"]
    rest = [r for r in phases_ if r not in differ and r not in same]
    out: dict[str, Any] = {
        "has-phases": 1, "phases-model": tables.tex(first["model"]),
        "phases-env": tables.tex(first["environment"]),
        "phases-ref": tables.tex(first["reference"]),
        "phases-blocks": first["n_blocks"], "phases-count": len(phases_),
        "phases-differ": tables.join_words(_phrase(r) for r in differ) or "none",
        "phases-differ-n": len(differ),
        "phases-equivalent": tables.join_words(r["label"].lower() for r in same) or "none",
        "phases-equivalent-n": len(same),
        "phases-rest": tables.join_words(_phrase(r) for r in rest) or "none",
        "phases-rest-n": len(rest),
    }
    if wall is not None:
        diff, low, high = abs_texts(WALL, wall["diff_s"], wall["diff_low"], wall["diff_high"])
        out.update({"phases-wall-diff": diff, "phases-wall-low": low, "phases-wall-high": high,
                    "phases-wall-ref": tables.num(wall["mean_ref"], 3),
                    "phases-wall-env": tables.num(wall["mean_env"], 3)})
    gap = sum_gap(runs)
    if math.isfinite(gap):
        out["phases-sum-gap-us"] = f"{gap * 1e6:.1f}"
    # Sani et al. (2025) timed whole runs: their gap is the quantity the wall time decomposes,
    # where this campaign runs their product (a matmul of their size)
    ids = list((campaign.raw.get("paper") or {}).get("prior_work") or [])
    sani = (prior or {}).get("sani2025") or {}
    same_product = any(campaign.workload_kind(m.id) == "matmul"
                       and campaign.workload_params(m.id).get("size") == sani.get("matmul_n")
                       for m in campaign.models)
    if "sani2025" in ids and "container_value" in sani and same_product:
        gap_s = sani["container_value"] - sani["reference_value"]
        out.update({"has-phases-sani": 1, "phases-sani-gap": f"{gap_s:.2f}",
                    "phases-sani-ref": f"{sani['reference_value']:.2f}",
                    "phases-sani-env": f"{sani['container_value']:.2f}"})
    return out


def sum_gap(runs: pd.DataFrame) -> float:
    """The largest |sum of a run's phases - its process_wall_s| over the runs (seconds)."""
    d = runs[runs.metric.isin([*ORDER, WALL])]
    if d.empty or not d.metric.isin(ORDER).any():
        return math.nan
    keys = ["model", "environment", "repetition"]
    w = d.pivot_table(index=keys, columns="metric", values="value", aggfunc="first")
    if WALL not in w:
        return math.nan
    have = [m for m in ORDER if m in w]
    gaps = (w[have].sum(axis=1, min_count=1) - w[WALL]).abs().dropna()
    return float(gaps.max()) if len(gaps) else math.nan
