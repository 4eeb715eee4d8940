"""The campaign's facts (statistics/facts.py, stats/facts.json) from the committed H100
records (issue #39): the runs that compiled read from each record's evidence, never from
its place in a visit; blocks per model, the metric each model's rule decided on, the GPUs
of each block and the tree that measured. Each case the old rules got wrong is planted or
is a committed campaign that holds it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from containertax.campaign.config import load_file
from containertax.statistics import aggregate, facts, quality
from tests.conftest import REPO


def _campaign(name: str):
    return load_file(REPO / "config" / f"{name}.yaml", REPO)


@pytest.fixture(scope="module")
def stopping() -> dict:
    campaign = _campaign("h100-stopping-exact")
    return facts.build(campaign, aggregate.tidy(campaign.root))


def test_the_four_qwen2_runs_whose_first_request_took_35_to_42_s_compiled(stopping):
    """h100-stopping-exact: the paper named three runs (the first of each visit, of any
    model); the records say four qwen2 runs compiled (first warm-up request 35-42 s
    against 7-16 s otherwise), and no matrix product."""
    comp = facts.compiled_frame(stopping)
    assert sorted(zip(comp.model, comp.environment, comp.repetition, strict=True)) == [
        ("qwen2-0.5b", "docker", 3), ("qwen2-0.5b", "docker", 8),
        ("qwen2-0.5b", "native", 1), ("qwen2-0.5b", "native", 5)]
    assert comp.first_request_s.between(35, 42).all()


def test_a_visit_that_primed_the_cache_compiled_nothing():
    """h100-warmup-causes: the old rule flagged the first run of each visit; its counters
    show cache hits only and every first request is 9.5-14.1 s: none compiled."""
    campaign = _campaign("h100-warmup-causes")
    assert facts.compiled_runs(campaign).empty


def test_the_engine_campaigns_first_native_run_compiled():
    campaign = _campaign("h100-engine-balanced")
    comp = facts.compiled_runs(campaign)
    assert list(zip(comp.model, comp.environment, comp.repetition, strict=True)) == [
        ("llama3-8b", "native", 1)]


def test_blocks_primary_metric_and_split_blocks_per_model(stopping):
    """'Each model runs eight times' and 'the headline metric is token throughput' were
    false for h100-stopping-exact: matmul-10k stopped at 6 blocks, and both matrix
    products were decided on compute time; qwen2's block 3 ran on two GPUs."""
    models = stopping["models"]
    assert {m: v["blocks"] for m, v in models.items()} == {
        "qwen2-0.5b": 8, "matmul-10k": 6, "mm-4096": 8}
    assert models["qwen2-0.5b"]["primary_metric"] == "token_throughput"
    assert models["matmul-10k"]["primary_metric"] == models["mm-4096"]["primary_metric"] \
        == "compute_time_s"
    assert models["matmul-10k"]["stop_look"] == 1 and models["mm-4096"]["stop_look"] == 2
    assert models["qwen2-0.5b"]["split_blocks"] == [3]
    assert models["matmul-10k"]["split_blocks"] == []
    assert models["qwen2-0.5b"]["workload"] == {
        "dtype": "bfloat16", "batch_size": 8, "input_len": 256, "output_len": 64,
        "decoding": "engine"}
    assert models["matmul-10k"]["workload"]["size"] == 10000


def test_the_measuring_tree_is_the_records_not_the_building_checkout(stopping):
    trees = {t["commit"] for t in stopping["measuring_trees"]}
    assert trees and trees <= {"da9dacd", "2e1f73d"}
    assert all(t["dirty"] for t in stopping["measuring_trees"])


def test_planted_counters_decide_over_the_first_request():
    """A run whose counters show only hits did not compile, however slow its first
    request (a cold page cache); one with a miss did, however fast."""
    ev = pd.DataFrame({"model": "m", "environment": ["a", "b", "a", "b"],
                       "repetition": [1, 1, 2, 2], "block": [1, 1, 2, 2],
                       "first_request_s": [40.0, 10.0, 10.0, 10.0],
                       "cache_misses": [0.0, 0.0, 0.0, 3.0], "commit": "x",
                       "dirty": False, "machine": "g"})
    comp = facts.compiled(ev, {"m": True})
    assert list(zip(comp.environment, comp.repetition, strict=True)) == [("b", 2)]
    assert facts.compiled(ev, {"m": False}).empty  # a workload that never compiles
    # degenerate: no evidence at all says nothing compiled
    none = ev.assign(first_request_s=np.nan, cache_misses=np.nan)
    assert facts.compiled(none, {"m": True}).empty


def test_the_headline_of_each_model_is_the_metric_its_rule_decided_on():
    """h100-stopping-exact: the headline metric was the first model's (token throughput)
    for all three; each model's is its own primary metric, and the sentences that print
    it (the headline metric, the times each model ran) pass the claims audit."""
    from containertax.publishing import design_values, paper_values, review
    from containertax.statistics import policy

    campaign = _campaign("h100-stopping-exact")
    runs = aggregate.tidy(campaign.root)
    per = policy.headline_metrics(campaign, runs)
    assert per == {"qwen2-0.5b": "token_throughput", "matmul-10k": "compute_time_s",
                   "mm-4096": "compute_time_s"}
    assert policy.headline_override(campaign, runs) == "compute_time_median_s"
    words = paper_values.headline_words(per, policy.metric_registry(campaign))
    blocks = design_values.block_values(campaign, runs)
    assert not blocks["blocks-uniform"]
    assert blocks["blocks-per-model"] == ("qwen2-0.5b 8 times, matmul-10k 6 times and "
                                          "mm-4096 8 times")
    found = facts.build(campaign, runs)
    text = (f"The headline metric is {words}, the primary metric the stopping rule decided "
            f"on. The models ran in every environment as many times as they have blocks.")
    assert review.check_claims(text, found, review.metric_words()) == []
    old = "The headline metric is token throughput, the primary metric the rule decided on."
    assert [p.check for p in review.check_claims(old, found, review.metric_words())] == [
        "claim-metric"]


# --- split blocks: named beside the headline, the headline printed without them ----------

def _split_rows(campaign, runs):
    from containertax.statistics import comparisons as st
    from containertax.statistics import findings, policy

    results = st.analyse(runs, st.Settings.from_config(campaign.analysis, campaign.reference),
                         policy.analysed_metrics(campaign, runs),
                         policy.comparison_plan(campaign, runs))
    table = findings.build(campaign, runs, results, None)
    return results, table, table[table["family"] == findings.SPLIT_FAMILY]


@pytest.mark.filterwarnings("ignore::statsmodels.tools.sm_exceptions.SingularMatrixWarning")
def test_the_committed_split_block_is_left_out_at_the_looks_level():
    """h100-stopping-exact: qwen2's block 3 paired native on one GPU with docker on
    another two hours later. Its headline without block 3 is the stopping look's blocks
    less block 3, at that look's level, recomputed here with scipy alone."""
    from scipy import stats as sps

    campaign = _campaign("h100-stopping-exact")
    runs = aggregate.tidy(campaign.root)
    assert quality.split_blocks(runs) == {"qwen2-0.5b": [3]}
    _, table, split = _split_rows(campaign, runs)
    assert len(split) == 1
    row = split.iloc[0]
    head = table[(table.family == "primary") & (table.model == "qwen2-0.5b")
                 & (table.metric == "token_throughput")].iloc[0]
    assert (row.environment, row.metric, row.split_blocks) == ("docker", "token_throughput",
                                                               "3")
    assert row.reach == "beside the headline" and row.look_alpha == head.look_alpha
    g = runs[(runs.model == "qwen2-0.5b") & (runs.metric == "token_throughput")]
    wide = g.pivot_table(index="block", columns="environment", values="value")
    order = g.groupby("block")["position"].min().sort_values().index[:int(head.look_blocks)]
    d = np.log(wide.loc[order, "docker"] / wide.loc[order, "native"]).drop(3).to_numpy()
    q = sps.t.ppf(1 - head.look_alpha / 2, len(d) - 1)
    se = d.std(ddof=1) / np.sqrt(len(d))
    assert row.look_blocks == len(d) == 7
    assert row.estimate == pytest.approx(np.expm1(d.mean()))
    assert (row.ci_low, row.ci_high) == pytest.approx(
        (np.expm1(d.mean() - q * se), np.expm1(d.mean() + q * se)))
    assert (row.text_est, row.text_ci) == ("-3.8", "[-9.4, +2.1]")


@pytest.mark.filterwarnings("ignore::statsmodels.tools.sm_exceptions.SingularMatrixWarning")
def test_planted_split_block_is_named_and_a_campaign_without_one_prints_nothing():
    """Planted: in a fixed-design campaign (h100-engine-balanced, no stopping rule: the
    primary analysis decides), its model's second block's docker run moved to another
    GPU. The numbers name the block with the headline without it, recomputed by the same
    analysis on the other blocks; with every block on one GPU they print nothing."""
    from containertax.publishing import paper_values
    from containertax.statistics import comparisons as st
    from containertax.statistics import policy

    campaign = _campaign("h100-engine-balanced")
    runs = aggregate.tidy(campaign.root)
    one = runs.assign(machine="gpu-a")
    results, table, split = _split_rows(campaign, one)
    reg = policy.metric_registry(campaign)
    base, others = table[table.family.isin(["primary", "secondary", "derived", "calibration",
                                            "calibration-secondary"])], table
    assert split.empty
    assert paper_values.split_values(campaign, one, base, others, reg) == {
        "split-count": 0, "split-each": ""}
    model = str(runs["model"].iloc[0])
    block = sorted(runs["block"].unique())[1]
    planted = one.copy()
    planted.loc[(planted.model == model) & (planted.block == block)
                & (planted.environment == "docker"), "machine"] = "gpu-b"
    results, table, split = _split_rows(campaign, planted)
    assert list(split.model) == [model] and list(split.split_blocks) == [str(block)]
    base = table[table.family.isin(["primary", "secondary", "derived", "calibration",
                                    "calibration-secondary"])]
    values = paper_values.split_values(campaign, planted, base, table, reg)
    assert values["split-count"] == 1 and values["split-each"] == "\\splititem{1}"
    assert values["sp/1/blocks"] == f"block {block}" and values["sp/1/gpus"] == 2
    # the same analysis on the other blocks, by hand: the primary comparison without it
    row = split.iloc[0]
    rest = planted[(planted.model == model) & (planted.block != block)]
    again = st.analyse(rest, st.Settings.from_config(campaign.analysis, campaign.reference),
                       [row.metric], policy.comparison_plan(campaign, planted))
    again = again[again.environment == row.environment].iloc[0]
    assert row.estimate == pytest.approx(again.rel_overhead)
    assert (row.ci_low, row.ci_high) == pytest.approx((again.rel_ci_low, again.rel_ci_high))
    assert values["sp/1/est"] == f"${row.text_est}$"
    assert values["sp/1/n"] == int(again.n_blocks) == runs[runs.model == model].block.nunique() - 1
