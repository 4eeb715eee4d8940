"""Issue #41 (B): `check` and the rehearsal say under which noise the simulations found the
rule's error not held, and what to do; a run CV above the held one is warned about by name.
Planted: a CV of 4 % (warned) and of 1 % (not)."""

from __future__ import annotations

import math

from containertax.campaign import config, rehearsal, stopping
from tests.conftest import REPO


def test_warning_names_a_cv_above_the_held_one_and_not_below():
    planted = stopping.noise_warning(0.04)
    assert planted is not None and "run CV 4 %" in planted
    assert planted.startswith("warning: stopping:") and "more repeats per run" in planted
    assert "sign-flip" in planted
    assert stopping.noise_warning(0.01) is None
    assert stopping.noise_warning(stopping.HELD_CV) is None  # held there: no warning
    assert stopping.noise_warning(math.nan) is None  # no CV: nothing to say


def test_the_cells_are_the_docs_measured_ones():
    """NOISE_NOT_HELD and HELD_CV are the design table's rows for the default design."""
    docs = (REPO / "docs" / "measurement.md").read_text()
    for kind, cv, err in stopping.NOISE_NOT_HELD:
        row = {"skewed": "skewed", "AR(1) rho 0.3": "ar1"}[kind]
        assert f"| HSD -1 6..30 every 2 | {row} | {100 * cv:.1f}% | {err:.3f} |" in docs
        held = f"| HSD -1 6..30 every 2 | {row} | {100 * stopping.HELD_CV:.1f}% | "
        after = docs.split(held, 1)[1]
        assert float(after.split(" |", 1)[0]) <= 0.05
    # the worst run-level cell under the Williams order, as check and the rehearsal print it
    runlevel = [row.split("|") for row in docs.splitlines()
                if row.startswith("| williams |") and "block-ar1" not in row]
    assert len(runlevel) == 36
    assert max(float(cells[6]) for cells in runlevel) == stopping.RUN_LEVEL_WORST


def test_check_says_the_noise_line():
    study = config.load_file(REPO / "config" / "h200-stopping-hsd.yaml")
    out = stopping.summary(study.raw, 100)
    line = [x for x in out.splitlines() if "did not hold" in x]
    assert len(line) == 1 and line[0].startswith("stopping: ")
    assert "skewed noise at 5 % run CV (type I 0.091)" in line[0]
    assert "AR(1) rho 0.3 noise at 5 % run CV (type I 0.135)" in line[0]


def _stopping(sds: list[float]) -> dict:
    rule = {"from_config": True, "spending": "hsd", "looks": [6, 8], "stopping": {}}
    return {"rule": rule, "without_s": 80.0, "min_s": 60.0, "comparisons": 1,
            "scenarios": [{"sd": sd, "effect": 0.0, "expected_blocks": 7.0, "wall_s": 70.0,
                           "saved_pct": 12.5} for sd in sds], "proposals": []}


def test_rehearsal_warns_at_a_planted_cv_of_4_and_not_1_percent():
    above = "\n".join(rehearsal._render_stopping(_stopping([0.04 * math.sqrt(2)])))
    assert "warning: stopping: run CV 4 %" in above and "did not hold" in above
    below = "\n".join(rehearsal._render_stopping(_stopping([0.01 * math.sqrt(2)])))
    assert "warning: stopping: run CV" not in below and "did not hold" in below


def test_the_remedy_benchmark_is_the_rule_with_its_variance_swapped():
    """benchmarks/stopping_hac.py: its 'plain' variant gives run_rule's answers, blocks and
    intervals on the same data, and its Newey-West SE is statsmodels' (issue #41 A)."""
    import sys

    import numpy as np

    sys.path.insert(0, str(REPO / "benchmarks"))
    import stopping_hac as sh

    sh.check_statsmodels()
    rule = stopping.Rule(6, 12, 2, spending="hsd", gamma=-1.0)
    d = sh.noise("ar1", 0.05, (300, 12), np.random.default_rng(7))
    mine, theirs = sh.run_variant(d, rule, "plain"), stopping.run_rule(d, rule)
    assert (mine["answer"] == theirs["answer"]).all()
    assert np.array_equal(mine["blocks"], theirs["blocks"])
    assert np.allclose(mine["low"], theirs["low"]) and np.allclose(mine["high"], theirs["high"])
    # the extrapolated trend term on a planted linear drift: the intercept is the mean
    # over the design's blocks, not over the blocks seen
    x = np.arange(6, dtype=float)[None, :] * 0.01
    est, _, df = sh.se_df(x, "trend30", 12)
    assert df == 4 and math.isclose(float(est[0]), 0.055)


def test_run_level_noise_reaches_the_rule_through_the_designs_order():
    """benchmarks/stopping_runlevel.py pairs each block's two runs where the schedule puts
    them: a planted linear drift of one unit per run gives +1, -1, ... under the two-
    environment Williams order (cancelling over each period) and +1 in every block under
    the fixed order; with four environments each Williams period still sums to zero."""
    import sys

    import numpy as np

    sys.path.insert(0, str(REPO / "benchmarks"))
    import stopping_runlevel as rl

    two = rl.ratios_of_runs(np.arange(2 * rl.BLOCKS, dtype=float)[None, :], "williams", 2)
    assert two[0, :4].tolist() == [1.0, -1.0, 1.0, -1.0]
    assert rl.ratios_of_runs(np.arange(2 * rl.BLOCKS, dtype=float)[None, :], "fixed",
                             2)[0].tolist() == [1.0] * rl.BLOCKS
    four = rl.ratios_of_runs(np.arange(4 * rl.BLOCKS, dtype=float)[None, :], "williams", 4)
    assert four[0, :4].tolist() == [1.0, -2.0, -1.0, 2.0]
    assert np.allclose(four[0, :28].reshape(7, 4).sum(axis=1), 0.0)


def test_the_parametric_ar1_variance_corrects_and_clips_the_lag1_estimate():
    """stopping_hac's 'ar1' variant: on 1..6 the lag-1 estimate 0.5 becomes 0.917 by
    Marriott and Pope's correction, clipped to 0.9: the plain variance times 19."""
    import sys

    import numpy as np

    sys.path.insert(0, str(REPO / "benchmarks"))
    import stopping_hac as sh

    x = np.arange(1.0, 7.0)[None, :]
    est, se, df = sh.se_df(x, "ar1", 30)
    _, plain, _ = sh.se_df(x, "plain", 30)
    assert df == 5 and math.isclose(float(est[0]), 3.5)
    assert math.isclose(float(se[0]) ** 2, float(plain[0]) ** 2 * 19.0)
