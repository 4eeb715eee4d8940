"""Degenerate and damaged tables give defined results or a clear error, never a silent change
of test (issue #21) and never a traceback; the small-n details of issue #23. The property
test feeds analyse(), the correction and the paper's formatting random tables of every
awkward shape; the last test recomputes a committed campaign's paired numbers with scipy."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as hs
from scipy import stats as sps

from containertax.campaign import config
from containertax.publishing import paper_values, report, tables
from containertax.statistics import comparisons as st
from containertax.statistics import steps
from containertax.statistics.correction import correct
from tests.conftest import REPO, demo_config

S = st.Settings("native", bootstrap_resamples=200, seed=1)
METRIC = "token_throughput"


def table(values: dict[str, list[float]], metric: str = METRIC, model: str = "m",
          blocked: bool = True) -> pd.DataFrame:
    """environment -> per-block values (NaN: no run in that block)."""
    rows = []
    for env, vals in values.items():
        for b, v in enumerate(vals, start=1):
            if v is None:
                continue
            rows.append({"model": model, "metric": metric, "environment": env, "unit": "x",
                         "repetition": b, "block": b if blocked else np.nan, "value": v})
    return pd.DataFrame(rows)


def one(out: pd.DataFrame) -> pd.Series:
    assert len(out) == 1
    return out.iloc[0]


# --- issue #21: duplicated and missing rows ----------------------------------------------


def _issue_campaign() -> pd.DataFrame:
    """Four blocks with strong drift between them and a +2 % effect within each."""
    base = [100.0, 130.0, 80.0, 115.0]
    noise = [1.000, 1.004, 0.997, 1.001]
    return table({"native": base, "docker": [b * 1.02 * e for b, e in zip(base, noise,
                                                                          strict=True)]})


def test_a_duplicated_row_is_an_error_not_a_switch_to_welch():
    """Planted: one row of the reference repeated (before: the analysis silently became
    Welch's and the +2 % effect vanished into the block-to-block drift)."""
    runs = _issue_campaign()
    clean = one(st.analyse(runs, S, [METRIC]))
    assert clean.design == "paired" and clean.n_blocks == 4 and clean.p < 0.01
    doubled = pd.concat([runs, runs[runs.environment == "native"].iloc[[1]]],
                        ignore_index=True)
    with pytest.raises(st.DuplicateRows, match="repeat a") as err:
        st.analyse(doubled, S, [METRIC])
    assert len(err.value.rows) == 2 and set(err.value.rows.repetition) == {2}


def test_the_stats_step_names_the_file_and_the_fix(tmp_path):
    cfg = demo_config()
    cfg["results_dir"] = str(tmp_path)
    cfg["results_dir_absolute"] = True
    campaign = config.load_campaign(cfg, "demo.yaml")
    runs = _issue_campaign()
    kept = tmp_path / "kept.csv"
    pd.concat([runs, runs.iloc[[0]]]).to_csv(kept, index=False)
    with pytest.raises(report.AnalysisError, match=r"kept\.csv.*repeat a") as err:
        steps.run_stats(campaign, kept, None, {"m": (tmp_path / "m.csv",
                                                      tmp_path / "m.d.csv")})
    assert "analysis.exclude: [duplicate]" in str(err.value)
    assert not (tmp_path / "m.csv").exists()


def test_excluding_duplicates_leaves_an_incomplete_block_counted():
    """The explicit choice (analysis.exclude: [duplicate]) drops every copy: that block is
    incomplete, left out and counted, and the design stays paired."""
    from containertax.statistics import quality

    runs = _issue_campaign()
    doubled = quality.annotate(pd.concat([runs, runs.iloc[[1]]], ignore_index=True)
                               .assign(position=0))
    kept, dropped = quality.exclude(doubled, ["duplicate"])
    assert len(dropped) == 2
    r = one(st.analyse(kept, S, [METRIC]))
    assert (r.design, r.n_blocks, r.blocks_dropped) == ("paired", 3, 1)


def test_a_missing_run_drops_its_block_and_says_so():
    runs = _issue_campaign()
    runs = runs[~((runs.environment == "docker") & (runs.repetition == 3))]
    r = one(st.analyse(runs, S, [METRIC]))
    assert (r.design, r.n_blocks, r.blocks_dropped) == ("paired", 3, 1)
    assert r.rel_ci_low > 0  # the within-block effect survives: no unpaired test


def test_one_complete_block_stays_paired_without_an_interval():
    r = one(st.analyse(table({"native": [10.0, 11.0], "docker": [10.5, None]}), S, [METRIC]))
    assert (r.design, r.n_blocks, r.blocks_dropped) == ("paired", 1, 1)
    assert r.rel_overhead == pytest.approx(0.05)
    assert r.no_interval == "one complete block" and r.not_estimable == ""
    assert math.isnan(r.rel_ci_low) and math.isnan(r.p)


# --- issue #21: degenerate data -----------------------------------------------------------


def test_reference_mean_zero_is_not_estimable_not_a_crash():
    """The reported crash: host_mem_rise_gib 0 in every native run, 1 model x 2 reps."""
    runs = table({"native": [0.0, 0.0], "docker": [0.01, 0.0]}, metric="host_mem_rise_gib")
    r = one(st.analyse(runs, S, ["host_mem_rise_gib"]))
    assert r.scale == "difference" and math.isnan(r.rel_overhead)
    assert r.not_estimable == "reference mean is zero" and math.isnan(r.p)


def test_constant_metric_and_all_nan():
    const = one(st.analyse(table({"native": [4.0] * 4, "docker": [4.0] * 4}), S, [METRIC]))
    assert const.rel_overhead == 0 and const.not_estimable == ""
    assert const.no_interval.startswith("no variation")
    nan = one(st.analyse(table({"native": [np.nan] * 3, "docker": [np.nan] * 3}), S, [METRIC]))
    assert nan.not_estimable == "no complete block" and math.isnan(nan.rel_overhead)


def test_scale_is_one_per_metric_for_the_campaign():
    """A zero in one model's runs puts the metric on the raw scale for every model."""
    a = table({"native": [1.0, 2.0, 3.0], "docker": [1.1, 2.1, 3.2]}, model="a")
    b = table({"native": [0.0, 2.0, 3.0], "docker": [0.5, 2.1, 3.2]}, model="b")
    campaign = pd.concat([a, b], ignore_index=True)
    scales = st.metric_scales(campaign)
    assert scales == {METRIC: "raw"}
    alone = one(st.analyse(a, S, [METRIC]))
    within = one(st.analyse(a, S, [METRIC], scales=scales))
    assert alone.scale == "log ratio" and within.scale == "difference"


def test_tables_print_not_estimable_never_nan():
    runs = pd.concat([table({"native": [0.0, 0.0], "docker": [0.1, 0.0]}, metric="ttft_s"),
                      table({"native": [1.0, 2.0], "docker": [1.0, None]})], ignore_index=True)
    out = st.analyse(runs, S, ["ttft_s", METRIC])
    text = tables.estimates_table(out, {}) + tables.tests_table(out, {})
    assert "nan" not in text.lower().replace("\\nan", "")
    assert "n.e." in text and "[n.e.]" in text


def test_margin_band_is_the_ratio_band():
    v = paper_values.margin_values(0.05)
    assert (v["margin-low"], v["margin-high"]) == ("-4.76", "+5")
    assert v["margin-band"] == r"[$-4.76$\,\%, $+5$\,\%]"


# --- property test ------------------------------------------------------------------------

magnitude = hs.sampled_from([1e-300, 1e-9, 1e-3, 1.0, 1e3, 1e9, 1e300])
value = hs.one_of(hs.just(0.0), hs.just(1.0), hs.just(-1.0),
                  hs.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
                  hs.floats(1e-6, 1e6), hs.just(float("nan")))


@hs.composite
def campaigns(draw):
    """A blocked or unblocked table, 1 or 2 models, 1..6 blocks, 2 or 3 environments, each
    value a constant, zero, a negative, NaN or a random number times a magnitude; an
    environment may miss runs; never a repeated block."""
    blocked = draw(hs.booleans())
    n = draw(hs.integers(1, 6))
    envs = ["native", "docker", "native-aa"][: draw(hs.integers(2, 3))]
    scale = draw(magnitude)
    constant = draw(hs.booleans())
    rows = []
    for model in ["m0", "m1"][: draw(hs.integers(1, 2))]:
        for env in envs:
            for b in range(1, n + 1):
                if draw(hs.integers(0, 9)) == 0:  # a failed cell
                    continue
                v = 7.0 if constant else draw(value)
                rows.append({"model": model, "metric": METRIC, "environment": env,
                             "unit": "x", "repetition": b, "block": b if blocked else np.nan,
                             "value": v * scale})
    return pd.DataFrame(rows, columns=["model", "metric", "environment", "unit",
                                       "repetition", "block", "value"])


def _frame(rows: list[tuple[str, str, int, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"model": m, "metric": METRIC, "environment": e, "unit": "x",
                          "repetition": rep, "block": np.nan, "value": v}
                         for m, e, rep, v in rows])


# Found by the property test in a clean CI-like run (seeds 2 and 5), kept as fixed
# examples: a subnormal reference value makes the ratio overflow, 100 x the relative
# difference was printed '+inf'; an infinite MDE crashed the table's number format.
SUBNORMAL_RATIO = _frame([("m1", "native", 3, 2.225074e-317), ("m1", "docker", 3, 1e-9)])
INFINITE_MDE = _frame([("m0", "native", 5, 0.0), ("m0", "native", 6, 1.404185e-309),
                       ("m0", "native-aa", 5, 0.0), ("m0", "native-aa", 6, 4.465020e-04)])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs=campaigns(), signflip=hs.booleans())
@example(runs=SUBNORMAL_RATIO, signflip=False)
@example(runs=INFINITE_MDE, signflip=False)
def test_property_no_exception_and_invariants(runs, signflip):
    s = st.Settings("native", bootstrap_resamples=50, seed=1,
                    primary_test="signflip" if signflip else "paired_t")
    plan = st.Plan("native", {"native-aa": "native"}, {"m0": [METRIC], "m1": [METRIC]}, {})
    out = st.analyse(runs, s, [METRIC], plan)
    for _, r in out.iterrows():
        est, low, high = r.rel_overhead, r.rel_ci_low, r.rel_ci_high
        assert (r.not_estimable != "") == math.isnan(est)  # a reason exactly when NaN
        assert not math.isinf(est)
        finite_ci = math.isfinite(low) and math.isfinite(high)
        assert (r.no_interval != "") == (not finite_ci)
        if finite_ci:
            assert low <= est <= high
        for p in ("p", "p_bonferroni", "p_bh", "tost_p", "wilcoxon_p", "mwu_p", "t_p"):
            assert math.isnan(r[p]) or 0 <= r[p] <= 1, (p, r[p])
        assert r.design == ("paired" if runs["block"].notna().any() else "independent")
        assert r.blocks_dropped >= 0
    for _, r in correct(out.drop(columns=["p_bonferroni", "p_bh", "family_size"],
                                 errors="ignore")).iterrows():
        assert math.isnan(r.p_bh) or r.p - 1e-12 <= r.p_bh <= 1
    text = tables.estimates_table(out, {}) + tables.tests_table(out, {}) if len(out) else ""
    assert "nan" not in text.lower().replace("\\nan", "")
    for _, r in out.iterrows():
        for cell in (tables.rel_with_ci(r), tables.pval(r.p), tables.effect(r.effect_size),
                     tables.num(100 * r.mde_rel, 2)):
            assert "nan" not in cell.lower() and "inf" not in cell.lower()


# --- an independent check on a committed campaign -----------------------------------------


def test_committed_campaign_paired_effect_size_and_wilcoxon_match_scipy(tmp_path):
    """results/h100-engine-gqa: per-block log ratios docker/native of token throughput,
    recomputed with numpy and scipy from the records' tidy table."""
    from containertax.statistics import aggregate

    root = tmp_path / "h100-engine-gqa"
    shutil.copytree(REPO / "results" / "h100-engine-gqa" / "raw", root / "raw")
    runs = aggregate.tidy(root)
    tt = runs[runs.metric == METRIC]
    model = tt.model.iloc[0]
    env = next(e for e in tt.environment.unique() if e != "native")
    g = tt[tt.model == model]
    x = g[g.environment == env].set_index("block")["value"]
    y = g[g.environment == "native"].set_index("block")["value"]
    common = x.index.intersection(y.index)
    d = np.log(x.loc[common].to_numpy(float)) - np.log(y.loc[common].to_numpy(float))
    n = len(d)
    dz = d.mean() / d.std(ddof=1)
    gz = dz * math.gamma((n - 1) / 2) / (math.sqrt((n - 1) / 2) * math.gamma((n - 2) / 2))
    out = st.analyse(g, st.Settings("native", bootstrap_resamples=200), [METRIC])
    r = out[out.environment == env].iloc[0]
    assert r.n_blocks == n and r.design == "paired"
    assert r.d_z == pytest.approx(dz, rel=1e-12)
    assert r.g_z == pytest.approx(gz, rel=1e-12) == r.effect_size
    assert r.wilcoxon_p == pytest.approx(sps.wilcoxon(d).pvalue, rel=1e-12)
    assert r.wilcoxon_min_p == 2.0 ** (1 - n)
    assert r.p == pytest.approx(sps.ttest_1samp(d, 0.0).pvalue, rel=1e-9)
