"""Effects of a factorial campaign (statistics/factorial.py) and the options phase 2C
derives from them (campaign/optimisation.factorial_choice): planted effects on synthetic
records, each found with its size; an interaction that undoes two options' gains drops one.
Seeded, no machine load: the outcome depends on nothing but the code."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from containertax.campaign import factorial, optimisation
from containertax.campaign.config import load_campaign
from containertax.statistics.factorial import effects, fit, lenth_pse

FACTORS = {name: {"high": {opt: val}} for name, opt, val in (
    ("cpuset", "cpuset_cpus", "0"), ("shm", "shm_size", "1g"), ("net", "network", "host"),
    ("sec", "seccomp", "unconfined"), ("mem", "memory", "2g"), ("priv", "privileged", True),
    ("cg", "cgroup_parent", "ct.slice"))}


def _campaign(factors: dict = FACTORS, resolution: int = 4):
    return load_campaign({
        "campaign": "fx", "repetitions": 4, "reference_environment": "base",
        "environments": {"base": {"kind": "docker", "image": "x", "options": {"ipc": "host"}},
                         "base-aa": {"replica_of": "base"}},
        "workload": {"kind": "matmul"}, "models": [{"id": "n64", "size": 64}],
        "schedule": {"design": "random"},
        "analysis": {"resolution_pct": 2},
        "factorial": {"base": "base", "resolution": resolution, "factors": factors}})


def _row(frame: pd.DataFrame, pair: str) -> pd.Series:
    """The effect row whose alias chain holds the two-factor interaction `pair`."""
    hit = frame[(frame["factors"] == pair) | frame["aliases"].fillna("").str.split(" = ")
                .apply(lambda chain: pair in chain)]
    assert len(hit) == 1, pair
    return hit.iloc[0]


def _records(campaign, truth, blocks: int, cv: float, seed: int = 7,
             metric: str = "compute_time_s") -> pd.DataFrame:
    """Log-normal values around 1 s: truth maps a term ('A', 'AB') to its effect (high
    minus low, log scale); each block adds its own drift."""
    design = factorial.design_of(campaign.raw, campaign.source)
    rng = np.random.default_rng(seed)
    rows = []
    for b in range(1, blocks + 1):
        drift = rng.normal(0, 0.02)
        for env in [e.id for e in campaign.environments]:
            row = design.row_of(env) or {f.letter: -1 for f in design.factors}
            mu = drift + sum(eff / 2 * math.prod(row[c] for c in term)
                             for term, eff in truth.items())
            rows.append({"model": "n64", "environment": env, "block": b, "metric": metric,
                         "value": math.exp(mu + rng.normal(0, cv))})
    return pd.DataFrame(rows)


def test_a_planted_main_effect_and_interaction_are_found_with_their_sizes() -> None:
    campaign = _campaign()
    truth = {"A": math.log(2.0), "BC": math.log(1.05)}  # cpuset doubles; shm x net +5 %
    frame = effects(campaign, _records(campaign, truth, blocks=4, cv=0.01),
                    {"n64": ["compute_time_s"]})
    by = frame.set_index("factors")
    assert by.loc["cpuset", "verdict"] == "difference"
    assert by.loc["cpuset", "rel_low"] < 1.0 < by.loc["cpuset", "rel_high"]
    assert abs(by.loc["cpuset", "rel"] - 1.0) < 0.03
    pair = _row(frame, "shm:net")  # chain AE = BC = DF of the 2^(7-3) design
    assert pair["factors"] == "cpuset:mem" and pair["verdict"] == "difference"
    assert pair["rel_low"] < 0.05 < pair["rel_high"]
    others = by[(by.index != "cpuset") & (by.index != "cpuset:mem")]
    assert set(others["verdict"]) <= {"equivalent", "inconclusive"}
    assert (others["verdict"] == "equivalent").sum() >= 10  # CV 1 %, 64 runs, band 2 %
    assert (frame["method"] == "ols").all() and (frame["df"] > 0).all()


def test_an_unreplicated_design_is_judged_by_lenths_pse() -> None:
    campaign = _campaign()
    frame = effects(campaign, _records(campaign, {"A": math.log(2.0)}, blocks=1, cv=0.01),
                    {"n64": ["compute_time_s"]})
    assert (frame["method"] == "lenth").all()
    top = frame.loc[frame["p_holm"].idxmin()]
    assert top["factors"] == "cpuset" and top["verdict"] == "difference"


def test_lenths_pse_by_hand() -> None:
    # |c| median 2 -> s0 = 3; 10 > 2.5 s0 = 7.5 is left out; the rest's median 1.5 -> 2.25
    assert lenth_pse(np.array([10, -1, 2, -3, 4, 0.5, -0.5])) == pytest.approx(2.25)
    assert math.isnan(lenth_pse(np.array([])))


def test_a_block_cut_short_is_not_estimable_not_guessed() -> None:
    campaign = _campaign()
    records = _records(campaign, {"A": math.log(2.0)}, blocks=1, cv=0.01)
    cut = records[~records["environment"].isin(["f03", "f07", "f12"])]
    frame = effects(campaign, cut, {"n64": ["compute_time_s"]})
    assert len(frame) == 14 and set(frame["verdict"]) == {"not estimable"}
    assert frame["rel"].isna().all()


def test_degenerate_data_give_an_empty_table_not_an_error() -> None:
    campaign = _campaign()
    design = factorial.design_of(campaign.raw, campaign.source)
    empty = pd.DataFrame({"environment": ["f01"], "block": [1], "value": [0.0]})
    assert fit(empty, design, 0.05, 2).empty


def test_phase_2c_takes_the_beneficial_significant_options() -> None:
    campaign = _campaign()
    # compute_time_s: lower is better. shm (B) and net (C) each save 5 %; cpuset costs 2x.
    truth = {"A": math.log(2.0), "B": math.log(0.95), "C": math.log(0.95)}
    frame = effects(campaign, _records(campaign, truth, blocks=4, cv=0.005),
                    {"n64": ["compute_time_s"]})
    choice = optimisation.factorial_choice(campaign, frame, "compute_time_s")
    assert choice.options == {"shm_size": "1g", "network": "host"}
    assert choice.predicted["n64"] == pytest.approx(1 / 0.95 ** 2 - 1, abs=0.01)


def test_an_interaction_that_undoes_two_gains_keeps_only_the_better_option() -> None:
    campaign = _campaign()
    # shm saves 10 % and net 4 % on average, but their interaction (+6 % on the log scale,
    # aliased with cpuset:mem and sec:priv) makes shm alone (-15 %) beat both (-14 %)
    truth = {"B": math.log(0.90), "C": math.log(0.96), "BC": 0.06}
    frame = effects(campaign, _records(campaign, truth, blocks=4, cv=0.005),
                    {"n64": ["compute_time_s"]})
    assert _row(frame, "shm:net")["verdict"] == "difference"
    choice = optimisation.factorial_choice(campaign, frame, "compute_time_s")
    assert list(choice.chosen) == ["shm"] and choice.options == {"shm_size": "1g"}
    assert any("interaction cpuset:mem" in line and "taken as shm:net" in line
               for line in choice.evidence)
    assert choice.predicted["n64"] == pytest.approx(math.exp(-math.log(0.90) + 0.06) - 1,
                                                    abs=0.01)


def test_the_abstract_of_a_factorial_campaign_states_its_effects_not_its_rows() -> None:
    """A factorial campaign's headline is its effects (publishing/factorial_paper.abstract):
    the h200-factorial paper's abstract had listed each of its 16 rows against the base, two
    runs each, in 510 words. Planted: cpuset doubles the time; the abstract names it with the
    size and interval of effects.csv and says the others are not shown to matter."""
    from containertax.publishing import factorial_paper

    campaign = _campaign()
    truth = {"A": math.log(2.0)}
    frame = effects(campaign, _records(campaign, truth, blocks=4, cv=0.01),
                    {"n64": ["compute_time_s"]})
    design = factorial.design_of(campaign.raw, campaign.source)
    text = factorial_paper.abstract(campaign, design, frame)
    compare = text.split("\\newcommand{\\fxcompare}{", 1)[1].split("}\n", 1)[0]
    headline = text.split("\\newcommand{\\fxheadline}{", 1)[1]
    assert compare.startswith("base, base-aa and the 16 rows of a $2^{7-3}$ design over seven")
    cpuset = frame.set_index("factors").loc["cpuset"]
    assert (f"cpuset $+{100 * cpuset['rel']:.1f}$\\,\\% ($+{100 * cpuset['rel_low']:.1f}$ to "
            f"$+{100 * cpuset['rel_high']:.1f}$\\,\\%)") in headline
    assert "the options that matter are cpuset ($+" in headline
    assert headline.count("\\,\\% ($") == 7  # every main effect's interval, no interaction's
    assert not any(f"f{n:02d}" in text for n in range(1, 17))


@pytest.mark.slow
def test_the_committed_h200_factorial_builds_its_paper_with_its_effects_in_the_abstract(
        tmp_path) -> None:
    """results/h200-factorial, rebuilt from its raw records alone: the review is empty (the
    abstract within 250 words; before, its 16 rows made it 510) and the abstract states the
    five main effects with the intervals of stats/effects.csv."""
    import json
    import shutil
    import subprocess
    import sys

    from containertax.publishing import review
    from tests.conftest import REPO

    root = tmp_path / "results" / "h200-factorial"
    shutil.copytree(REPO / "results" / "h200-factorial" / "raw", root / "raw")
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "paper", "--cores", "1", "--snakefile",
         str(REPO / "Snakefile"), "--directory", str(tmp_path), "--configfile",
         str(REPO / "config" / "h200-factorial.yaml")], capture_output=True, text=True,
        timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads((root / "paper" / "review.json").read_text()) == []
    flat = " ".join(review.prose_text(root / "paper" / "paper.pdf").split())
    abstract = flat.split("Abstract", 1)[1].split("1 Introduction", 1)[0]
    frame = pd.read_csv(root / "stats" / "effects.csv")
    first = frame[(frame["metric"] == frame["metric"].iloc[0]) & (frame["kind"] == "main")]
    assert len(first) == 5
    for r in first.itertuples():
        shown = f"{r.factors} {100 * r.rel:+.1f} % ({100 * r.rel_low:+.1f} to"
        assert shown.replace("-", "\u2212") in abstract, (shown, abstract)
    assert " f01 " not in abstract and "16 rows" in abstract
