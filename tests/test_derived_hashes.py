"""Issue #44: look files and derived options verified like the raw records. The step that
writes one (the interim checkpoint, `best-options --derive`) puts its sha256 in the
campaign's hashes.jsonl (records.HASHES; the ledger is the cells' steps'); every reader
compares. Before: a look decision edited from continue to stop was obeyed, a look stripped
of its rule and fingerprint was accepted (silent); a derived options file edited by hand,
without its `options` key (read as no options: valid records superseded) or with a key
given twice was taken as it stood (silent). Fast: no cell runs; the files are written by
the writers themselves."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from containertax import cli
from containertax.campaign import looks, optimisation
from containertax.campaign.config import load_campaign
from containertax.core import records
from containertax.statistics import aggregate
from containertax.statistics import sequential as seq
from tests.test_derived_strict import GOOD, _configs, _derived
from tests.test_sequential import stopping_config, synthetic_runs


def _stopping_campaign(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A stopping campaign whose first look the interim step itself writes (its runs
    synthetic: the quiet model stops, the noisy one continues)."""
    cfg = stopping_config()
    cfg.update(results_dir=str(tmp_path / "results"), results_dir_absolute=True)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    campaign = load_campaign(cfg, str(path))
    runs = synthetic_runs({"quiet": 0.0001, "noisy": 0.2}, 6)
    monkeypatch.setattr(aggregate, "tidy", lambda root: runs)
    look = campaign.paths.interim(1)
    seq.write_interim(campaign, 1, look)
    return campaign, path, look


@pytest.mark.parametrize("edit", ["decision", "no-fingerprint"])
def test_an_edited_look_is_refused_naming_the_file_and_the_fix(tmp_path, monkeypatch,
                                                               capsys, edit):
    campaign, path, look = _stopping_campaign(tmp_path, monkeypatch)
    rule = seq.rule_of(campaign)
    assert looks.read_looks(campaign.paths, rule)  # as written: read
    assert cli.main(["check", str(path), "-d", str(tmp_path)]) == 0
    state = json.loads(look.read_text())
    if edit == "decision":  # a model told to continue, stopped by hand
        for entry in state["models"].values():
            entry["decision"] = "stop"
        state["continuing"] = []
    else:  # the rule's record removed: before, such a look was read "as it is"
        del state["rule_fingerprint"]
    look.write_text(json.dumps(state, indent=1) + "\n")
    with pytest.raises(looks.LookError, match="edited after its look was decided"):
        looks.read_looks(campaign.paths, rule)
    assert cli.main(["check", str(path), "-d", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert str(look) in err and "not what the interim checkpoint wrote" in err, err
    assert "git checkout --" in err and f"mv {look} {look}.damaged" in err
    assert "Traceback" not in err


def test_a_look_written_before_hashes_were_kept_is_read(tmp_path, monkeypatch):
    """The committed stopping campaigns' looks have no sha256 in a hashes.jsonl: read as
    before (held to their rule's fingerprint only)."""
    campaign, _, look = _stopping_campaign(tmp_path, monkeypatch)
    (campaign.root / records.HASHES).unlink()
    assert looks.read_look(look, seq.rule_of(campaign))["models"]


def test_a_foreign_look_that_names_no_rule_is_refused(tmp_path, monkeypatch):
    """Before: a look naming no rule (copied in by hand, no sha256 in hashes.jsonl) was read
    "as it is", and the paper named the config's spending beside its decisions."""
    campaign, _, look = _stopping_campaign(tmp_path, monkeypatch)
    (campaign.root / records.HASHES).unlink()  # no hash: only the rule can hold it
    state = json.loads(look.read_text())
    del state["rule_fingerprint"], state["rule"]
    look.write_text(json.dumps(state))
    with pytest.raises(looks.LookError, match="names no stopping rule"):
        looks.read_looks(campaign.paths, seq.rule_of(campaign))


def test_a_look_decided_again_is_held_to_its_latest_hash(tmp_path, monkeypatch):
    campaign, _, look = _stopping_campaign(tmp_path, monkeypatch)
    seq.write_interim(campaign, 1, look)  # decided again (after a move aside): same text
    text = look.read_text().replace('"look": 1', '"look": 1 ')
    look.write_text(text)
    records.hash_written(campaign.root, look, "interim", text)  # as a new write would
    assert looks.read_look(look, seq.rule_of(campaign))


def _derive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """phase-b's derived file for phase-c's 'optimised', written by write_derived."""
    monkeypatch.chdir(tmp_path)
    cfg = _configs(tmp_path)
    deriving = yaml.safe_load((tmp_path / "phase-b.yaml").read_text())
    campaign = load_campaign(deriving, str(tmp_path / "phase-b.yaml"))
    campaign.paths.comparisons.parent.mkdir(parents=True)
    pd.DataFrame({"model": ["n64"]}).to_csv(campaign.paths.comparisons, index=False)
    monkeypatch.setattr(optimisation, "judge", lambda *a: [])
    monkeypatch.setattr(optimisation, "derived_text",
                        lambda *a: yaml.safe_dump(GOOD, sort_keys=False))
    file, written = optimisation.write_derived(campaign, "optimised")
    assert written and file.resolve() == _derived(tmp_path)
    return cfg


@pytest.mark.parametrize("planted,why", [
    ("edited", "not what `best-options --derive` wrote"),
    ("no-options", "without its key 'options'"),
    ("twice", "key 'ipc' is given twice"),
])
def test_a_derived_file_edited_or_malformed_is_refused(tmp_path, monkeypatch, capsys,
                                                       planted, why):
    cfg = _derive(tmp_path, monkeypatch)
    file = _derived(tmp_path)
    assert cli.main(["check", str(cfg), "-d", str(tmp_path)]) == 0, capsys.readouterr().err
    if planted == "edited":  # another option slipped in by hand
        file.write_text(file.read_text().replace("ipc: host", "ipc: host\n  shm_size: 1g"))
    elif planted == "no-options":
        file.write_text(yaml.safe_dump({k: v for k, v in GOOD.items() if k != "options"}))
    else:
        file.write_text(file.read_text().replace("ipc: host", "ipc: host\n  ipc: private"))
    capsys.readouterr()
    assert cli.main(["check", str(cfg), "-d", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "results/phase-b/derived/optimised.yaml" in err and why in err, err
    assert "--derive optimised" in err and "Traceback" not in err


def test_an_edited_runs_csv_is_refused_by_the_analysis(tmp_path, monkeypatch):
    """runs.csv is derived too (the aggregate step, or the import's): before, a value
    edited in it reached the paper at the next build (the quality step reran on its newer
    mtime). Now the step that writes it keeps its sha256 and the quality step compares."""
    from containertax.campaign import config
    from containertax.statistics import steps
    from containertax.statistics.policy import AnalysisError

    monkeypatch.chdir(tmp_path)
    rows = [f"m1,{env},{r},time_s,{1 + 0.01 * r + (0.1 if env == 'docker' else 0)},s"
            for r in range(1, 5) for env in ("native", "docker")]
    (tmp_path / "table.csv").write_text(
        "\n".join(["model,environment,repetition,metric,value,unit", *rows]) + "\n")
    cfg = tmp_path / "imp.yaml"
    cfg.write_text("campaign: imp\nreference_environment: native\nanalysis:\n"
                   "  import_csv: table.csv\n  headline_metric: time_s\n")
    campaign = config.load_file(cfg, tmp_path)
    runs = campaign.paths.runs
    runs.parent.mkdir(parents=True)
    assert cli.main(["import", "--config", str(cfg), "--out", str(runs)]) == 0
    assert "runs.csv" in campaign.paths.hashes.read_text()  # its sha256, kept apart from
    assert not campaign.paths.ledger.exists()  # the cells' ledger: no cell was started
    steps.run_quality(campaign, runs, tmp_path / "q1", tmp_path / "order1.csv")  # as written
    runs.write_text(runs.read_text().replace("1.11", "1110.0"))  # the planted hand edit
    with pytest.raises(AnalysisError) as err:
        steps.run_quality(campaign, runs, tmp_path / "q2", tmp_path / "order2.csv")
    text = str(err.value)
    assert f"{runs} is not what the import step wrote" in text and f"rm {runs}" in text
