"""The data-quality section reads as it did when Python wrote its sentences: quality.tex
holds only the findings, the excluded values and the rule's values, and the words
(exclusion rule, 'all N values were kept', '1 of 5 values was excluded', 'and N more')
are paper/main.tex's. Each case compiles main.tex's own quality block with generated
quality.tex and numbers and reads the PDF's text."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from containertax.publishing import quality_section, tables
from containertax.workloads.metric_registry import registry
from tests.conftest import REPO

pytestmark = pytest.mark.skipif(shutil.which("latexmk") is None or shutil.which(
    "pdftotext") is None, reason="needs TeX Live and poppler-utils")

REGISTRY = registry(None)


def quality_block() -> str:
    """main.tex's lines from the quality.tex comment to the end of its group."""
    text = (REPO / "paper" / "main.tex").read_text()
    start = text.index("% quality.tex:")
    end = text.index("\\par}", start) + len("\\par}")
    return text[start:end]


def rendered(tmp_path, report: dict) -> str:
    """The text of a document made of main.tex's quality block and the generated parts."""
    numbers = tables.macros({"findings": len(report["findings"]),
                             "excluded": len(report["excluded"])})
    (tmp_path / "numbers.tex").write_text(numbers)
    (tmp_path / "quality.tex").write_text(quality_section.quality_tex(report, REGISTRY))
    (tmp_path / "main.tex").write_text(
        "\\documentclass{article}\\usepackage{xcolor}\\input{numbers.tex}"
        "\\pagestyle{empty}\\begin{document}\n" + quality_block() + "\n\\end{document}\n")
    proc = subprocess.run(["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error",
                           "main.tex"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:]
    text = subprocess.run(["pdftotext", "main.pdf", "-"], cwd=tmp_path, capture_output=True,
                          text=True, check=True).stdout
    return " ".join(text.split())


def excluded(n: int) -> list[dict]:
    return [{"model": "n256", "environment": "docker", "repetition": rep,
             "metric": "compute_time_s", "value": 1.5, "flag_outlier": True,
             "flag_nonfinite": False} for rep in range(1, n + 1)]


def test_nothing_found_and_nothing_excluded(tmp_path):
    text = rendered(tmp_path, {"findings": [], "exclude_rules": [], "excluded": [],
                               "n_rows": 416})
    assert text == ("Exclusion rule: none (non-finite values are always excluded); all 416 "
                    "values were kept.")


def test_findings_and_one_excluded_value(tmp_path):
    findings = [{"check": "aa_calibration", "severity": "error",
                 "message": "native-aa differs: n256/compute_time_s +22.29 % [1, 2]"},
                {"check": "thermal_dependence", "severity": "warning", "message": "drift"}]
    report = {"findings": findings, "exclude_rules": ["outliers"], "excluded": excluded(1),
              "n_rows": 5}
    text = rendered(tmp_path, report)
    label = tables.in_prose(REGISTRY["compute_time_s"], "compute_time_s")
    assert f"A/A calibration (error): native-aa differs: n256, {label} +22.29 % [1, 2]" in text
    assert "Thermal dependence (warning): drift" in text
    assert ("Exclusion rule: outliers (non-finite values are always excluded); 1 of 5 "
            "values was excluded.") in text
    assert f"n256/docker/rep 1, {label} = {tables.num(1.5)}: outlier" in text
    # an error is set in red: main.tex's \qualityerror, chosen by severity
    quality = (tmp_path / "quality.tex").read_text()
    assert "\\qualityerror{A/A calibration}" in quality
    assert "\\qualityfinding{Thermal dependence}" in quality
    assert re.search(r"\\newcommand\{\\qualityerror\}\[3\]\{[^\n]*\\textcolor\{red\}",
                     quality_block())


def test_many_excluded_values_are_counted_past_the_listed(tmp_path):
    report = {"findings": [], "exclude_rules": ["outliers", "duplicate"],
              "excluded": excluded(45), "n_rows": 50}
    text = rendered(tmp_path, report)
    assert ("Exclusion rule: outliers, duplicate (non-finite values are always excluded); "
            "45 of 50 values were excluded.") in text
    assert text.count("n256/docker/rep") == quality_section.LISTED_EXCLUSIONS
    assert "and 5 more (see quality.json)" in text
