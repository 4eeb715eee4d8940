"""Proof by simulation of the sequential stopping rule (analysis/sequential.py).

Each bound is a one-sided binomial test of the simulated count at FALSE_FAIL: a rule whose
true rate is exactly at the bound (5 % errors, 94.5 % coverage) fails a check with
probability <= FALSE_FAIL (0.1 %), one that keeps the bound with room fails it less often;
the simulations are seeded, so the outcome is fixed for this code.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from containertax.analysis import sequential as seq
from containertax.campaign import stopping

N = 20_000  # replicates per scenario
FALSE_FAIL = 1e-3
CVS = (0.0006, 0.04, 0.15)  # between-run CV: H100 engine, middle, plain decoding
# (min_blocks, max_blocks, every): n from 4 to 30 blocks
DESIGNS = ((4, 4, 4), (4, 12, 4), (6, 30, 6), (4, 30, 2))


def allowed(rate: float) -> int:
    """The largest count of N with P(X >= count | rate) > FALSE_FAIL."""
    return int(sps.binom.ppf(1 - FALSE_FAIL, N, rate))


def simulate(cv: float, effect: float, design: tuple[int, int, int], seed: int,
             spending: str = "obrien-fleming") -> dict[str, np.ndarray]:
    """Per-block log ratios of two environments with the given run CV (each run's log
    value has SD cv, so the ratio has SD cv sqrt 2) and true ratio 1 + effect."""
    rule = stopping.Rule(*design, spending=spending)
    rng = np.random.default_rng(seed)
    d = math.log1p(effect) + rng.normal(0, cv * math.sqrt(2), (N, rule.max_blocks))
    return stopping.run_rule(d, rule)


@pytest.mark.parametrize("cv", CVS)
@pytest.mark.parametrize("design", DESIGNS)
def test_difference_type_one_error(cv, design):
    out = simulate(cv, 0.0, design, seed=1)
    assert int((out["answer"] == "difference").sum()) <= allowed(0.05)


@pytest.mark.parametrize("cv", CVS)
@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("side", (1, -1))
def test_equivalence_size_at_margin(cv, design, side):
    # at either edge of the TOST band (ratio 1.05 or 1/1.05 at a 5 % margin)
    effect = 0.05 if side > 0 else 1 / 1.05 - 1
    out = simulate(cv, effect, design, seed=2)
    assert int((out["answer"] == "equivalence").sum()) <= allowed(0.05)


@pytest.mark.parametrize("cv", CVS)
@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("effect", (0.0, 0.01, 0.05))
def test_coverage_of_adjusted_intervals(cv, design, effect):
    out = simulate(cv, effect, design, seed=3)
    true = math.log1p(effect)
    missed = int(((out["low"] > true) | (out["high"] < true)).sum())
    assert missed <= allowed(1 - 0.945)


def test_planted_naive_rule_is_caught():
    """Planted: testing at the full alpha at every look (no spending) must fail the type I
    bound, so the check above can fail."""
    rule = stopping.Rule(4, 30, 2)
    rng = np.random.default_rng(4)
    d = rng.normal(0, 0.04, (N, 30))
    hits = np.zeros(N, bool)
    for n in rule.looks():
        x = d[:, :n]
        s = stopping.look_stats(x.mean(1), x.std(1, ddof=1), n, 0.05, rule.margin)
        hits |= s["difference"]
    assert hits.sum() > allowed(0.05)


def test_quiet_comparison_stops_at_first_look():
    """CV 0.06 %: equivalence (null) and a 5 % effect are answered at the first look."""
    for effect, answer in ((0.0, "equivalence"), (0.05, "difference")):
        out = simulate(0.0006, effect, (6, 30, 6), seed=5)
        assert (out["blocks"] == 6).mean() > 0.99
        assert (out["answer"] == answer).mean() > 0.99


def test_spending_and_looks():
    rule = stopping.Rule(6, 30, 6)
    assert rule.looks() == [6, 12, 18, 24, 30]
    assert rule.spent().sum() == pytest.approx(0.05)
    assert (rule.spent() > 0).all()
    assert stopping.Rule(4, 9, 2).looks() == [4, 6, 8, 9]
    assert stopping.Rule(4, 9, 2, spending="pocock").spent().sum() == pytest.approx(0.05)
    with pytest.raises(ValueError, match="spending"):
        stopping.Rule(4, 9, 2, spending="x").spent()


def test_min_blocks_exact():
    # smallest attainable two-sided p of an exact sign-flip test: 2^(1-n)
    assert stopping.min_blocks_exact(0.05) == 6  # 2^-5 = 0.031 < 0.05 <= 2^-4
    assert stopping.min_blocks_exact(0.01) == 8


def test_degenerate_zero_variance():
    """Identical blocks: a defined answer, never a NaN decision."""
    rule = stopping.Rule(4, 8, 4)
    out = stopping.run_rule(np.zeros((1, 8)), rule)
    assert out["answer"][0] == "equivalence" and out["blocks"][0] == 4
    out = stopping.run_rule(np.full((1, 8), 0.2), rule)
    assert out["answer"][0] == "difference" and out["blocks"][0] == 4


# --- the campaign layer: config checks, interim decisions ------------------------------


def stopping_config(**stopping) -> dict:
    from tests.conftest import demo_config

    cfg = demo_config()
    cfg["repetitions"] = 10
    cfg["environments"] = {"native": cfg["environments"]["native"],
                           "native-aa": {"replica_of": "native"}}
    cfg["models"] = [{"id": "quiet", "size": 64}, {"id": "noisy", "size": 64}]
    cfg["stopping"] = {"min_blocks": 6, "every": 2, **stopping}
    return cfg


def synthetic_runs(cvs: dict[str, float], blocks: int, seed: int = 0):
    """runs.csv's columns for compute_time_s, in block order."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    rows, pos = [], 0
    for b in range(1, blocks + 1):
        for model, cv in cvs.items():
            for env in ("native", "native-aa"):
                rows.append({"model": model, "environment": env, "repetition": b,
                             "block": b, "position": pos, "metric": "compute_time_s",
                             "value": float(np.exp(rng.normal(0, cv)))})
                pos += 1
    return pd.DataFrame(rows)


def test_config_checks_name_key_and_fix():
    from containertax.campaign.config import ConfigError, load_campaign

    campaign = load_campaign(stopping_config(), "c.yaml")
    assert seq.rule_of(campaign).looks() == [6, 8, 10]
    for bad, words in (({"min_blocks": 4}, "set at least 6"),
                       ({"every": 3}, "multiple of 2"),
                       ({"max_blocks": 12}, "differs from repetitions 10")):
        with pytest.raises(ConfigError, match=words) as err:
            load_campaign(stopping_config(**bad), "c.yaml")
        assert "c.yaml" in str(err.value) and "stopping." in str(err.value)


def test_interim_stops_quiet_model_and_lets_noisy_continue():
    """Planted: a quiet model (CV 0.01 %) stops at the first look; a noisy one (CV 30 %)
    continues, and is allowed the next look's blocks only."""
    from containertax.campaign.config import load_campaign

    campaign = load_campaign(stopping_config(), "c.yaml")
    runs = synthetic_runs({"quiet": 0.0001, "noisy": 0.3}, 10)
    primary = {"quiet": ["compute_time_s"], "noisy": ["compute_time_s"]}
    rows = seq.decide(runs[runs.repetition <= 6], campaign, primary)
    by = {r["model"]: r for r in rows}
    assert by["quiet"]["decision"] == "stop" and by["quiet"]["answer"] == "equivalence"
    assert by["noisy"]["decision"] == "continue"
    assert seq.allowed_at(rows, campaign, 1) == {"quiet": 6, "noisy": 8}
    rows = seq.decide(runs, campaign, primary)  # all 10 blocks: quiet made one look only
    assert {r["look"] for r in rows if r["model"] == "quiet"} == {1}
    assert max(r["look"] for r in rows if r["model"] == "noisy") <= 3
    assert seq.allowed_at(rows, campaign, 3)["noisy"] == 10


def test_interim_incomplete_block_keeps_model_running():
    """A dropped block (missing value) before a look: the look is not made, the model keeps
    the next look's blocks (never fewer than before)."""
    from containertax.campaign.config import load_campaign

    campaign = load_campaign(stopping_config(), "c.yaml")
    runs = synthetic_runs({"quiet": 0.0001, "noisy": 0.0001}, 6)
    runs = runs[~((runs.model == "quiet") & (runs.block == 3) & (runs.environment == "native"))]
    primary = {"quiet": ["compute_time_s"], "noisy": ["compute_time_s"]}
    rows = seq.decide(runs, campaign, primary)
    assert not [r for r in rows if r["model"] == "quiet"]
    assert seq.allowed_at(rows, campaign, 1) == {"quiet": 8, "noisy": 6}


def test_no_stopping_no_macros():
    from containertax.campaign.config import load_campaign

    cfg = stopping_config()
    del cfg["stopping"]
    assert seq.macros(load_campaign(cfg, "c.yaml"), synthetic_runs({"quiet": 0.1}, 4)) == {}


def test_visit_targets_respect_the_looks(tmp_path):
    """`containertax blocks` (visits of whole blocks) under a rule: blocks beyond an
    undecided look are refused with the fix; a stopped model's later blocks are left out."""
    import json

    from containertax.campaign import schedule
    from containertax.campaign.config import ConfigError, load_campaign

    cfg = stopping_config()
    cfg["results_dir"] = str(tmp_path)
    cfg["results_dir_absolute"] = True
    campaign = load_campaign(cfg, "c.yaml")
    assert len(schedule.block_targets(campaign, set(range(1, 7)))) == 6 * 2 * 2
    with pytest.raises(ConfigError, match="snakemake --cores 1"):
        schedule.block_targets(campaign, {7})
    look1 = campaign.paths.interim(1)
    look1.parent.mkdir(parents=True)
    look1.write_text(json.dumps({"models": {"quiet": {"blocks_allowed": 6},
                                            "noisy": {"blocks_allowed": 8}}}))
    got = schedule.block_targets(campaign, {7, 8})
    assert len(got) == 2 * 2 and all("/noisy/" in t for t in got)


# --- the plan: what a rule is expected to save (campaign/stopping.py, the rehearsal) ----


def _first_look_equivalence(n: int, a: float, margin: float, sd: float) -> float:
    """Independent of the simulation: P(TOST at level a shows equivalence at n blocks) for
    one comparison with no true difference, by numerical integration over the sample SD
    (s^2 ~ sd^2 chi2_{n-1} / (n-1); the mean ~ N(0, sd^2 / n) independent of it)."""
    from scipy import integrate

    band, q, df = math.log1p(margin), sps.t.ppf(1 - a, n - 1), n - 1

    def given_s(s: float) -> float:
        half = band - q * s / math.sqrt(n)
        p = 2 * sps.norm.cdf(half / (sd / math.sqrt(n))) - 1 if half > 0 else 0.0
        return p * sps.chi2.pdf(df * s * s / sd**2, df) * 2 * df * s / sd**2

    return integrate.quad(given_s, 0, sd * 6)[0]


@pytest.mark.parametrize("sd", [0.01, 0.02, 0.03])
def test_plan_first_look_matches_integration(sd):
    """The Monte Carlo plan against a numerical integral of the same probability. 2000
    simulations: SE <= 0.011; the bound 0.05 (4.5 SE, plus the difference test's own
    tiny chance a_1 of stopping at the look) fails by chance with probability < 1e-5."""
    rule = stopping.Rule(min_blocks=6, max_blocks=30, every=6)
    a1 = float(rule.spent()[0])
    want = _first_look_equivalence(6, a1, rule.margin, sd)
    got = stopping.expected_blocks(rule, 1, sd, 0.0)["first_look"]
    assert got == pytest.approx(want, abs=0.05)


def test_plan_waits_for_the_slowest_comparison():
    """A model runs until every comparison has its answer: with three comparisons it runs
    longer than with one (10.4 against 11.8 blocks at SD 1 %, seeded). Planted: a plan
    that took one comparison's stop for the model's would give the smaller number."""
    rule = stopping.Rule(min_blocks=6, max_blocks=30, every=6)
    one = stopping.expected_blocks(rule, 1, 0.01, 0.0)["mean"]
    three = stopping.expected_blocks(rule, 3, 0.01, 0.0)["mean"]
    assert three > one + 0.5


def test_plan_of_the_spark_config_and_its_limits():
    """config/config.yaml has no rule: the plan proposes the smallest valid one (6 blocks,
    the design's period of 6 with three environments) and says it is not the config's;
    more noise, more blocks; a campaign too short for a look says why, never a traceback."""
    from pathlib import Path

    import yaml

    data = yaml.safe_load((Path(__file__).parents[1] / "config" / "config.yaml").read_text())
    data.setdefault("analysis", {})
    plan = stopping.plan(data, 2)
    assert plan["rule"]["from_config"] is False and plan["rule"]["looks"][0] == 6
    assert stopping.problems({**data, "stopping": plan["rule"]["stopping"]}) == []
    null = [s["expected_blocks"] for s in plan["scenarios"] if s["effect"] == 0]
    assert null == sorted(null) and null[0] >= 6 and null[-1] <= 30
    short = stopping.plan({**data, "repetitions": 6}, 2)
    assert short["rule"] is None and "no look before the last" in short["why"]
