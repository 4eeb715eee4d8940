"""The paper's parts of the timeline's phases (statistics/phases.py computes the rows): the
stacked figure, tables/phases.tex and the values its section "Where the time goes"
(paper/phases.tex) quotes."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from containertax.publishing import tables
from containertax.statistics import texts
from containertax.statistics.phases import WALL, ms_texts, sum_gap


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
            body.append([f"\\multicolumn{{6}}{{l}}{{\\textit{{{texts.tex(r['model'])}: "
                         f"{texts.tex(r['environment'])} against "
                         f"{texts.tex(r['reference'])}}}}}"])
        body.append([
            texts.tex(r["label"]), tables.num(r["mean_ref"], 3), tables.num(r["mean_env"], 3),
            # a wide difference ('+189693867 [+57299684, +322088051]': a day-long phase
            # in ms) stacks its interval under it, in the column's width
            tables.interval_cell(*_ms_texts(r)),
            tables.pval(r["p_bh"]), texts.tex(r["verdict"])])
    return tables.longtable(
        ["Phase", "Ref.\\ (s)", "Env.\\ (s)", "Diff.\\ (ms) [95\\,\\% CI]",
         "$p_\\mathrm{BH}$", "Verdict"], body,
        r"L{0.2\linewidth}rrrrl", "tab:phases", size=r"\small")


def figure(found: list[dict[str, Any]], path: Path) -> bool:
    """Each environment's mean phases stacked into its wall time (left), and each phase's
    difference from the reference in seconds with its 95 % interval (right), for the first
    model's comparisons (A/A included)."""
    import matplotlib.pyplot as plt

    from containertax.publishing.figures import WIDTH, _save

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


def _ms_texts(r: dict[str, Any]) -> tuple[str, str, str]:
    """A row's difference in milliseconds as findings.csv holds it (ms_texts), for TeX:
    a negative end's sign is a minus ('[-197' broke after its hyphen into '[197')."""
    est, low, high = ms_texts(r["diff_s"], r["diff_low"], r["diff_high"])
    return texts.tex(est), texts.tex(low), texts.tex(high)


def _phrase(r: dict[str, Any]) -> str:
    est, low, high = _ms_texts(r)
    return f"{texts.tex(r['label'].lower())} ({est}~ms [{low}, {high}])"


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
        "has-phases": 1, "phases-model": texts.tex(first["model"]),
        "phases-env": texts.tex(first["environment"]),
        "phases-ref": texts.tex(first["reference"]),
        "phases-blocks": first["n_blocks"], "phases-count": len(phases_),
        "phases-differ": tables.join_words(_phrase(r) for r in differ) or "none",
        "phases-differ-n": len(differ),
        "phases-equivalent": (tables.join_words(texts.tex(r["label"].lower()) for r in same)
                              or "none"),
        "phases-equivalent-n": len(same),
        "phases-rest": tables.join_words(_phrase(r) for r in rest) or "none",
        "phases-rest-n": len(rest),
    }
    if wall is not None:
        diff, low, high = _ms_texts(wall)
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
