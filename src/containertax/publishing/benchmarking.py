"""Hoefler and Belli's twelve rules for reporting performance results (SC '15, "Scientific
benchmarking of parallel computing systems", doi:10.1145/2807591.2807644), as a checklist
the paper prints in an appendix: for each rule, where this build meets it, or 'not met'
with why, or 'not checked'. Every status is computed here from what the build has (the
numbers of paper_values, the metric registry, the campaign's facts), never written into a
template: a campaign without request latencies does not claim its percentiles.

RULES holds each rule in the paper's own words (its boxed statements, Sections 2 to 5),
numbered as there; the appendix prints them quoted. The texts were taken from a full-text
transcription of the authors' copy (https://htor.inf.ethz.ch/publications/img/
hoefler-scientific-benchmarking.pdf; that PDF itself was not reachable when they were
copied) and agree word for word with independent quotations of the rules. An earlier
paraphrase from memory swapped rules 7 and 8: rule 7 is the sound comparison, rule 8 the
choice of mean, median or other percentiles.
The review (publishing/review.py, check_benchmarking) checks the six that a generated
paper's text can be held to: each headline ratio with its base value, each headline
estimate with its interval and n, a named test, spread shown in a figure, the factor and
level table, and the measuring tree that a rerun needs.
"""

from __future__ import annotations

from typing import Any

from containertax.publishing.tables import in_prose
from containertax.statistics.texts import tex
from containertax.workloads.metric_registry import MetricInfo

RULES = {
    1: "When publishing parallel speedup, report if the base case is a single parallel "
       "process or best serial execution, as well as the absolute execution performance of "
       "the base case.",
    2: "Specify the reason for only reporting subsets of standard benchmarks or applications "
       "or not using all system resources.",
    3: "Use the arithmetic mean only for summarizing costs. Use the harmonic mean for "
       "summarizing rates.",
    4: "Avoid summarizing ratios; summarize the costs or rates that the ratios base on "
       "instead. Only if these are not available use the geometric mean for summarizing "
       "ratios.",
    5: "Report if the measurement values are deterministic. For nondeterministic data, "
       "report confidence intervals of the measurement.",
    6: "Do not assume normality of collected data (e.g., based on the number of samples) "
       "without diagnostic checking.",
    7: "Compare nondeterministic data in a statistically sound way, e.g., using "
       "non-overlapping confidence intervals or ANOVA.",
    8: "Carefully investigate if measures of central tendency such as mean or median are "
       "useful to report. Some problems, such as worst-case latency, may require other "
       "percentiles.",
    9: "Document all varying factors and their levels as well as the complete experimental "
       "setup (e.g., software, hardware, techniques) to facilitate reproducibility and "
       "provide interpretability.",
    10: "For parallel time measurements, report all measurement, (optional) "
        "synchronization, and summarization techniques.",
    11: "If possible, show upper performance bounds to facilitate interpretability of the "
        "measured results.",
    12: "Plot as much information as needed to interpret the experimental results. Only "
        "connect measurements by lines if they indicate trends and the interpolation is "
        "valid.",
}
MET, NOT_MET, NOT_CHECKED = "met", "not met", "not checked"


def _yes(values: dict[str, Any], key: str) -> bool:
    return bool(values.get(key)) and values.get(key) not in ("0", "--")


def checklist(values: dict[str, Any], reg: dict[str, MetricInfo],
              metrics: list[str], shape_checked: bool = False) -> dict[int, tuple[str, str]]:
    """rule -> (status, where it is met or why not), from the numbers of this build
    (paper_values: hl/N/*, has-fig-*, the design's keys) and the analysed metrics."""
    heads = range(1, int(values.get("hl-count") or 0) + 1)
    with_rel = [n for n in heads if _yes(values, f"hl/{n}/has-rel")]
    based = [n for n in with_rel if values.get(f"hl/{n}/base", "--") != "--"]
    out: dict[int, tuple[str, str]] = {}
    out[1] = ((MET, "each headline ratio with its reference's mean (Section~\\ref{sec:results})"
               ", every mean in Table~\\ref{tab:descriptives}")
              if with_rel and len(based) == len(with_rel) else
              (NOT_MET, "no headline ratio has its base value") if not based else
              (NOT_MET, f"{len(with_rel) - len(based)} headline ratio(s) without a base value"))
    # the hardware as the records show it (design_values: gpu, n-gpus, gpu-names), never a
    # template's: a CPU campaign has no GPU, an import's table records no hardware
    gpus = int(values.get("n-gpus") or 0)
    shown = ("the source's" if _yes(values, "imported") else
             f"the records show {gpus} {'GPU' if gpus == 1 else 'GPUs'}: "
             f"{values.get('gpu-names', '--')}" if _yes(values, "gpu") and gpus else
             "the records show no GPU: every run on the CPU")
    out[2] = (NOT_MET, f"the paper does not say why these workloads and this hardware "
                       f"({shown}) were chosen")
    rates = [m for m in metrics if reg.get(m) is not None and reg[m].direction == "higher"]
    out[3] = ((NOT_MET, "rates (" + ", ".join(tex(in_prose(reg[m], m)) for m in rates) + ") are "
               "summarised by arithmetic and geometric means, not harmonic means") if rates
              else (MET, "every metric is a cost, summarised by its arithmetic mean "
                         "(Table~\\ref{tab:descriptives})"))
    out[4] = (MET, "relative differences are "
              + ("geometric means of the per-block ratios" if _yes(values, "design-paired")
                 else "ratios of the environments' geometric means")
              + ", with the per-run values beside them")
    with_ci = [n for n in with_rel if _yes(values, f"hl/{n}/has-ci")]
    out[5] = ((MET, "each headline estimate with its interval and n (Section~\\ref"
                    "{sec:results}), every comparison in Table~\\ref{tab:estimates}")
              if with_rel and len(with_ci) == len(with_rel) else
              (NOT_MET, f"{len(with_rel) - len(with_ci)} headline estimate(s) without an "
                        "interval"))
    out[6] = ((MET, "the stopping rule checks each look's blocks for skew and outliers")
              if shape_checked else
              (MET, "the primary test is a sign-flip permutation test, free of normality")
              if _yes(values, "primary-signflip") else
              (NOT_MET, "the paired $t$ test assumes normal log ratios; no diagnostic of "
                        "them is printed"))
    out[7] = ((MET, f"the pre-specified {values.get('hl/1/test', 'primary')} test, "
                    "corrected within each family (Table~\\ref{tab:tests})")
              if with_rel else (NOT_MET, "no headline comparison was tested"))
    # the latency percentiles' table is the tables step's (per-request data): whether it
    # exists is decided when the paper is set, by its label
    out[8] = ("\\ifcsname r@tab:latency\\endcsname met\\else not met\\fi",
              "\\ifcsname r@tab:latency\\endcsname request latency percentiles (p50, p95, "
              "p99) in Table~\\ref{tab:latency}\\else only means, medians and quartiles "
              "are reported; no tail percentile\\fi")
    out[9] = ((NOT_MET, "Table~\\ref{tab:factors} (factors and levels); the set-up is the "
                        "source's, not in the imported table") if _yes(values, "imported") else
              (MET, "Table~\\ref{tab:factors} (factors and levels); Tables~\\ref{tab:system}, "
                    "\\ref{tab:environments} and~\\ref{tab:workloads} (the set-up)"))
    out[10] = (NOT_CHECKED, "each metric's measurement is defined in the workflow's metric "
                            "registry; the build does not check the methods' words against it")
    out[11] = ((MET, "the memory roofline of a decoding step: each run's share of its "
                     "bandwidth bound (Table~\\ref{tab:descriptives})")
               if "hbm_roofline_pct" in metrics else
               (NOT_MET, "no upper bound (such as a roofline) is computed for these workloads"))
    # which figures exist is the figures step's (figures.tex): decided when the paper is set
    out[12] = ("\\ifctxdefined{has-fig-paired}{met}{\\ifctxdefined{has-fig-dist-headline}{met}"
               "{not met}}",
               "\\ifctxdefined{has-fig-paired}{every block's difference under its estimate "
               "(Figure~\\ref{fig:paired})}{\\ifctxdefined{has-fig-dist-headline}{every "
               "run's value by environment (Figure~\\ref{fig:dist-headline})}{no figure shows "
               "the spread of the headline metric}}; no line joins unordered points")
    return out


def values(values: dict[str, Any], reg: dict[str, MetricInfo],
           metrics: list[str], shape_checked: bool = False) -> dict[str, Any]:
    """numbers.tex's keys of the checklist: hb/N/rule, hb/N/status, hb/N/where, and
    hb-met (how many rules are met)."""
    from containertax.statistics import texts

    found = checklist(values, reg, metrics, shape_checked)
    out: dict[str, Any] = {"hb-count": len(RULES)}
    for n, rule in RULES.items():
        status, where = found[n]
        out[f"hb/{n}/rule"] = texts.tex(rule)
        out[f"hb/{n}/status"] = status
        out[f"hb/{n}/where"] = where  # LaTeX already: references
    return out
