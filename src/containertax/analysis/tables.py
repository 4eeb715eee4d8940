"""LaTeX tables (booktabs) and the numbers quoted in the text, as generated macros.

No number in the paper is typed by hand: the text says \\ctx{key} and numbers.tex defines
every key from the analysis.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from containertax.analysis.metrics import MetricInfo

_TEX = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
        "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}"}


def tex(text: Any) -> str:
    return re.sub(r"[&%$#_{}~^\\]", lambda m: _TEX[m.group()], str(text))


def num(value: Any, digits: int = 3) -> str:
    """Significant digits, plain notation for ordinary magnitudes, '--' for missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "--"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:d}"
    v = float(value)
    if v == 0:
        return "0"
    if abs(v) >= 1e5 or abs(v) < 1e-3:
        mant, exp = f"{v:.{digits - 1}e}".split("e")
        return f"${mant}\\times10^{{{int(exp)}}}$"
    return f"{v:.{max(0, digits - 1 - int(math.floor(math.log10(abs(v)))))}f}"


def pval(p: Any) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "--"
    return "$<0.001$" if p < 0.001 else f"{p:.3f}"


def pct(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "--"
    return f"{100 * v:+.1f}"


def booktabs(header: Sequence[str], rows: Iterable[Sequence[str]], align: str,
             caption: str, label: str, wide: bool = True, size: str = r"\footnotesize") -> str:
    env = "table*" if wide else "table"
    body = "\n".join(" & ".join(r) + r" \\" for r in rows)
    tabular = (f"\\begin{{tabular}}{{{align}}}\n\\toprule\n{' & '.join(header)} \\\\\n"
               f"\\midrule\n{body}\n\\bottomrule\n\\end{{tabular}}")
    # never wider than the text: shrink a wide table rather than let it run off the page
    width = r"\ifdim\width>\linewidth\linewidth\else\width\fi"
    fitted = f"\\resizebox{{{width}}}{{!}}{{%\n{tabular}}}"
    return (f"\\begin{{{env}}}[htbp]\n\\centering\n{size}\n\\caption{{{caption}}}\n"
            f"\\label{{{label}}}\n{fitted}\n\\end{{{env}}}\n")


def descriptives_table(desc: pd.DataFrame, registry: dict[str, MetricInfo],
                       metrics: list[str]) -> str:
    rows = []
    for _, r in desc[desc.metric.isin(metrics + ["latency_s"])].iterrows():
        info = registry.get(r.metric)
        rows.append([tex(r.model), tex(info.label if info else r.metric), tex(r.unit),
                     tex(r.environment), str(int(r.n)), num(r["mean"]), num(r["median"]),
                     num(r.sd), num(r["min"]), num(r["max"]), num(r.cv, 2),
                     num(r.get("p95")) if "p95" in r else "--",
                     num(r.get("p99")) if "p99" in r else "--"])
    return booktabs(["Model", "Metric", "Unit", "Env.", "$n$", "Mean", "Median", "SD", "Min",
                     "Max", "CV", "p95", "p99"], rows, "llllrrrrrrrrr",
                    "Descriptive statistics per model, metric and environment (p95/p99 of "
                    "latency from per-request data).", "tab:descriptives")


FAMILY_ORDER = {"calibration": 0, "primary": 1, "calibration-secondary": 2, "secondary": 3,
                "derived": 4}
FAMILY_LABEL = {"calibration": "A/A", "calibration-secondary": "A/A (sec.)",
                "primary": "primary", "secondary": "secondary", "derived": "derived"}


def inferential_table(results: pd.DataFrame, registry: dict[str, MetricInfo]) -> str:
    rows = []
    if "family" not in results:
        results = results.assign(family="primary")
    ordered = results.assign(_f=results["family"].map(FAMILY_ORDER)).sort_values(
        "_f", kind="stable")
    for _, r in ordered.iterrows():
        info = registry.get(r.metric)
        rows.append([tex(FAMILY_LABEL.get(r.family, r.family)), tex(r.model),
                     tex(info.label if info else r.metric),
                     tex(f"{r.environment} vs {r.reference}"),
                     f"{pct(r.rel_overhead)} [{pct(r.rel_ci_low)}, {pct(r.rel_ci_high)}]",
                     num(r.hedges_g, 2), tex(r.primary_test), pval(r.p), pval(r.p_bonferroni),
                     pval(r.p_bh), pval(r.tost_p), num(100 * r.mde_rel, 2)])
    return booktabs(["Family", "Model", "Metric", "Comparison",
                     r"Rel.\ diff.\ \% [95\,\% CI]", "$g$", "Test", "$p$",
                     r"$p_\mathrm{Bonf}$", r"$p_\mathrm{BH}$", r"$p_\mathrm{TOST}$",
                     r"MDE \%"], rows, "llllrrlrrrrr",
                    "Comparisons, the A/A calibration first: relative difference (geometric "
                    "mean of the per-block ratios minus one) with its 95\\,\\% $t$ interval, "
                    "Hedges $g$ (signed), the primary test's $p$ raw and corrected within its "
                    "family (Bonferroni, Benjamini-Hochberg), the equivalence test (two "
                    "one-sided tests on the same log scale) and the minimum detectable effect "
                    "at 80\\,\\% power. Derived metrics restate another and are not tested "
                    "again.", "tab:inferential")


MEMORY_METRICS = ("kv_cache_gib", "host_mem_used_peak_gib", "host_mem_rise_gib",
                  "gpu_mem_peak_gib", "peak_memory_gib", "mem_available_before_gib",
                  "mem_available_after_gib", "max_rss_mib")


def memory_table(runs: pd.DataFrame, registry: dict[str, MetricInfo]) -> str:
    """Memory per model and environment (mean and SD over the runs): where the reference
    study saw 20-30 GiB between Docker and chroot on unified memory."""
    present = [m for m in MEMORY_METRICS if m in set(runs["metric"])]
    if not present:
        return "No memory metrics were recorded in this campaign.\n"
    stats = (runs[runs.metric.isin(present)].groupby(["model", "environment", "metric"])["value"]
             .agg(["mean", "std"]))
    rows = []
    for (model, env), _ in runs.groupby(["model", "environment"], sort=False):
        cells = []
        for m in present:
            if (model, env, m) in stats.index:
                mean, sd = stats.loc[(model, env, m)]
                cells.append(f"{num(mean)} $\\pm$ {num(sd, 2)}" if sd == sd else num(mean))
            else:
                cells.append("--")
        rows.append([tex(model), tex(env), *cells])
    header = ["Model", "Env."] + [
        f"{tex(registry[m].label if m in registry else m)} ({tex(registry[m].unit)})"
        for m in present]
    lead = "Table~\\ref{tab:memory} shows the memory each model took in each environment.\n"
    return lead + booktabs(header, rows, "ll" + "r" * len(present),
                    "Memory per model and environment, mean $\\pm$ SD over the runs: KV cache "
                    "as TensorRT-LLM reports allocating it, peak host memory in use "
                    "(MemTotal$-$MemAvailable, 10\\,Hz; on unified memory it includes the GPU's "
                    "allocations) and its rise over the run's start, GPU memory where NVML "
                    "reports it, MemAvailable before and after"
                    + ("; peak resident memory is the workload process's own high-water "
                       "mark (VmHWM in /proc/self/status, which exec resets, so nothing of "
                       "the process that launched it counts)" if "max_rss_mib" in present
                       else "") + ".", "tab:memory")


def system_table(facts: dict[str, Any]) -> str:
    rows = [[tex(k), tex(v)] for k, v in facts.items() if v not in (None, "")]
    return booktabs(["Item", "Value"], rows, "lp{0.62\\linewidth}",
                    "System and software configuration (from the recorded provenance).",
                    "tab:system", wide=False)


def macros(values: dict[str, Any]) -> str:
    r"""\ctx{key} expands to the value; an unknown key stops the build with its name."""
    lines = [
        "% generated by containertax: every number quoted in the text",
        r"\makeatletter",
        r"\newcommand{\ctxdef}[2]{\expandafter\def\csname ctx@#1\endcsname{#2}}",
        r"\newcommand{\ctx}[1]{\ifcsname ctx@#1\endcsname\csname ctx@#1\endcsname"
        r"\else\PackageError{containertax}{no generated value #1}{}\fi}",
        r"\makeatother",
    ]
    for key, value in values.items():
        lines.append(f"\\ctxdef{{{key}}}{{{value}}}")
    return "\n".join(lines) + "\n"
