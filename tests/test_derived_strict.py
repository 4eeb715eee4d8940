"""Issue #35: derived options read strictly. A derived options file (phase 2B -> 2C's
docker_optimised) that is bad YAML, a list, binary, empty or a folder was a traceback
from `check` naming no file, or (empty) taken as "no options", which superseded valid
records; a bad option value was blamed on the config's key; and `snakemake --unlock`
alone moved records to raw/.superseded/. Fast: `check` in-process, one Snakemake
--unlock as a subprocess, no cell runs."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from containertax import cli
from tests.conftest import REPO, demo_config


def _configs(tmp_path: Path) -> Path:
    """phase-b (deriving) and phase-c, whose 'optimised' takes phase-b's derived file."""
    cfg = demo_config()
    cfg.update(campaign="phase-b", repetitions=2, reference_environment="native")
    cfg["environments"] = {"native": cfg["environments"]["native"]}
    cfg["models"] = [{"id": "n64", "size": 64, "repeats": 3}]
    (tmp_path / "phase-b.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    cfg = {**cfg, "campaign": "phase-c"}
    cfg["environments"] = {"native": cfg["environments"]["native"],
                           "optimised": {"kind": "docker", "image": "containertax-demo:bookworm",
                                         "python": "/usr/bin/python3",
                                         "derived_from": "phase-b.yaml"}}
    path = tmp_path / "phase-c.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _derived(tmp_path: Path) -> Path:
    file = tmp_path / "results" / "phase-b" / "derived" / "optimised.yaml"
    file.parent.mkdir(parents=True, exist_ok=True)
    return file


GOOD = {"campaign": "phase-b", "qualifying": [], "description": "baseline",
        "options": {"ipc": "host"}}


@pytest.mark.parametrize("content,why", [
    (b"options: [ipc: host\n", "cannot be read (ParserError"),
    (b"- ipc\n- host\n", "a list, not a mapping"),
    (b"\x00\xff\xfe\x00binary", "cannot be read (UnicodeDecodeError"),
    (b"", "is empty"),
    (b"options: host\n", "its key 'options' is not a mapping"),
    (None, "cannot be read (IsADirectoryError"),
], ids=["bad-yaml", "list", "binary", "empty", "options-not-mapping", "folder"])
def test_a_bad_derived_file_is_a_clear_error_naming_it(tmp_path, monkeypatch, capsys,
                                                        content, why):
    monkeypatch.chdir(tmp_path)
    cfg = _configs(tmp_path)
    file = _derived(tmp_path)
    if content is None:
        file.mkdir()
    else:
        file.write_bytes(content)
    assert cli.main(["check", str(cfg), "-d", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "results/phase-b/derived/optimised.yaml" in err and why in err, err
    assert "--derive optimised" in err and "Traceback" not in err


def test_a_bad_derived_value_is_blamed_on_the_derived_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    cfg = _configs(tmp_path)
    _derived(tmp_path).write_text(yaml.safe_dump({**GOOD, "options": {"ipc": 123}}))
    assert cli.main(["check", str(cfg), "-d", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "environments.optimised.options" in err, err
    assert "they come from the derived file results/phase-b/derived/optimised.yaml" in err


def test_a_good_derived_file_passes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = _configs(tmp_path)
    _derived(tmp_path).write_text(yaml.safe_dump(GOOD))
    assert cli.main(["check", str(cfg), "-d", str(tmp_path)]) == 0


@pytest.mark.slow
def test_unlock_moves_no_record(tmp_path):
    """A record measured under other derived options is superseded; `snakemake --unlock`
    only names it (it used to move it to raw/.superseded/)."""
    cfg = _configs(tmp_path)
    _derived(tmp_path).write_text(yaml.safe_dump(GOOD))
    raw = tmp_path / "results" / "phase-c" / "raw" / "n64" / "optimised" / "rep001.json"
    raw.parent.mkdir(parents=True)
    raw.write_text(json.dumps({
        "cell": {"model": "n64", "environment": "optimised", "repetition": 1},
        "metrics": [], "provenance": {"options_source": {
            "sha256": hashlib.sha256(b"another").hexdigest()}}}))
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "--unlock", "--snakefile",
         str(REPO / "Snakefile"), "--directory", str(tmp_path), "--configfile", str(cfg)],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert raw.exists() and not (raw.parents[2] / ".superseded").exists()
    assert "next invocation that runs jobs moves them" in out.stdout + out.stderr
