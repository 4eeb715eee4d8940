"""The paper's review stays empty whatever values a campaign measures: each case below is a
value that benchmarks/paper_data_sweep.py (one small campaign, its raw records perturbed
per seed, the paper rebuilt and reviewed) found tripping a review check, planted here at
the layer that prints it. Each test also plants the old output and shows the review
check catches it, so the check can fail.

Found by the sweep: an estimate and interval too wide for their table column ('+651018.4
[+723.1, >+10^6]' in the headline table, a day-long phase in milliseconds in the phases
table: overfull), intervals near -100 % or of zero width printed alike ('-100.000
[-100.000, -100.000]': interval-digits), and 'in all two headline comparisons'
(count-phrasing) when both headline comparisons share a verdict."""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from containertax.publishing import phases_paper, review, tables
from containertax.statistics import comparisons, texts
from containertax.statistics.phases import ms_texts, seconds_text
from containertax.workloads.metric_registry import REGISTRY
from tests.conftest import REPO

needs_tex = pytest.mark.skipif(shutil.which("pdflatex") is None, reason="needs TeX Live")
MAIN = (REPO / "paper" / "main.tex").read_text()
# the paper's own preamble: packages, column types, emergency stretch
PREAMBLE = MAIN[MAIN.index(r"\documentclass"):MAIN.index(r"\input{numbers.tex}")]


def compile_tex(work: Path, body: str, numbers: str = "") -> tuple[str, str]:
    """A document with the paper's preamble: (LaTeX log, the PDF's text)."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "main.tex").write_text(
        PREAMBLE + numbers + "\n\\newcommand{\\papercaption}[1]{A generated table.}\n"
        "\\begin{document}\n" + body + "\n\\end{document}\n")
    proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error",
                           "main.tex"], cwd=work, capture_output=True, text=True, timeout=120)
    log = (work / "main.log").read_text(errors="replace")
    assert proc.returncode == 0, log[-2000:]
    return log, review.pdf_text(work / "main.pdf")


def overfull(log: str) -> list[review.Problem]:
    return [p for p in review.check_log(log) if p.check == "overfull"]


# --- identical per-block differences: no interval, not one of zero width -----------------


@pytest.mark.parametrize("n", [3, 6, 7])
def test_identical_block_differences_have_no_interval(n):
    """A memory metric counted in pages gives every block the same difference: np.std of
    those (n = 3, 6, 7) is 1e-18, not 0, and the interval was '+0.775 [+0.775, +0.775]'."""
    d = np.full(n, math.log(32.5 / 32.25))
    assert float(np.std(d, ddof=1)) > 0  # the rounding this guards against
    e = comparisons.paired_estimate(d, 0.05)
    assert e["sd"] == 0 and math.isnan(e["low"]) and math.isnan(e["high"])
    # differences that do vary keep their interval
    varied = comparisons.paired_estimate(d + np.arange(n) * 1e-9, 0.05)
    assert varied["low"] < varied["est"] < varied["high"]
    # the planted old result: an interval of zero width prints its three values alike
    rel = np.expm1([e["est"]] * 3)
    shown = texts.interval_texts(*rel)
    assert review.check_interval_texts(f"{shown[0]} [{shown[1]}, {shown[2]}]")


# --- printed apart near -100 % and where the interval is narrow ---------------------------


@pytest.mark.parametrize("values", [
    (-0.9999990030, -0.9999990077, -0.9999989987),  # a million times faster, tight
    (-0.9999995956, -0.9999999979, -0.9999217410),  # an end 0.0000002 % above -100 %
    (-0.9990032513, -0.9990077403, -0.9989987420),  # '-99.900 [-99.901, -99.900]'
    (0.0309278350, 0.0309278349, 0.0309278352),  # an interval 3e-10 wide
])
def test_an_interval_near_minus_100_or_narrow_prints_apart(values):
    est, low, high = texts.interval_texts(*values)
    printed = f"{est} [{low}, {high}]"
    assert len({est, low, high}) == 3 and "-100.0" not in printed, printed
    assert review.check_interval_texts(printed) == []
    # the planted old output (at most three decimals) is what the review rejected
    old = texts.interval_texts(*values, max_digits=3)
    assert review.check_interval_texts(f"{old[0]} [{old[1]}, {old[2]}]"), old


@pytest.mark.parametrize("seconds", [(-4e-7, -1.1e-6, 3e-7), (2.2e-6, 1.9e-6, 2.5e-6)])
def test_a_phase_difference_a_microsecond_wide_prints_apart(seconds):
    """30 blocks of a teardown of 80 us can narrow its interval to a microsecond: ms_texts
    printed it with at most three decimals ('0.000 [-0.001, 0.000]', '+0.002 [+0.002,
    +0.003]')."""
    est, low, high = ms_texts(*seconds)
    assert len({est, low, high}) == 3 and float(est) != 0
    assert review.check_interval_texts(f"{est} [{low}, {high}]") == []
    old = [seconds_text(1000 * v, 3) for v in seconds]  # the planted old printing
    assert review.check_interval_texts(f"{old[0]} [{old[1]}, {old[2]}]"), old


def test_ordinary_intervals_keep_their_short_texts():
    assert ms_texts(-0.0085, -0.0618, 0.0448) == ("-8.5", "-61.8", "+44.8")
    assert ms_texts(1e-10, -99.9, 100.1) == ("0", "-99900", "+100100")
    assert texts.interval_texts(0.0005, -0.0003, 0.0012) == ("+0.05", "-0.03", "+0.12")
    assert texts.interval_texts(0.022, -0.131, 0.203) == ("+2.2", "-13.1", "+20.3")
    assert texts.interval_texts(-0.5, -1.0, -0.2) == ("-50.0", "-100.0", "-20.0")


# --- tables: an estimate and its interval fit their column, whatever their width ---------

# ratios (estimate, low, high) as wide as interval_texts prints them: beyond PCT_CAP a
# bound, six digits before the point, seven decimals near -100 %
WIDE = [(6510.184, 7.231, 2e4), (9999.99, 9999.98, 9999.999),
        (-0.9999990030, -0.9999990077, -0.9999989987), (-0.99999, -0.99999, 21.894),
        (0.4312, -0.999, 21.894), (4.312, 0.233, 21.894), (43.12, 2.33, 218.94),
        (0.022, -0.131, 0.203)]
MODELS = ["qwen2-0.5b", "matmul-10k"]  # committed campaigns' model ids


def _headline_rows(flat: bool = False) -> list[dict[str, str]]:
    rows = []
    for model in MODELS:
        for est, low, high in WIDE:
            e, lo, hi = (f"${t}$" for t in texts.interval_texts(est, low, high))
            rows.append(dict(model=model, metric="compute_time_s", environment="docker",
                             rel=e, ci=f"{lo}, {hi}", p_bh=tables.pval(0.0004),
                             mde=tables.num(100 * 1.9e4, 2), verdict="inconclusive"))
    return rows


def _estimates() -> pd.DataFrame:
    return pd.DataFrame([dict(model=m, metric="compute_time_s", environment="docker",
                              reference="native", family="primary", rel_overhead=est,
                              rel_ci_low=low, rel_ci_high=high, effect_size=-123.4,
                              mde_rel=1.9e4) for m in MODELS for est, low, high in WIDE])


def _phases() -> list[dict]:
    # a day-long phase in seconds, tiny differences with a huge interval, ordinary ones
    diffs = [(189693.867, 57299.684, 322088.051), (1e-6, -99999.9, 100000.1),
             (-0.0085, -0.0618, 0.0448),
             *[(-x, -3.1 * x, 1.1 * x) for x in (1.23e-5, 1.23e-3, 0.123, 12.3, 1234.5)]]
    return [dict(model=m, environment="docker", reference="native", metric="phase_start_s",
                 label="Process or container start", mean_ref=0.0142, mean_env=1.8e5,
                 diff_s=d, diff_low=lo, diff_high=hi, p_bh=0.0004, verdict="inconclusive")
            for m in MODELS for d, lo, hi in diffs]


@needs_tex
def test_wide_estimates_and_intervals_fit_their_tables(tmp_path):
    body = (tables.headline_table(_headline_rows(), REGISTRY)
            + tables.estimates_table(_estimates(), REGISTRY)
            + phases_paper.table(_phases()))
    assert r"\begin{tabular}[t]{@{}r@{}}" in body  # the wide cells are stacked
    log, _ = compile_tex(tmp_path / "stacked", body)
    assert overfull(log) == [], overfull(log)
    # what the review reads back (in reading order, where a stacked cell's interval
    # follows another column's number): every interval is a planted one, printed apart
    text = review.prose_text(tmp_path / "stacked" / "main.pdf")
    canonical = {texts.interval_texts(*w) for w in WIDE} | {
        ms_texts(r["diff_s"], r["diff_low"], r["diff_high"]) for r in _phases()}
    assert review.check_printed_once(text, canonical) == []
    ms_ends = {(low, high) for _, low, high in canonical}
    assert review.check_interval_texts(text, ms_ends) == []


def test_a_stacked_cells_interval_is_not_read_with_the_number_before_it():
    """pdftotext reads a stacked cell's estimate, then the next column's p-value, then
    the interval on its line: the p-value is not the interval's estimate. On one line a
    wrong estimate is still caught."""
    canonical = {("+0.035", "-0.002", "+0.073")}
    assert review.check_printed_once("+0.035 0.091\n[-0.002, +0.073]", canonical) == []
    assert review.check_printed_once("0.091 [-0.002, +0.073]", canonical)
    assert review.check_interval_texts("+0.073 0.091\n[+0.073, +0.074]") == []
    assert review.check_interval_texts("+0.073 [+0.073, +0.074]")


def test_an_ordinary_interval_stays_on_one_line():
    cell = tables.interval_cell("$+2.2$", "$-13.1$", "$+20.3$")
    assert cell == "$+2.2$ [$-13.1$, $+20.3$]"
    assert tables.interval_cell(r"\ensuremath{-}8.5", r"\ensuremath{-}61.8", "+44.8") == (
        r"\ensuremath{-}8.5 [\ensuremath{-}61.8, +44.8]")


@needs_tex
def test_planted_one_line_wide_interval_is_reported_overfull(tmp_path, monkeypatch):
    """The same tables with every cell on one line (the layout before): the review's
    overfull check reports them."""
    monkeypatch.setattr(tables, "interval_cell",
                        lambda est, low, high, **_: f"{est} [{low}, {high}]")
    body = (tables.headline_table(_headline_rows(), REGISTRY)
            + phases_paper.table(_phases()))
    assert r"\begin{tabular}[t]" not in body
    log, _ = compile_tex(tmp_path / "flat", body)
    assert overfull(log), "a one-line interval wider than its column was not reported"


# --- counts: 'both', never 'all two' -------------------------------------------------------


def _macro(name: str, source: str = MAIN) -> str:
    """A \\newcommand of main.tex, whole (its braces balanced)."""
    start = source.index(f"\\newcommand{{\\{name}}}")
    depth, i, opened = 0, start, False
    while True:
        c = source[i]
        depth += {"{": 1, "}": -1}.get(c, 0)
        opened |= c == "{" and depth == 1 and source[i - 1] == "]"
        i += 1
        if opened and depth == 0:
            return source[start:i]


COUNT_MACROS = ["numword", "Numword", "nof", "hlof"]
OLD_HLOF = r"""\newcommand{\hlof}[1]{\ifnum\ctx{#1}=\ctx{hl-count}
  \ifnum\ctx{hl-count}=1 the one headline comparison\else all
  \nof{hl-count}{}{headline comparisons}\fi\else
  \nof{#1}{headline comparison}{headline comparisons}\fi}"""


def _counts_text(tmp_path: Path, macros: str) -> str:
    """'The container cost performance in \\hlof{hl-overhead}.' for (hl-count,
    hl-overhead) = (1, 1), (2, 2), (3, 3), (3, 2), (3, 1), as the PDF prints it."""
    body = macros + "\n" + "\n\n".join(
        f"\\ctxdef{{hl-count}}{{{n}}}\\ctxdef{{hl-overhead}}{{{k}}}"
        "The container cost performance in \\hlof{hl-overhead}."
        for n, k in [(1, 1), (2, 2), (3, 3), (3, 2), (3, 1)])
    _, text = compile_tex(tmp_path, body, tables.macros({"hl-count": 0}))
    return " ".join(text.split())


@needs_tex
def test_every_headline_comparison_is_counted_in_words(tmp_path):
    text = _counts_text(tmp_path / "new", "\n".join(_macro(m) for m in COUNT_MACROS))
    assert "in the one headline comparison." in text
    assert "in both headline comparisons." in text
    assert "in all three headline comparisons." in text
    assert "in two headline comparisons." in text and "in one headline comparison." in text
    assert review.check_counts(text) == []
    # planted: the macro before, which said 'all two' when both shared a verdict
    old = _counts_text(tmp_path / "old", "\n".join(
        [_macro(m) for m in COUNT_MACROS[:-1]] + [OLD_HLOF]))
    assert "in all two headline comparisons" in old
    assert [p.check for p in review.check_counts(old)] == ["count-phrasing"]


def test_a_relative_interval_below_minus_100_prints_as_the_findings_truncate_it():
    """An A/A run of exactly 0 s (paper_data_sweep --campaign demo, seed 18): the A/A texts
    printed '-26.6 % [-101.4, +48.2]' while the finding's own text, truncated at -100 %,
    is '[-100.0, +48.2]': every print of a relative interval floors it the same way."""
    from containertax.statistics.texts import interval_texts

    assert interval_texts(-0.266, -1.013595, 0.481556) == ("-26.6", "-100.0", "+48.2")
    assert interval_texts(-0.266, -0.9, 0.481556) == ("-26.6", "-90.0", "+48.2")
