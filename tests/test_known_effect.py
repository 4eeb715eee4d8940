"""Known-effect check through the real workflow: real Snakemake, real probe runs, the real
analysis. One environment carries a test-only +5 % compute slowdown (the matmul probe's
CONTAINERTAX_TEST_SLOWDOWN, spun inside each timed product); a replica of the reference
carries nothing. The primary analysis must find the slowdown, significant after correction,
with an estimate of the right size, and the A/A replica must be calibrated.

Why "the right size" and not "the interval covers +5 %": the realised slowdown has been below
the nominal +5 % in every full run (CI: +3.53 % [+2.54, +4.54]; earlier +3.68, +4.34 and
+4.78 %). The likely reason: the stretch spins until a fixed time, so whatever else the
machine runs (Snakemake, the step's sampler, a CI neighbour) can be served during the spin
instead of during the next product, and the slowed environment's products are a little less
disturbed than the reference's. The realised truth is not known exactly here,
and a 95 % interval misses even an exact truth one run in twenty; coverage is tested where
the truth is exact, in tests/test_simulation.py (0.955 to 0.962 for a true +5 %). Here the
estimate must lie within half the nominal effect of it (+2.5 to +7.5 %), which a lost effect,
a doubled one, a sign error or a comparison against the wrong environment all fail.

On a machine whose speed changes under the test (a 2-vCPU VM here: some runs took 75 ms a
product instead of 41 ms), the A/A replica is the workflow's own check: where it fails,
where outliers cost a quarter of the blocks, or where its interval is too wide to resolve
half the known effect, the test is skipped with that reason, never passed."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from tests.conftest import demo_config
from tests.test_workflow import snakemake

pytestmark = [pytest.mark.slow]

TRUTH = 0.05


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
    assert aa["status"] in ("passed", "failed")  # it ran, and can fail
    rec = json.loads(next((root / "raw" / "n512" / "slow").glob("rep*[0-9].json")).read_text())
    assert rec["inside"]["software"]["test_slowdown"] == str(TRUTH)  # never unseen
    assert rec["inside"]["max_rss_source"] == "VmHWM"
    # the instrument's own verdict on this machine during the test: a failed A/A, runs
    # left out as outliers in a quarter of the blocks, or an A/A interval too wide to
    # resolve half the known effect; then a known effect cannot be checked here (the
    # paper of such a campaign says the same): skipped with the reason, never passed
    same = res[(res.environment == "native-aa") & (res.metric == "compute_time_median_s")]
    aa_half = float((same.rel_ci_high - same.rel_ci_low).iloc[0]) / 2
    unstable = {"A/A failed": aa["status"] == "failed",
                f"{slow.n_blocks} of 16 blocks kept": slow.n_blocks < 12,
                f"A/A half-width {100 * aa_half:.1f} %": aa_half > TRUTH / 2}
    if any(unstable.values()):
        pytest.skip(f"this machine was too unstable to check +5 % "
                    f"({', '.join(k for k, v in unstable.items() if v)}; slow: "
                    f"{100 * slow.rel_overhead:+.2f} %)")
    assert slow.family == "primary" and slow.design == "paired"
    assert slow.p_bonferroni < 0.05 and slow.rel_ci_low > 0
    assert TRUTH / 2 <= slow.rel_overhead <= 1.5 * TRUTH
