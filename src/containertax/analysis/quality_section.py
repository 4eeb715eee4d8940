"""The paper's data-quality section (paper/quality.tex): the findings and the excluded
values as the paper lists them."""

from __future__ import annotations

from typing import Any

from containertax.analysis import tables
from containertax.analysis.metrics import MetricInfo

# excluded values listed one by one; the rest are counted (all are in quality.json)
LISTED_EXCLUSIONS = 40


def check_words(check: str) -> str:
    """A quality check's name as a reader sees it: 'thermal_dependence' -> 'Thermal
    dependence', 'aa_calibration' -> 'A/A calibration'."""
    words = check.replace("aa_", "A/A ").replace("_", " ")
    return words[:1].upper() + words[1:]


def quality_tex(quality_report: dict[str, Any], reg: dict[str, MetricInfo]) -> str:
    """The data-quality findings as the paper lists them: each check's name in words and
    every metric by its label (quality.json keeps the identifiers)."""
    findings = quality_report["findings"]
    lines = []
    if findings:  # none: the text says so ('they found no problems')
        lines.append("\\begin{itemize}")
        for finding in findings:
            item = (f"\\textbf{{{tables.tex(check_words(finding['check']))}}} "
                    f"({tables.tex(finding['severity'])}): "
                    + tables.unbroken_pct(tables.tex(tables.humanise(finding["message"], reg))))
            if finding["severity"] == "error":  # what makes the analysis untrustworthy: in red
                item = f"\\textcolor{{red}}{{{item}}}"
            lines.append(f"\\item {item}")
        lines.append("\\end{itemize}")
    rules = quality_report["exclude_rules"]
    dropped = quality_report["excluded"]
    kept = (f"all {quality_report['n_rows']} values were kept" if not dropped else
            f"{len(dropped)} of {quality_report['n_rows']} values "
            f"{'was' if len(dropped) == 1 else 'were'} excluded")
    lines.append(f"Exclusion rule: {tables.tex(', '.join(rules)) if rules else 'none'} "
                 f"(non-finite values are always excluded); {kept}.")
    if dropped:
        lines.append("\\begin{itemize}")
        for value in dropped[:LISTED_EXCLUSIONS]:
            why = ", ".join(key[5:] for key, flagged in value.items()
                            if key.startswith("flag_") and flagged)
            metric = tables.in_prose(reg.get(value["metric"]), value["metric"])
            lines.append(f"\\item {tables.tex(value['model'])}/"
                         f"{tables.tex(value['environment'])}/"
                         f"rep {value['repetition']}, {tables.tex(metric)} = "
                         f"{tables.num(value['value'])}: {tables.tex(why)}")
        if len(dropped) > LISTED_EXCLUSIONS:
            lines.append(f"\\item and {len(dropped) - LISTED_EXCLUSIONS} more "
                         "(see quality.json)")
        lines.append("\\end{itemize}")
    return "\n".join(lines) + "\n"
