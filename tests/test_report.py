"""The analysis steps refuse empty input with a clear message instead of a traceback."""

from __future__ import annotations

import pytest

from containertax.campaign import config
from containertax.publishing import paper_values, report
from containertax.statistics import steps
from tests.conftest import REPO, demo_config


def test_no_runs_is_a_clear_error(tmp_path):
    cfg = demo_config()
    cfg["results_dir"] = str(tmp_path)
    cfg["results_dir_absolute"] = True
    campaign = config.load_campaign(cfg, "demo.yaml")
    runs = tmp_path / "runs.csv"
    runs.write_text("campaign,model,environment,repetition,metric,value,unit\n")
    with pytest.raises(report.AnalysisError, match="no raw records"):
        steps.run_quality(campaign, runs, tmp_path / "stats")


def test_everything_excluded_is_a_clear_error(tmp_path):
    cfg = demo_config()
    cfg["results_dir"] = str(tmp_path)
    cfg["results_dir_absolute"] = True
    campaign = config.load_campaign(cfg, "demo.yaml")
    runs = tmp_path / "runs.csv"
    runs.write_text("model,environment,repetition,metric,value,unit\n"
                    "n256,native,1,compute_time_s,nan,s\n")
    with pytest.raises(report.AnalysisError, match="every value"):
        steps.run_quality(campaign, runs, tmp_path / "stats")


def _aa_runs(tmp_path, shift):
    import numpy as np

    rng = np.random.default_rng(1)
    lines = ["model,environment,repetition,block,position,metric,value,unit"]
    pos = 0
    for rep in range(1, 5):
        level = 1 + rng.normal(0, 0.05)
        for env in ("native", "native-aa", "chroot", "docker"):
            value = level * (1 + shift if env == "native-aa" else 1) * (1 + rng.normal(0, 0.005))
            lines.append(f"n256,{env},{rep},{rep},{pos},compute_time_s,{value},s")
            pos += 1
    path = tmp_path / "runs.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(("shift", "status"), [(0.0, "passed"), (0.2, "failed")])
def test_a_a_difference_is_an_instrument_failure(tmp_path, shift, status):
    """A planted A/A difference (the replica 20 % slower in every block) fails the
    calibration in quality.json, first and as an error, and turns the abstract red."""
    import json

    cfg = demo_config()
    cfg["results_dir"] = str(tmp_path)
    cfg["results_dir_absolute"] = True
    campaign = config.load_campaign(cfg, "demo.yaml")
    steps.run_quality(campaign, _aa_runs(tmp_path, shift), tmp_path / "stats")
    q = json.loads((tmp_path / "stats" / "quality.json").read_text())
    assert q["calibration"]["status"] == status
    macros = paper_values.calibration_macros(q["calibration"])
    assert macros["aa-failed"] == (status == "failed")
    assert macros["aa-passed"] == (status == "passed")
    assert macros["aa-count"] == 1 and macros["aa/1/env"] == "native-aa"
    assert macros["aa/1/significant"] == (status == "failed")
    if status == "failed":
        assert q["findings"][0]["check"] == "aa_calibration"
        assert q["findings"][0]["severity"] == "error"
        # the paper states it in red where the abstract and the A/A section test aa-failed
        tex = (REPO / "paper" / "main.tex").read_text()
        abstract = tex[tex.index("\\begin{abstract}"):tex.index("\\end{abstract}")]
        assert "\\ifctx{aa-failed}{ \\textcolor{red}" in abstract
