"""Known-effect check through the real workflow: real Snakemake, real probe runs, the real
analysis. One environment carries a test-only +20 % compute slowdown (the matmul probe's
CONTAINERTAX_TEST_SLOWDOWN, spun inside each timed product); a replica of the reference
carries nothing. The primary analysis must find the slowdown with an estimate of the right
size, in the paired design, and the A/A replica must have been tested.

The decision and its false-failure rate. The realised slowdown is not exactly the nominal
one: the stretch spins until a fixed multiple of the product's own time, and whatever else
the machine runs can be served during the spin instead of during the next product (at +5 %
the realised effect was +3.5 to +7.5 % over eight full runs). So the test accepts any
realised effect in a band around the truth, +10 % to +30 % (half the nominal effect either
side), and fails only when the run's own data exclude the whole band: when the 99.9 % t
interval of the mean per-block log ratio, computed from the run's own blocks (kept.csv),
lies entirely outside [log 1.10, log 1.30]. For any realised effect inside the band, a run
fails with probability at most 1 in 2,000 under the t model of the block log ratios (one
tail of a 99.9 % interval); `test_the_decision_fails_one_run_in_two_thousand_at_the_band_edge`
measures it by simulation at the band's edge.

What it catches: a lost effect, a doubled one, a sign error or the wrong reference. Each
needs the interval to be narrow enough to exclude them, so where the run's 99.9 % interval
is wider than a quarter of the band (a half-width over RESOLVE), or where the A/A failed or
outliers cost a quarter of the blocks, the machine was too unstable during the test to
check the effect: the test is skipped with that reason, never passed. At the widest
interval it accepts, a lost effect still fails at least 9,999 runs in 10,000, a doubled or
reversed one 999 in 1,000 (`test_the_decision_catches_lost_doubled_and_reversed_effects`)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats as sps

from tests.conftest import demo_config
from tests.test_workflow import snakemake

pytestmark = [pytest.mark.slow]

TRUTH = 0.20
BAND = (math.log1p(TRUTH / 2), math.log1p(1.5 * TRUTH))  # log scale: +10 % to +30 %
LEVEL = 0.999  # the interval the decision uses: one tail is 1 in 2,000
RESOLVE = (BAND[1] - BAND[0]) / 4  # widest 99.9 % half-width that can tell a lost effect


def interval(d: np.ndarray, level: float = LEVEL) -> tuple[float, float, float]:
    """Mean of the per-block log ratios and its t interval at `level`."""
    n = len(d)
    half = float(sps.t.ppf(0.5 + level / 2, n - 1)) * float(np.std(d, ddof=1)) / math.sqrt(n)
    return float(np.mean(d)), float(np.mean(d)) - half, float(np.mean(d)) + half


def decide(d: np.ndarray) -> str:
    """'pass', 'fail' (the run's interval excludes the whole band) or 'unresolved'."""
    est, low, high = interval(d)
    if (high - low) / 2 > RESOLVE:
        return "unresolved"
    return "fail" if high < BAND[0] or low > BAND[1] else "pass"


def _simulate(truth: float, sd: float, n: int, runs: int, seed: int) -> dict[str, float]:
    """How often `decide` says each word over simulated runs (vectorised: the same rule)."""
    d = np.random.default_rng(seed).normal(truth, sd, (runs, n))
    est = d.mean(axis=1)
    half = float(sps.t.ppf(0.5 + LEVEL / 2, n - 1)) * d.std(axis=1, ddof=1) / math.sqrt(n)
    unresolved = half > RESOLVE
    fail = ~unresolved & ((est + half < BAND[0]) | (est - half > BAND[1]))
    return {"fail": float(fail.mean()), "unresolved": float(unresolved.mean()),
            "pass": float((~unresolved & ~fail).mean())}


def _sd_at(fraction: float, n: int) -> float:
    """Block-ratio noise whose expected 99.9 % half-width is `fraction` of RESOLVE."""
    return fraction * RESOLVE * math.sqrt(n) / float(sps.t.ppf(0.5 + LEVEL / 2, n - 1))


@pytest.mark.parametrize("n", [12, 16])
@pytest.mark.parametrize("fraction", [0.3, 0.7, 1.0])
def test_the_decision_fails_one_run_in_two_thousand_at_the_band_edge(n, fraction):
    # the worst case for a correct workflow: the realised effect on the band's edge, with
    # noise from small to the most the decision still resolves; 400,000 simulated runs per
    # edge, fixed seed. Theory: 1/2,000 of the runs whose interval is resolved; measured
    # here below 1/1,000 (the Monte Carlo SE at 400,000 runs is 0.00004)
    for edge in BAND:
        rates = _simulate(edge, _sd_at(fraction, n), n, 400_000, seed=7)
        assert rates["fail"] <= 1 / 1000, rates
        assert rates["fail"] > 0 or fraction < 0.5  # the edge is where it can fail


@pytest.mark.parametrize("truth", [0.0, math.log1p(2 * TRUTH), math.log1p(-TRUTH)],
                         ids=["lost", "doubled", "reversed"])
def test_the_decision_catches_lost_doubled_and_reversed_effects(truth):
    n = 16
    rates = _simulate(truth, _sd_at(1.0, n), n, 100_000, seed=11)
    # at the widest interval the decision accepts, a resolved run with a lost effect fails
    # 9,999 times in 10,000 or more, with a doubled or reversed one 999 in 1,000 or more
    bound = 0.9999 if truth == 0 else 0.999
    assert rates["fail"] / (rates["fail"] + rates["pass"]) >= bound, rates


def test_a_known_slowdown_is_found_with_its_size(tmp_path):
    cfg = demo_config()
    native = cfg["environments"]["native"]
    cfg.update(campaign="known", repetitions=16, reference_environment="native")
    cfg["environments"] = {
        "native": native,
        "native-aa": {"replica_of": "native"},
        "slow": {**native, "description": "test only: +5 % per timed product",
                 "env": {"CONTAINERTAX_TEST_SLOWDOWN": str(TRUTH)}},
    }
    # 512: a product takes ~40 ms, long enough that a shared machine's scheduling noise
    # stays a few per cent; the per-run median is the metric least moved by preemption
    cfg["models"] = [{"id": "n512", "size": 512, "repeats": 20}]
    cfg["thermal"].update(min_interval_s=0, cooldown_s=0.2, poll_s=0.1)
    cfg["analysis"]["primary_metrics"] = ["compute_time_median_s"]
    # a run that loses a core for its whole duration (a 2-vCPU VM's neighbours: 75 ms per
    # product instead of 41 ms, seen on this machine) is what the documented outlier rule
    # is for; without it one such block moved the estimate to +2 % [-19, +29]
    cfg["analysis"]["exclude"] = ["outliers"]
    cfg["analysis"]["metrics"] = ["compute_time_median_s", "compute_time_s", "max_rss_mib"]
    path = tmp_path / "known.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    root = tmp_path / "results" / "known"

    out = snakemake(tmp_path, path, "--cores", "1", "cells")
    assert out.returncode == 0, out.stderr[-3000:]
    out = snakemake(tmp_path, path, "--cores", "1", "results/known/stats/comparisons.csv",
                    "results/known/stats/quality.json")  # relative to --directory
    assert out.returncode == 0, out.stderr[-3000:]

    res = pd.read_csv(root / "stats" / "comparisons.csv")
    slow = res[(res.environment == "slow") & (res.metric == "compute_time_median_s")].iloc[0]
    print(f"slow: {100 * slow.rel_overhead:+.2f} % [{100 * slow.rel_ci_low:+.2f}, "
          f"{100 * slow.rel_ci_high:+.2f}], p {slow.p:.2g}, {slow.n_blocks} blocks")
    quality = json.loads((root / "stats" / "quality.json").read_text())
    aa = quality["calibration"]
    print("A/A:", aa["status"], [(c["metric"], c["rel_overhead"], c["p"])
                                 for c in aa["comparisons"]])
    # it ran and could fail: passed, failed, or inconclusive at the declared resolution
    # (analysis.resolution_pct: on a loaded machine the A/A interval is often wider)
    assert aa["status"] in ("passed", "failed", "inconclusive")
    rec = json.loads(next((root / "raw" / "n512" / "slow").glob("rep*[0-9].json")).read_text())
    assert rec["inside"]["software"]["test_slowdown"] == str(TRUTH)  # never unseen
    assert rec["inside"]["max_rss_source"] == "VmHWM"
    # the decision, from the run's own blocks: per-block log ratios slow / native
    kept = pd.read_csv(root / "stats" / "kept.csv")
    kept = kept[(kept.metric == "compute_time_median_s") & (kept.model == "n512")]
    wide = kept.pivot_table(index="repetition", columns="environment", values="value")
    d = np.log(wide["slow"]) - np.log(wide["native"])
    d = d.dropna().to_numpy()
    assert len(d) == slow.n_blocks  # the same complete blocks as the primary analysis
    assert math.isclose(math.expm1(float(np.mean(d))), slow.rel_overhead, rel_tol=1e-9)
    est, low, high = interval(d)
    print(f"99.9 % interval {100 * math.expm1(low):+.2f} to {100 * math.expm1(high):+.2f} %")
    # the instrument's own verdict on this machine during the test: a failed A/A, runs
    # left out as outliers in a quarter of the blocks, or an interval too wide to tell a
    # lost effect from the planted one; then a known effect cannot be checked here (the
    # paper of such a campaign says the same): skipped with the reason, never passed
    unstable = {"A/A failed": aa["status"] == "failed",
                f"{slow.n_blocks} of 16 blocks kept": slow.n_blocks < 12,
                f"99.9 % half-width {100 * (high - low) / 2:.1f} % (log)":
                    decide(d) == "unresolved"}
    if any(unstable.values()):
        pytest.skip(f"this machine was too unstable to check +{100 * TRUTH:.0f} % "
                    f"({', '.join(k for k, v in unstable.items() if v)}; slow: "
                    f"{100 * slow.rel_overhead:+.2f} %)")
    assert slow.family == "primary" and slow.design == "paired"
    assert decide(d) == "pass", (
        f"+{100 * TRUTH:.0f} % planted, the run's 99.9 % interval "
        f"[{100 * math.expm1(low):+.2f}, {100 * math.expm1(high):+.2f}] % excludes the whole "
        f"band [+{100 * TRUTH / 2:.0f}, +{150 * TRUTH:.0f}] %")
