"""Statistics against independent implementations (scipy, statsmodels, hand formulas) on
fixed data and known answers; the simulations are in test_simulation.py."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from containertax.statistics import comparisons as st

S = st.Settings(reference="native", bootstrap_resamples=2000, seed=1)
rng = np.random.default_rng(20251121)
X = rng.normal(10.5, 1.0, 30)  # the environment
Y = rng.normal(10.0, 1.2, 30)  # the reference


def test_welch_and_mann_whitney_match_scipy():
    r = st.compare(X, Y, S)
    welch = sps.ttest_ind(X, Y, equal_var=False)
    assert r["welch_t"] == pytest.approx(welch.statistic)
    assert r["welch_p"] == pytest.approx(welch.pvalue)
    mwu = sps.mannwhitneyu(X, Y, alternative="two-sided")
    assert r["mwu_u"] == pytest.approx(mwu.statistic)
    assert r["mwu_p"] == pytest.approx(mwu.pvalue, rel=1e-6)


def test_paired_primary_is_the_t_on_per_block_log_ratios():
    """Independent computation: scipy's one-sample t on log(x) - log(y), by hand interval."""
    r = st.compare(X, Y, S, paired=(X, Y))
    d = np.log(X) - np.log(Y)
    one = sps.ttest_1samp(d, 0.0)
    assert r["design"] == "paired" and r["n_blocks"] == 30
    assert r["primary_test"] == "paired t" and r["p"] == pytest.approx(one.pvalue, rel=1e-9)
    half = sps.t.ppf(0.975, 29) * d.std(ddof=1) / math.sqrt(30)
    assert r["rel_overhead"] == pytest.approx(math.expm1(d.mean()), rel=1e-12)
    assert r["rel_ci_low"] == pytest.approx(math.expm1(d.mean() - half), rel=1e-12)
    assert r["rel_ci_high"] == pytest.approx(math.expm1(d.mean() + half), rel=1e-12)
    # the rank test and the effect size of the design: on the per-block log ratios
    assert r["wilcoxon_p"] == pytest.approx(sps.wilcoxon(d).pvalue, rel=1e-9)
    assert r["wilcoxon_min_p"] == 2.0 ** -29
    dz = d.mean() / d.std(ddof=1)
    assert r["d_z"] == pytest.approx(dz, rel=1e-12)
    j = math.gamma(29 / 2) / (math.sqrt(29 / 2) * math.gamma(28 / 2))  # Hedges' J, 29 df
    assert r["g_z"] == pytest.approx(dz * j, rel=1e-12) == r["effect_size"]
    assert abs(j - (1 - 3 / (4 * 29 - 1))) < 1e-4  # the usual approximation
    assert all(math.isnan(r[k]) for k in ("cohen_d", "hedges_g", "mwu_p"))  # unpaired ones
    assert "observed_power" not in r


def test_exact_sign_flip_against_scipy_permutation_test():
    d = np.array([0.03, -0.01, 0.02, 0.05, 0.04, -0.02, 0.01])
    ref = sps.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=10**6,
                               alternative="two-sided")
    assert st.signflip_p(d) == pytest.approx(ref.pvalue, rel=1e-12)
    assert st.signflip_p(np.array([0.1, 0.2, 0.3, 0.4])) == 2 / 16 == st.min_signflip_p(4)
    flip = st.compare(np.exp(d), np.ones(7), st.Settings("native", primary_test="signflip"),
                      paired=(np.exp(d), np.ones(7)))
    assert flip["primary_test"] == "sign-flip (exact)" and flip["p"] == st.signflip_p(d)


def test_effect_sizes_signed_and_difference_interval_unrounded():
    """Independent design: Cohen's d and Hedges' g on the primary (log) scale."""
    r = st.compare(X, Y, S)
    nx, ny = len(X), len(Y)
    lx, ly = np.log(X), np.log(Y)
    pooled = math.sqrt(((nx - 1) * lx.var(ddof=1) + (ny - 1) * ly.var(ddof=1)) / (nx + ny - 2))
    d = (lx.mean() - ly.mean()) / pooled
    g = d * (1 - 3 / (4 * (nx + ny) - 9))
    assert r["cohen_d"] == pytest.approx(d, rel=1e-9)
    assert r["hedges_g"] == pytest.approx(g, rel=1e-3) == r["effect_size"]
    assert math.isnan(r["d_z"]) and math.isnan(r["wilcoxon_p"])  # no blocks, no d_z
    flipped = st.compare(Y, X, S)  # the other way round: the same size, the other sign
    assert flipped["cohen_d"] == pytest.approx(-d, rel=1e-9) and flipped["hedges_g"] < 0
    se = math.sqrt(X.var(ddof=1) / nx + Y.var(ddof=1) / ny)
    dof = se**4 / ((X.var(ddof=1) / nx) ** 2 / (nx - 1) + (Y.var(ddof=1) / ny) ** 2 / (ny - 1))
    half = sps.t.ppf(0.975, dof) * se
    assert r["diff_ci_low"] == pytest.approx(X.mean() - Y.mean() - half, rel=1e-9)
    assert r["diff_ci_high"] == pytest.approx(X.mean() - Y.mean() + half, rel=1e-9)
    assert r["mean_ratio"] == pytest.approx(X.mean() / Y.mean() - 1)
    assert r["mean_ratio_ci_low"] < r["mean_ratio"] < r["mean_ratio_ci_high"]
    # unpaired primary: Welch on the logs
    welch_log = sps.ttest_ind(np.log(X), np.log(Y), equal_var=False)
    assert r["design"] == "independent" and r["p"] == pytest.approx(welch_log.pvalue)


def test_welch_tost_matches_statsmodels():
    from statsmodels.stats.weightstats import ttost_ind

    a, b = np.log(X), np.log(Y * 1.04)
    bound = math.log1p(0.05)
    expected = ttost_ind(a, b, -bound, bound, usevar="unequal")[0]
    r = st.compare(X, Y * 1.04, S)
    assert r["tost_p"] == pytest.approx(expected, rel=1e-9)


def test_sensitivity_matches_noncentral_t():
    """Independent solution: the d at which a two-sided t test (n = 30 + 30, alpha 0.05)
    reaches 80 % power, from scipy's noncentral t and a root finder."""
    from scipy import optimize

    df, crit = 58, sps.t.ppf(0.975, 58)

    def power(d):
        nc = d * math.sqrt(30 * 30 / 60)
        return sps.nct.sf(crit, df, nc) + sps.nct.cdf(-crit, df, nc)

    expected = optimize.brentq(lambda d: power(d) - 0.8, 0.1, 2.0)
    assert st.sensitivity(30, 30, 0.05, 0.8) == pytest.approx(expected, rel=1e-4)
    assert 0.73 < expected < 0.74


def test_corrections_known_answers():
    frame = pd.DataFrame({"p": [0.01, 0.04, 0.03, 0.005, np.nan]})
    out = st.correct(frame)
    assert out["p_bonferroni"].tolist()[:4] == pytest.approx([0.04, 0.16, 0.12, 0.02])
    # BH by hand: sorted p 0.005, 0.01, 0.03, 0.04 -> 0.02, 0.02, 0.04, 0.04
    assert out["p_bh"].tolist()[:4] == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert math.isnan(out["p_bh"].iloc[4]) and out["family_size"].iloc[0] == 4


def test_corrections_stay_within_their_family():
    frame = pd.DataFrame({"p": [0.01, 0.04, 0.03, 0.005],
                          "family": ["primary", "primary", "secondary", "secondary"]})
    out = st.correct(frame)
    assert out["p_bonferroni"].tolist() == pytest.approx([0.02, 0.08, 0.06, 0.01])
    assert out["family_size"].tolist() == [2, 2, 2, 2]


def test_equivalence_tost():
    a = rng.normal(100, 1, 30)
    same = st.compare(a * 1.001, a, S)
    assert same["equivalent"] is True
    far = st.compare(a * 1.2, a, S)
    assert far["equivalent"] is False


def test_descriptives_and_percentiles_from_requests():
    runs = pd.DataFrame({"model": "m", "metric": "t", "environment": "e", "unit": "s",
                         "value": [1.0, 2.0, 3.0, 4.0]})
    req = pd.DataFrame({"model": "m", "environment": "e", "latency_s": np.arange(1, 101.0)})
    d = st.descriptives(runs, req)
    row = d[d.metric == "t"].iloc[0]
    assert (row["n"], row["mean"], row["median"], row["min"], row["max"]) == (4, 2.5, 2.5, 1, 4)
    assert row["sd"] == pytest.approx(np.std([1, 2, 3, 4], ddof=1))
    lat = d[d.metric == "latency_s"].iloc[0]
    assert lat["p99"] == pytest.approx(np.percentile(np.arange(1, 101.0), 99))


def test_identical_values_have_exactly_zero_spread():
    """Planted: seven identical values (a peak memory that never moves). np.std gives
    1.5e-17 from its rounded mean, which the descriptives table printed as an SD and a CV
    of 10^-16 (and was overfull for it); the spread is exactly zero."""
    assert np.std(np.full(7, 0.1), ddof=1) > 0  # the rounding this guards against
    row = st.describe(np.full(7, 0.1))
    assert (row["sd"], row["cv"]) == (0.0, 0.0)
    assert math.isnan(st.describe(np.array([0.1, math.nan]))["sd"])


def _blocked(models=(("a", 0.0), ("b", 0.05)), n=10):
    rows = []
    for model, effect in models:
        for rep in range(1, n + 1):
            base = 10 * (1 + rng.normal(0, 0.05))  # block-to-block drift
            for env, mult in (("native", 1.0), ("native-aa", 1.0), ("docker", 1 + effect)):
                for metric in ("token_throughput", "request_throughput", "ttft_s"):
                    rows.append({"model": model, "metric": metric, "environment": env,
                                 "repetition": rep, "block": rep, "unit": "s",
                                 "value": base * mult * (1 + rng.normal(0, 0.005))})
    return pd.DataFrame(rows)


def test_analyse_plans_families_pairs_and_derived_metrics():
    plan = st.Plan("native", {"native-aa": "native"},
                   {"a": ["token_throughput"], "b": ["token_throughput"]},
                   {"request_throughput": "token_throughput"})
    out = st.analyse(_blocked(), S, ["token_throughput", "request_throughput", "ttft_s"], plan)
    pairs = set(zip(out.environment, out.reference, out.family, out.metric, strict=True))
    assert ("native-aa", "native", "calibration", "token_throughput") in pairs
    assert ("docker", "native", "primary", "token_throughput") in pairs
    assert ("docker", "native", "secondary", "ttft_s") in pairs
    assert not any(e == "native-aa" and r != "native" for e, _, r in
                   zip(out.environment, out.family, out.reference, strict=True))
    derived = out[out.metric == "request_throughput"]
    assert set(derived.family) == {"derived"} and derived["p"].isna().all()
    prim = out[out.family == "primary"]
    assert len(prim) == 2 and (prim.family_size == 2).all() and (prim.n_blocks == 10).all()
    b = prim[prim.model == "b"].iloc[0]
    assert b["p_bonferroni"] < 0.05 and b["rel_ci_low"] < 0.05 < b["rel_ci_high"]


def test_machine_adjusted_overhead_removes_a_faster_machine():
    """Two GPUs, one 20 % slower, holding more of the environment's runs than of the
    reference's: the plain ratio mixes machine and environment, the adjusted one does not."""
    import numpy as np
    import pandas as pd

    from containertax.statistics.comparisons import machine_adjusted

    rng = np.random.default_rng(3)
    rows = []
    for env, machines in (("native", ["A"] * 6 + ["B"] * 2), ("docker", ["A"] * 2 + ["B"] * 6)):
        for m in machines:
            value = 1.0 * (1.05 if env == "docker" else 1.0) * (1.2 if m == "B" else 1.0)
            rows.append({"environment": env, "machine": m,
                         "value": value * rng.lognormal(0, 0.002)})
    g = pd.DataFrame(rows)
    naive = g[g.environment == "docker"].value.mean() / g[g.environment == "native"].value.mean()
    out = machine_adjusted(g, "docker", "native", 0.05)
    assert out["machines"] == 2 and naive - 1 > 0.12
    assert out["machine_adjusted_rel"] == pytest.approx(0.05, abs=0.01)
    assert out["machine_adjusted_ci_low"] < 0.05 < out["machine_adjusted_ci_high"]
    one = machine_adjusted(g.assign(machine="A"), "docker", "native", 0.05)
    assert one["machines"] == 1 and np.isnan(one["machine_adjusted_rel"])


def test_the_machine_adjusted_interval_keeps_the_blocks():
    """Two machines, one 10 % faster, every block on one machine: the adjusted estimate and
    interval equal the paired analysis (block effects absorb the machine's); before, a model
    of machine alone dropped the pairing and gave a narrower interval. A block split
    between machines still gives an estimate."""
    rng = np.random.default_rng(3)
    rows = []
    for b in range(1, 9):
        machine = "m1" if b <= 4 else "m2"
        block_level = rng.normal(0, 0.05) + (0.1 if machine == "m2" else 0.0)
        for env, eff in (("native", 0.0), ("docker", 0.02)):
            rows.append({"environment": env, "block": b, "machine": machine,
                         "value": float(np.exp(block_level + eff + rng.normal(0, 0.005)))})
    g = pd.DataFrame(rows)
    out = st.machine_adjusted(g, "docker", "native", 0.05)
    wide = g.pivot(index="block", columns="environment", values="value")
    d = np.log(wide["docker"]) - np.log(wide["native"])
    ci = sps.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=sps.sem(d))
    assert out["machines"] == 2
    assert math.isclose(out["machine_adjusted_rel"], math.expm1(d.mean()), rel_tol=1e-9)
    assert math.isclose(out["machine_adjusted_ci_low"], math.expm1(ci[0]), rel_tol=1e-6)
    assert math.isclose(out["machine_adjusted_ci_high"], math.expm1(ci[1]), rel_tol=1e-6)
    split = g.copy()
    split.loc[(split.block == 4) & (split.environment == "docker"), "machine"] = "m2"
    assert math.isfinite(st.machine_adjusted(split, "docker", "native", 0.05)[
        "machine_adjusted_rel"])
