"""Sequential stopping (config `stopping:`): after each look, per model, whether another
block is needed, with intervals valid over the repeated looks.

Rule (docs/measurement.md, "Sequential stopping"): group-sequential alpha spending. The
looks are fixed in the config (after min_blocks, then every `every` blocks, and at
max_blocks); the spending function (Lan-DeMets O'Brien-Fleming-type, Pocock-type or
Hwang-Shih-DeCani) gives the error alpha(t) spent up to information fraction t = n /
max_blocks. Each look's tests are the study's own, on the log ratio per block (paired t,
n - 1 df), at nominal levels a_k (two-sided) and b_k (one-sided):

  difference   two-sided paired t p < a_k (the repeated interval below excludes 0)
  equivalence  TOST at level b_k within the band [-log(1+m), log(1+m)]: the (1 - 2 b_k)
               interval inside it; m the equivalence margin, for an A/A replica the
               resolution (analysis.resolution_pct)
  interval     the (1 - a_k) t interval of the mean log ratio, exponentiated minus one

boundaries exact (default): a_k and b_k are the t levels of boundaries that spend exactly
alpha(t_k) by look k (the t statistics' joint law is free of the unknown variance;
stopping.exact_boundaries); union: a_k = b_k = alpha(t_k) - alpha(t_{k-1}), whose sum
bounds the error. Either way type I error of the difference test <= alpha, size of the
equivalence test at the margin <= alpha, simultaneous coverage of the repeated intervals
>= 1 - alpha over all looks, in small samples, for normal blocks (tests/test_sequential.py).
Every answer counts (issue #41): a look whose blocks look skewed or hold a block far from
the rest (shape check), or drift against block order or depend on the block before (drift
check), does not stop, and at max_blocks the failed check is the answer ('not symmetric',
'not exchangeable', 'not stationary'), so the error of a campaign is that of everything it
can say; benchmarks/stopping_design.py measures it so under skewed, contaminated and AR(1)
noise. The bound holds per primary comparison (multiplicity_words says so in the paper).

A model stops when every primary comparison of it has its answer (difference or
equivalence shown) on blocks that pass the checks, or at max_blocks; all its
environments stop together, so blocks stay complete and paired. Standard library and
numpy/scipy only in the rule; `interim` reads a campaign's records (pandas).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

# the rule itself is part of the design (campaign/stopping.py); here it meets the records
from containertax.campaign.stopping import (
    CHECK_ANSWER,
    DRIFT_LEVEL,
    SHAPE_LEVEL,
    Rule,
    drift,
    look_stats,
    shape,
)

# --- the interim state of a campaign ------------------------------------------------


INTERIM_COLUMNS = ["model", "look", "blocks", "alpha_look", "metric", "environment",
                   "against", "estimate", "adj_low", "adj_high", "p", "answer", "decision",
                   "alpha_tost", "alpha_spent", "boundaries", "margin", "t", "shape", "why",
                   "drift", "drift_slope", "trend", "lag1"]


def _pairs(campaign: Any) -> list[tuple[str, str]]:
    """Primary comparisons: each environment against the reference, an A/A replica
    against the environment it copies."""
    reps = campaign.replicas
    return [(e.id, reps.get(e.id, campaign.reference)) for e in campaign.environments
            if e.id != campaign.reference]


def log_ratios(runs: Any, model: str, metric: str, env: str, against: str) -> np.ndarray:
    """Per complete block of one model (in realised order, by first position), the log
    ratio env / against of one metric; blocks with a missing or non-positive value out."""
    return block_log_ratios(runs, model, metric, env, against).to_numpy(float)


def block_log_ratios(runs: Any, model: str, metric: str, env: str, against: str) -> Any:
    """log_ratios with each block's label (a pandas Series indexed by block, in realised
    order): the looks take its first n, the split-block check leaves some out by label."""
    import pandas as pd

    g = runs[(runs.model.astype(str) == str(model)) & (runs.metric == metric)]
    wide = g.pivot_table(index="block", columns="environment", values="value",
                         aggfunc="first")
    if env not in wide or against not in wide:
        return pd.Series(dtype=float)
    first = g.groupby("block")["position"].min()
    wide = wide.loc[first.sort_values(kind="stable").index.intersection(wide.index)]
    pair = wide[[env, against]].dropna()
    pair = pair[(pair[env] > 0) & (pair[against] > 0)]
    return np.log(pair[env].astype(float)) - np.log(pair[against].astype(float))


def decide(runs: Any, campaign: Any, primary: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Every look reached by each model in a table of runs (runs.csv's columns): one row
    per model, look and primary comparison. A model's decision at a look is 'stop' when
    every comparison has its answer and its blocks pass the shape check, 'max' at
    max_blocks, 'continue' otherwise (with `why`: the comparisons still open or the shape
    check that failed); looks after a stop are not made (its later blocks, if any ran,
    are not looked at). An A/A replica is decided within its own band (the resolution)."""
    rule = rule_of(campaign)
    replicas = set(campaign.replicas)
    rows: list[dict[str, Any]] = []
    two_sided, one_sided = rule.levels()
    spent = rule.spent()
    for model in [m.id for m in campaign.models]:
        comps = [(m, e, a) for m in primary.get(model, []) for e, a in _pairs(campaign)]
        ratios = {c: log_ratios(runs, model, *c) for c in comps}
        for k, n in enumerate(rule.looks(), 1):
            if not comps or min(len(r) for r in ratios.values()) < n:
                break  # this look is not reached yet
            a = float(two_sided[k - 1])
            look = []
            for (metric, env, against), d in ratios.items():
                x = d[:n]
                margin = rule.margin_of(env in replicas)
                a1 = rule.tost_level(float(one_sided[k - 1]), env in replicas)
                s = look_stats(np.array([x.mean()]), np.array([x.std(ddof=1)]), n, a,
                               margin, a1)
                answer = ("difference" if s["difference"][0] else
                          "equivalence" if s["equivalence"][0] else "none")
                form = shape(x[None, :]) if rule.shape_check else None
                look.append({"model": model, "look": k, "blocks": n, "alpha_look": a,
                             "metric": metric, "environment": env, "against": against,
                             "estimate": math.expm1(x.mean()),
                             "adj_low": math.expm1(s["low"][0]),
                             "adj_high": math.expm1(s["high"][0]),
                             "p": float(s["p"][0]), "answer": answer,
                             "alpha_tost": a1, "alpha_spent": float(spent[k - 1]),
                             "boundaries": rule.boundaries, "margin": margin,
                             "t": float(s["t"][0]),
                             "shape": str(form["reason"][0]) if form else "not checked",
                             "skewness": float(form["skewness"][0]) if form else None,
                             "skew_limit": float(form["skew_limit"]) if form else None,
                             "outlier": float(form["outlier"][0]) if form else None,
                             "outlier_limit": float(form["outlier_limit"]) if form else None,
                             **(_drift_fields(x) if rule.drift_check else
                                {"drift": "not checked", "drift_slope": None, "trend": None,
                                 "trend_limit": None, "lag1": None, "lag1_limit": None})})
            odd = [r for r in look if r["shape"] not in ("", "not checked")
                   or r["drift"] not in ("", "not checked")]
            answered = all(r["answer"] != "none" for r in look)
            last = n >= rule.max_blocks
            decision = ("stop" if answered and not odd else "max" if last else "continue")
            why = "; ".join(
                [f"{r['environment']}/{r['against']} {r['metric']}: no answer yet"
                 for r in look if r["answer"] == "none"]
                + [f"{r['environment']}/{r['against']} {r['metric']}: {_check_words(r)}"
                   for r in odd])
            if last:  # every answer counts: a failed check is the answer at the maximum
                for r in odd:
                    r["answer"] = CHECK_ANSWER[_failed(r)]
            rows += [{**r, "decision": decision, "why": why} for r in look]
            if decision != "continue":
                break
    return rows


def _failed(r: dict[str, Any]) -> str:
    """The first check a look row failed (shape before drift)."""
    return r["shape"] if r["shape"] not in ("", "not checked") else r["drift"]


def _check_words(r: dict[str, Any]) -> str:
    """Why a check failed, with its statistic, its limit and its false-alarm level."""
    if r["shape"] == "skew":
        return (f"shape check failed (skewness {r['skewness']:+.2f}, beyond "
                f"{r['skew_limit']:.2f} in size, which normal blocks exceed with probability "
                f"{SHAPE_LEVEL:g})")
    if r["shape"] == "outlier":
        return (f"shape check failed (a block {r['outlier']:.1f} SDs of the others from "
                f"their mean, beyond {r['outlier_limit']:.1f}, which normal blocks exceed "
                f"with probability {SHAPE_LEVEL:g})")
    size = f"slope {100 * math.expm1(r['drift_slope']):+.2f} % per block"
    if r["drift"] == "trend":
        return (f"drift check failed (Spearman correlation with block order "
                f"{r['trend']:+.2f}, beyond {r['trend_limit']:.2f} in size, which "
                f"exchangeable blocks exceed with probability {DRIFT_LEVEL:g}; {size})")
    return (f"drift check failed (lag-1 correlation of the ranks {r['lag1']:+.2f}, beyond "
            f"{r['lag1_limit']:.2f}, which exchangeable blocks exceed with probability "
            f"{DRIFT_LEVEL:g}; {size})")


def rule_of(campaign: Any) -> Rule:
    return Rule.from_campaign(campaign)


def _primary(campaign: Any, runs: Any) -> dict[str, list[str]]:
    from containertax.statistics.policy import primary_metrics

    return primary_metrics(campaign, runs)


def interim(campaign_root: str | Path) -> Any:
    """The interim state of a campaign for the status page: per model, per look reached,
    per primary comparison, the estimate, the repeated-look-adjusted interval, the
    answer and the model's decision (DataFrame, INTERIM_COLUMNS; empty without a stopping
    rule or records). Reads config.resolved.json and raw/ under the campaign's folder."""
    import json

    import pandas as pd

    from containertax.campaign.config import campaign_of
    from containertax.campaign.paths import CampaignPaths
    from containertax.statistics.aggregate import tidy

    paths = CampaignPaths(Path(campaign_root))
    empty = pd.DataFrame(columns=INTERIM_COLUMNS)
    if not paths.resolved.exists():
        return empty
    resolved = json.loads(paths.resolved.read_text())
    campaign = campaign_of(resolved["config"], resolved["source"])
    if "stopping" not in campaign.raw:
        return empty
    runs = tidy(paths.root)
    if runs.empty:
        return empty
    return pd.DataFrame(decide(runs, campaign, _primary(campaign, runs)),
                        columns=INTERIM_COLUMNS)


def allowed_at(rows: list[dict[str, Any]], campaign: Any, look: int) -> dict[str, int]:
    """Per model, the blocks it may run after look `look` (1-based): those of the look
    where it stopped or reached the maximum, else those of the next look (also where a
    model's look could not be made: a block dropped as incomplete keeps it running, as
    the fixed design would)."""
    looks = rule_of(campaign).looks()
    out = {}
    for m in campaign.models:
        ends = [r for r in rows if r["model"] == m.id and r["decision"] != "continue"
                and r["look"] <= look]
        out[m.id] = int(ends[0]["blocks"]) if ends else looks[min(look, len(looks) - 1)]
    return out


def interim_state(campaign: Any, runs: Any, look: int) -> dict[str, Any]:
    """The decision after look `look` from the runs of the blocks up to it (repetition <=
    its blocks: blocks run in repetition order): per model the decision, blocks run and
    possible, and the blocks allowed next; the rows of every look made."""
    looks = rule_of(campaign).looks()
    upto = runs[runs.repetition <= looks[look - 1]] if len(runs) else runs
    rows = decide(upto, campaign, _primary(campaign, upto)) if len(upto) else []
    allowed = allowed_at(rows, campaign, look)
    models = {}
    for m in campaign.models:
        mine = [r for r in rows if r["model"] == m.id]
        last = max(mine, key=lambda r: r["look"]) if mine else None
        models[m.id] = {"decision": last["decision"] if last else "continue",
                        "looks_made": int(last["look"]) if last else 0,
                        "blocks_run": int(last["blocks"]) if last else 0,
                        "blocks_possible": looks[-1], "blocks_allowed": allowed[m.id],
                        "why": last["why"] if last else "look not made"}
    from containertax.campaign.looks import fingerprint

    rule = rule_of(campaign)
    two_sided, one_sided = rule.levels()
    return {"look": look, "blocks": looks[look - 1], "looks": looks,
            "rule": {"spending": rule.spending,
                     "alpha": rule.alpha, "margin": rule.margin,
                     "boundaries": rule.boundaries, "gamma": rule.gamma,
                     "resolution": rule.resolution, "shape_check": rule.shape_check,
                     "drift_check": rule.drift_check,
                     "levels_two_sided": [float(a) for a in two_sided],
                     "levels_one_sided": [float(a) for a in one_sided]},
            # the rule this look was decided under: a look of another rule is refused
            "rule_fingerprint": fingerprint(rule),
            "continuing": [m for m, v in models.items() if v["decision"] == "continue"],
            "models": models, "rows": rows}


def write_interim(campaign: Any, look: int, out: Path,
                  log: Path | None = None) -> dict[str, Any]:
    """The interim checkpoint's step: the state after a look, written atomically with its
    sha256 in hashes.jsonl (a decision edited afterwards is refused: campaign.looks); the
    per-model decisions to the log."""
    import json

    from containertax.core.records import atomic_write_text, hash_written
    from containertax.statistics.aggregate import tidy

    state = interim_state(campaign, tidy(campaign.root), look)
    text = json.dumps(state, indent=1, default=float) + "\n"
    atomic_write_text(Path(out), text)
    # a look edited afterwards is refused (campaign.looks)
    hash_written(campaign.root, Path(out), "interim", text)
    if log is not None:
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        Path(log).write_text(json.dumps(state["models"], indent=1) + "\n")
    return state


SPENDING_WORDS = {"obrien-fleming": "O'Brien--Fleming-type", "pocock": "Pocock-type",
                  "hsd": "Hwang--Shih--DeCani"}


def last_state(campaign: Any, runs: Any) -> list[dict[str, Any]]:
    """The rows of the last interim decision written (interim/look<k>.json: what the
    workflow decided), else the rule recomputed from the runs given."""
    from containertax.campaign.looks import read_looks

    written = read_looks(campaign.paths, rule_of(campaign))  # of this rule, or an error
    if written:
        return list(written[-1].get("rows") or [])
    return decide(runs, campaign, _primary(campaign, runs)) if len(runs) else []


def _drift_fields(x: Any) -> dict[str, Any]:
    """A look row's drift fields for per-block log ratios x (block order): the check's
    reason ('' when it passes), the slope per block, and the two statistics with limits."""
    moved = drift(x[None, :])
    return {"drift": str(moved["reason"][0]), "drift_slope": float(moved["slope"][0]),
            "trend": float(moved["trend"][0]), "trend_limit": float(moved["trend_limit"]),
            "lag1": float(moved["lag1"][0]), "lag1_limit": float(moved["lag1_limit"])}


def _checks_words(rule: Rule, replicas: bool) -> str:
    """The shape check and the A/A replica's band, in the paper's words."""
    shape_words = ("A look stopped a model only where the per-block log ratios of every "
                   "comparison had a plausible shape (skewness, one block far from the "
                   "others)." if rule.shape_check
                   else "The shape of the per-block log ratios was not tested at the looks.")
    shape_words += (
        " At each look the per-block log ratios were also tested for drift: their Spearman "
        "correlation with block order and the lag-1 correlation of their ranks, each "
        f"against its permutation law at {DRIFT_LEVEL:g}; a comparison that drifted could "
        "not stop as different or equivalent, and at the maximum its answer is `not "
        "stationary'." if rule.drift_check else
        " Drift across blocks was not tested at the looks.")
    if not replicas or rule.resolution is None:
        return shape_words
    return (shape_words + " An A/A replica was decided within the resolution "
            f"($\\pm{100 * rule.resolution:g}$\\,\\%), not the margin.")


def multiplicity_words(campaign: Any, rule: Rule) -> str:
    """What the error bound covers, from the design: alpha holds per primary comparison
    (each is tested at the looks' levels on its own); over a model's m comparisons the
    chance of any false answer is at most m alpha (Bonferroni), and the paper says so."""
    pairs = len(_pairs(campaign))
    models = len(campaign.models)
    return (f"The error bound $\\alpha = {rule.alpha:g}$ holds per primary comparison "
            f"(each environment against its reference, {pairs} per model and primary "
            f"metric, {models} model{'s' if models != 1 else ''}); it is not spent over "
            "the comparisons, so over $m$ comparisons the chance of at least one false "
            "difference or equivalence is at most $m\\alpha$ (Bonferroni).")


def macros(campaign: Any, runs: Any, words: Any = str) -> dict[str, Any]:
    """The paper's values for paper/sequential.tex (\\ctx{seq/...}); none without a
    stopping rule, so a fixed design's numbers.tex is unchanged. words: a metric's name
    in prose (the registry's label)."""
    if not campaign.raw.get("stopping"):
        return {}
    from containertax.statistics.texts import tex

    rule = rule_of(campaign)
    rows = last_state(campaign, runs)
    stops, intervals, drifts = [], [], []
    for m in campaign.models:
        mine = [r for r in rows if r["model"] == m.id]
        if not mine:
            stops.append(f"{tex(m.id)}: no look made")
            continue
        k = max(r["look"] for r in mine)
        last = [r for r in mine if r["look"] == k]
        how = {"stop": "every comparison answered", "max": "the maximum",
               "continue": "still running"}[last[0]["decision"]]
        stops.append(f"{tex(m.id)} after {last[0]['blocks']} blocks (look {k}, {how})")
        for r in last:
            if not rule.drift_check:  # the looks did not test it: tested here, afterwards
                r = {**r, **_drift_fields(log_ratios(runs, m.id, r["metric"], r["environment"],
                                                     r["against"])[:r["blocks"]])}
            if r.get("drift") in ("trend", "dependence"):
                slope = tex(f"{100 * math.expm1(r['drift_slope']):+.2f}")
                drifts.append(f"{tex(m.id)}, {tex(words(r['metric']))}, "
                              f"{tex(r['environment'])}/{tex(r['against'])}: {slope}\\,\\% "
                              f"per block (look {k}, {r['blocks']} blocks, "
                              + ("Spearman " + f"{r['trend']:+.2f}" if r["drift"] == "trend"
                                 else "lag-1 " + f"{r['lag1']:+.2f}") + ")")
            est, low, high = (tex(f"{100 * r[key]:+.2f}")
                              for key in ("estimate", "adj_low", "adj_high"))
            intervals.append(
                f"{tex(m.id)}, {tex(words(r['metric']))}, {tex(r['environment'])}/"
                f"{tex(r['against'])}: {est}\\,\\% [{low}, {high}]\\,\\% "
                f"({r['answer'] if r['answer'] != 'none' else 'no answer'})")
    return {"has-stopping": 1,
            "seq/spending": SPENDING_WORDS[rule.spending],
            "seq/looks": ", ".join(map(str, rule.looks())),
            "seq/nlooks": len(rule.looks()),
            "seq/min": rule.min_blocks, "seq/max": rule.max_blocks,
            "seq/boundaries": (
                "each look tests at a nominal $t$ level from boundaries on the $t$ "
                "statistics that spend exactly $\\alpha$ over the looks (their joint law "
                "does not depend on the unknown variance; computed once for the design "
                "by a seeded simulation): "
                if rule.boundaries == "exact" else
                "look $k$ tests at the increment $a_k$ of the spending function, and the "
                "increments sum to $\\alpha$ (the union bound; conservative): ")
                + ", ".join(f"{a:.2g}" for a in rule.levels()[0]) + " two-sided.",
            "seq/checks": _checks_words(rule, bool(campaign.replicas)),
            "seq/stops": "; ".join(stops),
            "seq/intervals": "; ".join(intervals) or "none",
            "seq/drift": (("Drift at the last look: " if rule.drift_check else
                           "Drift at the last look, tested after the campaign (its looks did "
                           "not test drift, so it did not change when a model stopped): ")
                          + "; ".join(drifts) + "." if drifts else ""),
            "seq/multiplicity": multiplicity_words(campaign, rule)}
