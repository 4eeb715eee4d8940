"""Issue #44, unclear messages: each now names the fix. A oneOf option (docker's gpus, a
ulimit) said "'some' is not valid under any of the given schemas" and named no accepted
form; `best-options --derive` without `--metric` on a campaign analysed on other metrics
said "run the campaign's analysis first" after it ran; a study whose campaign never ran
showed a nested CalledProcessError with the reason only in a log."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from containertax import cli
from containertax.campaign import config
from tests.conftest import REPO, demo_config


@pytest.mark.parametrize("option,value,accepted", [
    ("gpus", "some", "accepted: --gpus: all, a count, or device ids"),
    ("gpus", 0, "accepted: --gpus: all, a count, or device ids"),
    ("ulimits", {"stack": "lots"}, "accepted: an integer (-1 = unlimited) or 'soft:hard'"),
])
def test_a_oneof_option_names_the_accepted_forms(tmp_path, capsys, option, value, accepted):
    cfg = demo_config()
    cfg["environments"]["docker"]["options"] = {option: value}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    assert cli.main(["check", str(path), "-d", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"environments.docker.options.{option}" in err and accepted in err, err


def test_best_options_on_other_metrics_names_them_not_the_analysis(tmp_path, capsys):
    cfg = tmp_path / "mine.yaml"
    # the one-at-a-time 2B, whose options come from comparisons (the factorial 2B's come
    # from its effects file: cli._best_options_factorial)
    base = REPO / "config" / "phase-2b-one-at-a-time.yaml"
    cfg.write_text(yaml.safe_dump({"base": str(base),
                                   "results_dir": str(tmp_path / "results"),
                                   "results_dir_absolute": True}))
    c = config.load_file(cfg)
    (c.root / "stats").mkdir(parents=True)
    pd.DataFrame([{"model": m.id, "metric": "time_s", "environment": "docker_net_host",
                   "reference": "docker_baseline", "rel_overhead": 0.03, "p_bh": 0.001}
                  for m in c.models]).to_csv(c.root / "stats" / "comparisons.csv",
                                             index=False)
    assert cli.main(["best-options", str(cfg), "--derive", "docker_optimised"]) == 1
    err = capsys.readouterr().err
    assert "the analysis compared ['time_s']" in err and "--metric time_s" in err, err
    assert "analysis first" not in err


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("latexmk") is None, reason="the study's planning needs it")
def test_a_study_whose_campaign_never_ran_prints_the_reason(tmp_path):
    cfg = demo_config()
    cfg["campaign"] = "never"
    cfg["environments"] = {"native": cfg["environments"]["native"],
                           "native-aa": {"replica_of": "native"}}
    cfg["reference_environment"] = "native"
    (tmp_path / "never.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    (tmp_path / "study.yaml").write_text(yaml.safe_dump({"study": {
        "name": "s", "campaigns": [{"name": "never", "config": "never.yaml",
                                    "why": "a campaign that never ran"}]}}))
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--snakefile",
         str(REPO / "workflow" / "study.smk"), "--directory", str(tmp_path),
         "--configfile", str(tmp_path / "study.yaml")],
        capture_output=True, text=True, timeout=600)
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert "the workflow of campaign never failed" in text, text[-3000:]
    assert "run the campaign first" in text or "no raw records" in text, text[-3000:]
