"""Phase 2B to 2C: which single Docker options beat the baseline, and their combination.

A variant (an environment with `extends: <reference>`) qualifies when, on the chosen
metric, it is better than the reference on every model and significantly so (BH-adjusted
within the comparison's family, comparisons.csv) on at least one: an option that helps one
model and hurts another is not one to switch on for all. Options of qualifying variants are
merged; where two set the same option (shm 8g / 32g / 60g) the larger mean improvement
wins. The decision stays the researcher's: this prints the evidence and a snippet, it edits
no config.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from containertax.campaign.config import Campaign
from containertax.core.errors import ContainertaxError
from containertax.workloads.metric_registry import registry

if TYPE_CHECKING:
    import pandas as pd


class OptimisationError(ContainertaxError, ValueError):
    """No phase-2B result this can read; the message says what is missing."""


@dataclass(frozen=True)
class Verdict:
    environment: str
    options: dict[str, Any]
    improvement: float  # mean over models of the relative gain (positive = better)
    per_model: dict[str, tuple[float, float]]  # model -> (relative difference, BH p)
    qualifies: bool


def better_sign(campaign: Campaign, metric: str) -> float:
    """+1 where higher is better, -1 where lower is; a metric without a better direction
    cannot choose options (one-at-a-time verdicts and factorial effects alike)."""
    info = registry(campaign.analysis.get("define_metrics")).get(metric)
    if info is None or info.direction not in ("higher", "lower"):
        raise OptimisationError(f"metric {metric!r} has no better direction in the registry; "
                                "choose e.g. token_throughput, request_latency_s or "
                                "compute_time_s.")
    return 1.0 if info.direction == "higher" else -1.0


def judge(campaign: Campaign, comparisons: pd.DataFrame, metric: str) -> list[Verdict]:
    sign = better_sign(campaign, metric)
    alpha = campaign.analysis["alpha"]
    variants = [e for e in campaign.environments
                if e.spec.get("variant_of") == campaign.reference]
    if not variants:
        raise OptimisationError(
            f"{campaign.source}: no environment 'extends: {campaign.reference}' (the "
            "reference); best-options reads a phase-2B campaign such as config/phase-2b.yaml.")
    rows = comparisons[(comparisons["metric"] == metric)
                       & (comparisons["reference"] == campaign.reference)]
    if rows.empty:
        compared = sorted(set(comparisons.loc[comparisons["reference"] == campaign.reference,
                                              "metric"].astype(str)))
        if compared:  # the analysis ran, on other metrics (--metric's default is one)
            raise OptimisationError(
                f"no comparison of {metric} with {campaign.reference} in "
                f"{campaign.paths.comparisons}: the analysis compared {compared}; pass "
                f"--metric one of them (with a better direction), e.g. --metric "
                f"{compared[0]}.")
        raise OptimisationError(f"no comparison of {metric} with {campaign.reference} in "
                                f"{campaign.paths.comparisons}; run the "
                                "campaign's analysis first (snakemake paper).")
    verdicts = []
    for env in variants:
        mine = rows[rows["environment"] == env.id]
        per_model = {str(r.model): (float(r.rel_overhead), float(r.p_bh))
                     for r in mine.itertuples()}
        gains = [sign * rel for rel, _ in per_model.values()]
        qualifies = bool(gains) and all(g > 0 for g in gains) and any(
            p < alpha for _, p in per_model.values())
        improvement = sum(gains) / len(gains) if gains else float("nan")
        verdicts.append(Verdict(env.id, dict(env.spec.get("variant", {})), improvement,
                                per_model, qualifies))
    # best first; a variant without comparisons (nan) last
    return sorted(verdicts, key=lambda v: (math.isnan(v.improvement), -v.improvement))


def combine(verdicts: list[Verdict]) -> dict[str, Any]:
    """The options of the qualifying variants; the larger gain wins a shared option."""
    options: dict[str, Any] = {}
    for v in verdicts:  # best first
        if v.qualifies:
            for key, value in v.options.items():
                options.setdefault(key, value)
    return options


def render(campaign: Campaign, verdicts: list[Verdict], metric: str) -> str:
    lines = [f"{campaign.name}: single Docker options vs {campaign.reference} on {metric} "
             f"(relative difference, BH-adjusted p; better on every model and significant on "
             f"one at alpha = {campaign.analysis['alpha']} qualifies)", ""]
    for v in verdicts:
        cells = ", ".join(f"{m} {rel:+.1%} (p={p:.3g})" for m, (rel, p) in v.per_model.items())
        mark = "yes" if v.qualifies else "no "
        lines.append(f"  {mark} {v.environment:<28} {cells}")
    chosen = combine(verdicts)
    lines.append("")
    if chosen:
        snippet = yaml.safe_dump({"docker_optimised": {"extends": campaign.reference,
                                                       "options": chosen}}, sort_keys=False)
        lines += ["For config.yaml (environments:), phases 2C and 2D:", "",
                  *("  " + s for s in snippet.splitlines())]
    else:
        lines.append("No single option qualifies: keep docker_optimised equal to the baseline "
                     "(or leave it out of phases 2C and 2D).")
    return "\n".join(lines)


BEGIN, END = "# BEGIN best-options", "# END best-options"


def write_block(config_file: Path, campaign: Campaign, verdicts: list[Verdict], metric: str,
                comparisons: Path, utc: str) -> dict[str, Any]:
    """Replace the lines between the markers in `config_file` (inside docker_optimised)
    with the combined options and where they came from; returns those options."""
    lines = config_file.read_text().splitlines()
    try:
        start = next(i for i, ln in enumerate(lines) if ln.strip().startswith(BEGIN))
        end = next(i for i, ln in enumerate(lines) if i > start and ln.strip().startswith(END))
    except StopIteration:
        raise OptimisationError(
            f"{config_file}: no '{BEGIN}' ... '{END}' lines inside "
            "environments.docker_optimised; add them (config/config.yaml shows how) or copy "
            "the printed snippet by hand.") from None
    indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
    chosen = combine(verdicts)
    digest = hashlib.sha256(comparisons.read_bytes()).hexdigest()[:16]
    qualifying = [v.environment for v in verdicts if v.qualifies] or ["none"]
    said = ", ".join(f"{k}={v}" for k, v in chosen.items()) or "no option (= the baseline)"
    body = yaml.safe_dump({"description": f"baseline + {said} (best-options, {campaign.name})",
                           "options": chosen}, sort_keys=False, default_flow_style=None)
    block = [f"{indent}# written {utc} by containertax best-options {campaign.source} "
             f"--metric {metric}",
             f"{indent}# from {comparisons} (sha256 {digest}); qualifying: "
             f"{', '.join(qualifying)}",
             *(indent + ln for ln in body.splitlines())]
    new = [*lines[: start + 1], *block, *lines[end:]]
    # options written by hand replace derived ones: say so (config.resolve_derived)
    for i in range(start - 1, -1, -1):
        stripped = lines[i].strip()
        here = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        if stripped and not stripped.startswith("#") and len(here) < len(indent):
            break
        if stripped.startswith("derived_from:") and here == indent:
            new[i] = (f"{indent}declared_by_hand: true  # best-options --write, {utc} "
                      f"(was {stripped})")
            break
    tmp = config_file.with_name(f".{config_file.name}.partial")
    tmp.write_text("\n".join(new) + "\n")
    tmp.replace(config_file)
    return chosen


DEFAULT_METRIC = "token_throughput"


def derived_text(campaign: Campaign, verdicts: list[Verdict], metric: str,
                 comparisons: Path) -> str:
    """The derived options file's content: the options and their evidence, no time stamp,
    so that the same analysis gives the same bytes (and reruns nothing downstream)."""
    chosen = combine(verdicts)
    said = ", ".join(f"{k}={v}" for k, v in chosen.items()) or "no option (= the baseline)"
    return yaml.safe_dump({
        "campaign": campaign.name, "config": campaign.source, "metric": metric,
        "comparisons": str(comparisons),
        "comparisons_sha256": hashlib.sha256(comparisons.read_bytes()).hexdigest(),
        "qualifying": [v.environment for v in verdicts if v.qualifies],
        "description": f"baseline + {said} (derived from {campaign.name})",
        "options": chosen}, sort_keys=False, default_flow_style=False)


@dataclass(frozen=True)
class FactorialChoice:
    """The levels a factorial campaign's effects choose, and why."""

    options: dict[str, Any]
    chosen: dict[str, int]  # factor id -> level chosen (+1 high, -1 low)
    evidence: list[str]  # one line per factor and interaction the choice used
    predicted: dict[str, float]  # model -> predicted relative gain of the combination


def factorial_choice(campaign: Campaign, effects: pd.DataFrame, metric: str
                     ) -> FactorialChoice:
    """Phase 2C from a factorial 2B: a factor qualifies when its main effect on `metric`
    points the same (better) way on every model and is significant (Holm, within its
    model's family of effects) on at least one; of the qualifying factors, the subset whose
    combination the significant terms (main effects and two-factor interactions) predict
    best on average, and better than the base on every model, is chosen (the fewest factors
    on a tie): an interaction that undoes two options' gains drops one of them. The
    options are the chosen levels' (the base's own for every other factor)."""
    import itertools

    from containertax.campaign import factorial

    design = factorial.design_of(campaign.raw, campaign.source)
    if design is None:
        raise OptimisationError(f"{campaign.source}: no factorial design (key factorial).")
    sign = better_sign(campaign, metric)
    alpha = campaign.analysis["alpha"]
    rows = effects[effects["metric"] == metric]
    if rows.empty:
        raise OptimisationError(f"no effect on {metric} in {campaign.paths.effects}; run the "
                                "campaign's analysis first (snakemake paper), or name a "
                                "primary metric with --metric.")
    models = list(dict.fromkeys(rows["model"].astype(str)))
    letter = {f.id: f.letter for f in design.factors}
    # the base level of each factor: the one that leaves the base environment's options
    base_level = {f.id: (-1 if not f.low else +1 if not f.high else -1)
                  for f in design.factors}
    significant = rows[rows["p_holm"] < alpha]
    evidence: list[str] = []
    candidates: dict[str, int] = {}
    for f in design.factors:
        mine = rows[(rows["term"] == f.letter)]
        gains = {str(r.model): sign * float(r.effect_log) for r in mine.itertuples()}
        level = +1 if all(g > 0 for g in gains.values()) else \
            -1 if all(g < 0 for g in gains.values()) else 0
        hit = bool(level) and level != base_level[f.id] and any(
            p < alpha for p in mine["p_holm"])
        cells = ", ".join(f"{r.model} {float(r.rel):+.1%} (p_Holm={float(r.p_holm):.3g})"
                          for r in mine.itertuples())
        evidence.append(f"{'yes' if hit else 'no '} {f.id} ({f.level_text(+1)} vs "
                        f"{f.level_text(-1)}): {cells}")
        if hit:
            candidates[f.id] = level

    def member(r: Any) -> str:
        """The term an interaction's estimate is attributed to: of its alias chain, the
        one pair of candidate factors where there is exactly one, else its first member
        (aliased interactions cannot be told apart; the evidence names the chain)."""
        if r.kind != "interaction":
            return str(r.term)
        chain = [str(r.factors), *(str(r.aliases).split(" = ") if isinstance(r.aliases, str)
                                   and r.aliases else [])]
        pairs = [m for m in chain if all(part in candidates for part in m.split(":"))]
        pick = pairs[0] if len(pairs) == 1 else str(r.factors)
        return "".join(letter[part] for part in pick.split(":"))

    def predicted(chosen: dict[str, int], model: str) -> float:
        x = {letter[f.id]: chosen.get(f.id, base_level[f.id]) for f in design.factors}
        x0 = {letter[f.id]: base_level[f.id] for f in design.factors}
        sub = significant[significant["model"].astype(str) == model]
        total = 0.0
        for r in sub.itertuples():
            term = member(r)
            total += float(r.effect_log) / 2 * (math.prod(x[c] for c in term)
                                                - math.prod(x0[c] for c in term))
        return sign * total

    best: tuple[float, int, dict[str, int]] = (0.0, 0, {})
    ids = list(candidates)
    for size in range(1, len(ids) + 1):
        for combo in itertools.combinations(ids, size):
            chosen = {i: candidates[i] for i in combo}
            gains = [predicted(chosen, m) for m in models]
            mean = sum(gains) / len(gains)
            if all(g > 0 for g in gains) and mean > best[0] + 1e-12:
                best = (mean, size, chosen)
    chosen = best[2]
    for r in significant[significant["kind"] == "interaction"].itertuples():
        chain = f"{r.factors}{' = ' + r.aliases if isinstance(r.aliases, str) else ''}"
        taken = ":".join(next(f.id for f in design.factors if f.letter == c)
                         for c in member(r))
        evidence.append(f"interaction {chain} on {r.model}: {float(r.rel):+.1%} "
                        f"(p_Holm={float(r.p_holm):.3g}), taken as {taken}")
    options: dict[str, Any] = {}
    for f in design.factors:
        if f.id in chosen:
            options.update(f.high if chosen[f.id] > 0 else f.low)
    return FactorialChoice(options, chosen, evidence,
                           {m: math.expm1(predicted(chosen, m)) for m in models})


def _derived_factorial_text(campaign: Campaign, metric: str, effects_csv: Path) -> str:
    import pandas as pd

    choice = factorial_choice(campaign, pd.read_csv(effects_csv, dtype={"model": str}),
                              metric)
    said = ", ".join(f"{k}={v}" for k, v in choice.options.items()) \
        or "no option (= the baseline)"
    return yaml.safe_dump({
        "campaign": campaign.name, "config": campaign.source, "metric": metric,
        "effects": str(effects_csv),
        "effects_sha256": hashlib.sha256(effects_csv.read_bytes()).hexdigest(),
        "qualifying": [f"{k}={'high' if v > 0 else 'low'}" for k, v in choice.chosen.items()],
        "evidence": choice.evidence,
        "predicted_gain": {m: round(v, 6) for m, v in choice.predicted.items()},
        "description": f"baseline + {said} (derived from {campaign.name}'s effects)",
        "options": choice.options}, sort_keys=False, default_flow_style=False)


def write_derived(campaign: Campaign, environment: str, metric: str = DEFAULT_METRIC
                  ) -> tuple[Path, bool]:
    """Derive `environment`'s options from this campaign's comparisons and write them to
    paths.derived_options only when their content changed, its sha256 in the deriving
    campaign's hashes.jsonl; returns (file, written)."""
    import pandas as pd

    from containertax.campaign.paths import derived_options
    from containertax.core.records import atomic_write_text, hash_written

    comparisons = campaign.paths.effects if campaign.raw.get("factorial") \
        else campaign.paths.comparisons
    if not comparisons.is_file():
        raise OptimisationError(f"{comparisons} does not exist: run the analysis of "
                                f"{campaign.source} first (snakemake --cores 1 paper "
                                f"--configfile {campaign.source}).")
    if campaign.raw.get("factorial"):  # from the estimated effects (factorial_choice)
        text = _derived_factorial_text(campaign, metric, comparisons)
    else:
        text = derived_text(campaign, judge(campaign, pd.read_csv(comparisons), metric),
                            metric, comparisons)
    file = derived_options(campaign.root, environment)
    if file.is_file() and file.read_text() == text:
        return file, False
    file.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(file, text)
    hash_written(campaign.root, file, "derive", text)  # edited afterwards: refused
    return file, True


def refresh_derived(config_file: Path, environment: str) -> bool:
    """Before a study's DAG is built: rewrite the derived file when the deriving campaign's
    analysis exists and gives other options; nothing when it does not exist yet."""
    from containertax.campaign.config import load_file

    campaign = load_file(config_file)
    made = campaign.paths.effects if campaign.raw.get("factorial") \
        else campaign.paths.comparisons
    if not made.is_file():
        return False
    return write_derived(campaign, environment)[1]
