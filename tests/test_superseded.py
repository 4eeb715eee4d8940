"""Records measured under derived options that changed since (issue #26: phase 2B derives
docker_optimised's options for 2C and 2D; when 2B's analysis changes them, the cells of 2C
and 2D already measured answered another variant's question). With real Snakemake: a dry
run and `check` name them and move nothing; the next invocation that runs jobs moves them
aside (never deletes them) and measures those cells again; the other environments' records
stay as they were. Native environments (no Docker needed): the mechanism keys on the derived
file's content, which is the same whatever the environment's kind.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, demo_config

pytestmark = [pytest.mark.slow]


def _configs(tmp_path: Path) -> Path:
    cfg = demo_config()
    cfg.update(campaign="phase-b", repetitions=2, reference_environment="native")
    cfg["environments"] = {"native": cfg["environments"]["native"]}
    cfg["models"] = [{"id": "n64", "size": 64, "repeats": 3}]
    cfg["thermal"].update(min_interval_s=0, cooldown_s=0.2, poll_s=0.1)
    (tmp_path / "phase-b.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    cfg = {**cfg, "campaign": "phase-c"}
    cfg["environments"] = {"native": cfg["environments"]["native"],
                           "optimised": {"kind": "native",
                                         "python": cfg["environments"]["native"]["python"],
                                         "derived_from": "phase-b.yaml"}}
    path = tmp_path / "phase-c.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _derive(tmp_path: Path, qualifying: list[str]) -> str:
    """The derived file (a test fixture in the form optimisation.derived_text writes); a
    native environment takes no Docker options, so a change of its evidence changes it."""
    file = tmp_path / "results" / "phase-b" / "derived" / "optimised.yaml"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(yaml.safe_dump({"campaign": "phase-b", "qualifying": qualifying,
                                    "description": f"baseline + {qualifying}",
                                    "options": {}}, sort_keys=False))
    return hashlib.sha256(file.read_bytes()).hexdigest()


def _snakemake(tmp_path: Path, cfg: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "cells", "--cores", "1", *args, "--snakefile",
         str(REPO / "Snakefile"), "--directory", str(tmp_path), "--configfile", str(cfg)],
        capture_output=True, text=True, timeout=600)


def _sha(raw: Path) -> str | None:
    return json.loads(raw.read_text())["provenance"]["options_source"].get("sha256")


def test_changed_derived_options_move_old_records_aside_and_rerun_their_cells(tmp_path):
    cfg = _configs(tmp_path)
    first = _derive(tmp_path, [])
    out = _snakemake(tmp_path, cfg)
    assert out.returncode == 0, out.stderr[-3000:]
    raw = tmp_path / "results" / "phase-c" / "raw" / "n64"
    opt = sorted((raw / "optimised").glob("rep???.json"))
    native = {p: p.stat().st_mtime_ns for p in (raw / "native").glob("rep???.json")}
    assert len(opt) == 2 and len(native) == 2 and {_sha(p) for p in opt} == {first}

    second = _derive(tmp_path, ["ipc"])  # 2B's analysis changed its answer
    check = subprocess.run([sys.executable, "-m", "containertax", "check", str(cfg)],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0 and "2 raw record(s) of optimised" in check.stdout
    dry = _snakemake(tmp_path, cfg, "-n")
    said = dry.stdout + dry.stderr
    assert dry.returncode == 0 and "next invocation that runs jobs moves them" in said
    assert {_sha(p) for p in opt} == {first}  # a dry run moves nothing

    out = _snakemake(tmp_path, cfg)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Moved aside to" in out.stdout + out.stderr
    aside = list((tmp_path / "results" / "phase-c" / "raw" / ".superseded").glob(
        "*/n64/optimised/rep???.json"))
    assert len(aside) == 2 and {_sha(p) for p in aside} == {first}  # kept, not deleted
    note = json.loads(next(aside[0].parents[2].glob("SUPERSEDED.json")).read_text())
    assert {n["options_sha256"] for n in note} == {first} and note[0]["now"] == second
    assert len(list(aside[0].parent.glob("rep*.telemetry.csv"))) == 2  # side files with it
    new = sorted((raw / "optimised").glob("rep???.json"))
    assert len(new) == 2 and {_sha(p) for p in new} == {second}  # measured again
    assert {p: p.stat().st_mtime_ns for p in native} == native  # untouched
    ledger = [json.loads(x) for x in
              (tmp_path / "results" / "phase-c" / "ledger.jsonl").read_text().splitlines()]
    assert sum(e.get("step") == "supersede" for e in ledger) == 2

    again = _snakemake(tmp_path, cfg)  # nothing changed since: nothing moved or run
    assert again.returncode == 0 and "Moved aside" not in again.stdout + again.stderr
    assert "Nothing to be done" in again.stdout + again.stderr


def test_superseded_records_planted_cases(tmp_path):
    """A record with another content's hash, and one with no derived options at all
    (measured before they were derived), are found; the current one and a record of an
    environment whose options are not derived are not; a damaged one is left to the
    damaged-record check."""
    from containertax.campaign import integrity

    def record(env: str, rep: int, src: dict | None) -> str:
        p = tmp_path / "raw" / "m" / env / f"rep{rep:03d}.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps({"provenance": {"options_source": src}}))
        return str(p)

    present = [record("opt", 1, {"sha256": "old"}), record("opt", 2, None),
               record("opt", 3, {"sha256": "now"}), record("native", 1, None)]
    broken = tmp_path / "raw" / "m" / "opt" / "rep004.json"
    broken.write_text("{cut")
    found = integrity.superseded_records([*present, str(broken)], {"opt": "now"})
    assert [(f.path.name, f.recorded) for f in found] == [("rep001.json", "old"),
                                                          ("rep002.json", None)]
