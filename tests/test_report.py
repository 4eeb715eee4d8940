"""The analysis steps refuse empty input with a clear message instead of a traceback."""

from __future__ import annotations

import pytest

from containertax.analysis import report
from containertax.campaign import config
from tests.conftest import demo_config


def test_no_runs_is_a_clear_error(tmp_path):
    cfg = demo_config()
    cfg["results_dir"] = str(tmp_path)
    cfg["results_dir_absolute"] = True
    campaign = config.load_campaign(cfg, "demo.yaml")
    runs = tmp_path / "runs.csv"
    runs.write_text("campaign,model,environment,repetition,metric,value,unit\n")
    with pytest.raises(report.AnalysisError, match="no raw records"):
        report.run_quality(campaign, runs, tmp_path / "stats")


def test_everything_excluded_is_a_clear_error(tmp_path):
    cfg = demo_config()
    cfg["results_dir"] = str(tmp_path)
    cfg["results_dir_absolute"] = True
    campaign = config.load_campaign(cfg, "demo.yaml")
    runs = tmp_path / "runs.csv"
    runs.write_text("model,environment,repetition,metric,value,unit\n"
                    "n256,native,1,compute_time_s,nan,s\n")
    with pytest.raises(report.AnalysisError, match="every value"):
        report.run_quality(campaign, runs, tmp_path / "stats")
