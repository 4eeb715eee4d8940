"""Statistics against independent implementations on fixed data, known answers, and a
simulation of the relative-overhead interval's coverage."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from containertax.analysis import comparisons as st

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


def test_paired_tests_match_scipy():
    r = st.compare(X, Y, S, paired=(X, Y))
    assert r["paired_p"] == pytest.approx(sps.ttest_rel(X, Y).pvalue)
    assert r["wilcoxon_p"] == pytest.approx(sps.wilcoxon(X, Y).pvalue, rel=1e-6)


def test_effect_sizes_and_difference_interval_known_answers():
    r = st.compare(X, Y, S)
    nx, ny = len(X), len(Y)
    pooled = math.sqrt(((nx - 1) * X.var(ddof=1) + (ny - 1) * Y.var(ddof=1)) / (nx + ny - 2))
    d = (X.mean() - Y.mean()) / pooled
    g = d * (1 - 3 / (4 * (nx + ny) - 9))
    assert r["hedges_g"] == pytest.approx(g, rel=1e-3)
    se = math.sqrt(X.var(ddof=1) / nx + Y.var(ddof=1) / ny)
    dof = se**4 / ((X.var(ddof=1) / nx) ** 2 / (nx - 1) + (Y.var(ddof=1) / ny) ** 2 / (ny - 1))
    half = sps.t.ppf(0.975, dof) * se
    assert r["diff_ci_low"] == pytest.approx(X.mean() - Y.mean() - half, abs=1e-2)
    assert r["diff_ci_high"] == pytest.approx(X.mean() - Y.mean() + half, abs=1e-2)
    assert r["rel_overhead"] == pytest.approx(X.mean() / Y.mean() - 1)
    assert r["rel_ci_low"] < r["rel_overhead"] < r["rel_ci_high"]


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


def test_primary_test_rule():
    normal = st.compare(X, Y, S)
    assert normal["primary_test"] == "Welch t" and normal["p"] == normal["welch_p"]
    skewed = rng.lognormal(0, 1.5, 30)
    r = st.compare(skewed, Y, S)
    assert r["shapiro_p_env"] < 0.05
    assert r["primary_test"] == "Mann-Whitney U" and r["p"] == r["mwu_p"]
    paired = st.compare(X, Y, st.Settings(reference="native", primary_test="paired",
                                          bootstrap_resamples=2000), paired=(X, Y))
    assert paired["primary_test"] == "paired t"


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


@pytest.mark.slow
def test_bca_interval_covers_true_overhead_about_95_percent():
    """Simulation: true relative overhead +10 %, lognormal noise (CV 5 %), n = 30 per group.
    400 simulated studies; the 95 % interval must cover the truth 92-98 % of the time."""
    sim = np.random.default_rng(7)
    covered = 0
    trials = 400
    for i in range(trials):
        y = sim.lognormal(0, 0.05, 30)
        x = 1.10 * sim.lognormal(0, 0.05, 30)
        truth = 1.10 - 1  # ratio of population means (same sigma, so the lognormal bias cancels)
        _, lo, hi = st.relative_overhead(x, y, resamples=2000, seed=i)
        covered += lo <= truth <= hi
    rate = covered / trials
    print(f"coverage of the 95 % BCa interval: {rate:.3f}")
    assert 0.92 <= rate <= 0.98


def test_analyse_with_blocks_and_family_correction():
    rows = []
    for model, shift in (("a", 0.0), ("b", 0.5)):
        for rep in range(1, 11):
            base = 10 + rng.normal(0, 0.2)
            for env, add in (("native", 0.0), ("docker", shift)):
                rows.append({"model": model, "metric": "compute_time_s", "environment": env,
                             "repetition": rep, "block": rep, "unit": "s",
                             "value": base + add + rng.normal(0, 0.05)})
    out = st.analyse(pd.DataFrame(rows), S, ["compute_time_s"])
    assert len(out) == 2 and set(out.environment) == {"docker"}
    assert (out["paired_n"] == 10).all()
    b = out[out.model == "b"].iloc[0]
    assert b["p_bh"] < 0.05 and b["rel_overhead"] > 0.03
    assert (out["p_bonferroni"] >= out["p"]).all()


def test_machine_adjusted_overhead_removes_a_faster_machine():
    """Two GPUs, one 20 % slower, holding more of the environment's runs than of the
    reference's: the plain ratio mixes machine and environment, the adjusted one does not."""
    import numpy as np
    import pandas as pd

    from containertax.analysis.comparisons import machine_adjusted

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
