"""Simulated campaigns with known truth, through the analysis code itself: the primary test
keeps its false-positive rate at the sample sizes we run (blocked A/A campaigns with strong
block-to-block drift), its interval covers a known effect 95 % of the time, and the
outlier and drift rules fire on planted cases at n = 4 and stay quiet on clean data.

Monte Carlo error: with T trials a true rate of 5 % has SE sqrt(.05 .95 / T); the bounds
below are about 3.5 SE wide (a false alarm of this test suite about once in 2000 runs)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from containertax.statistics import comparisons as st
from containertax.statistics import quality
from containertax.workloads.metric_registry import REGISTRY

ALPHA = 0.05


def blocked(rng, n, effect=0.0, envs=2, noise=0.02, drift=0.10, tails=None):
    """Per-block values (n blocks x envs) of a lognormal metric: a random block level
    (SD `drift` on the log scale) plus a linear trend over the campaign, within-block
    noise (normal, or Student t with `tails` df), environment 1 carrying the effect."""
    level = rng.normal(0, drift, (n, 1)) + np.linspace(0, 3 * drift, n)[:, None]
    eps = (rng.standard_t(tails, (n, envs)) if tails else rng.normal(0, 1, (n, envs))) * noise
    log = level + eps
    log[:, 1] += math.log1p(effect)
    return np.exp(log)


@pytest.mark.parametrize("n", [4, 10, 30])
def test_a_a_false_positive_rate_of_the_primary_test(n):
    rng = np.random.default_rng(100 + n)
    trials = 2000
    p = np.array([st.paired_estimate(np.log(v[:, 1]) - np.log(v[:, 0]), ALPHA)["p"]
                  for v in (blocked(rng, n) for _ in range(trials))])
    rate = float(np.mean(p < ALPHA))
    print(f"n={n}: A/A false-positive rate {rate:.3f}")
    assert 0.033 <= rate <= 0.067


def test_a_a_false_positive_rate_with_heavy_tails_at_n4():
    """Student t(3) noise: the t test on log ratios stays at or below its level."""
    rng = np.random.default_rng(4)
    p = [st.paired_estimate(np.log(v[:, 1]) - np.log(v[:, 0]), ALPHA)["p"]
         for v in (blocked(rng, 4, tails=3) for _ in range(2000))]
    assert float(np.mean(np.array(p) < ALPHA)) <= 0.067


def test_sign_flip_is_exact_and_cannot_reject_at_n4():
    rng = np.random.default_rng(5)
    for n, bound in ((4, 0.0), (10, 0.067)):
        p = [st.signflip_p(np.log(v[:, 1]) - np.log(v[:, 0]))
             for v in (blocked(rng, n) for _ in range(1000))]
        rate = float(np.mean(np.array(p) < ALPHA))
        assert rate <= bound, (n, rate)  # 2^(1-4) = 0.125 > alpha: never at n = 4


def test_unpaired_primary_keeps_its_level_without_blocks():
    """An import without blocks: Welch t on logs, independent groups."""
    rng = np.random.default_rng(6)
    p = [st.welch_estimate(rng.normal(0, 0.05, 10), rng.normal(0, 0.05, 10), ALPHA)["p"]
         for _ in range(2000)]
    assert 0.033 <= float(np.mean(np.array(p) < ALPHA)) <= 0.067


@pytest.mark.parametrize("n", [4, 10, 30])
def test_interval_covers_a_known_effect_95_percent(n):
    rng = np.random.default_rng(200 + n)
    trials, truth = 2000, 0.05
    covered = 0
    for _ in range(trials):
        v = blocked(rng, n, effect=truth)
        e = st.paired_estimate(np.log(v[:, 1]) - np.log(v[:, 0]), ALPHA)
        covered += math.expm1(e["low"]) <= truth <= math.expm1(e["high"])
    rate = covered / trials
    print(f"n={n}: coverage of +5 % {rate:.3f}")
    assert 0.933 <= rate <= 0.967


def campaign(rng, n, models=2, envs=("native", "native-aa", "chroot", "docker")):
    """A whole blocked campaign with no effect anywhere, as a tidy table."""
    rows = []
    for m in range(models):
        for b, block in enumerate(blocked(rng, n, envs=len(envs)), start=1):
            rows += [{"model": f"m{m}", "metric": "compute_time_s", "unit": "s",
                      "environment": e, "repetition": b, "block": b, "value": float(x)}
                     for e, x in zip(envs, block, strict=True)]
    return pd.DataFrame(rows)


def test_whole_campaigns_before_and_after_correction():
    """200 A/A campaigns through analyse(): every comparison is null. Uncorrected, about 5 %
    of the primary tests reject; after Bonferroni within the family (4 tests) at most 5 %
    of the campaigns report anything; the calibration (A/A) fails about 5 % of the time."""
    rng = np.random.default_rng(7)
    s = st.Settings("native", bootstrap_resamples=1000)
    plan = st.Plan("native", {"native-aa": "native"},
                   {"m0": ["compute_time_s"], "m1": ["compute_time_s"]}, {})
    raw, any_bonf, aa_fail = [], 0, 0
    trials = 200
    for _ in range(trials):
        out = st.analyse(campaign(rng, 6), s, ["compute_time_s"], plan)
        prim = out[out.family == "primary"]
        assert len(prim) == 4 and (prim.family_size == 4).all()
        raw += list(prim["p"] < ALPHA)
        any_bonf += bool((prim["p_bonferroni"] < ALPHA).any())
        status = quality.calibration(out[out.family == "calibration"], ALPHA, 0.02)[0]["status"]
        aa_fail += status == "failed"
    print(f"per test {np.mean(raw):.3f}, campaigns with a Bonferroni finding "
          f"{any_bonf / trials:.3f}, A/A failures {aa_fail / trials:.3f}")
    assert 0.03 <= np.mean(raw) <= 0.075
    assert any_bonf / trials <= 0.05 + 3.5 * math.sqrt(0.05 * 0.95 / trials)
    assert aa_fail / trials <= 0.05 + 3.5 * math.sqrt(0.05 * 0.95 / trials)


def test_a_known_slowdown_fails_no_calibration_and_is_found():
    rng = np.random.default_rng(8)
    runs = campaign(rng, 6)
    runs.loc[runs.environment == "docker", "value"] *= 1.10
    plan = st.Plan("native", {"native-aa": "native"},
                   {"m0": ["compute_time_s"], "m1": ["compute_time_s"]}, {})
    out = st.analyse(runs, st.Settings("native", bootstrap_resamples=1000),
                     ["compute_time_s"], plan)
    docker = out[(out.environment == "docker") & (out.family == "primary")]
    assert (docker.p_bonferroni < ALPHA).all()
    # within 4 SE (noise 2 % a run, 6 blocks: SE of the log ratio 0.012); coverage: above
    assert ((docker.rel_overhead - 0.10).abs() < 0.05).all()
    aa = out[out.family == "calibration"]
    # noise of 2 % a run over 6 blocks cannot show a 2 % resolution (the A/A interval is
    # about +-2.9 % wide): not failed, and inconclusive rather than passed
    assert quality.calibration(aa, ALPHA, 0.02)[0]["status"] == "inconclusive"


def _tidy(values, envs=("native", "native-aa", "chroot", "docker")):
    """values: n x envs, run order block by block."""
    rows, pos = [], 0
    for b, block in enumerate(values, start=1):
        for e, x in zip(envs, block, strict=True):
            rows.append({"model": "m", "environment": e, "repetition": b, "position": pos,
                         "metric": "compute_time_s", "unit": "s", "value": float(x)})
            pos += 1
    return pd.DataFrame(rows)


def test_outlier_rule_at_n4_fires_on_planted_and_is_quiet_on_clean():
    """Through annotate (data frames). The 95 % bar on the planted value is held with
    4000 tables by test_outlier_rule_finds_10sd_at_n4_in_4_equal_environments (measured
    97 %); 300 trials here have an SE of 1 %, so this end-to-end check asks 92 %."""
    rng = np.random.default_rng(9)
    hits, false_values, values = 0, 0, 0
    trials = 300
    for _ in range(trials):
        v = 1 + rng.normal(0, 0.01, (4, 4))
        clean = quality.annotate(_tidy(v))
        false_values += int(clean.flag_outlier.sum())
        values += len(clean)
        v[2, 1] += 0.10  # 10 SD
        planted = quality.annotate(_tidy(v))
        hits += bool(planted.flag_outlier.iloc[2 * 4 + 1])
    print(f"planted found {hits / trials:.3f}; clean values flagged {false_values / values:.4f}")
    assert hits / trials >= 0.92
    assert false_values / values <= 0.015


def test_drift_rule_at_n4_fires_on_planted_and_is_quiet_on_clean():
    rng = np.random.default_rng(10)
    fired_clean, fired_drift = 0, 0
    trials = 100
    for _ in range(trials):
        noise = rng.normal(0, 0.01, (4, 4))
        clean = quality.annotate(_tidy(1 + noise))
        fired_clean += any(f.check == "drift" for f in quality.drift(clean, ALPHA, 999))
        trend = np.arange(16).reshape(4, 4) * -0.003  # 4.5 % over the campaign
        drifting = quality.annotate(_tidy(1 + noise + trend))
        fired_drift += any(f.check == "drift" for f in quality.drift(drifting, ALPHA, 999))
    print(f"drift found {fired_drift / trials:.2f}; on clean data {fired_clean / trials:.2f}")
    assert fired_drift / trials >= 0.9
    assert fired_clean / trials <= 0.05 + 3.5 * math.sqrt(0.05 * 0.95 / trials)


def test_registry_marks_restated_metrics():
    assert REGISTRY["request_throughput"].restates == "token_throughput"
    assert REGISTRY["kv_cache_gib"].size_trend == "decreasing"


def _groups(rng, sims, n, scales, plant=None):
    """sims tables of len(scales) environments x n normal values; plant: (environment,
    shift in that environment's SD) added to its first value."""
    groups = [s * rng.standard_normal((sims, n)) for s in scales]
    if plant is not None:
        groups[plant[0]][:, 0] += plant[1] * scales[plant[0]]
    return groups


@pytest.mark.parametrize("n", [4, 6, 10, 30])
def test_outlier_rule_flags_at_most_1pct_of_clean_tables(n):
    """Any flag in a clean table (k = 2, 3, 4 equal environments): calibrated to 0.8 %
    (quality.OUTLIER_TARGET); 15 000 tables, SE about 0.07 %; each k within 1.5 %."""
    rng = np.random.default_rng(200 + n)
    rates = [float(np.any(np.concatenate(quality.outlier_flags(_groups(rng, 5000, n, [1] * k)),
                                         -1), -1).mean()) for k in (2, 3, 4)]
    print(f"n={n}: clean tables flagged {rates}")
    assert np.mean(rates) <= 0.01
    assert max(rates) <= 0.015


def test_outlier_rule_finds_10sd_at_n4_in_4_equal_environments():
    """Measured 97 % (benchmarks/outlier_rule.py); 4000 tables, SE 0.3 %."""
    rng = np.random.default_rng(31)
    found = quality.outlier_flags(_groups(rng, 4000, 4, [1] * 4, (1, 10.0)))[1][:, 0]
    assert found.mean() >= 0.95


@pytest.mark.parametrize("where", [1, 0])
def test_outlier_rule_with_a_10x_tighter_reference_flags_the_planted_value_alone(where):
    """n = 10, reference (environment 0) 10x tighter; one value 10 SD (of its own
    environment) off, in the noisier environment or in the reference: flagged with no
    other value flagged (measured 97 % and 96 %); 4000 tables, SE 0.3 %."""
    rng = np.random.default_rng(41 + where)
    f = quality.outlier_flags(_groups(rng, 4000, 10, [0.1, 1.0], (where, 10.0)))
    rest = np.concatenate([f[where][:, 1:], f[1 - where]], -1)
    assert (f[where][:, 0] & ~rest.any(-1)).mean() >= 0.95


@pytest.mark.parametrize(("n", "bound"), [(4, 0.04), (6, 0.01), (10, 0.01), (30, 0.01)])
def test_outlier_rule_spares_ordinary_values_of_a_10x_noisier_environment(n, bound):
    """Clean 2-environment tables, the reference 10x tighter: values of the noisier one
    flagged (the rule this replaced: 13, 22, 31, 41 %). At n = 4 the Brown-Forsythe test
    sees a tenfold spread in only about 40 % of tables at the level that keeps the power
    against one outlier, and the pooled scale then flags 3.1 % of the noisier values
    (measured): the bound there is 4 %, 1 % from n = 6 on."""
    rng = np.random.default_rng(50 + n)
    f = quality.outlier_flags(_groups(rng, 4000, n, [0.1, 1.0]))
    print(f"n={n}: values of the noisier environment flagged {f[1].mean():.4f}")
    assert f[1].mean() <= bound
