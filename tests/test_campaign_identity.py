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


# Issue #44: the pin atomic, recreated from the records, holding the measuring settings.

def _plant_record(root: Path, campaign: config.Campaign, model: str, env: str) -> Path:
    """A record as the run step writes its identity parts: workload kind and parameters,
    the environment's settings, the config it ran under."""
    raw = root / "raw" / model / env / "rep001.json"
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_text(json.dumps({
        "cell": {"model": model, "environment": env, "repetition": 1},
        "workload": {"kind": campaign.workload_kind(model),
                     "params": campaign.workload_params(model)},
        "environment": {"id": env, "spec": campaign.environment(env).spec},
        "provenance": {"config_source": campaign.source,
                       "config_hash": campaign.config_hash()}, "metrics": []}))
    return raw


def test_a_missing_pin_is_recreated_from_the_records(tmp_path, monkeypatch, capsys):
    """Before: on a fresh clone (no pin in git) a second config of the same file name and
    campaign, another matrix size, passed check and ran beside the first; the paper
    pooled both."""
    monkeypatch.chdir(tmp_path)
    one, two = _two_configs(tmp_path)
    first = config.load_file(one, tmp_path)
    _plant_record(first.root, first, "n256", "native")
    assert not first.paths.pin.exists()
    assert cli.main(["check", str(two), "-d", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "recreated from its raw records" in err and "size: 256 pinned, 128 here" in err
    config.claim(first, first.paths.resolved, "2026-01-01T00:00:00+00:00")
    pin = json.loads(first.paths.pin.read_text())
    assert pin["recreated_from_records"] and pin["models"]["n256"]["size"] == 256
    assert first.paths.resolved.exists()


@pytest.mark.parametrize("key,value,shown", [
    (("memory", "drop_page_cache"), "never", "memory:"),
    (("telemetry", "hz"), 50, "telemetry:"),
])
def test_a_pinned_campaign_refuses_a_changed_measuring_setting(tmp_path, monkeypatch,
                                                                capsys, key, value, shown):
    monkeypatch.chdir(tmp_path)
    cfg = demo_config()
    one = _write(tmp_path / "one", cfg)
    config.claim(config.load_file(one, tmp_path), tmp_path / "resolved.json")
    cfg.setdefault(key[0], {})[key[1]] = value
    changed = _write(tmp_path / "two", cfg)
    assert cli.main(["check", str(changed), "-d", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert shown in err and f"'{key[1]}': {value!r}" in err and "pinned" in err, err


def test_a_pin_from_before_the_settings_gains_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one = _write(tmp_path / "one", demo_config())
    campaign = config.load_file(one, tmp_path)
    config.claim(campaign, tmp_path / "resolved.json")
    pin = json.loads(campaign.paths.pin.read_text())
    del pin["settings"]
    campaign.paths.pin.write_text(json.dumps(pin))
    config.claim(campaign, tmp_path / "resolved.json")
    assert "settings" in json.loads(campaign.paths.pin.read_text())


def test_two_configs_claiming_a_new_campaign_at_once_get_one_pin(tmp_path, monkeypatch):
    """Before: in 3 of 5 trials the pin named one config while the other measured (pin
    and resolved config were written before Snakemake's lock). Now the owner check, pin
    and resolved config are one step under one lock: of configs racing from 8 processes,
    the resolved config is the pinned one's, and every other is refused."""
    import multiprocessing

    monkeypatch.chdir(tmp_path)
    paths = []
    for i in range(8):
        cfg = demo_config()
        cfg["models"][0]["size"] = 64 + 8 * i
        paths.append(str(_write(tmp_path / f"c{i}", cfg)))
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(8) as pool:
        outcomes = pool.starmap(_claim_in_child, [(p, str(tmp_path)) for p in paths])
    won = [p for p, ok in zip(paths, outcomes, strict=True) if ok]
    pin = json.loads((tmp_path / "results" / "demo" / "campaign.pin.json").read_text())
    resolved = json.loads((tmp_path / "results" / "demo" / "config.resolved.json")
                          .read_text())
    assert won == [pin["config_source"]] and resolved["source"] == won[0]


def _claim_in_child(path: str, workdir: str) -> bool:
    try:  # load_file checks the owner too: a pin written before it refuses there
        campaign = config.load_file(path, Path(workdir))
        config.claim(campaign, campaign.paths.resolved)
    except config.ConfigError:
        return False
    return True


def test_a_fresh_clone_holds_the_measuring_settings_its_visits_pinned(tmp_path, capsys):
    """Issue #44: a pin recreated from the records had no settings, so on a fresh clone a
    config that changed telemetry.hz (or memory) passed check. The pins each GPU visit
    kept with the records (raw/visits/*/campaign.pin.json, committed) say them."""
    import shutil

    root = tmp_path / "results" / "h200-stopping-hsd"
    shutil.copytree(REPO / "results" / "h200-stopping-hsd" / "raw", root / "raw")
    cfg = yaml.safe_load((REPO / "config" / "h200-stopping-hsd.yaml").read_text())
    same = tmp_path / "h200-stopping-hsd.yaml"
    same.write_text(yaml.safe_dump(cfg))
    assert cli.main(["check", str(same), "-d", str(tmp_path)]) == 0
    capsys.readouterr()
    cfg["telemetry"]["hz"] = 50  # the planted change
    same.write_text(yaml.safe_dump(cfg))
    assert cli.main(["check", str(same), "-d", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "recreated from its raw records" in err and "telemetry" in err, err
