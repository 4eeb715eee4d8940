"""The paper as an argument: its metadata (title, authors, the question, dated by its data),
the runs that compiled, and the discussion's values: each prior result a campaign answers
(resources/prior_work.yaml, named by the config's paper.prior_work) next to this campaign's
own answer on the same quantity, argued from its records (start-up against steady state,
what the design removes). The words are in paper/discussion.tex; this module writes only
values and conditions, merged into numbers.tex by paper_values.numbers_values.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from containertax.campaign import paths
from containertax.campaign.config import Campaign, ConfigError
from containertax.core import packaged
from containertax.publishing import tables
from containertax.statistics import facts, texts

PRIOR_WORK = packaged.resource(paths.PRIOR_WORK)
ANSWERS = ("headline", "startup", "none")


def read_prior_work(path: Path = PRIOR_WORK) -> dict[str, dict[str, Any]]:
    """The prior results, checked: each names its citation, result, source and answer."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read the prior-work table ({exc}).") from None
    for key, entry in data.items():
        missing = [k for k in ("cite", "setting", "quantity", "result", "source", "answer")
                   if not entry.get(k)]
        if missing:
            raise ConfigError(f"{path}: entry '{key}' lacks {', '.join(missing)}; every prior "
                              "result states its number, setting and where it was read.")
        if entry["answer"] not in ANSWERS:
            raise ConfigError(f"{path}: entry '{key}': answer '{entry['answer']}' is not one "
                              f"of {', '.join(ANSWERS)}.")
    return data


def _words(text: str) -> str:
    return texts.tex(" ".join(str(text).split()))


def metadata_values(campaign: Campaign) -> dict[str, Any]:
    """Title, authors, the question and the introduction of this campaign (config paper:)."""
    meta = campaign.raw.get("paper") or {}
    authors = [str(a) for a in meta.get("authors") or []]
    return {
        "paper-title": _words(meta.get("title") or "Does the container cost performance?"),
        "paper-has-authors": bool(authors),
        "paper-authors": _words(", ".join(authors)),
        "paper-affiliation": _words(meta.get("affiliation") or ""),
        "paper-has-question": bool(meta.get("question")),
        "paper-question": _words(meta.get("question") or ""),
        "paper-has-intro": bool(meta.get("introduction")),
        "paper-intro": _words(meta.get("introduction") or ""),
        "paper-has-lead": bool(meta.get("abstract_lead")),
        "paper-lead": _words(meta.get("abstract_lead") or ""),
    }


def date_values(campaign: Campaign, runs: pd.DataFrame) -> dict[str, Any]:
    """The paper's date is its data's: the first and last run of the records, never the day
    it was built. An import carries no run times: it is dated by its source."""
    start = (pd.to_datetime(runs["started_utc"], utc=True, errors="coerce", format="ISO8601")
             if "started_utc" in runs else pd.Series(dtype="datetime64[ns, UTC]")).dropna()
    study = campaign.analysis.get("import_study") or {}
    if start.empty:
        return {"data-dated": False, "data-first": "--", "data-last": "--",
                "data-one-day": False,
                "data-source": _words(study.get("source") or "the imported table")}
    first, last = start.min().strftime("%Y-%m-%d"), start.max().strftime("%Y-%m-%d")
    return {"data-dated": True, "data-first": first, "data-last": last,
            "data-one-day": first == last, "data-source": "--"}


def containers(campaign: Campaign, runs: pd.DataFrame) -> list[str]:
    """The environments compared with the reference, A/A replicas left out."""
    return [e for e in dict.fromkeys(runs["environment"])
            if e != campaign.reference and e not in campaign.replicas]


def paired(runs: pd.DataFrame, metric: str, env: str, reference: str,
           drop: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per-block differences env - reference of one metric (model, block, diff, rel),
    without the blocks holding a run of `drop`."""
    if "block" not in runs:
        return pd.DataFrame(columns=["model", "block", "diff", "rel"])
    d = runs[runs.metric == metric]
    if drop is not None and not drop.empty:
        key = d.set_index(["model", "environment", "repetition"]).index
        bad = d[key.isin(drop.set_index(["model", "environment", "repetition"]).index)]
        d = d[~d.set_index(["model", "block"]).index.isin(
            bad.set_index(["model", "block"]).index)]
    w = d.pivot_table(index=["model", "block"], columns="environment", values="value")
    if env not in w or reference not in w:
        return pd.DataFrame(columns=["model", "block", "diff", "rel"])
    w = w[[env, reference]].dropna()
    return pd.DataFrame({"diff": w[env] - w[reference],
                         "rel": w[env] / w[reference] - 1}).reset_index()


def _signed(x: float, digits: int = 1) -> str:
    """'+0.3', '-1.2', and '0.0' where the sign would only say which side of zero a value
    that rounds to zero fell."""
    text = f"{x:+.{digits}f}"
    return text[1:] if float(text) == 0 else text


def _finding_text(rows: pd.DataFrame | None, metric: str, env: str) -> str:
    """'+9.7\\,\\% [+4.0, +8.1]': a comparison of the findings table as the paper prints
    it everywhere ('--' where there is none)."""
    if rows is None or rows.empty:
        return "--"
    r = rows[(rows.metric == metric) & (rows.environment == env)]
    if r.empty:
        return "--"
    est, lo, hi = tables.rel_texts(r.iloc[0])
    return f"{est}\\,\\%" + ("" if lo == "--" else f" [{lo}, {hi}]")


def steady_values(campaign: Campaign, runs: pd.DataFrame, results: pd.DataFrame | None = None,
                  others: pd.DataFrame | None = None) -> dict[str, Any]:
    """Process time and energy with and without the blocks that hold a run that compiled
    (statistics/facts.py: each run's own record says so): the primary statistics keep them
    (the design's blocks); the discussion quotes both comparisons of the compiling model
    from the findings table (the same estimator, test and printed digits as every other
    comparison), never a mean of its own, and its process time against its own other runs."""
    comp = facts.compiled_runs(campaign)
    v: dict[str, Any] = {"compiled-runs": len(comp), "has-compiled": not comp.empty}
    if comp.empty:
        return v
    model = str(comp["model"].iloc[0])  # the compiling model (the first, where several)
    mine = comp[comp["model"] == model]
    wall = runs[(runs.metric == "process_wall_s") & (runs.model.astype(str) == model)
                ].set_index(["environment", "repetition"])["value"]
    first = wall[wall.index.isin(mine.set_index(["environment", "repetition"]).index)]
    rest = wall[~wall.index.isin(first.index)]
    v["compiled-model"] = texts.tex(model)
    v["compiled-models"] = texts.tex(tables.join_words(list(dict.fromkeys(comp["model"]))))
    v["compiled-model-runs"] = len(mine)
    v["compiled-wall-min"] = tables.num(first.min()) if not first.empty else "--"
    v["compiled-wall"] = tables.num(first.max()) if not first.empty else "--"
    v["others-wall-min"] = tables.num(rest.min()) if not rest.empty else "--"
    v["others-wall-max"] = tables.num(rest.max()) if not rest.empty else "--"
    v["compiled-each"] = texts.tex(compiled_words(comp))
    envs = containers(campaign, runs)
    env = envs[0] if envs else None
    excluded = (others[others["family"].astype(str).str.startswith("compile-excluded")]
                if others is not None and not others.empty and "family" in others else None)

    def of(rows: pd.DataFrame | None) -> pd.DataFrame | None:  # the compiling model's
        return None if rows is None or rows.empty else rows[rows["model"].astype(str) == model]

    for metric in facts.STEADY_METRICS:
        key = metric.replace("_", "-")
        every = _finding_text(of(results), metric, env) if env else "--"
        steady = _finding_text(of(excluded), metric, env) if env else "--"
        v[f"steady/{key}/has"] = every != "--" and steady != "--"
        v[f"steady/{key}/all"] = every
        v[f"steady/{key}/steady"] = steady
        ex = of(excluded)
        blocks = (ex.loc[ex.metric == metric, "n_blocks"]
                  if ex is not None and "n_blocks" in ex else pd.Series(dtype=float))
        v[f"steady/{key}/blocks"] = int(blocks.max()) if len(blocks) else 0
        aa = [e for e in campaign.replicas if e in set(runs["environment"])]
        v[f"steady/{key}/aa"] = _finding_text(of(excluded), metric, aa[0]) if aa else "--"
        v[f"steady/{key}/has-aa"] = v[f"steady/{key}/aa"] != "--"
        v[f"steady/{key}/aa-as-much"] = bool(aa) and replica_as_much(of(excluded), metric,
                                                                     env, aa[0])
    v["steady-env"] = texts.tex(env or "--")
    return v


def compiled_words(comp: pd.DataFrame) -> str:
    """Which runs compiled and the evidence, per model: 'qwen2-0.5b: docker in blocks 3
    and 8, native in blocks 1 and 5, first warm-up request 35.2 to 41.5 s against the
    model's median 12.6 s' (or the counters' cache misses)."""
    parts = []
    for model, g in comp.groupby("model", sort=False):
        where = [f"{env} in block{'s' if len(h) > 1 else ''} "
                 + tables.join_words([str(b) for b in sorted(h["block"])])
                 for env, h in g.groupby("environment", sort=False)]
        timed = g[g["evidence"].str.startswith("first warm-up")]
        why = []
        if len(timed):
            median = timed["evidence"].iloc[0].rsplit("median ", 1)[-1]
            lo, hi = timed["first_request_s"].min(), timed["first_request_s"].max()
            why.append(f"first warm-up request {lo:.1f}"
                       + (f" to {hi:.1f}" if f"{hi:.1f}" != f"{lo:.1f}" else "")
                       + f" s against the model's median {median}")
        if len(timed) < len(g):
            why.append("compile-cache misses in torch.compile's counters")
        parts.append(f"{model}: " + ", ".join(where) + "; " + " and ".join(why))
    return "; ".join(parts)


def replica_as_much(rows: pd.DataFrame | None, metric: str, env: str, replica: str) -> bool:
    """Whether the A/A replica moved at least half as much as the container on the same
    blocks: its estimate has the container's sign and at least half its size
    (h100-engine-balanced: Docker +9.7 % in process time, the identical copy of native
    +7.5 %), so that the container's difference cannot be told from the instrument's own.
    The paper says it in these words, not 'as much' (a referee: +3.9 % against +6.0 % is
    not as much)."""
    if rows is None or rows.empty or "rel_overhead" not in rows:
        return False
    at = {e: float(r) for e, r in zip(rows.loc[rows.metric == metric, "environment"],
                                      rows.loc[rows.metric == metric, "rel_overhead"],
                                      strict=True)}
    c, a = at.get(env, math.nan), at.get(replica, math.nan)
    return c == c and a == a and c != 0 and a / c >= 0.5


def headline_state(campaign: Campaign, results: pd.DataFrame | None) -> str:
    """'steady' where every headline model warmed up before its timed work, 'cold' where
    none did (h100-sani-cold: warmup 0, one timed product, printed as the 'steady state'
    until a referee read its records), '' where they differ or it is not known (an
    import)."""
    from containertax import workloads

    if results is None or results.empty or campaign.is_import:
        return ""
    models = results.loc[(results["family"] == "primary")
                         & ~results["environment"].isin(list(campaign.replicas)), "model"]
    warm = set()
    for model in dict.fromkeys(models.astype(str)):
        kind = workloads.REGISTRY.get(campaign.workload_kind(model))
        params = campaign.workload_params(model)
        warmup = params.get("warmup", kind.defaults.get("warmup") if kind else None)
        warm.add(None if warmup is None else int(warmup) > 0)
    return {frozenset({True}): "steady", frozenset({False}): "cold"}.get(frozenset(warm), "")


def _answer_headline(results: pd.DataFrame | None, campaign: Campaign) -> str:
    if results is None or results.empty:
        return "no comparison"
    rows = results[(results["family"] == "primary")
                   & ~results["environment"].isin(list(campaign.replicas))]
    parts = []
    for _, r in rows.iterrows():
        est, lo, hi = tables.rel_texts(r)
        ci = "" if lo == "--" else f" [{lo}, {hi}]"
        parts.append(f"{texts.tex(r['model'])}, {texts.tex(r['environment'])}: "
                     f"{est}\\,\\%{ci}")
    return "; ".join(parts) if parts else "no comparison"


def startup_values(campaign: Campaign, runs: pd.DataFrame,
                   results: pd.DataFrame | None = None) -> dict[str, Any]:
    """The start-up cost per run of each container environment (s), per model: the
    comparisons' own difference of means (the abstract's and the results' range, printed
    the same way), else the mean paired difference per block where there is no comparison."""
    envs = containers(campaign, runs)
    if results is not None and not results.empty and "diff" in results:
        rows = results[(results.metric == "startup_s") & results.environment.isin(envs)]
        per = [float(x) for x in rows["diff"] if x == x]
    else:
        diffs = [paired(runs, "startup_s", e, campaign.reference)["diff"]
                 for e in envs] if "startup_s" in set(runs["metric"]) else []
        per = [float(d.mean()) for d in diffs if not d.empty]
    if not per:
        return {"startup-cost-has": False, "startup-cost-min": "--", "startup-cost-max": "--"}
    return {"startup-cost-has": True, "startup-cost-min": tables.num(min(per), 2),
            "startup-cost-max": tables.num(max(per), 2), "startup-cost-maxv": max(per)}


def prior_values(campaign: Campaign, runs: pd.DataFrame, results: pd.DataFrame | None,
                 prior: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The prior-work table (a LaTeX tabular body) and the Sani arithmetic: the start-up
    cost's share of its gap, and the compute a 10k product needs on its GPU."""
    prior = read_prior_work() if prior is None else prior
    ids = list((campaign.raw.get("paper") or {}).get("prior_work") or [])
    unknown = [i for i in ids if i not in prior]
    if unknown:
        raise ConfigError(f"{campaign.source}: key 'paper.prior_work': {', '.join(unknown)} "
                          f"not in {PRIOR_WORK.name}; add the result there (with its source) "
                          "or remove the id.")
    start = startup_values(campaign, runs, results)
    v: dict[str, Any] = {"prior-count": len(ids), **start}
    head = _answer_headline(results, campaign)
    state = headline_state(campaign, results)
    v["headline-state"] = {"steady": "In the steady state the",
                           "cold": "For a cold process (no warm-up before its timed work) "
                                   "the"}.get(state, "The")
    said = {"steady": "steady state ", "cold": "cold process "}.get(state, "")
    rows = []
    for i in ids:
        p = prior[i]
        cited = (campaign.analysis.get("import_study") or {}).get("citation")
        if campaign.is_import and p["cite"] == cited:
            answer = "this paper re-analyses these values (Section~\\ref{sec:discussion})"
        elif campaign.is_import:
            answer = "not measured in this re-analysis (an imported study)"
        elif p["answer"] in ("headline", "startup") and not native_reference(campaign):
            # a prior result is a container against native execution: a campaign whose
            # reference is itself a container (h200-factorial's Docker base) measured
            # another quantity, never 'its answer'
            answer = (f"not measured here (the reference, {texts.tex(campaign.reference)}, "
                      "is not native execution)")
        elif p["answer"] == "startup" and start["startup-cost-has"]:
            lo, hi = start["startup-cost-min"], start["startup-cost-max"]
            answer = (f"start-up {lo if lo == hi else f'{lo}--{hi}'}\\,s a run; "
                      f"{said}{head}")
        elif p["answer"] in ("headline", "startup"):
            answer = f"{said}{head}"
        else:
            answer = "not measured here"
        rows.append(f"\\citet{{{p['cite']}}} & {_words(p['setting'])} & "
                    f"{_words(p['result'])} & {answer} \\\\")
    v["prior-rows"] = " ".join(rows) if rows else "--"  # one line: numbers.tex is read by line
    sani = prior.get("sani2025") if "sani2025" in ids else None
    v["has-sani"] = sani is not None
    if sani is not None:
        gap = float(sani["container_value"]) - float(sani["reference_value"])
        flops = 2 * float(sani["matmul_n"]) ** 3
        peak = 2 * float(sani["gpu_fp32_lanes"]) * float(sani["gpu_boost_ghz"]) * 1e9
        v["sani-gap"] = f"{gap:.2f}"
        v["sani-native"] = f"{float(sani['reference_value']):.2f}"
        v["sani-docker"] = f"{float(sani['container_value']):.2f}"
        v["sani-pct"] = f"{100 * gap / float(sani['reference_value']):.0f}"
        v["sani-compute"] = f"{flops / peak:.2f}"
        v["sani-peak"] = f"{peak / 1e12:.2f}"
        v["sani-gap-compute"] = f"{gap / (flops / peak):.1f}"
        v["sani-compute-share"] = f"{100 * flops / peak / float(sani['reference_value']):.0f}"
        # 'at most' from the interval, never from a point estimate (h200-stopping-hsd:
        # 0.19 s of 1.03 s printed 'at most 19 %' while its 95 % interval reached 0.24 s,
        # 23 %): the upper end of the start-up difference's interval, over the models that
        # ran their product (their gap is divided by no other model's)
        high = startup_high(campaign, runs, product_models(campaign, int(sani["matmul_n"])))
        v["sani-startup-share"] = f"{100 * high / gap:.0f}" if high == high else "--"
        # a container that starts no slower anywhere explains none of their gap (a share
        # of at most -23 % would say nothing)
        v["sani-startup-none"] = bool(start["startup-cost-has"]
                                      and start["startup-cost-maxv"] <= 0)
        # their gap is divided only by a campaign that ran their product (issue #39: a
        # share of it from LLM decoding's start-up compares another launch path)
        v["sani-same-quantity"] = same_product(campaign, int(sani["matmul_n"]))
        v["sani-startup-bounded"] = high == high
    start.pop("startup-cost-maxv", None)
    v.pop("startup-cost-maxv", None)
    return v


def native_reference(campaign: Campaign) -> bool:
    """Whether the campaign's reference ran natively, as the prior results' references did:
    its kind runs the host's own processes, no image (the kind's declaration, never its
    name: tests/test_runtime_contract.py)."""
    from containertax import runtimes

    return not campaign.is_import and runtimes.get(
        campaign.environment(campaign.reference).kind).needs_image is False


def same_product(campaign: Campaign, n: int) -> bool:
    """Whether a model of the campaign is the n x n FP32 matrix product (Sani et al.'s)."""
    return bool(product_models(campaign, n))


def product_models(campaign: Campaign, n: int) -> list[str]:
    """The campaign's models that are the n x n FP32 matrix product (Sani et al.'s)."""
    if campaign.is_import:
        return []
    found = []
    for model in campaign.models:
        try:
            kind, params = campaign.workload_kind(model.id), campaign.workload_params(model.id)
        except (KeyError, ValueError):
            continue
        if kind == "matmul" and params.get("size") == n and str(
                params.get("dtype", "float32")) in ("float32", "fp32"):
            found.append(str(model.id))
    return found


def startup_high(campaign: Campaign, runs: pd.DataFrame, models: list[str]) -> float:
    """The largest upper end of the paired 95 % t interval of a container's start-up
    difference (s, per block, as the sentence says) over these models; NaN where none
    has an interval (fewer than two blocks). Not the comparisons' diff_ci_high, which is
    Welch's, unpaired."""
    from scipy import stats

    highs: list[float] = []
    if "startup_s" not in set(runs["metric"]):
        return math.nan
    mine = runs[runs.model.astype(str).isin(models)]
    for env in containers(campaign, runs):
        d = paired(mine, "startup_s", env, campaign.reference)["diff"].astype(float)
        if len(d) > 1 and d.std(ddof=1) == d.std(ddof=1):
            half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
            highs.append(float(d.mean() + half))
    return max(highs) if highs else math.nan


def util_values(runs: pd.DataFrame, reference: str) -> dict[str, Any]:
    """A sampled utilisation (a percentage of time the GPU was busy) as a difference in
    percentage points of the means, descriptive: never a log ratio."""
    d = runs[runs.metric == "gpu_util_pct"]
    if d.empty or reference not in set(d.environment):
        return {"util-has": False}
    means = d.groupby("environment")["value"].mean()
    others = [e for e in means.index if e != reference]
    if not others:
        return {"util-has": False}
    return {"util-has": True, "util-ref": f"{means[reference]:.1f}",
            "util-env": f"{means[others[0]]:.1f}",
            "util-pp": f"${_signed(means[others[0]] - means[reference])}$"}


def values(campaign: Campaign, runs: pd.DataFrame, results: pd.DataFrame | None,
           others: pd.DataFrame | None = None) -> dict[str, Any]:
    """Every value and condition of the title page and paper/discussion.tex."""
    return {
        **metadata_values(campaign),
        **date_values(campaign, runs),
        "causal-design": not campaign.is_import,
        **steady_values(campaign, runs, results, others),
        **prior_values(campaign, runs, results),
        **util_values(runs, campaign.reference),
    }


def paired_rows(campaign: Campaign, runs: pd.DataFrame, results: pd.DataFrame | None,
                pairs: list[tuple[str, str]], relative: bool,
                label: Any = None) -> list[dict[str, Any]]:
    """The rows of figures.paired_differences for (model, metric) pairs: each environment
    against the reference, per block. Relative: per-block ratio minus one (%), with the
    comparison's own estimate and interval (comparisons.csv); absolute: the difference in the
    metric's unit, with its mean and 95 % t interval. Blocks holding a compiling run are
    marked."""
    from scipy import stats

    comp = facts.compiled_runs(campaign)
    comp_blocks = set(zip(comp["model"], comp["block"], strict=False))
    out = []
    for model, metric in pairs:
        envs = [e for e in dict.fromkeys(runs.loc[runs.model == model, "environment"])
                if e != campaign.reference]
        for env in envs:
            d = paired(runs[runs.model == model], metric, env, campaign.reference)
            if d.empty:
                continue
            compiled = [(str(model), int(b)) in comp_blocks for b in d["block"]]
            if relative:
                diffs = 100 * d["rel"].to_numpy(float)
                r = pd.DataFrame() if results is None else results[
                    (results.model == model) & (results.metric == metric)
                    & (results.environment == env)]
                # the interval the paper prints (findings: adjusted under a stopping rule)
                keys = (("estimate", "ci_low", "ci_high")
                        if not r.empty and "estimate" in r and pd.notna(r.iloc[0]["estimate"])
                        else ("rel_overhead", "rel_ci_low", "rel_ci_high"))
                est, lo, hi = ((100 * float(r.iloc[0][k]) for k in keys)
                               if not r.empty else (math.nan,) * 3)
                # the legend names the interval drawn: a look's is not a 95 % interval
                look = r.iloc[0].get("look") if keys[0] == "estimate" else None
                interval = ("repeated-look adjusted interval"
                            if look is not None and look == look and str(look) != ""
                            else "95 % interval")
            else:
                diffs = d["diff"].to_numpy(float)
                est = float(diffs.mean())
                half = (stats.t.ppf(0.975, len(diffs) - 1) * diffs.std(ddof=1)
                        / math.sqrt(len(diffs))) if len(diffs) > 1 else math.nan
                lo, hi = est - half, est + half
                interval = "95 % interval"
            name = f"{model}, {env}" if label is None else label(model, env, metric)
            if env in campaign.replicas:
                name += " (A/A)"
            out.append({"label": name, "diffs": diffs, "compiled": compiled,
                        "est": est, "lo": lo, "hi": hi, "interval": interval})
    return out


# What a verdict may say where the design supports no causal reading (an import whose runs
# were not interleaved and whose set-ups differ): the direction, marked descriptive.
DESCRIPTIVE = {"overhead": "slower in its session, descriptive",
               "advantage": "faster in its session, descriptive",
               "difference": "differs between sessions, descriptive"}


def design_verdicts(campaign: Campaign, heads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The headline rows with verdicts the design supports: unchanged for a campaign of
    interleaved blocks; for an import, a difference is a descriptive one between sessions,
    never a container 'overhead'."""
    if not campaign.is_import:
        return heads
    out = []
    for h in heads:
        word, _, rest = str(h["verdict"]).partition(" (")
        if word in DESCRIPTIVE:
            h = {**h, "verdict": DESCRIPTIVE[word] + (f" ({rest}" if rest else "")}
        out.append(h)
    return out
