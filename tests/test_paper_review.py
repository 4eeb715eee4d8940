"""The paper review (publishing/review.py) catches what a reviewer would reject. Each defect
is planted in a small document compiled with the real TeX Live, or in a real matplotlib
figure, and must be reported; a clean document must pass, so the check can pass at all."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from containertax.publishing import facts, figures, review, tables  # noqa: E402
from containertax.statistics import texts
from containertax.workloads.metric_registry import REGISTRY, TELEMETRY, axis_label  # noqa: E402
from tests.conftest import REPO  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("latexmk") is None, reason="needs TeX Live")

PREAMBLE = r"""\documentclass[11pt,a4paper]{article}
\usepackage[margin=2.5cm]{geometry}
\usepackage{graphicx}
\usepackage{booktabs}
\usepackage[authoryear,round]{natbib}
\begin{document}
"""
CLOSING = r"""
\bibliographystyle{plainnat}
\bibliography{references}
\end{document}
"""
TABLE = r"""\begin{tabular}{lrrrr}\toprule Model & Mean & SD & Min & Max \\ \midrule
n256 & 0.00611 & $7.13\times10^{-4}$ & 0.00566 & 0.00717 \\ \bottomrule\end{tabular}"""
NAMES = sorted(set(REGISTRY) | set(TELEMETRY))


def build(tmp_path: Path, body: str, figure: Path | None = None) -> list[review.Problem]:
    """Compile main.tex with the paper's own references.bib; review it as the paper rule
    does."""
    shutil.copyfile(REPO / "paper" / "references.bib", tmp_path / "references.bib")
    if figure is not None:
        (tmp_path / "figures").mkdir(exist_ok=True)
        shutil.copyfile(figure, tmp_path / "figures" / figure.name)
    (tmp_path / "main.tex").write_text(PREAMBLE + body + CLOSING)
    subprocess.run(["latexmk", "-pdf", "-interaction=nonstopmode", "main.tex"], cwd=tmp_path,
                   capture_output=True, timeout=300)
    return review.review(tmp_path, tmp_path / "main.pdf", NAMES)


def checks(problems: list[review.Problem]) -> set[str]:
    return {p.check for p in problems}


CLEAN = (r"\section{Results}\label{sec:r} As Section~\ref{sec:r} shows, Welch's test "
         r"\citep{welch1947} gives a difference of $3.1\times10^{-4}$\,s." "\n\n"
         r"\begin{table}[h]\centering\footnotesize" + TABLE + r"\caption{A table.}"
         r"\end{table}")


def test_a_clean_document_passes(tmp_path):
    """Exponents in text and in a 9 pt table are set smaller by design: not a problem."""
    assert build(tmp_path, CLEAN) == []


def test_undefined_reference_citation_and_question_marks_are_caught(tmp_path):
    problems = build(tmp_path, CLEAN + r" See Table~\ref{tab:missing} and \citet{nobody2024}.")
    assert {"undefined-reference", "undefined-citation", "unresolved-??"} <= checks(problems)
    assert any("tab:missing" in p.message for p in problems)
    assert any("nobody2024" in p.message for p in problems)


def test_a_less_than_sign_in_text_is_caught_and_escaped(tmp_path):
    """'p < 0.05' typed into text prints 'p ¡ 0.05' in the OT1 font (seen in a quality
    message); texts.tex sets it in math."""
    from containertax.statistics.texts import tex

    problems = build(tmp_path, CLEAN + " Adjusted p < 0.05 in 3 tests.")
    assert "ot1-glyph" in checks(problems)
    assert build(tmp_path, CLEAN + f" Adjusted {tex('p < 0.05')} in 3 tests.") == []


def test_an_overfull_box_beyond_the_tolerance_is_caught(tmp_path):
    wide = r"\noindent\hbox to 1.2\textwidth{a table that runs into the margin\hfil}"
    problems = build(tmp_path, CLEAN + "\n\n" + wide)
    assert "overfull" in checks(problems)
    assert all(float(p.message.split()[1]) > review.OVERFULL_PT for p in problems
               if p.check == "overfull")


def test_a_table_shrunk_with_resizebox_is_caught(tmp_path):
    """The old tables: \\resizebox down to the column width printed them at 4.6-5 pt."""
    shrunk = r"\resizebox{0.35\linewidth}{!}{" + TABLE + "}"
    problems = build(tmp_path, CLEAN + "\n\n" + shrunk)
    fonts = [p for p in problems if p.check == "font-below-min"]
    assert fonts and "Model" in fonts[0].message


def test_scriptsize_text_below_8_pt_is_caught(tmp_path):
    problems = build(tmp_path, CLEAN + "\n\n" + r"{\tiny a caption set far too small}")
    assert "font-below-min" in checks(problems)


def _figure(path: Path, ylabel: str, layout: str | None = "constrained") -> Path:
    fig, ax = plt.subplots(figsize=(3, 2), layout=layout)
    ax.plot([0, 1, 2], [3, 1, 2])
    ax.set_xlabel("Time since launch (s)")
    ax.set_ylabel(ylabel)
    fig.savefig(path)
    plt.close(fig)
    return path


@pytest.mark.parametrize("label", ["cpu_util_pct", "cpu util pct", "power w"])
def test_a_raw_column_name_as_axis_label_is_caught(tmp_path, label):
    """'cpu util pct' is what the old telemetry figure printed (col.replace('_', ' '))."""
    fig = _figure(tmp_path / "trace.pdf", label)
    problems = review.check_figure_labels([fig], NAMES)
    assert [p.check for p in problems] == ["raw-label"]
    assert label in problems[0].message


def test_a_label_cut_at_the_figure_edge_is_caught(tmp_path):
    """A y label longer than its panel, in a figure without a layout engine, runs past the
    page box: the PDF keeps the glyphs but a reader sees a cut label."""
    cut = _figure(tmp_path / "cut.pdf", "Median compute time per product of the run (s)",
                  layout=None)
    assert [p.check for p in review.check_figure_edges([cut])] == ["cut-label"]
    fitted = _figure(tmp_path / "fitted.pdf", "Start-up latency (s)")
    assert review.check_figure_edges([fitted]) == []


def test_the_telemetry_figure_uses_registry_labels(tmp_path):
    n = figures.TELEMETRY_MIN_SAMPLES  # a shorter trace draws no figure (test_referee.py)
    trace = pd.DataFrame({"t_s": [0.1 * i for i in range(n)],
                          "cpu_util_pct": ([10, 50, 40] * n)[:n],
                          "power_w": ([100, 300, 250] * n)[:n],
                          "sm_clock_mhz": ([1980, 1980, 1755] * n)[:n]})
    assert figures.telemetry_trace(trace, tmp_path / "telemetry.pdf")
    assert review.check_figure_labels([tmp_path / "telemetry.pdf"], NAMES) == []
    text = review.pdf_text(tmp_path / "telemetry.pdf")
    assert "CPU utilisation" in text and "MHz" in text


def test_a_figure_in_the_paper_is_checked_at_its_printed_size(tmp_path):
    """A figure scaled down into a narrow box prints its labels below 8 pt."""
    fig = _figure(tmp_path / "small.pdf", "Start-up latency (s)")
    body = CLEAN + "\n\n" + r"\includegraphics[width=0.3\linewidth]{figures/small.pdf}"
    problems = build(tmp_path, body, fig)
    assert "font-below-min" in checks(problems)


def test_a_metric_without_registry_entry_has_no_axis_label():
    with pytest.raises(KeyError, match="not in the metric registry"):
        axis_label(None, "cpu_util_pct")
    assert axis_label(REGISTRY["conv_7x7x512_n2_k2048_1x1_s1_us"], "x").endswith("(µs)")


def _row(rel: float, p_bh: float, tost_p: float) -> pd.Series:
    return pd.Series({"rel_overhead": rel, "p_bh": p_bh, "tost_p": tost_p})


@pytest.mark.parametrize("metric, row, expected", [
    ("startup_s", _row(0.9, 0.001, 0.9), "overhead"),               # slower start: worse
    ("token_throughput", _row(-0.2, 0.01, 0.8), "overhead"),        # fewer tok/s: worse
    ("token_throughput", _row(0.2, 0.01, 0.8), "advantage"),
    ("compute_time_s", _row(0.001, 0.01, 0.001), "equivalent"),     # tiny and within margin
    ("compute_time_s", _row(0.05, 0.5, 0.4), "inconclusive"),
    ("gpu_util_mean_pct", _row(0.1, 0.001, 0.9), "difference"),     # no better side
    # an estimate with neither an interval nor a test (one block): nothing can be said
    ("compute_time_s", _row(0.05, math.nan, math.nan), "not estimable"),
    ("compute_time_s", pd.Series({"rel_overhead": 0.05, "rel_ci_low": -0.1, "p_bh": math.nan,
                                  "tost_p": math.nan}), "inconclusive"),
    ("compute_time_s", _row(math.nan, math.nan, math.nan), "not estimable"),
])
def test_the_verdict_of_a_comparison(metric, row, expected):
    assert facts.verdict(row, REGISTRY[metric], 0.05) == expected


def test_a_raw_metric_name_in_a_quality_item_is_caught(tmp_path):
    """The data-quality list once printed the metric's identifier ('qwen2-0.5b/itl_p99_s'),
    the tests table 'restates token_throughput'; the paper now prints the registry's
    label."""
    from containertax.publishing import tables

    message = "largest effect +22.29 % across the start temperature (qwen2-0.5b/itl_p99_s)"
    raw = r"\begin{itemize}\item \textbf{Thermal dependence} (info): " + texts.tex(message)
    problems = build(tmp_path, CLEAN + "\n\n" + raw + r"\end{itemize}")
    hits = {p.where: p.message for p in problems if p.check == "raw-name-in-text"}
    assert "itl p99 s" in hits["page 1"]  # the PDF's text: OT1 draws the underscore
    assert "itl_p99_s" in hits["main.tex"]  # the source, where it was escaped
    labelled = texts.tex(tables.humanise(message, REGISTRY))
    assert "inter-token latency p99" in labelled and "itl" not in labelled
    assert build(tmp_path, CLEAN + "\n\n" + r"\begin{itemize}\item " + labelled
                 + r"\end{itemize}") == []


def test_a_count_that_reads_wrong_is_caught(tmp_path):
    """'Of the 1 comparison', '0 remain significant' and a sentence opening with a numeral,
    as the old \\nof macro printed them; the words the paper's macros print pass."""
    wrong = ("Of the 1 comparison in the primary family, 0 remain significant. "
             "2 headline comparisons remain inconclusive.")
    problems = [p for p in build(tmp_path, CLEAN + "\n\n" + wrong)
                if p.check == "count-phrasing"]
    assert len(problems) == 3
    right = ("The one comparison in the primary family does not remain significant. "
             "Of the five comparisons, none remains significant and 28 are equivalent. "
             "Two headline comparisons remain inconclusive in 32 runs.")
    assert build(tmp_path, CLEAN + "\n\n" + right) == []


def test_metric_labels_in_prose_keep_their_acronyms():
    from containertax.publishing.tables import in_prose

    assert in_prose(REGISTRY["token_throughput"], "token_throughput") == "token throughput"
    assert in_prose(REGISTRY["gpu_energy_j"], "gpu_energy_j") == "GPU energy"
    assert in_prose(None, "unknown_metric") == "unknown_metric"


def test_a_reference_with_unknown_coauthors_prints_et_al(tmp_path):
    """sani2025's authors are 'Sani and others' (the rest unknown): the text and the list
    of references print 'Sani et al.', never 'Sani and others'."""
    assert build(tmp_path, CLEAN + r" As \citet{sani2025} report.") == []
    text = " ".join(review.prose_text(tmp_path / "main.pdf").split())
    assert "Sani et al. (2025) report" in text and text.count("Sani et al.") == 2
    assert "and others" not in text


def test_a_machine_path_and_python_reprs_in_the_text_are_caught(tmp_path):
    """Planted in a compiled document: the checkout's path in a table row, Python's False
    and None, a numpy scalar, a dict and an empty list; 'None' opening a sentence and the
    system paths every Linux has (/usr, /proc/self/status) pass."""
    planted = (r"Host paths mounted: /work/main/results/x/compile-cache as /containertax/cache."
               r" Coordinate descent False; limit None; n np.int64(3); flags \{'a': 1\};"
               r" mounts [].")
    problems = build(tmp_path, CLEAN + "\n\n" + planted)
    found = [p.message for p in problems]
    assert sum(p.check == "machine-path" for p in problems) == 1
    assert any("/work/main/results/x/compile-cache" in m for m in found)
    literals = " ".join(p.message for p in problems if p.check == "python-literal")
    for what in ("False", "None", "numpy", "dict", "empty list"):
        assert what in literals
    fine = ("None of the values was excluded. Memory is read from /proc/self/status; the "
            "container mounts /usr and /opt read-only.")
    assert review.check_artefacts(fine) == []


def test_a_doubled_word_is_caught_but_a_table_column_is_not(tmp_path):
    """'blas blas,blas' (NumPy's build info printed as it was) in a sentence is caught;
    a table whose column repeats one word in every row is not."""
    table = (r"\begin{tabular}{lll}\toprule Env. & Family & Test \\ \midrule "
             r"docker & secondary & paired \\ docker & secondary & paired \\ \bottomrule"
             r"\end{tabular}")
    problems = build(tmp_path, CLEAN + "\n\nSoftware in native: numpy 1.24.2, blas blas,blas."
                     "\n\n" + table)
    doubled = [p for p in problems if p.check == "doubled-word"]
    assert len(doubled) == 1 and "blas" in doubled[0].message
    assert build(tmp_path, CLEAN + "\n\n" + table) == []


def test_an_identifier_set_as_words_is_caught_and_code_passes(tmp_path):
    """'sdpa\\_gqa' in the prose font prints 'sdpa gqa'; in \\texttt it is code."""
    from containertax.publishing.tables import code
    from containertax.statistics.texts import tex

    problems = build(tmp_path, CLEAN + "\n\nAttention " + tex("sdpa_gqa") + ".")
    hits = [p for p in problems if p.check == "identifier-in-text"]
    assert len(hits) == 1 and "sdpa_gqa" in hits[0].message
    assert build(tmp_path, CLEAN + "\n\nAttention " + code(tex("sdpa_gqa")) + ".") == []


def test_a_config_key_in_generated_text_is_caught():
    """'attn implementation' (a workload parameter's key with its underscore turned into a
    space) and 'results_dir' are caught; 'reference environment', English in main.tex, is
    not, though it is a key's words too."""
    keys = review.config_keys()
    assert {"attn_implementation", "results_dir", "reference_environment"} <= keys
    generated = (r"dtype bfloat16; attn implementation sdpa\_\allowbreak{}gqa; "
                 "the reference environment")
    text = ("Parameters: dtype bfloat16; attn implementation sdpa gqa. Results in results_dir. "
            "Against the reference environment.")
    problems = review.check_config_keys(text, keys, generated,
                                        "compared with the reference environment")
    assert len(problems) == 1
    assert "attn_implementation" in problems[0].message
    assert "results_dir" in problems[0].message
    assert "reference_environment" not in problems[0].message
    assert review.check_config_keys("Parameters: dtype bfloat16; attention PyTorch SDPA.",
                                    keys, "attention PyTorch SDPA", "") == []


def _order(envs_by_block: list[list[str]], models: tuple[str, ...] = ("m",)) -> pd.DataFrame:
    rows, position = [], 0
    for block, envs in enumerate(envs_by_block, 1):
        for model in models:
            for env in envs:
                rows.append({"position": position, "model": model, "environment": env,
                             "repetition": block, "block": block})
                position += 1
    return pd.DataFrame(rows)


BALANCE = "Blocks alternate, so that each environment runs first and last equally often."


def test_a_balance_claim_the_schedule_contradicts_is_caught():
    """Three environments alternated forward and reversed: the middle one is never first
    or last (the h100-engine-gqa schedule), so the sentence is false; two environments
    alternated make it true."""
    three = _order([["native", "native-aa", "docker"], ["docker", "native-aa", "native"]] * 3)
    problems = review.check_campaign_claims(BALANCE, three)
    assert [p.check for p in problems] == ["balance-claim"]
    assert "native-aa 0" in problems[0].message
    two = _order([["native", "docker"], ["docker", "native"]] * 3)
    assert review.check_campaign_claims(BALANCE, two) == []


def test_every_model_with_one_model_is_caught(tmp_path):
    """'for every model' in a campaign of one model; with two models it is true."""
    claim = "Start-up is longer in docker for every model, by 0.23 s."
    one = _order([["native", "docker"], ["docker", "native"]])
    assert [p.check for p in review.check_campaign_claims(claim, one)] == ["one-model-claim"]
    two = _order([["native", "docker"], ["docker", "native"]], models=("a", "b"))
    assert review.check_campaign_claims(claim, two) == []
    # read from a campaign's folder as the paper rule does: schedule.csv, else runs.csv
    one.to_csv(tmp_path / "runs.csv", index=False)
    assert len(review.run_order(tmp_path)) == len(one)
    (tmp_path / "schedule.csv").write_text(two.to_csv(index=False))
    assert review.run_order(tmp_path)["model"].nunique() == 2


def test_build_runs_latex_again_while_the_log_asks(tmp_path, monkeypatch):
    """latexmk 4.79 sometimes stops while LaTeX's last pass says "Label(s) may have
    changed" (2 of 3 clean builds of the committed h100-matmul paper). TEST DOUBLE of that
    early stop: a `latexmk` on PATH that runs pdflatex once. A forward reference then
    leaves the request in the log; paper.build must run LaTeX again until it is gone, and
    the review finds nothing. Planted: with no extra pass (RERUNS 0) the review's 'rerun'
    problem is left."""
    from containertax.publishing import paper

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "latexmk").write_text(
        "#!/bin/sh\nexec pdflatex -interaction=nonstopmode -halt-on-error main.tex\n")
    (fake / "latexmk").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    doc = (r"\documentclass{article}\begin{document}See Section~\ref{s:late}."
           r"\section{Late}\label{s:late}Text.\end{document}")

    def build(where: Path) -> list[dict]:
        src, out = where / "src", where / "build"
        src.mkdir(parents=True)
        out.mkdir()
        (src / "main.tex").write_text(doc)
        paper.build(src, out, where / "paper.pdf")
        return [p["check"] for p in json.loads((out / "review.json").read_text())]

    assert "rerun" not in build(tmp_path / "a")
    monkeypatch.setattr(paper, "RERUNS", 0)
    assert "rerun" in build(tmp_path / "b")


def test_a_negative_number_set_with_a_hyphen_is_caught_and_tex_sets_a_minus(tmp_path):
    """'partial r -0.85' (a quality message, seen in the demo paper) typed as text prints a
    hyphen: caught; through texts.tex it prints a minus and passes."""
    problems = build(tmp_path, CLEAN + " Thermal dependence (partial r -0.85, p 0.003).")
    hits = [p for p in problems if p.check == "hyphen-minus"]
    assert len(hits) == 1 and "partial r -0.85" in hits[0].message
    fixed = texts.tex("Thermal dependence (partial r -0.85, p 0.003).")
    assert build(tmp_path, CLEAN + " " + fixed) == []
    assert "(partial r \u22120.85," in review.prose_text(tmp_path / "main.pdf")


def test_names_dates_and_dashes_are_not_negative_numbers(tmp_path):
    """Hyphens inside names, dates and ranges, and '--' (an en dash), pass the check, and
    texts.tex leaves them as they are."""
    words = ("Model qwen2-0.5b ran on 2026-11-27 on x86-64 with Llama-3-8B and n-1 degrees "
             "of freedom, blocks 3-4 and pages 10--20 of the manual, vs. -x.")
    assert texts.tex(words) == words  # nothing escaped, no minus set
    assert build(tmp_path, CLEAN + " " + texts.tex(words)) == []


@pytest.mark.parametrize("planted", ["(partial r -0.85, p 0.003)", "rho -0.80 over 8",
                                     "product -1.3 % [-4.5, +2.0]", "ms [-\n197, +387]",
                                     "(\n-.5 ms)", "-6.9 [-9.5, -4.4]"])
def test_check_signs_catches_a_hyphen_that_starts_a_number(planted):
    """On the raw text: a hyphen at a line's start, after a space, '[' or '(', and one that
    ends a line before the number's digits (pdftotext's reading order drops it there)."""
    problems = review.check_signs("page one\f" + planted)
    assert [(p.check, p.where) for p in problems] == [("hyphen-minus", "page 2")]


@pytest.mark.parametrize("fine", ["qwen2-0.5b", "on 2026-11-27", "x86-\n64", "10\u201320",
                                  "[\u2212197, +387]", "n-1", "Llama-3-8B", "--cpus 2"])
def test_check_signs_passes_names_dates_and_minus_signs(fine):
    assert review.check_signs(fine) == []


# the phases section's sentence (paper/phases.tex) in a box as wide as the planted text up to
# its interval's hyphen: TeX ends the line there, where it may break after a hyphen
WALL_SENTENCE = (r"a difference of \ctx{phases-wall-diff}~ms [\ctx{phases-wall-low}, "
                 r"\ctx{phases-wall-high}] over \ctx{phases-blocks} blocks.")


def _at_line_end(values: dict[str, object]) -> str:
    return (tables.macros(values) + r"\newlength\upto\settowidth\upto{a difference of +95~ms [-}"
            r"\noindent\parbox[t]{\upto}{" + WALL_SENTENCE + "}\n")


def test_a_negative_interval_end_at_a_line_end_reads_as_its_finding(tmp_path):
    """The CI failure, made to happen: the wall time's interval [-197, +387] ms with its
    lower end where TeX ends a line. Set with a hyphen (as phases_paper printed it) the
    line broke after '[-' and the PDF's text read '[197, +387]', which is no finding's
    text (printed-twice); phases_paper's values set a minus, which does not break."""
    from types import SimpleNamespace

    from containertax.publishing import phases_paper
    from containertax.statistics import phases

    wall = {"model": "n256", "environment": "docker", "reference": "native", "aa": False,
            "metric": phases.WALL, "label": "Process wall time", "verdict": "inconclusive",
            "n_blocks": 4, "mean_ref": 0.396, "mean_env": 0.491, "diff_s": 0.095,
            "diff_low": -0.197, "diff_high": 0.387, "p_bh": 0.5}
    findings = {phases.ms_texts(0.095, -0.197, 0.387)}  # the texts findings.csv holds
    assert findings == {("+95", "-197", "+387")}
    values = phases_paper.values(SimpleNamespace(raw={}, models=[]), [wall],
                                 pd.DataFrame(columns=["metric"]))
    planted = {**values, "phases-wall-low": "-197"}  # the text-mode hyphen of before
    build(tmp_path, _at_line_end(planted))
    text = review.prose_text(tmp_path / "main.pdf")
    assert "[197, +387]" in " ".join(text.split())  # the reproduction: the sign is lost
    assert [p.check for p in review.check_printed_once(text, findings)] == ["printed-twice"]
    assert [p.check for p in review.check_signs(review.raw_text(tmp_path / "main.pdf"))
            ] == ["hyphen-minus"]
    build(tmp_path, _at_line_end(values))
    text = review.prose_text(tmp_path / "main.pdf")
    assert "[\u2212197, +387]" in " ".join(text.split())
    assert review.check_printed_once(text, findings) == []
    assert review.check_signs(review.raw_text(tmp_path / "main.pdf")) == []
    # the phases table sets its signs the same way
    assert "\\ensuremath{-}197" in phases_paper.table([wall])
    assert not re.search(r"(?<![\w.{^-])-\d", phases_paper.table([wall]))
