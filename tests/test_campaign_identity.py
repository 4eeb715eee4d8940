"""Issue #35: a campaign's records belong to it alone. Each test plants the fault the issue
measured and shows it caught: another config writing into a campaign (same file name in
another folder, another matrix size), records outside the written schedule, look files
decided under another rule or damaged, derived options that are not a mapping, and
`snakemake --unlock` moving records. Fast ones call the package and `containertax
check`; one per fault runs Snakemake as a subprocess (a dry run, or the schedule step)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from containertax import cli
from containertax.campaign import config
from tests.conftest import REPO, demo_config


def _write(folder: Path, cfg: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "demo.yaml"  # the same file name in every folder
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _snakemake(workdir: Path, path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(workdir), "--configfile", str(path), *args],
        capture_output=True, text=True, timeout=300)


def _two_configs(tmp_path: Path) -> tuple[Path, Path]:
    """Two configs called demo.yaml in two folders, one campaign name, matrix sizes 256
    and 128 for the model n256 (the issue's 64 / 128)."""
    a = demo_config()
    b = demo_config()
    b["models"][0]["size"] = 128
    return _write(tmp_path / "one", a), _write(tmp_path / "two", b)


def test_a_second_config_with_the_same_file_name_is_refused_by_check(tmp_path, monkeypatch,
                                                                       capsys):
    """Before: `check` compared only the config file's base name, so both said ok."""
    monkeypatch.chdir(tmp_path)
    one, two = _two_configs(tmp_path)
    config.pin_campaign(config.load_file(one, tmp_path), "2026-01-01T00:00:00+00:00")
    assert cli.main(["check", str(one), "-d", str(tmp_path)]) == 0
    capsys.readouterr()
    assert cli.main(["check", str(two), "-d", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert str(one) in err and str(two) in err, err
    assert "size: 256 pinned, 128 here" in err and "new campaign name" in err, err
    assert "Extending a campaign" in err and "Traceback" not in err


def test_an_extension_is_accepted_and_pinned(tmp_path, monkeypatch, capsys):
    """More repetitions and a new model extend the campaign; its pin then names them."""
    monkeypatch.chdir(tmp_path)
    cfg = demo_config()
    one = _write(tmp_path / "one", cfg)
    config.pin_campaign(config.load_file(one, tmp_path), "2026-01-01T00:00:00+00:00")
    cfg["repetitions"] = 6
    cfg["models"].append({"id": "n64", "size": 64})
    more = _write(tmp_path / "more", cfg)
    assert cli.main(["check", str(more), "-d", str(tmp_path)]) == 0
    config.pin_campaign(config.load_file(more, tmp_path), "2026-01-02T00:00:00+00:00")
    pin = json.loads((tmp_path / "results" / "demo" / "campaign.pin.json").read_text())
    assert pin["config_source"] == str(one) and "n64" in pin["models"]
    assert pin["extended_by"][0]["config_source"] == str(more)
    # the extension's own change of a pinned model is refused like any other
    cfg["models"][1]["size"] = 500
    assert cli.main(["check", str(_write(tmp_path / "edit", cfg)), "-d", str(tmp_path)]) == 1
    assert "model n512: size: 512 pinned, 500 here" in capsys.readouterr().err


def test_extends_campaign_still_writes_on_purpose(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one, _ = _two_configs(tmp_path)
    config.pin_campaign(config.load_file(one, tmp_path), "2026-01-01T00:00:00+00:00")
    cfg = demo_config()
    cfg["models"][0]["size"] = 128
    cfg["extends_campaign"] = True
    assert cli.main(["check", str(_write(tmp_path / "three", cfg)), "-d",
                     str(tmp_path)]) == 0


def test_a_damaged_pin_is_named_with_its_fix(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    one, _ = _two_configs(tmp_path)
    pin = tmp_path / "results" / "demo" / "campaign.pin.json"
    pin.parent.mkdir(parents=True)
    pin.write_text('{"models": {"n256"')
    assert cli.main(["check", str(one), "-d", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "results/demo/campaign.pin.json" in err and "mv " in err, err
    assert "Traceback" not in err


@pytest.mark.slow
def test_the_workflow_pins_and_refuses_the_other_config(tmp_path):
    """The first invocation that runs jobs (here the schedule step alone) pins the
    campaign; Snakemake then refuses the other config, even in a dry run."""
    one, two = _two_configs(tmp_path)
    out = _snakemake(tmp_path, one, "--cores", "1", "results/demo/schedule.csv")
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "results" / "demo" / "campaign.pin.json").is_file()
    out = _snakemake(tmp_path, two, "-n")
    text = out.stdout + out.stderr
    assert out.returncode != 0 and str(one) in text and "size: 256 pinned, 128 here" in text
    assert "Traceback" not in text, text[-3000:]
