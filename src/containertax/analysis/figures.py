"""Figures for a two-column paper: vector PDF, labels and units from the metric registry.

Each function draws one figure from tidy data and returns its caption, or None when the
data it needs is absent (an imported study has no telemetry, say).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from containertax.analysis.metrics import MetricInfo  # noqa: E402
from containertax.analysis.tables import tex  # noqa: E402

WIDTH = 7.0  # inches: full text width of a two-column paper
sns.set_theme(context="paper", style="whitegrid", font_scale=0.9)
plt.rcParams.update({"pdf.fonttype": 42, "savefig.bbox": "tight"})


def _label(info: MetricInfo | None, metric: str) -> str:
    return f"{info.label} ({info.unit})" if info else metric


def _model_grid(models: list[str], row_height: float) -> tuple[plt.Figure, np.ndarray]:
    """One panel per model, at most four a row; panels left over are hidden."""
    cols = min(len(models), 4)
    rows = int(np.ceil(len(models) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(WIDTH, row_height * rows), squeeze=False)
    for ax in list(axes.flat)[len(models):]:
        ax.set_visible(False)
    return fig, axes


def _save(fig: plt.Figure, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def distributions(runs: pd.DataFrame, metric: str, info: MetricInfo | None, envs: list[str],
                  path: Path) -> str | None:
    data = runs[runs.metric == metric]
    if data.empty:
        return None
    models = list(dict.fromkeys(data.model))
    fig, axes = _model_grid(models, 2.0)
    for ax, model in zip(axes.flat, models, strict=False):
        d = data[data.model == model]
        sns.boxplot(d, x="environment", y="value", order=envs, ax=ax, color="0.9",
                    showfliers=False, linewidth=0.8)
        sns.stripplot(d, x="environment", y="value", order=envs, ax=ax, hue="environment",
                      hue_order=envs, size=3, jitter=0.2, legend=False)
        ax.set_title(model)
        ax.set_xlabel("")
        ax.set_ylabel(_label(info, metric) if ax in axes[:, 0] else "")
        ax.tick_params(axis="x", rotation=20)
    _save(fig, path)
    return (f"{tex(info.label if info else metric)} per run, by model and environment: boxes show "
            "quartiles, points are individual runs.")


def forest(results: pd.DataFrame, metric: str, info: MetricInfo | None, margin: float,
           path: Path) -> str | None:
    d = results[results.metric == metric].copy()
    if d.empty:
        return None
    d["row"] = d["model"] + "  " + d["environment"] + " vs " + d["reference"]
    d = d.iloc[::-1]
    fig, ax = plt.subplots(figsize=(WIDTH / 2, 0.3 * len(d) + 0.8))
    y = np.arange(len(d))
    est = 100 * d["rel_overhead"].to_numpy()
    lo = 100 * d["rel_ci_low"].to_numpy()
    hi = 100 * d["rel_ci_high"].to_numpy()
    ax.axvspan(-100 * margin, 100 * margin, color="0.92", zorder=0)
    ax.axvline(0, color="0.3", lw=0.8)
    ax.errorbar(est, y, xerr=[np.nan_to_num(est - lo), np.nan_to_num(hi - est)], fmt="o",
                ms=3.5, capsize=2, color="C0")
    ax.set_yticks(y, d["row"])
    ax.set_xlabel(f"Relative difference of {info.label.lower() if info else metric} (%)")
    _save(fig, path)
    return (f"Relative difference of {tex(info.label.lower() if info else metric)} of each "
            "environment against the reference (ratio of means minus one) with 95\\,\\% BCa "
            f"bootstrap intervals; the grey band is the equivalence margin of "
            f"$\\pm${100 * margin:g}~\\%.")


def latency_cdf(requests: pd.DataFrame, envs: list[str], path: Path) -> str | None:
    if requests is None or requests.empty:
        return None
    models = list(dict.fromkeys(requests.model))
    fig, axes = _model_grid(models, 2.0)
    for ax, model in zip(axes.flat, models, strict=False):
        d = requests[requests.model == model]
        sns.ecdfplot(d, x="latency_s", hue="environment", hue_order=envs, ax=ax,
                     legend=ax is axes.flat[0])
        ax.set_title(model)
        ax.set_xlabel("Request latency (s)")
    _save(fig, path)
    return "Empirical distribution of per-request latency, pooled over runs, by environment."


def telemetry_trace(trace: pd.DataFrame | None, title: str, path: Path) -> str | None:
    if trace is None or trace.empty:
        return None
    cols = [c for c in ("temperature_c", "cpu_util_pct", "mem_used_mib", "power_w",
                        "sm_clock_mhz") if c in trace and trace[c].notna().any()]
    if not cols:
        return None
    fig, axes = plt.subplots(len(cols), 1, figsize=(WIDTH / 2, 1.2 * len(cols) + 0.4),
                             sharex=True, squeeze=False)
    for ax, col in zip(axes[:, 0], cols, strict=True):
        ax.plot(trace["t_s"], trace[col], lw=0.8)
        ax.set_ylabel(col.replace("_", " "))
    axes[-1, 0].set_xlabel("Time since launch (s)")
    _save(fig, path)
    return f"Host-side telemetry during one run ({tex(title)})."


def drift(runs: pd.DataFrame, metric: str, info: MetricInfo | None, envs: list[str],
          path: Path) -> str | None:
    d = runs[runs.metric == metric]
    order = "position" if "position" in d and d["position"].notna().all() else "repetition"
    if d.empty:
        return None
    models = list(dict.fromkeys(d.model))
    fig, axes = _model_grid(models, 1.8)
    for ax, model in zip(axes.flat, models, strict=False):
        sns.scatterplot(d[d.model == model], x=order, y="value", hue="environment",
                        hue_order=envs, ax=ax, s=12, legend=ax is axes.flat[0])
        ax.set_title(model)
        ax.set_ylabel(_label(info, metric) if ax in axes[:, 0] else "")
        ax.set_xlabel("Run order" if order == "position" else "Repetition")
    _save(fig, path)
    return (f"{tex(info.label if info else metric)} against run order: a trend would reveal drift "
            "(warming, background load) that the counterbalanced order spreads over all "
            "environments.")


def gate_waits(runs: pd.DataFrame, envs: list[str], path: Path) -> str | None:
    if "gate_waited_s" not in runs or runs["gate_waited_s"].isna().all():
        return None
    d = runs.drop_duplicates(["model", "environment", "repetition"])
    fig, ax = plt.subplots(figsize=(WIDTH / 2, 2.0))
    sns.stripplot(d, x="environment", y="gate_waited_s", order=envs, hue="environment",
                  hue_order=envs, ax=ax, size=3, legend=False)
    ax.set_ylabel("Gate waiting time (s)")
    ax.set_xlabel("")
    _save(fig, path)
    return ("Time each run waited at the thermal gate (temperature threshold and minimum "
            "interval since the previous run).")
