"""Issue #35: the study sees what the campaigns see. Before: a record damaged in place
after the study was built gave "Nothing to be done" and a PDF citing the old data; two
import configs with one campaign name let the second replace the first's analysis, and
the study then looped on "comparisons.csv changed ...; rerun the study workflow". Now the
study checks every campaign's records by content when it plans (the campaign's own
check), and an import campaign is pinned to its table like any campaign."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from containertax import cli
from containertax.campaign import config
from tests.conftest import REPO

CAMPAIGN = "h100-matmul"


@pytest.mark.slow
def _study_dry_run(tmp_path, study) -> subprocess.CompletedProcess:
    """`snakemake -n` of the study workflow, as a user plans the study's next run."""
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--snakefile",
         str(REPO / "workflow" / "study.smk"), "--directory", str(tmp_path),
         "--configfile", str(study)], capture_output=True, text=True, timeout=300)


def test_a_record_damaged_in_place_stops_the_studys_next_run(tmp_path):
    (tmp_path / "config").mkdir()
    shutil.copy(REPO / "config" / f"{CAMPAIGN}.yaml", tmp_path / "config")
    study = tmp_path / "config" / "study-one.yaml"
    study.write_text(f"study:\n  name: study-one\n  campaigns:\n"
                     f"    - {{name: {CAMPAIGN}, config: {CAMPAIGN}.yaml}}\n")
    shutil.copytree(REPO / "results" / CAMPAIGN / "raw", tmp_path / "results" / CAMPAIGN / "raw")
    record = sorted((tmp_path / "results" / CAMPAIGN / "raw").glob("*/docker/rep??.json"))[0]
    record.chmod(0o644)
    record.write_bytes(record.read_bytes()[:200])  # cut in place
    out = _study_dry_run(tmp_path, study)
    text = out.stdout + out.stderr
    assert out.returncode != 0, text[-3000:]
    assert f"campaign {CAMPAIGN}" in text and record.name in text and "mv " in text, text
    assert "Traceback" not in text


def test_two_import_configs_with_one_campaign_name_are_named_with_the_fix(
        tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    table = (REPO / "resources" / "sani2025" / "runs.csv").read_text()
    paths = []
    for name in ("a", "b"):
        (tmp_path / f"{name}.csv").write_text(table)
        cfg = tmp_path / f"imp-{name}.yaml"
        cfg.write_text(f"campaign: imp\nreference_environment: native\nanalysis:\n"
                       f"  import_csv: {name}.csv\n  headline_metric: time_s\n")
        paths.append(cfg)
    config.pin_campaign(config.load_file(paths[0], tmp_path), "2026-01-01T00:00:00+00:00")
    assert cli.main(["check", str(paths[0]), "-d", str(tmp_path)]) == 0
    capsys.readouterr()
    assert cli.main(["check", str(paths[1]), "-d", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert str(paths[0]) in err and "the analysed table: {'import_csv': 'a.csv'} pinned" in err
    assert "new campaign name" in err and "Traceback" not in err


@pytest.mark.slow
def test_a_summary_whose_analysis_changed_is_made_again_not_a_loop(tmp_path):
    """Before: comparisons.csv rewritten by another run of the campaign's workflow made
    the study stop on 'changed after its summary ...; rerun the study workflow' however
    often it was rerun. Now a dry run names it, and the next run that runs jobs removes
    the stale summary so that the campaign is summarised again."""
    import json

    (tmp_path / "config").mkdir()
    shutil.copy(REPO / "config" / f"{CAMPAIGN}.yaml", tmp_path / "config")
    study = tmp_path / "config" / "study-one.yaml"
    study.write_text(f"study:\n  name: one\n  campaigns:\n"
                     f"    - {{name: {CAMPAIGN}, config: {CAMPAIGN}.yaml}}\n")
    shutil.copytree(REPO / "results" / CAMPAIGN / "raw", tmp_path / "results" / CAMPAIGN / "raw")
    comparisons = tmp_path / "results" / CAMPAIGN / "stats" / "comparisons.csv"
    comparisons.parent.mkdir(parents=True)
    comparisons.write_text("model,metric\nmm-4096,time\n")  # rewritten since the summary
    summary = tmp_path / "results" / "study-one" / "campaigns" / f"{CAMPAIGN}.json"
    summary.parent.mkdir(parents=True)
    summary.write_text(json.dumps({"comparisons": str(comparisons),
                                   "comparisons_sha256": "0" * 64}))

    def study_smk(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "snakemake", *args, "--snakefile",
             str(REPO / "workflow" / "study.smk"), "--directory", str(tmp_path),
             "--configfile", str(study)], capture_output=True, text=True, timeout=300)

    dry = study_smk("-n")
    assert dry.returncode == 0 and "changed after" in dry.stdout + dry.stderr
    assert summary.exists()  # a plan removes nothing
    # an invocation that may run jobs (its target, a file no rule makes, stops it right
    # after parsing: the campaign's own workflow is not what this test runs)
    run = study_smk("--cores", "1", str(study))
    assert not summary.exists() and "summarising it again" in run.stdout + run.stderr


@pytest.mark.slow
def test_a_value_edited_in_place_after_its_run_stops_the_study(tmp_path):
    """Issue #44: a record value multiplied by 1000 by hand (still valid JSON, its cell
    unchanged): before, the study re-summarised it while the campaign's runs.csv kept the
    old value. The run step ledgers each record's sha256 (planted here as it would have,
    the committed records predating it); the study's plan compares and names the record."""
    import hashlib
    import json

    from containertax.core import records

    (tmp_path / "config").mkdir()
    shutil.copy(REPO / "config" / f"{CAMPAIGN}.yaml", tmp_path / "config")
    study = tmp_path / "config" / "study-one.yaml"
    study.write_text(f"study:\n  name: study-one\n  campaigns:\n"
                     f"    - {{name: {CAMPAIGN}, config: {CAMPAIGN}.yaml}}\n")
    root = tmp_path / "results" / CAMPAIGN
    shutil.copytree(REPO / "results" / CAMPAIGN / "raw", root / "raw")
    record = root / "raw" / "mm-4096" / "docker" / "rep01.json"
    data = record.read_bytes()
    records.append_ledger(root, {"step": "run", "event": "end", "status": "ok",
                                 "model": "mm-4096", "environment": "docker",
                                 "repetition": 1,
                                 "record_sha256": hashlib.sha256(data).hexdigest()})
    edited = json.loads(data)
    edited["metrics"][0]["value"] *= 1000  # the planted hand edit
    record.chmod(0o644)
    record.write_text(json.dumps(edited, indent=2))
    out = _study_dry_run(tmp_path, study)
    text = out.stdout + out.stderr
    assert out.returncode != 0, text[-3000:]
    assert f"campaign {CAMPAIGN}" in text and "edited after the run" in text, text[-3000:]
    assert f"results/{CAMPAIGN}/raw/mm-4096/docker/rep01.json" in text
    assert "Traceback" not in text
