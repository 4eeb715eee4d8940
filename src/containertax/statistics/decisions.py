"""The decision table: from a comparison's statistics, the A/A control of its metric and
the data-quality findings on its metric to the words the paper may print.

One home for every verdict word the paper prints (docs/measurement.md, "From statistics to
words", is this module as a table). A word is never stronger than the evidence: an A/A
control that failed or could not show the instrument's resolution on a metric, or an
error-severity quality finding on it, adds a caveat to every verdict on that metric, and a
claim over several models rests on corrected tests and is not made with one model.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

WORDS = ("overhead", "equivalent", "inconclusive", "advantage", "difference", "not estimable")

# A/A status of one comparison (a replica against the environment it copies), and of a
# metric (all its A/A comparisons)
AA_STATUSES = ("passed", "failed", "inconclusive", "cannot fail", "untested")
# the A/A statuses that qualify every verdict on their metric
AA_CAVEAT = {"failed": "aa-failed", "inconclusive": "aa-inconclusive",
             "cannot fail": "aa-inconclusive"}
# caveats, most serious first
CAVEATS = ("aa-failed", "quality-error", "aa-inconclusive")


def _nan(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _get(r: Any, key: str) -> float:
    value = r.get(key, math.nan) if hasattr(r, "get") else getattr(r, key, math.nan)
    return math.nan if _nan(value) else float(value)


# --- the A/A control with a criterion -----------------------------------------------


def aa_comparison_status(r: Any, resolution: float, alpha: float) -> str:
    """One A/A comparison: 'failed' where its corrected p (Bonferroni within its family) is
    below alpha; 'passed' where it is equivalent within +-resolution (TOST at that bound on
    the primary test's scale and design rejects, and the 95 % interval lies inside the
    band); 'cannot fail' where neither and the primary test cannot reach alpha after
    correction (a sign-flip test with too few blocks); 'untested' where there is neither a
    p nor an interval (degenerate data); 'inconclusive' otherwise: the sample cannot tell
    an instrument that resolves the band from one that does not."""
    p_corr = _get(r, "p_bonferroni")
    if not _nan(p_corr) and p_corr < alpha:
        return "failed"
    tost = _get(r, "tost_resolution_p")
    low, high = _get(r, "rel_ci_low"), _get(r, "rel_ci_high")
    if (not _nan(tost) and tost < alpha and not _nan(low) and not _nan(high)
            and -resolution <= low and high <= resolution):
        return "passed"
    if _nan(_get(r, "p")) and _nan(tost) and _nan(low):
        return "untested"
    min_p, size = _get(r, "signflip_min_p"), _get(r, "family_size")
    if (str(r.get("primary_test", "")).startswith("sign-flip") and not _nan(min_p)
            and not _nan(size) and min_p * size >= alpha):
        return "cannot fail"
    return "inconclusive"


def aa_metric_status(statuses: Iterable[str]) -> str:
    """A metric's A/A status over its comparisons (models, replicas): failed if any failed,
    passed only if every one passed, untested if none was tested, else the weakest."""
    s = list(statuses)
    if not s or all(x == "untested" for x in s):
        return "untested"
    if "failed" in s:
        return "failed"
    if all(x == "passed" for x in s):
        return "passed"
    return "inconclusive" if "inconclusive" in s or "passed" in s else "cannot fail"


def aa_overall_status(primary: dict[str, str]) -> str:
    """The campaign's A/A status over its primary metrics (metric -> status)."""
    return aa_metric_status(primary.values())


# --- quality findings on a metric -----------------------------------------------------


def error_metrics(findings: list[dict[str, Any]], metrics: Iterable[str]) -> set[str]:
    """The metrics an error-severity data-quality finding concerns (its details name the
    metric, or the cells it found); an error that names none concerns every metric. The
    A/A control's own findings are left out: its status qualifies verdicts by itself."""
    metrics = set(metrics)
    out: set[str] = set()
    for f in findings:
        if f.get("severity") != "error" or str(f.get("check", "")).startswith("aa_"):
            continue
        d = f.get("details") or {}
        named = {d["metric"]} if d.get("metric") else {
            c["metric"] for c in d.get("cells", []) if isinstance(c, dict) and "metric" in c}
        out |= named if named else metrics
    return out


# --- the verdict of one comparison ----------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """A verdict word and the caveats it must be printed with (most serious first)."""
    word: str
    caveats: tuple[str, ...] = ()

    @property
    def short(self) -> str:
        """As the headline table prints it: 'equivalent (A/A failed)'."""
        if not self.caveats:
            return self.word
        return f"{self.word} ({', '.join(SHORT[c] for c in self.caveats)})"


SHORT = {"aa-failed": "A/A failed", "aa-inconclusive": "A/A inconclusive",
         "quality-error": "quality error"}


def caveat_words(caveat: str, metric_words: str, resolution_pct: float) -> str:
    """A caveat as the prose prints it, after 'but'."""
    return {"aa-failed": f"the A/A control failed on {metric_words}",
            "aa-inconclusive": f"the A/A control did not show a resolution of "
                               f"{resolution_pct:g} % on {metric_words}",
            "quality-error": f"a data-quality error was found on {metric_words}"}[caveat]


def caveats_for(aa_status: str | None, quality_error: bool) -> tuple[str, ...]:
    found = {AA_CAVEAT[aa_status]} if aa_status in AA_CAVEAT else set()
    if quality_error:
        found.add("quality-error")
    return tuple(c for c in CAVEATS if c in found)


def verdict(r: Any, direction: str, alpha: float, *, aa_status: str | None = None,
            quality_error: bool = False, shown: str | None = None) -> Verdict:
    """The decision table's verdict of one comparison: 'equivalent' (TOST within the
    margin), 'overhead' / 'advantage' (BH-corrected difference, worse / better for the
    container by the metric's direction), 'difference' (a metric with no better side) or
    'inconclusive' (neither), or 'not estimable' (no relative difference, or neither an
    interval nor a test: comparisons.py's not_estimable / no_interval say why). A claim
    (any word but inconclusive and not estimable) carries a caveat where the metric's A/A
    control failed or was inconclusive, or an error-severity quality finding concerns the
    metric; 'inconclusive' and 'not estimable' claim nothing and need none.

    shown: under a stopping rule, what the look at which the model stopped showed
    ('equivalence', 'difference' or 'none', statistics/sequential.py: TOST and the paired t
    test at that look's level a_k) replaces the fixed design's TOST at alpha and BH p; the
    rest of the table is the same for both designs."""
    tost, p_bh = _get(r, "tost_p"), _get(r, "p_bh")
    if _nan(_get(r, "rel_overhead")) or (_nan(_get(r, "rel_ci_low")) and _nan(p_bh)):
        return Verdict("not estimable")
    equivalent = (shown == "equivalence" if shown is not None
                  else not _nan(tost) and tost < alpha)
    different = (shown == "difference" if shown is not None
                 else not _nan(p_bh) and p_bh < alpha)
    if equivalent:
        word = "equivalent"
    elif different:
        if direction == "none":
            word = "difference"
        else:
            rel = _get(r, "rel_overhead")
            worse = rel > 0 if direction == "lower" else rel < 0
            word = "overhead" if worse else "advantage"
    else:
        word = "inconclusive"
    if word == "inconclusive":
        return Verdict(word)
    return Verdict(word, caveats_for(aa_status, quality_error))


# --- claims over several models -------------------------------------------------------


def every_model(rows: pd.DataFrame, alpha: float) -> dict[str, Any]:
    """Whether a metric is larger in one environment than in the reference for every model:
    'every model' only with two or more models, each comparison larger (its 95 % interval
    above zero) and significant after Bonferroni correction within its family (a claim
    about all of them is false if any one is: the family-wise error rate is the one that
    bounds it); 'the one model' where a single model shows it; None otherwise."""
    if rows.empty:
        return {"present": False, "claim": None}
    p_bonf = rows["p_bonferroni"] if "p_bonferroni" in rows else pd.Series(math.nan,
                                                                           index=rows.index)
    holds = bool(((rows["rel_ci_low"] > 0) & (p_bonf < alpha)).all())
    diff = rows["mean_env"] - rows["mean_ref"]
    n = len(rows)
    claim = None if not holds else ("every model" if n >= 2 else "the one model")
    return {"present": True, "claim": claim, "n": n, "min": float(diff.min()),
            "max": float(diff.max()), "significant": int((p_bonf < alpha).sum())}
