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
from containertax.statistics import aggregate, facts
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
