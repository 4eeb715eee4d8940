"""Proof by simulation of the sequential stopping rule (statistics/sequential.py).

Each bound is checked against its nominal value by an exact one-sided binomial test at
FALSE_FAIL: a rule whose true rate sat exactly on the bound (5 % errors, 95 % coverage)
fails a check with probability <= FALSE_FAIL (1e-4), one that keeps the bound with room
less often; over the about 110 checks of this file the chance that any fails by chance is
below 110 x FALSE_FAIL, about 1 %. The simulations are seeded (independent of the
boundaries' own seed), so the outcome is fixed for this code. Only designs that
`containertax check` accepts (min_blocks 6 at alpha 0.05, whole Williams periods of 2).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from containertax.campaign import stopping
from containertax.statistics import sequential as seq

N = 50_000  # replicates per scenario
FALSE_FAIL = 1e-4
CVS = (0.0006, 0.02, 0.15)  # between-run CV: H100 engine, middle, plain decoding
# (min_blocks, max_blocks, every): looks 6..30 every 6 (the Spark plan), every 2, and the
# H100 campaign's 6, 8
DESIGNS = ((6, 30, 6), (6, 30, 2), (6, 8, 2))
RULES = (("exact", "obrien-fleming"), ("exact", "pocock"), ("union", "obrien-fleming"))


def too_many(rate: float) -> int:
    """The smallest count of N with P(X >= count | rate) <= FALSE_FAIL: a count at or
    above it rejects 'the true rate is at most `rate`'."""
    return int(sps.binom.isf(FALSE_FAIL, N, rate)) + 1


def too_few(rate: float) -> int:
    """The largest count with P(X <= count | rate) <= FALSE_FAIL."""
    return int(sps.binom.ppf(FALSE_FAIL, N, rate)) - 1


def simulate(cv: float, effect: float, design: tuple[int, int, int], seed: int,
             boundaries: str = "exact", spending: str = "obrien-fleming",
             **kw) -> dict[str, np.ndarray]:
    """Per-block log ratios of two environments with the given run CV (each run's log
    value has SD cv, so the ratio has SD cv sqrt 2) and true ratio 1 + effect."""
    rule = stopping.Rule(*design, spending=spending, boundaries=boundaries, **kw)
    rng = np.random.default_rng(seed)
    d = math.log1p(effect) + rng.normal(0, cv * math.sqrt(2), (N, rule.max_blocks))
    return stopping.run_rule(d, rule)


@pytest.mark.parametrize("cv", CVS)
@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("how", RULES)
def test_difference_type_one_error(cv, design, how):
    out = simulate(cv, 0.0, design, 1, *how)
    assert int((out["answer"] == "difference").sum()) < too_many(0.05)


@pytest.mark.parametrize("cv", CVS)
@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("side", (1, -1))
def test_equivalence_size_at_margin(cv, design, side):
    # at either edge of the TOST band (ratio 1.05 or 1/1.05 at a 5 % margin)
    effect = 0.05 if side > 0 else 1 / 1.05 - 1
    out = simulate(cv, effect, design, 2)
    assert int((out["answer"] == "equivalence").sum()) < too_many(0.05)


@pytest.mark.parametrize("cv", CVS)
@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("effect", (0.0, 0.05))
def test_coverage_of_adjusted_intervals(cv, design, effect):
    out = simulate(cv, effect, design, 3)
    true = math.log1p(effect)
    missed = int(((out["low"] > true) | (out["high"] < true)).sum())
    assert missed < too_many(0.05)


@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("spending", ("obrien-fleming", "pocock", "hsd"))
def test_exact_boundaries_spend_the_full_alpha(design, spending):
    """Exact: at a CV of 15 % no comparison stops for equivalence, so the rule's type I
    error is the boundaries' whole-path crossing probability, alpha: not below it either
    (a two-sided check). Planted: the union bound's boundaries spend less (0.032 to 0.040
    on these designs) and fail the lower check (test below)."""
    out = simulate(0.15, 0.0, design, 6, "exact", spending, shape_check=False,
                   drift_check=False)
    hits = int((out["answer"] == "difference").sum())
    assert too_few(0.05) < hits < too_many(0.05)


@pytest.mark.parametrize("design", ((6, 30, 6), (6, 30, 2)))
def test_planted_union_bound_is_caught_by_the_lower_check(design):
    out = simulate(0.15, 0.0, design, 6, "union", shape_check=False, drift_check=False)
    assert int((out["answer"] == "difference").sum()) <= too_few(0.05)


def test_planted_naive_rule_is_caught():
    """Planted: testing at the full alpha at every look (no spending) must fail the type I
    bound, so the check above can fail."""
    rule = stopping.Rule(6, 30, 2)
    rng = np.random.default_rng(4)
    d = rng.normal(0, 0.04, (N, 30))
    hits = np.zeros(N, bool)
    for n in rule.looks():
        x = d[:, :n]
        s = stopping.look_stats(x.mean(1), x.std(1, ddof=1), n, 0.05, rule.margin)
        hits |= s["difference"]
    assert hits.sum() >= too_many(0.05)


def test_exact_boundaries_first_look_and_cache():
    """The first look's level is the spending function's own (a t quantile, no
    simulation); later levels are at least the union bound's increments (the looks'
    correlation is used, not ignored), sum above alpha for the two-sided levels, and the
    same design gives the same numbers (seeded, cached)."""
    rule = stopping.Rule(6, 30, 6)
    two, one = rule.levels()
    spent = rule.spent()
    assert two[0] == pytest.approx(spent[0], rel=1e-9)
    assert one[0] == pytest.approx(spent[0], rel=1e-9)
    assert (two[1:] >= spent[1:] * 0.95).all() and two[-1] > 1.5 * spent[-1]
    assert stopping.exact_boundaries.__wrapped__((6, 12, 18, 24, 30), "obrien-fleming",
                                                 0.05, reps=200_000)[0][-1] == \
        pytest.approx(two[-1], rel=0.05)
    assert stopping.Rule(6, 30, 6, boundaries="union").levels()[0] == pytest.approx(spent)
    with pytest.raises(ValueError, match="boundaries"):
        stopping.Rule(6, 30, 6, boundaries="x").levels()


def test_quiet_comparison_stops_at_first_look():
    """CV 0.06 %: equivalence (null) and a 5 % effect are answered at the first look,
    but where a check's false alarm (shape about 1-2 %, drift: two tests at 0.05 on
    exchangeable blocks; 0.92 stop at 6 blocks, measured) holds it to a later look."""
    for effect, answer in ((0.0, "equivalence"), (0.05, "difference")):
        out = simulate(0.0006, effect, (6, 30, 6), seed=5)
        assert (out["blocks"] == 6).mean() > 0.88
        assert (out["answer"] == answer).mean() > 0.97
        out = simulate(0.0006, effect, (6, 30, 6), seed=5, drift_check=False)
        assert (out["blocks"] == 6).mean() > 0.97


def test_spending_and_looks():
    rule = stopping.Rule(6, 30, 6)
    assert rule.looks() == [6, 12, 18, 24, 30]
    assert rule.spent().sum() == pytest.approx(0.05)
    assert (rule.spent() > 0).all()
    assert stopping.Rule(6, 11, 2).looks() == [6, 8, 10, 11]
    assert stopping.Rule(6, 11, 2, spending="pocock").spent().sum() == pytest.approx(0.05)
    t = np.array([0.2, 0.5, 1.0])
    assert stopping.spending("hsd", t, 0.05, 0.0) == pytest.approx(0.05 * t)
    # Hwang-Shih-DeCani: gamma -4 spends little early, 1 much; both alpha at t = 1
    early = [float(stopping.spending("hsd", np.array([0.2]), 0.05, g)[0]) for g in (-4, 1)]
    assert early[0] < 0.01 < early[1]
    assert stopping.spending("hsd", np.array([1.0]), 0.05, -4)[0] == pytest.approx(0.05)
    with pytest.raises(ValueError, match="spending"):
        stopping.Rule(6, 11, 2, spending="x").spent()


def test_min_blocks_exact():
    # smallest attainable two-sided p of an exact sign-flip test: 2^(1-n)
    assert stopping.min_blocks_exact(0.05) == 6  # 2^-5 = 0.031 < 0.05 <= 2^-4
    assert stopping.min_blocks_exact(0.01) == 8


def test_first_look_an_exact_test_can_pass():
    """min_blocks against the first look's level, not alpha: with looks at 6 and 8 the
    first look's two-sided level (0.024) is below 2^-5 = 0.031, so a difference has an
    exact test only from look 2; an equivalence side (one-sided, 2^-6 = 0.016) from look 1.
    O'Brien-Fleming from 6 of 30: 1e-5 at look 1 (the sign-flip needs 18 blocks), 0.002 at
    look 2 (12 blocks: 2^-11 = 0.0005 below it)."""
    assert stopping.exact_reach(stopping.Rule(6, 8, 2)) == {"difference": 2,
                                                            "equivalence": 1}
    far = stopping.exact_reach(stopping.Rule(6, 30, 6))
    assert far["difference"] == 2
    words = stopping.exact_tests_words(stopping.Rule(6, 8, 2))
    assert "look 2 (8 blocks" in words and "below the smallest exact p" in words
    assert "reaches the first look's level" in stopping.exact_tests_words(
        stopping.Rule(6, 8, 2, spending="pocock", alpha=0.2))


def test_degenerate_zero_variance():
    """Identical blocks: a defined answer, never a NaN decision."""
    rule = stopping.Rule(6, 8, 2)
    out = stopping.run_rule(np.zeros((1, 8)), rule)
    assert out["answer"][0] == "equivalence" and out["blocks"][0] == 6
    out = stopping.run_rule(np.full((1, 8), 0.2), rule)
    assert out["answer"][0] == "difference" and out["blocks"][0] == 6


def test_a_stopped_aa_replica_passes_its_calibration():
    """An A/A replica stopped as equivalent passes its calibration on the blocks of that
    look (statistics/decisions.py: TOST at alpha within +-2 % and the 95 % interval inside),
    every time: it is decided within its resolution at a TOST level of at most alpha / 2.
    Run CV 2 %: 80 % are stopped so before the 30th block. Planted: the rule before
    issue #33 (decided within the 5 % margin) stops as many, and 72 % of them fail."""
    from scipy import stats as sps

    rng = np.random.default_rng(31)
    d = rng.normal(0, 0.02 * math.sqrt(2), (5000, 30))

    def passes(x):
        n = x.shape[1]
        m, se = x.mean(1), x.std(1, ddof=1) / math.sqrt(n)
        q = sps.t.ppf(0.975, n - 1)
        return (np.expm1(m - q * se) >= -0.02) & (np.expm1(m + q * se) <= 0.02)

    def failed_after_stop(rule):
        out = stopping.run_rule(d, rule, replica=True)
        stopped = (out["answer"] == "equivalence") & (out["blocks"] < 30)
        bad = [int((~passes(d[stopped & (out["blocks"] == n), :n])).sum())
               for n in rule.looks()[:-1]]
        return sum(bad), int(stopped.sum())

    bad, stopped = failed_after_stop(stopping.Rule(6, 30, 6, resolution=0.02))
    assert bad == 0 and stopped > 0.70 * len(d)  # measured 0.80, 0.75 with the drift check
    bad, stopped = failed_after_stop(stopping.Rule(6, 30, 6, boundaries="union"))
    assert bad > 0.5 * stopped


# --- the shape check: looks that hold on skewed and contaminated blocks -----------------


def test_shape_check_false_alarm_on_normal_blocks():
    """Each check fires on normal blocks with probability about SHAPE_LEVEL (0.01), both
    together at most about twice that; exact binomial test at FALSE_FAIL."""
    rng = np.random.default_rng(11)
    for n in (6, 8, 12, 30):
        fired = int((stopping.shape(rng.standard_normal((N, n)))["reason"] != "").sum())
        assert fired < too_many(2 * stopping.SHAPE_LEVEL), n


def test_shape_check_finds_a_planted_block():
    """Planted: one block 10 SDs from the others at 8 and 30 blocks is found; a strongly
    skewed sample (exponential) is found more often than normal blocks are."""
    rng = np.random.default_rng(12)
    for n in (8, 30):
        x = rng.standard_normal((2000, n))
        x[:, 3] += 10
        assert (stopping.shape(x)["reason"] == "outlier").mean() > 0.9
    skew = stopping.shape(rng.exponential(1, (2000, 30)))["reason"] != ""
    assert skew.mean() > 0.6  # measured 0.69 (2000 samples: SE 0.01)


def noisy(kind: str, cv: float, effect: float, design, seed: int, **kw):
    """The rule on skewed (exponential, skewness 2) or contaminated (5 % of container
    runs 10 run-SDs slow) per-block log ratios; truth: the typical run's ratio."""
    rule = stopping.Rule(*design, **kw)
    rng = np.random.default_rng(seed)
    shape = (N, rule.max_blocks)
    sd = cv * math.sqrt(2)
    if kind == "skewed":
        d = sd * (rng.exponential(1.0, shape) - 1.0)
    else:
        d = rng.normal(0, sd, shape) + 10 * cv * (rng.random(shape) < 0.05)
    return stopping.run_rule(math.log1p(effect) + d, rule)


@pytest.mark.parametrize(("kind", "cv", "design"), [
    ("contaminated", 0.02, (6, 30, 6)), ("contaminated", 0.05, (6, 30, 6)),
    ("contaminated", 0.02, (6, 8, 2)), ("skewed", 0.02, (6, 30, 6))])
def test_rule_holds_on_the_blocks_its_check_lets_through(kind, cv, design):
    """Type I error, equivalence size (either edge) and non-coverage, counted on answers
    whose blocks passed the shape check (the rule's guarantee), each < alpha by the exact
    binomial test. Without the check contamination at 2 % CV gives an equivalence size of
    0.071 (benchmarks/stopping_exact.py): the check is what keeps it."""
    band = math.log1p(0.05)
    null = noisy(kind, cv, 0.0, design, 21)
    ok = null["shape"] == ""
    assert int(((null["answer"] == "difference") & ok).sum()) < too_many(0.05)
    missed = (null["low"] > 0) | (null["high"] < 0)
    assert int((missed & ok).sum()) < too_many(0.05)
    for edge in (band, -band):
        out = noisy(kind, cv, math.expm1(edge), design, 22)
        assert int(((out["answer"] == "equivalence") & (out["shape"] == "")).sum()) \
            < too_many(0.05)


@pytest.mark.xfail(strict=True, reason="known limit (docs/measurement.md): skewness 2 in "
                   "the per-block ratios at 6 blocks inflates the t test's level about "
                   "3.4-fold (0.08 at looks 6, 8) and the shape check sees few such samples")
def test_skewed_blocks_in_a_short_design():
    null = noisy("skewed", 0.02, 0.0, (6, 8, 2), 23)
    ok = null["shape"] == ""
    assert int(((null["answer"] == "difference") & ok).sum()) < too_many(0.05)


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
                       ({"max_blocks": 12}, "differs from repetitions 10"),
                       ({"gamma": -2}, "only the hsd spending function has a gamma"),
                       ({"boundaries": "bonferroni"}, "boundaries")):
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


def planted_runs(ratios: list[float]):
    """runs.csv's columns for one model 'quiet': native at 1, its A/A replica at
    exp(ratio) in each block."""
    import pandas as pd

    rows = []
    for b, r in enumerate(ratios, 1):
        for env, v in (("native", 1.0), ("native-aa", math.exp(r))):
            rows.append({"model": "quiet", "environment": env, "repetition": b, "block": b,
                         "position": 2 * b + (env != "native"), "metric": "compute_time_s",
                         "value": v})
    return pd.DataFrame(rows)


def test_aa_replica_is_decided_within_its_own_resolution():
    """Planted: A/A log ratios +-1.4 % alternating (mean 0, SD 1.5 %): at 6 blocks the
    look's TOST interval is about +-2.2 %, inside the 5 % margin but not the 2 %
    resolution: the replica continues (a stop at the margin is what #33 found: a stopped
    A/A then failed its own +-2 % calibration). With resolution_pct 5 it stops there."""
    from containertax.campaign.config import load_campaign

    runs = planted_runs([0.014, -0.014] * 5)
    primary = {"quiet": ["compute_time_s"]}
    cfg = stopping_config()
    cfg["models"] = [{"id": "quiet", "size": 64}]
    rows = seq.decide(runs[runs.repetition <= 6], load_campaign(cfg, "c.yaml"), primary)
    assert rows[0]["decision"] == "continue" and rows[0]["margin"] == pytest.approx(0.02)
    assert "no answer yet" in rows[0]["why"]
    assert 0.02 < rows[0]["adj_high"] < 0.05
    cfg["analysis"] = {**cfg.get("analysis", {}), "resolution_pct": 5}
    rows = seq.decide(runs[runs.repetition <= 6], load_campaign(cfg, "c.yaml"), primary)
    assert rows[0]["decision"] == "stop" and rows[0]["answer"] == "equivalence"


def test_shape_check_failure_continues_and_says_why(tmp_path):
    """Planted: five blocks within 0.01 % and one 5 % off. Under a margin that makes every
    comparison answered (1000 %), the look still does not stop: the look file's rows say
    'shape check failed (a block ... SDs ...)'; with shape_check false it stops."""
    import json

    from containertax.campaign.config import load_campaign

    ratios = [0.0001, -0.0001, 0.0002, 0.05, -0.0002, 0.0, 0.0001, -0.0001, 0.0, 0.0]
    runs = planted_runs(ratios)
    cfg = stopping_config()
    cfg["models"] = [{"id": "quiet", "size": 64}]
    cfg["analysis"] = {**cfg.get("analysis", {}), "resolution_pct": 1000,
                       "equivalence_margin": 10.0}
    primary = {"quiet": ["compute_time_s"]}
    rows = seq.decide(runs[runs.repetition <= 6], load_campaign(cfg, "c.yaml"), primary)
    assert rows[0]["answer"] == "equivalence" and rows[0]["shape"] == "outlier"
    assert rows[0]["decision"] == "continue" and "shape check failed" in rows[0]["why"]
    # the look file keeps today's fields (read by the paper and findings) and adds these
    state = seq.interim_state(load_campaign(cfg, "c.yaml"), runs[runs.repetition <= 6], 1)
    text = json.loads(json.dumps(state, default=float))
    assert set(seq.INTERIM_COLUMNS) <= set(text["rows"][0])
    assert text["models"]["quiet"]["why"].startswith("native-aa/native")
    cfg["stopping"]["shape_check"] = False
    rows = seq.decide(runs[runs.repetition <= 6], load_campaign(cfg, "c.yaml"), primary)
    assert rows[0]["decision"] == "stop" and rows[0]["shape"] == "not checked"


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
    from containertax.campaign.looks import fingerprint

    look1.write_text(json.dumps({"models": {"quiet": {"blocks_allowed": 6},
                                            "noisy": {"blocks_allowed": 8}},
                                 "rule_fingerprint": fingerprint(seq.rule_of(campaign))}))
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
    # the proposal for the first look: a config can take it (check accepts it), it needs
    # no more blocks than the O'Brien-Fleming design from the same first look, and its
    # expected blocks hold on a fresh simulation with the full boundaries (seed 99)
    for p in plan["proposals"]:
        assert stopping.problems({**data, "stopping": p["stopping"]}) == []
        assert p["expected_blocks"] <= p["default_expected_blocks"] + 1e-9
        rule = stopping.Rule.from_config({**data, "stopping": p["stopping"]})
        again = stopping.expected_blocks(rule, 2, p["sd"], 0.0, sims=2000, seed=99)["mean"]
        assert again == pytest.approx(p["expected_blocks"], abs=0.6)
    short = stopping.plan({**data, "repetitions": 6}, 2)
    assert short["rule"] is None and "no look before the last" in short["why"]
