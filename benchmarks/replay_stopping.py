"""Replay the stopping rule on committed campaigns' raw records, as if they had run
sequentially (blocks in their realised order), and project the 900-run plan
(config/config.yaml) under stated CV assumptions (docs/measurement.md, "Sequential
stopping").

    PYTHONPATH=src python benchmarks/replay_stopping.py [CONFIG ...] [--reps 20000]

Rule replayed: the Spark plan's, O'Brien-Fleming-type spending with looks every 6 blocks
from 6 (the fewest with which an exact sign-flip / Wilcoxon test reaches alpha 0.05) to
30. A campaign with fewer than 30 blocks can only show its looks within its data: a model
that has not stopped by its last block 'continues' (it would have needed more blocks than
the campaign ran). The full data's answer is the fixed design's at alpha on every block
(difference: paired t p < alpha; equivalence: TOST within the margin); an import without
blocks (Sani et al. 2025) is paired by run index within each environment, which its
sequential, non-interleaved order does not justify: that row is illustrative only.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd

from containertax.campaign import stopping
from containertax.campaign.config import load_file
from containertax.publishing.report import read_import
from containertax.statistics import sequential as seq
from containertax.statistics.aggregate import tidy
from containertax.statistics.policy import primary_metrics

CONFIGS = ("config/h100-matmul.yaml", "config/h100-engine-balanced.yaml",
           "config/h100-engine.yaml", "config/h100-engine-gqa.yaml", "config/h100.yaml",
           "config/h100-variants.yaml", "config/h100-stopping.yaml",
           "config/h100-stopping-exact.yaml",
           "config/h200x2-lanes.yaml", "config/h200x2-onelane.yaml", "config/sani2025.yaml")
# before issue #33 (union bound, no shape check) and after (exact boundaries, shape check)
RULES = {"union": stopping.Rule(6, 30, 6, boundaries="union", shape_check=False),
         "exact": stopping.Rule(6, 30, 6, resolution=0.02)}
SPARK = RULES["union"]
RUNS_PLAN, HOURS_PLAN = 900, 340.0  # the Spark plan: 10 models x 3 environments x 30


def runs_of(campaign) -> pd.DataFrame:
    if campaign.is_import:
        runs = read_import(campaign).copy()
        runs["block"] = runs["repetition"]  # pseudo-blocks: run index (see above)
        runs["position"] = runs["repetition"]
        return runs
    return tidy(campaign.root)


def fixed_answer(d: np.ndarray, alpha: float, margin: float) -> str:
    s = stopping.look_stats(np.array([d.mean()]), np.array([d.std(ddof=1)]), len(d), alpha,
                       margin)
    return ("difference" if s["difference"][0] else
            "equivalence" if s["equivalence"][0] else "none")


def replay(path: str) -> list[dict]:
    campaign = load_file(path)
    runs = runs_of(campaign)
    primary = primary_metrics(campaign, runs)
    rows = []
    for model, metrics in primary.items():
        envs = [e for e in dict.fromkeys(runs.loc[runs.model == model, "environment"])
                if e != campaign.reference]
        replicas = campaign.replicas
        for metric in metrics:
            for env in envs:
                against = replicas.get(env, campaign.reference)
                d = seq.log_ratios(runs, model, metric, env, against)
                n = len(d)
                if n < SPARK.min_blocks:
                    continue
                full = fixed_answer(d, SPARK.alpha, SPARK.margin)  # the rule's margin
                row = {"campaign": campaign.name, "model": model, "metric": metric,
                       "comparison": f"{env}/{against}", "blocks": n,
                       "cv_pct": 100 * float(np.std(d, ddof=1)) / math.sqrt(2),
                       "full_answer": full}
                for name, rule in RULES.items():
                    out = _partial(d[:rule.max_blocks], rule,
                                   [k for k in rule.looks() if k <= n],
                                   replica=env in replicas)
                    row |= {f"{name}_at": out["stopped_at"], f"{name}": out["answer"],
                            f"{name}_adjusted": out["interval"],
                            f"{name}_same": ("n/a" if out["answer"] == "continues"
                                             else str(out["answer"] == full))}
                rows.append(row)
    return rows


def _partial(d: np.ndarray, rule: stopping.Rule, looks: list[int],
             replica: bool = False) -> dict:
    """The rule's looks that the data reach (a campaign shorter than the maximum); an
    A/A replica decided within the resolution (analysis default 2 %) under the new rule."""
    margin = rule.margin_of(replica)
    for n, a, a1 in zip(rule.looks(), *rule.levels(), strict=False):
        if n not in looks:
            break
        x = d[:n]
        s = stopping.look_stats(np.array([x.mean()]), np.array([x.std(ddof=1)]), n, a,
                                margin, rule.tost_level(a1, replica))
        ans = ("difference" if s["difference"][0] else
               "equivalence" if s["equivalence"][0] else None)
        odd = rule.shape_check and stopping.shape(x[None, :])["reason"][0] != ""
        if ans and not odd:
            lo, hi = math.expm1(s["low"][0]), math.expm1(s["high"][0])
            return {"stopped_at": n, "answer": ans,
                    "interval": f"[{lo:+.2%}, {hi:+.2%}]"}
    return {"stopped_at": f"> {len(d)}", "answer": "continues", "interval": ""}


def proposals(rows: list[dict]) -> list[dict]:
    """Per replayed comparison, the design stopping.propose picks for its measured
    per-block SD (the planning step, here from real spreads)."""
    out = []
    for r in rows:
        sd = r["cv_pct"] * math.sqrt(2) / 100
        aa = r["comparison"].split("/")[0].endswith("-aa")
        p = stopping.propose(sd, 1, 30, 6, sims=1000, resolution=0.02 if aa else None)
        keys = ", ".join(f"{k}: {v:g}" if isinstance(v, float) else f"{k}: {v}"
                         for k, v in p["stopping"].items() if k != "boundaries")
        out.append({"campaign": r["campaign"], "model": r["model"],
                    "comparison": r["comparison"], "sd_pct": 100 * sd, "proposed": keys,
                    "expected": round(p["expected_blocks"], 2),
                    "obrien-fleming 6 every 6": round(p["default_expected_blocks"], 2)})
    return out


def projection(reps: int) -> list[dict]:
    """Expected runs and hours of the 900-run plan: per model 2 environments x
    (throughput at the given CV with a null or 1 % effect, memory at 1 % CV with a 30 %
    effect); a model stops when all 4 comparisons have their answer. Hours scale with
    runs at the plan's mean of 340 h / 900 runs (large models run longer: the saving in
    hours is that of runs only if they stop as often as small ones)."""
    rng = np.random.default_rng(7)
    out = []
    for cv in (0.001, 0.003, 0.005):
        for eff in (0.0, 0.01):
            blocks = []
            for _ in range(2):  # two environments against the reference
                thr = math.log1p(eff) + rng.normal(0, cv * math.sqrt(2), (reps, 30))
                mem = math.log1p(0.30) + rng.normal(0, 0.01 * math.sqrt(2), (reps, 30))
                blocks += [stopping.run_rule(thr, SPARK)["blocks"],
                           stopping.run_rule(mem, SPARK)["blocks"]]
            per_model = np.max(blocks, axis=0)
            runs = float(per_model.mean()) * 3 * 10
            out.append({"throughput CV": f"{cv:.1%}", "effect": f"{eff:.0%}",
                        "mean blocks": round(float(per_model.mean()), 2),
                        "runs": round(runs), "hours": round(runs * HOURS_PLAN / RUNS_PLAN),
                        "fewer runs": f"{1 - runs / RUNS_PLAN:.0%}"})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("configs", nargs="*", default=list(CONFIGS))
    ap.add_argument("--reps", type=int, default=20_000)
    args = ap.parse_args()
    rows = [r for path in args.configs for r in replay(path)]
    print(f"Rules: {SPARK.spending}, looks after {SPARK.looks()} blocks, alpha "
          f"{SPARK.alpha}, margin {SPARK.margin:.0%}; union: the union bound, no shape "
          "check (before #33); exact: exact boundaries, shape check, an A/A replica "
          "within 2 % (after)\n")
    print(pd.DataFrame(rows).to_markdown(index=False, floatfmt=".3g"))
    print("\nProposed from each comparison's measured spread (stopping.propose: the "
          "looks and spending function with the fewest expected blocks, 30 at most, looks "
          "on whole periods of 6 blocks as in the Spark plan, no true difference, exact "
          "boundaries, an A/A replica within 2 %), against the Spark plan's O'Brien-Fleming "
          "rule from 6 every 6:\n")
    print(pd.DataFrame(proposals(rows)).to_markdown(index=False, floatfmt=".3g"))
    print(f"\nProjection for config/config.yaml ({RUNS_PLAN} runs, {HOURS_PLAN:g} h), "
          f"{args.reps} replicates:\n")
    print(pd.DataFrame(projection(args.reps)).to_markdown(index=False))


if __name__ == "__main__":
    main()
