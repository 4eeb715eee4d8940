"""Figures for a two-column paper: vector PDF, labels and units from the metric registry.

Each function draws one figure from tidy data and says whether it did: the data it needs
may be absent (an imported study has no telemetry) or say nothing (every value equal). The
captions are prose, in paper/main.tex.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from containertax.publishing import tables  # noqa: E402
from containertax.workloads.metric_registry import TELEMETRY, MetricInfo, axis_label  # noqa: E402

# Inches: the text width of paper/main.tex (A4, 2.5 cm margins). Figures are included
# unscaled, so the point sizes below are the sizes on the page (8 pt is the floor a reviewer
# accepts; publishing/review.py checks it in the PDF).
WIDTH = 6.2
# Height of one row of panels: two figures of two rows each, with their captions, fit one
# page of floats (A4 text height 9.75 in), so no figure is left alone on a float page.
ROW_HEIGHT = 2.0
sns.set_theme(context="paper", style="whitegrid")
plt.rcParams.update({"pdf.fonttype": 42, "savefig.bbox": None,  # constrained layouts fit
                     "savefig.pad_inches": 0.02,
                     "font.size": 9, "axes.labelsize": 9, "axes.titlesize": 9,
                     "xtick.labelsize": 8.5, "ytick.labelsize": 8.5, "legend.fontsize": 8.5,
                     "legend.title_fontsize": 8.5})


def _label(info: MetricInfo | None, metric: str) -> str:
    """'Label (unit)', wrapped: a y label longer than its panel is cut at the figure edge."""
    return textwrap.fill(axis_label(info, metric), 22)


def _legend_below(fig: plt.Figure, ax: plt.Axes, title: str = "Environment") -> None:
    """One legend for the figure, under the panels, never over data."""
    legend = ax.get_legend()
    if legend is not None:  # seaborn's own legend (its handles are not labelled artists)
        handles, labels = legend.legend_handles, [t.get_text() for t in legend.get_texts()]
        legend.remove()
    else:
        handles, labels = ax.get_legend_handles_labels()
    if handles:
        longest = max(len(t) for t in labels)  # columns as wide as the figure allows
        ncol = max(1, min(len(labels), int(fig.get_figwidth() * 12 / (longest + 4))))
        rows = -(-len(labels) // ncol)
        fig.set_figheight(fig.get_figheight() + 0.17 * rows + 0.2)  # room for the legend
        fig.legend(handles, labels, title=title, loc="outside lower center", ncol=ncol,
                   frameon=False)


def _model_grid(models: list[str], row_height: float) -> tuple[plt.Figure, np.ndarray]:
    """One panel per model, at most four a row; panels left over are hidden."""
    cols = {4: 2}.get(len(models), min(len(models), 3))  # four panels: 2 x 2, readable
    rows = int(np.ceil(len(models) / cols))
    width = WIDTH if cols > 1 else WIDTH * 0.55  # one panel need not span the page
    fig, axes = plt.subplots(rows, cols, figsize=(width, row_height * rows), squeeze=False,
                             layout="constrained")
    for ax in list(axes.flat)[len(models):]:
        ax.set_visible(False)
    return fig, axes


def _few_ticks(axes: np.ndarray) -> None:
    """Few ticks on numeric axes: labels of a narrow panel must not run together (three
    panels a row leave room for three long labels such as 0.0405)."""
    for ax in axes.flat:
        ax.xaxis.set_major_locator(MaxNLocator(4 if axes.shape[1] < 3 else 3))
        ax.yaxis.set_major_locator(MaxNLocator(5))


def _save(fig: plt.Figure, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


Panel = tuple[str, str, MetricInfo | None]  # model, metric, its registry entry


def distributions(runs: pd.DataFrame, panels: list[Panel], envs: list[str],
                  path: Path) -> bool:
    """One panel per model, each with its own metric; a panel whose values are all equal
    says nothing and is left out."""
    panels = [(m, metric, info) for m, metric, info in panels
              if runs[(runs.model == m) & (runs.metric == metric)]["value"].nunique() > 1]
    if not panels:
        return False
    fig, axes = _model_grid([m for m, _, _ in panels], ROW_HEIGHT)
    for ax, (model, metric, info) in zip(axes.flat, panels, strict=False):
        d = runs[(runs.model == model) & (runs.metric == metric)]
        order = [e for e in envs if e in set(d.environment)]
        sns.boxplot(d, x="environment", y="value", order=order, ax=ax, color="0.9",
                    showfliers=False, linewidth=0.8)
        sns.stripplot(d, x="environment", y="value", order=order, ax=ax, hue="environment",
                      hue_order=envs, size=3, jitter=0.2, legend=False)
        ax.set_title(model)
        ax.set_xlabel("")
        ax.set_ylabel(_label(info, metric))
        ax.yaxis.set_major_locator(MaxNLocator(5))
    _save(fig, path)
    return True


def forest(d: pd.DataFrame, labels: list[str], margin: float, path: Path,
           values: list[str] | None = None, xlabel: str = "Relative difference (%)") -> bool:
    """Relative differences with their intervals, one row per comparison (labels[i] names
    row i), the equivalence margin as a band: +-log(1 + m) on the log scale is the ratio
    band [1/(1 + m) - 1, m] (-4.76 % to +5 % at m = 0.05). values[i], where given, is row
    i's estimate and interval as the tables print them, at the right: an interval of a few
    tenths of a per cent on an axis of tens is a dot, and its numbers say what it is."""
    if d.empty:
        return False
    lines = max((label.count("\n") + 1 for label in labels), default=1)
    fig, ax = plt.subplots(figsize=(WIDTH, (0.34 + 0.16 * (lines - 1)) * len(d) + 0.9),
                           layout="constrained")
    y = np.arange(len(d))[::-1]
    est = 100 * d["rel_overhead"].to_numpy(float)
    lo = 100 * d["rel_ci_low"].to_numpy(float)
    hi = 100 * d["rel_ci_high"].to_numpy(float)
    band = (100 * (1 / (1 + margin) - 1), 100 * margin)
    ax.axvspan(*band, color="0.92", zorder=0)
    ax.axvline(0, color="0.3", lw=0.8)
    ax.errorbar(est, y, xerr=[np.nan_to_num(est - lo), np.nan_to_num(hi - est)], fmt="o",
                ms=3.5, capsize=2, color="C0")
    ax.set_yticks(y, labels)
    ax.set_ylim(-0.7, len(d) - 0.3)
    if values is not None:
        right = ax.twinx()
        right.set_ylim(ax.get_ylim())
        right.set_yticks(y, values)
        right.tick_params(axis="y", length=0)
        right.grid(False)
    # limits: zero, the margin band and every interval, with room on both sides
    ends = np.concatenate([lo, hi, est, [*band, 0.0]])
    ends = ends[np.isfinite(ends)]
    span = max(ends.max() - ends.min(), 1.0)
    ax.set_xlim(ends.min() - 0.12 * span, ends.max() + 0.12 * span)
    ax.set_xlabel(xlabel, loc="right")  # never past the edge
    _save(fig, path)
    return True


def latency_cdf(requests: pd.DataFrame, envs: list[str], path: Path) -> bool:
    if requests is None or requests.empty:
        return False
    models = list(dict.fromkeys(requests.model))
    fig, axes = _model_grid(models, ROW_HEIGHT)
    for ax, model in zip(axes.flat, models, strict=False):
        d = requests[requests.model == model]
        sns.ecdfplot(d, x="latency_s", hue="environment", hue_order=envs, ax=ax,
                     legend=ax is axes.flat[0])
        ax.set_title(model)
        ax.set_xlabel("Request latency (s)")
        ax.set_ylabel("Proportion" if ax in axes[:, 0] else "")
    _few_ticks(axes)
    _legend_below(fig, axes.flat[0])
    _save(fig, path)
    return True


# A trace shorter than this (samples; 10 s at the 10 Hz of telemetry) shows launch and exit,
# not the run: no telemetry figure is drawn from it (the demo's 0.75 s runs have 8 samples).
TELEMETRY_MIN_SAMPLES = 100


def telemetry_trace(trace: pd.DataFrame | None, path: Path) -> bool:
    """One panel per series, two columns, each named in a title over it (a rotated label
    longer than a short panel would run into its neighbour's); none for a trace of fewer
    than TELEMETRY_MIN_SAMPLES samples."""
    if trace is None or len(trace) < TELEMETRY_MIN_SAMPLES:
        return False
    cols = [c for c in TELEMETRY if c in trace and trace[c].notna().any()]
    if not cols:
        return False
    ncols = 2 if len(cols) > 2 else 1
    nrows = -(-len(cols) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(WIDTH if ncols > 1 else WIDTH * 0.55,
                                                    1.15 * nrows + 0.45),
                             sharex=True, squeeze=False, layout="constrained")
    for ax, col in zip(axes.flat, cols, strict=False):
        ax.plot(trace["t_s"], trace[col], lw=0.8)
        info = TELEMETRY[col]
        ax.set_title(f"{info.label} ({info.unit})", loc="left")
        ax.yaxis.set_major_locator(MaxNLocator(3))
    for ax in list(axes.flat)[len(cols):]:
        ax.set_visible(False)
    for c in range(ncols):  # the time axis under the lowest panel of each column
        lowest = max(r for r in range(nrows) if r * ncols + c < len(cols))
        axes[lowest, c].xaxis.set_tick_params(labelbottom=True)
        axes[lowest, c].set_xlabel("Time since launch (s)")
    _save(fig, path)
    return True


def drift(runs: pd.DataFrame, panels: list[Panel], envs: list[str],
          path: Path) -> bool:
    panels = [p for p in panels if not runs[(runs.model == p[0]) & (runs.metric == p[1])].empty]
    if not panels:
        return False
    d = runs[runs.metric.isin({m for _, m, _ in panels})]
    order = "position" if "position" in d and d["position"].notna().all() else "repetition"
    fig, axes = _model_grid([m for m, _, _ in panels], ROW_HEIGHT)
    for ax, (model, metric, info) in zip(axes.flat, panels, strict=False):
        sns.scatterplot(d[(d.model == model) & (d.metric == metric)], x=order, y="value",
                        hue="environment", hue_order=envs, ax=ax, s=14,
                        legend=ax is axes.flat[0])
        ax.set_title(model)
        ax.set_ylabel(_label(info, metric))
        ax.set_xlabel("Run order" if order == "position" else "Repetition")
    _few_ticks(axes)
    _legend_below(fig, axes.flat[0])
    _save(fig, path)
    return True


def gate_waits(runs: pd.DataFrame, envs: list[str], path: Path) -> bool:
    if "gate_waited_s" not in runs or runs["gate_waited_s"].isna().all():
        return False
    d = runs.drop_duplicates(["model", "environment", "repetition"])
    if tables.distinct_as_printed(d["gate_waited_s"]) <= 1:
        return False  # one value as printed for every run: the text says it in a sentence
    fig, ax = plt.subplots(figsize=(WIDTH / 2, 2.0), layout="constrained")
    sns.stripplot(d, x="environment", y="gate_waited_s", order=envs, hue="environment",
                  hue_order=envs, ax=ax, size=3, legend=False)
    ax.set_ylabel("Gate waiting time (s)")
    ax.set_xlabel("")
    _save(fig, path)
    return True


def interval_legend(rows: list[dict]) -> str:
    """The legend's words for the intervals drawn (each row's 'interval', a 95 % one where
    it names none): under a stopping rule the look's adjusted interval, never '95 %'
    (h200-stopping-hsd's Figure 1 drew the adjusted intervals under a '95 % interval'
    legend)."""
    kinds = list(dict.fromkeys(r.get("interval") or "95 % interval" for r in rows))
    return f"estimate, {kinds[0]}" if len(kinds) == 1 else "estimate, interval (see caption)"


def paired_differences(rows: list[dict], xlabel: str, path: Path) -> bool:
    """Per-block paired differences, one row per comparison (rows[i]: label, diffs, compiled,
    est, lo, hi): every block's difference as a dot (a block holding a run that compiled as
    a cross), the estimate with its 95 % interval over them, on an axis scaled to the data
    (zero drawn where it falls inside). The paired design's evidence, not two clouds of
    unpaired values."""
    rows = [r for r in rows if len(r["diffs"])]
    if not rows:
        return False
    legend = interval_legend(rows)
    fig, ax = plt.subplots(figsize=(WIDTH, 0.42 * len(rows) + 0.95), layout="constrained")
    ends: list[float] = []
    for i, r in enumerate(rows):
        y = len(rows) - 1 - i
        d = np.asarray(r["diffs"], float)
        comp = np.asarray(r["compiled"], bool)
        jitter = np.linspace(-0.12, 0.12, len(d)) if len(d) > 1 else np.zeros(1)
        ax.scatter(d[~comp], y + 0.18 + jitter[~comp], s=12, color="C0", alpha=0.8,
                   label="block" if i == 0 else None, zorder=3)
        if comp.any():
            ax.scatter(d[comp], y + 0.18 + jitter[comp], s=22, marker="x", color="C3",
                       label="block with a compiling run", zorder=3)
        est, lo, hi = (float(r[k]) for k in ("est", "lo", "hi"))
        if np.isfinite(est):
            xerr = [[est - lo], [hi - est]] if np.isfinite(lo) and np.isfinite(hi) else None
            ax.errorbar([est], [y - 0.15], xerr=xerr, fmt="D", ms=4, capsize=3, color="0.15",
                        label=legend if i == 0 else None, zorder=4)
        ends += [x for x in (*d, est, lo, hi) if np.isfinite(x)]
    lo_, hi_ = min(ends), max(ends)
    span = max(hi_ - lo_, 1e-9 + 0.02 * max(abs(lo_), abs(hi_), 1e-9))
    if lo_ - span <= 0 <= hi_ + span:  # zero near the data: show it, still data-scaled
        lo_, hi_ = min(lo_, 0.0), max(hi_, 0.0)
        span = hi_ - lo_
    ax.set_xlim(lo_ - 0.1 * span, hi_ + 0.1 * span)
    if lo_ <= 0 <= hi_:
        ax.axvline(0, color="0.4", lw=0.8)
    ax.set_yticks(range(len(rows))[::-1], [r["label"] for r in rows])
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel(xlabel, loc="right")
    handles, labels = ax.get_legend_handles_labels()
    by = dict(zip(labels, handles, strict=False))
    fig.set_figheight(fig.get_figheight() + 0.3)
    fig.legend(list(by.values()), list(by.keys()), loc="outside lower center",
               ncol=len(by), frameon=False)
    _save(fig, path)
    return True
