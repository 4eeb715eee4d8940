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

from containertax.statistics.policy import AA_FAMILIES, MEMORY_METRICS
from containertax.statistics.texts import PCT_CAP, interval_texts, missing, tex
from containertax.workloads.metric_registry import MetricInfo, display_unit


def code(escaped: str) -> str:
    r"""An identifier with underscores in escaped TeX ('foo\_\allowbreak{}bar') set as
    code (\texttt), not as words: the prose font draws the underscore as a space."""
    return re.sub(r"(?<![\w\\])[A-Za-z0-9.-]+(?:\\_\\allowbreak\{\}[A-Za-z0-9.-]+)+",
                  lambda m: f"\\texttt{{{m.group()}}}", escaped)


# A model id longer than this breaks at its hyphens in a column of its own width: in a
# plain column, h200-cache-arms' 'llama-small-perenv' ran its tables 22 pt past the margin
LONG_ID = 12


def id_spec(ids: Iterable[Any]) -> str:
    """The model column's spec: plain, or a narrow paragraph column for long ids."""
    return "l" if max((len(str(i)) for i in ids), default=0) <= LONG_ID else \
        r"L{0.11\linewidth}"


def id_cell(model: Any) -> str:
    """A model id as a table cell: a long one may break after each hyphen."""
    text = tex(str(model))
    return text.replace("-", r"-\allowbreak{}") if len(str(model)) > LONG_ID else text


def num(value: Any, digits: int = 3) -> str:
    """Significant digits, plain notation for ordinary magnitudes (a negative one's sign a
    true minus, texts.tex), '--' for missing, NOT_ESTIMABLE for infinite."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "--"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:d}"
    v = float(value)
    if v == 0:
        return "0"
    if math.isinf(v):  # e.g. an MDE no number of blocks bounds: not estimable, never 'inf'
        return NOT_ESTIMABLE
    if abs(v) >= 1e5 or abs(v) < 1e-3:
        mant, exp = f"{v:.{digits - 1}e}".split("e")
        return f"${mant}\\times10^{{{int(exp)}}}$"
    return tex(f"{v:.{max(0, digits - 1 - int(math.floor(math.log10(abs(v)))))}f}")  # a minus


def distinct_as_printed(values: Iterable[Any], digits: int = 3) -> int:
    """How many different values a reader sees at the paper's precision (num: three
    significant digits): a figure of values that all print alike shows no evidence (an
    axis from 2.0000 to 2.0010 s), and the text says the value instead."""
    return len({num(float(v), digits) for v in values
                if v is not None and not (isinstance(v, float) and math.isnan(v))})


def effect(value: Any) -> str:
    """A standardised effect size (Hedges' g): two decimals (one past 10, none past 100),
    never a power of ten, a true minus sign and no signed zero."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "--"
    v = float(value)
    text = f"{v:.{2 if abs(v) < 10 else 1 if abs(v) < 100 else 0}f}"
    return f"${text.lstrip('-') if float(text) == 0 else text}$"


def pval(p: Any) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "--"
    return "$<0.001$" if p < 0.001 else f"{p:.3f}"


def pct(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "--"
    if abs(v) >= PCT_CAP:  # e.g. a subnormal reference value: 100 v overflows to inf
        return "$>{+}10^{6}$" if v > 0 else "$<{-}10^{6}$"
    text = f"{100 * v:+.1f}"
    return "$0.0$" if text in ("+0.0", "-0.0") else f"${text}$"  # no signed zero


NOT_ESTIMABLE = "n.e."  # the tables' note and the paper's methods say what it means


def rel_texts(r: Any) -> tuple[str, str, str]:
    """A comparison's printed estimate and interval ends (math mode): the findings table's
    text where the row carries it (the interval the paper reports: repeated-look adjusted
    under a stopping rule), else interval_texts of its estimate and 95 % interval."""
    if not missing(r.get("text_est")) and str(r.get("text_est", "")):
        texts = (str(r.get("text_est")), str(r.get("text_low")), str(r.get("text_high")))
    else:
        texts = interval_texts(_num(r.get("rel_overhead")), _num(r.get("rel_ci_low")),
                               _num(r.get("rel_ci_high")))
    return tuple(t if t == "--" else f"${t}$" for t in texts)  # type: ignore[return-value]


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def reason(r: Any, column: str) -> str:
    """A comparison's reason column (not_estimable, no_interval) as text: '' where empty
    (a CSV reads an empty cell back as NaN) or absent."""
    value = r.get(column, "") if hasattr(r, "get") else ""
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def rel_with_ci(r: Any) -> str:
    """'+2.1 [+1.3, +2.9]', '+2.1 [n.e.]' without an interval, 'n.e.' without an
    estimate: never 'nan'."""
    if missing(r.get("rel_overhead")):
        return NOT_ESTIMABLE
    est, low, high = rel_texts(r)
    if low == "--" or high == "--":
        return f"{est} [{NOT_ESTIMABLE}]"
    return interval_cell(est, low, high)


def printed_len(text: str) -> int:
    r"""About how many characters TeX prints for a cell's source ('$+2.2$' 4,
    '$5.3\times10^{5}$' 7, '\ensuremath{-}1.5' 4): enough to tell a wide cell."""
    t = re.sub(r"\\ensuremath\{(.)\}", r"\1", text)
    t = re.sub(r"\\times", "x", t)
    return len(re.sub(r"\\[A-Za-z]+|\\.|[${}^]", "", t))


# An estimate with its interval on one line while it is at most this many characters
# ('-0.073 [-0.622, +0.476]': 23; 27 ran 9 pt into the margin of the estimates table
# beside an environment docker-optimised); a wider one stacks the interval under the
# estimate, and an interval itself wider breaks after its comma: a column of an estimate
# and its interval is as wide as its longest number, whatever the records hold
# ('+651018.4 [+723.1, >+10^6]' and '-99.9999003 [-99.9999008, -99.9998999]' ran into
# the margin).
ONE_LINE = 23


def interval_cell(est: str, low: str, high: str, one_line: int = ONE_LINE,
                  line: int = ONE_LINE) -> str:
    """A table cell of an estimate and its interval: 'est [low, high]' on one line up to
    one_line characters, else stacked on two lines (the interval up to `line`) or three
    (right-aligned, the first on the row's baseline)."""
    flat = f"{est} [{low}, {high}]"
    if printed_len(flat) <= one_line:
        return flat
    lines = ([est, f"[{low}, {high}]"] if printed_len(f"[{low}, {high}]") <= line
             else [est, f"[{low},", f"{high}]"])
    # '\\{}': a line that opens with '[' is not the optional argument of '\\'
    return r"\begin{tabular}[t]{@{}r@{}}" + r"\\{}".join(lines) + r"\end{tabular}"


def unit_tex(unit: str) -> str:
    """A unit as LaTeX: µs and °C in Computer Modern's Type 1 math fonts (textcomp's
    would be bitmaps here), the rest escaped."""
    u = display_unit(str(unit))
    return tex(u).replace("µ", r"$\mu$").replace("°", r"$^\circ$")


def in_prose(info: MetricInfo | None, metric: str) -> str:
    """A metric's label as a sentence uses it: 'token throughput', but 'GPU energy' and
    'MemAvailable before' keep their capitals (a first word with a capital after its first
    letter is a name or an acronym). The raw name only where the registry lacks it."""
    if info is None:
        return metric
    first, _, rest = info.label.partition(" ")
    if any(c.isupper() for c in first[1:]):
        return info.label
    return first[:1].lower() + first[1:] + (" " + rest if rest else "")


def humanise(text: str, registry: dict[str, MetricInfo]) -> str:
    """A message (a quality finding, a test's note) with every registered metric name as
    its label: 'qwen2-0.5b/itl_p99_s' reads 'qwen2-0.5b, inter-token latency p99'; plain
    text, to be escaped with tex()."""
    names = sorted((n for n in registry if "_" in n), key=len, reverse=True)  # not words
    if not names:
        return text
    pattern = re.compile(r"(/)?(?<![\w.-])(" + "|".join(map(re.escape, names))
                         + r")(?![\w])")

    def label(m: re.Match) -> str:
        words = in_prose(registry[m.group(2)], m.group(2))
        return (", " if m.group(1) else "") + words

    return pattern.sub(label, text)


def metric_tex(info: MetricInfo | None, metric: str) -> str:
    return (f"{tex(info.label)} ({unit_tex(info.unit)})" if info else tex(metric))


# Tables are set at \small (9 pt in the 10 pt paper; \footnotesize is 8 pt, the floor) and
# never scaled: a table too wide for the text is split or set as a longtable in the appendix,
# which the reviewer check (publishing/review.py) enforces through the PDF's font sizes.
# Captions are prose: \papercaption{label} takes them from paper/main.tex (\setcaption).
def booktabs(header: Sequence[str], rows: Iterable[Sequence[str]], align: str,
             label: str, size: str = r"\small") -> str:
    """A floating table for the main text."""
    body = "\n".join(" & ".join(r) + r" \\" for r in rows)
    caption = f"\\papercaption{{{label}}}"
    return (f"\\begin{{table}}[htbp]\n\\centering\n{size}\n\\caption{{{caption}}}\n"
            f"\\label{{{label}}}\n\\begin{{tabular}}{{{align}}}\n\\toprule\n"
            f"{' & '.join(header)} \\\\\n\\midrule\n{body}\n\\bottomrule\n\\end{{tabular}}\n"
            "\\end{table}\n")


def longtable(header: Sequence[str], rows: Iterable[Sequence[str]], align: str,
              label: str, size: str = r"\footnotesize", colsep: str = "4pt") -> str:
    """A table that may run over pages (appendix detail tables); the header repeats."""
    caption = f"\\papercaption{{{label}}}"
    head = " & ".join(header) + r" \\"
    body = "\n".join(" & ".join(r) + r" \\" for r in rows)
    return (f"{{{size}\\setlength{{\\tabcolsep}}{{{colsep}}}\n"
            f"\\begin{{longtable}}{{{align}}}\n\\caption{{{caption}}}\\label{{{label}}}"
            f"\\\\\n\\toprule\n{head}\n\\midrule\n\\endfirsthead\n\\toprule\n{head}\n\\midrule\n"
            f"\\endhead\n\\bottomrule\n\\endfoot\n{body}\n\\end{{longtable}}}}\n")


def _metric_cell(registry: dict[str, MetricInfo], metric: str) -> str:
    return metric_tex(registry.get(metric), metric)


def descriptives_table(desc: pd.DataFrame, registry: dict[str, MetricInfo],
                       metrics: list[str]) -> str:
    """Per-run metrics; request latency percentiles (from per-request data) in a table of
    their own, so that neither is wider than the page."""
    d = desc[desc.metric.isin(metrics)]
    rows = [[id_cell(r.model), _metric_cell(registry, r.metric), tex(r.environment),
             str(int(r.n)), num(r["mean"]), num(r.sd), num(r["min"]), num(r["max"]),
             num(100 * r.cv, 2)]
            for _, r in d.iterrows()]
    out = longtable(["Model", "Metric (unit)", "Env.", "$n$", "Mean", "SD", "Min", "Max",
                     r"CV \%"], rows,
                    id_spec(d.model) + r"L{0.2\linewidth}L{0.09\linewidth}" + "r" * 6,
                    # 3 pt: h200-stopping-hsd's table (an SD of $6.74\times10^{-5}$ beside
                    # five-digit GFLOP/s) ran 1.05 pt into the margin at 4 pt
                    "tab:descriptives", size=r"\scriptsize", colsep="3pt")
    lat = desc[desc.metric == "latency_s"]
    if not lat.empty and {"p50", "p95", "p99"} <= set(lat):
        rows = [[id_cell(r.model), tex(r.environment), str(int(r.n)), num(r["mean"]),
                 num(r["p50"]), num(r["p95"]), num(r["p99"]), num(r["max"])]
                for _, r in lat.iterrows()]
        out += longtable(["Model", "Env.", "Requests", "Mean", "p50", "p95", "p99", "Max"],
                         rows, id_spec(lat.model) + "lrrrrrr", "tab:latency", size=r"\footnotesize")
    return out


# Families of comparisons (statistics/comparisons.py, Plan): the A/A calibration first
FAMILY_ORDER = {"calibration": 0, "primary": 1, "calibration-secondary": 2, "secondary": 3,
                "derived": 4}
FAMILY_LABEL = {"calibration": "A/A", "calibration-secondary": "A/A (sec.)",
                "primary": "primary", "secondary": "secondary", "derived": "derived"}
# the timeline's phases: their own table (tables/phases.tex, statistics/phases.py)
PHASE_FAMILIES = ("phases", "calibration-phases")


def by_family(results: pd.DataFrame) -> pd.DataFrame:
    """The comparisons in the order the tables list them: A/A calibration, primary, A/A
    secondary, secondary, derived (stable within each)."""
    if "family" not in results:
        return results.assign(family="primary")
    results = results[~results["family"].isin(PHASE_FAMILIES)]
    return results.assign(_f=results["family"].map(FAMILY_ORDER)).sort_values(
        "_f", kind="stable").drop(columns="_f")


def _comparison_rows(results: pd.DataFrame, registry: dict[str, MetricInfo],
                     cells) -> list[list[str]]:
    """Model, metric and comparison (an A/A replica names the environment it copies)."""
    def env(r) -> str:
        if r.family in AA_FAMILIES:
            return tex(f"{r.environment} vs {r.reference}")
        return tex(r.environment)

    return [[id_cell(r.model), _metric_cell(registry, r.metric), env(r), *cells(r)]
            for _, r in by_family(results).iterrows()]


def estimates_table(results: pd.DataFrame, registry: dict[str, MetricInfo]) -> str:
    rows = _comparison_rows(results, registry, lambda r: [
        tex(FAMILY_LABEL.get(r.family, r.family)),
        rel_with_ci(r), effect(r.get("effect_size", r.get("hedges_g"))),
        num(100 * r.mde_rel, 2)])
    return longtable(["Model", "Metric (unit)", "Env.", "Family",
                      r"Rel.\ diff.\ \% [95\,\% CI]", "$g$", r"MDE \%"], rows,
                     id_spec(results.model) + r"L{0.21\linewidth}L{0.12\linewidth}lrrr",
                     "tab:estimates")


def tests_table(results: pd.DataFrame, registry: dict[str, MetricInfo]) -> str:
    rows = _comparison_rows(results, registry, lambda r: [
        tex(FAMILY_LABEL.get(r.family, r.family)), tex(humanise(str(r.primary_test), registry)),
        pval(r.p),
        pval(r.p_bonferroni), pval(r.p_bh), pval(r.tost_p)])
    return longtable(["Model", "Metric (unit)", "Env.", "Family", "Primary test", "$p$",
                      r"$p_\mathrm{Bonf}$", r"$p_\mathrm{BH}$", r"$p_\mathrm{TOST}$"], rows,
                     id_spec(results.model)
                     + r"L{0.15\linewidth}L{0.1\linewidth}lL{0.12\linewidth}rrrr",
                     "tab:tests")


def headline_table(rows: list[dict[str, Any]], registry: dict[str, MetricInfo],
                   p_header: str = r"$p_\mathrm{BH}$") -> str:
    """The headline comparison of each model, with the verdict the abstract states."""
    if not rows:
        return ""
    body = [[tex(r["model"]), _metric_cell(registry, r["metric"]), tex(r["environment"]),
             interval_cell(r["rel"], *r["ci"].split(", ", 1), one_line=0, line=16),
             r["p_bh"], r["mde"],
             tex(r["verdict"])] for r in rows]
    # a verdict with its caveat ('equivalent (A/A failed)') wraps in a narrower table
    caveat = any("(" in r["verdict"] for r in rows)
    spec = (r"lL{0.13\linewidth}L{0.09\linewidth}rrrL{0.13\linewidth}" if caveat
            else r"lL{0.15\linewidth}L{0.1\linewidth}rrrl")
    # and its interval's heading on two lines, the widest cell of the row otherwise (on one
    # line, h100-sani-cold's table of one model ran 2.5 pt into the margin), as each
    # estimate over its interval is (interval_cell; '+2.2 [-13.1, +20.3]' on one line ran
    # 2.3 pt into the margin beside the model matmul-10k, '[-99.999, +2189.400]' 12.7 pt)
    rel = r"\begin{tabular}[b]{@{}r@{}}Rel.\ diff.\ \%\\ {}[95\,\% CI]\end{tabular}"
    if any(r.get("sequential") for r in rows):  # the look's interval, not a 95 % one
        rel = rel.replace("95\\,\\% CI", "adj.\\ CI")
    return booktabs(["Model", "Metric (unit)", "Env.", rel, p_header, r"MDE \%",
                     "Verdict"], body, spec, "tab:headline")


def key_value_table(facts: dict[str, Any], label: str) -> str:
    rows = [[tex(k), tex(v)] for k, v in facts.items() if v not in (None, "")]
    return booktabs(["Item", "Value"], rows, r"L{0.25\linewidth}L{0.68\linewidth}", label)


def memory_table(runs: pd.DataFrame, registry: dict[str, MetricInfo]) -> str:
    """Memory per model and environment (mean and SD over the runs), one row per model,
    environment and metric where a column per environment would not fit (more than three,
    or a value in scientific notation)."""
    present = [m for m in MEMORY_METRICS if m in set(runs["metric"])]
    if not present:
        return ""
    stats = (runs[runs.metric.isin(present)].groupby(["model", "metric", "environment"])
             ["value"].agg(["mean", "std"]))
    envs = list(dict.fromkeys(runs["environment"]))
    rows = []
    for (model, metric), g in stats.groupby(level=[0, 1], sort=False):
        cells = []
        for env in envs:
            if (model, metric, env) in g.index:
                mean, sd = g.loc[(model, metric, env)]
                cells.append(f"{num(mean)} $\\pm$ {num(sd, 2)}" if sd == sd else num(mean))
            else:
                cells.append("--")
        rows.append([tex(model), _metric_cell(registry, metric), *cells])
    # one row per environment where a column each would not fit the page: more than three
    # environments, or a value in scientific notation (a rise of a few KiB in GiB)
    if len(envs) > 3 or any("\\times" in cell for row in rows for cell in row[2:]):
        long_rows = [[model, metric, tex(env), cell] for model, metric, *cells in rows
                     for env, cell in zip(envs, cells, strict=True) if cell != "--"]
        return longtable(["Model", "Metric (unit)", "Env.", "Mean $\\pm$ SD"], long_rows,
                         r"lL{0.3\linewidth}L{0.2\linewidth}r", "tab:memory",
                         size=r"\footnotesize")
    return booktabs(["Model", "Metric (unit)", *map(tex, envs)], rows,
                    r"lL{0.22\linewidth}" + "r" * len(envs), "tab:memory",
                    size=r"\footnotesize")


def system_table(facts: dict[str, Any]) -> str:
    return key_value_table(facts, "tab:system")


def macros(values: dict[str, Any]) -> str:
    r"""\ctx{key} expands to the value; an unknown key stops the build with its name."""
    lines = [
        "% generated by containertax: every number quoted in the text",
        r"\makeatletter",
        r"\newcommand{\ctxdef}[2]{\expandafter\def\csname ctx@#1\endcsname{#2}}",
        r"\newcommand{\ctx}[1]{\ifcsname ctx@#1\endcsname\csname ctx@#1\endcsname"
        r"\else\PackageError{containertax}{no generated value #1}{}\fi}",
        r"\newcommand{\ifctx}[1]{\ifnum\ctx{#1}=1 \expandafter\@firstoftwo\else"
        r"\expandafter\@secondoftwo\fi}",
        r"\newcommand{\ifctxdefined}[1]{\ifcsname ctx@#1\endcsname"
        r"\expandafter\@firstoftwo\else\expandafter\@secondoftwo\fi}",
        r"\makeatother",
    ]
    for key, value in values.items():
        if isinstance(value, bool):  # a condition for \ifctx{key}{then}{else}
            value = int(value)
        lines.append(f"\\ctxdef{{{key}}}{{{value}}}")
    return "\n".join(lines) + "\n"


def join_words(items: Iterable[str]) -> str:
    """'a', 'a and b', 'a, b and c': a list as the text names it ('' for none)."""
    items = list(items)
    if not items:
        return ""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def unbroken_pct(text: str) -> str:
    """'+22.29 \\%' as '+22.29\\,\\%': a line never breaks between a number and its
    per cent sign."""
    return re.sub(r"(\d) \\%", r"\1\\,\\%", text)


def environments_table(envs: list[dict[str, str]]) -> str:
    """Each environment's set-up as recorded (publishing/facts.py): the values of one
    \\envsetup{software}{mounts}{read-only}{GPU}{flags}{isolated} each; its words are in
    paper/main.tex."""
    def setup(env: dict[str, str]) -> str:
        flags = env["flags"]
        flags = "none" if flags == "none" else "\\texttt{" + tex(flags).replace(
            "--", "-{}-") + "}"
        return (f"\\envsetup{{{tex(env['software'])}}}{{{tex(env['mounts'])}}}"
                f"{{{int(bool(env['read_only']))}}}{{{tex(env['gpu'])}}}{{{flags}}}"
                f"{{{tex(env['isolation'])}}}")

    def declared(env: dict[str, str]) -> str:
        said = env.get("declared")
        return f"\\newline Declared differences: {tex(said)}." if said else ""

    rows = [[tex(env["environment"]) + (f"\\newline {tex(env['runtime'])}"
                                        if env.get("runtime") else ""),
             setup(env) + declared(env)]
            for env in envs]
    return booktabs(
        ["Env.", "Set-up as recorded"], rows, r"L{0.16\linewidth}L{0.78\linewidth}",
        "tab:environments")


def workloads_table(work: list[dict[str, str]]) -> str:
    """Each model's workload and the parameters its records hold."""
    rows = [[id_cell(load["model"]), tex(load["kind"]), code(tex(load["params"]))]
            for load in work]
    return booktabs(["Model", "Workload", "Parameters (as recorded)"], rows,
                    id_spec(load["model"] for load in work)
                    + r"L{0.22\linewidth}L{0.55\linewidth}", "tab:workloads",
                    size=r"\footnotesize")
