"""The last edges where data could be lost or hidden (issue #21), with real Snakemake on a
tiny native campaign: a raw record deleted by hand, a raw record cut in half, file times
in the future. Each test plants the fault and shows the workflow catches it."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from containertax.campaign import integrity
from containertax.campaign.paths import CampaignPaths
from tests.test_rerun import ledger, native_campaign, records, snakemake, why

slow = pytest.mark.slow


def test_check_records_names_each_damage_and_caches_whole_records(tmp_path):
    paths = CampaignPaths(tmp_path)
    cell = tmp_path / "raw" / "m" / "native"
    cell.mkdir(parents=True)
    good = {"cell": {"model": "m", "environment": "native", "repetition": 1}, "metrics": []}
    planted = {"rep001.json": json.dumps(good),
               "rep002.json": json.dumps(good)[:30],  # cut
               "rep003.json": json.dumps(good),  # another cell's record, by its key
               "rep004.json": "[1, 2]"}
    for name, text in planted.items():
        (cell / name).write_text(text)
    present = sorted(str(cell / n) for n in planted)
    damaged, future = integrity.check_records(paths, present, write_cache=False)
    assert {d.path.name: d.why.split(" ")[0] for d in damaged} == {
        "rep002.json": "not", "rep003.json": "key", "rep004.json": "not"}
    assert future == [] and not paths.verified.exists()  # a plan writes nothing
    integrity.check_records(paths, present, write_cache=True)
    assert list(json.loads(paths.verified.read_text())) == [str(cell / "rep001.json")]
    message = integrity.damaged_message(paths, damaged)
    assert f"{cell / 'rep002.json'} (cell m/native/rep002): not JSON" in message
    assert "raw/.damaged/" in message and "mv " in message
    ahead = time.time() + 3600
    os.utime(cell / "rep001.json", (ahead, ahead))
    assert integrity.check_records(paths, present[:1], write_cache=False)[1] == [
        cell / "rep001.json"]


def cell_steps(root: Path, since: int) -> list[tuple[str, str, str]]:
    """(step, event, status) of the ledger's events after the first `since`."""
    return [(e["step"], e["event"], e.get("status", "")) for e in ledger(root)[since:]]


@slow
def test_a_deleted_record_reruns_its_whole_cell_and_keeps_the_old_side_files(tmp_path):
    """Before: the rerun measured again and paired the new record with the old
    .cooldown.json (no cooldown in the ledger); the old telemetry was overwritten."""
    cfg = native_campaign(tmp_path, "deleted", reps=2)
    root = tmp_path / "results" / "deleted"
    out = snakemake(tmp_path, cfg, "cells")
    assert out.returncode == 0, why(out)
    record = records(root)[0]
    cell = record.with_suffix("")
    side = {s: cell.with_name(cell.name + s).read_bytes()
            for s in (".cooldown.json", ".telemetry.csv", ".requests.csv", ".log")}
    old_attempt = json.loads(record.read_text())["attempt"]
    record.unlink()  # the planted fault: deleted by hand
    before = len(ledger(root))
    out = snakemake(tmp_path, cfg, "cells")
    assert out.returncode == 0, why(out)
    assert cell_steps(root, before) == [
        ("gate", "start", ""), ("gate", "end", "ok"), ("run", "start", ""),
        ("run", "end", "ok"), ("cooldown", "start", ""), ("cooldown", "end", "ok")]
    assert json.loads(record.read_text())["attempt"] != old_attempt
    run_end = next(e for e in ledger(root)[before:] if e["step"] == "run"
                   and e["event"] == "end")
    moved = [tmp_path / p for p in run_end["moved_aside"]]  # relative to the workdir
    assert {p.name[len(cell.name):] for p in moved} == set(side)
    for path in moved:  # kept byte for byte, under raw/.orphaned/<when>/<model>/<env>/
        assert path.read_bytes() == side[path.name[len(cell.name):]]
        assert path.relative_to(root / "raw").parts[0] == ".orphaned"
        assert path.parent.relative_to(root / "raw").parts[2:] == record.parent.relative_to(
            root / "raw").parts
    new_cooldown = json.loads(cell.with_name(cell.name + ".cooldown.json").read_text())
    assert new_cooldown != json.loads(side[".cooldown.json"])
    assert len(records(root)) == 2  # nothing moved aside reads as a record


def two_environments(tmp_path: Path, name: str) -> Path:
    """Two native environments: the paper then has a comparison to make."""
    cfg = native_campaign(tmp_path, name, reps=2)
    data = yaml.safe_load(cfg.read_text())
    data["environments"]["native2"] = dict(data["environments"]["native"])
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    return cfg


@slow
def test_a_record_cut_in_half_stops_the_next_invocation_with_the_fix(tmp_path):
    """Before: `snakemake paper` said "Nothing to be done" (rc 0) over a truncated record;
    only a forced rebuild stopped."""
    cfg = two_environments(tmp_path, "cut")
    root = tmp_path / "results" / "cut"
    out = snakemake(tmp_path, cfg, "--cores", "1")
    assert out.returncode == 0, why(out)
    again = snakemake(tmp_path, cfg, "--cores", "1")  # plans with the records present
    assert "Nothing to be done" in again.stdout + again.stderr
    cache = json.loads((root / ".raw-verified.json").read_text())
    assert len(cache) == 4  # each record checked once, then by its (size, mtime, inode)
    record = records(root)[1]
    whole = record.read_bytes()
    record.chmod(0o644)
    record.write_bytes(whole[: len(whole) // 2])  # the planted fault: cut in half
    record.chmod(0o444)
    cell = f"{record.parent.parent.name}/{record.parent.name}/{record.stem}"
    for target in ("paper", "cells"):
        out = snakemake(tmp_path, cfg, "--cores", "1", target)
        assert out.returncode != 0, out.stdout[-2000:]
        text = out.stdout + out.stderr
        assert f"{record.relative_to(tmp_path)} (cell {cell}): not JSON" in text, text[-3000:]
    fix = [line.strip() for line in text.splitlines() if line.strip().startswith("mkdir -p")]
    assert len(fix) == 1 and "raw/.damaged/" in fix[0]
    subprocess.run(fix[0], shell=True, check=True, cwd=tmp_path)  # the user follows it
    assert not record.exists()
    [cut] = (root / "raw" / ".damaged").rglob(record.name)
    assert cut.read_bytes() == whole[: len(whole) // 2]  # nothing deleted
    out = snakemake(tmp_path, cfg, "--cores", "1")
    assert out.returncode == 0, why(out)
    assert json.loads(record.read_text())["cell"]["repetition"] == int(record.stem[3:])
    assert len(records(root)) == 4


@slow
def test_clock_skew_never_leaves_analysis_files_missing_behind_nothing_to_be_done(tmp_path):
    """Before: a forced aggregate hit Snakemake's clock-skew guard, which removed runs.csv;
    with the inputs' times right again, `snakemake paper` said "Nothing to be done" with
    runs.csv missing (Snakemake kept its metadata, and the files after it were there)."""
    cfg = two_environments(tmp_path, "skew")
    root = tmp_path / "results" / "skew"
    out = snakemake(tmp_path, cfg, "--cores", "1")
    assert out.returncode == 0, why(out)
    future = time.time() + 3600  # the planted fault: file times an hour ahead
    raw = [root / "raw", *(root / "raw").rglob("*")]
    for path in raw:
        os.utime(path, (future, future))
    forced = snakemake(tmp_path, cfg, "--cores", "1", "-f", "results/skew/runs.csv")
    assert forced.returncode != 0
    assert "file times in the future" in forced.stdout + forced.stderr  # named, with the fix
    assert not (root / "runs.csv").exists()  # Snakemake's guard removed it
    now = time.time()
    for path in raw:
        os.utime(path, (now - 60, now - 60))  # the clock set right (touch -c -d now)
    again = snakemake(tmp_path, cfg, "--cores", "1", "paper")
    assert again.returncode == 0, why(again)
    assert "Nothing to be done" not in again.stdout + again.stderr
    assert (root / "runs.csv").exists()
    for target in ("paper", "all"):
        plan = snakemake(tmp_path, cfg, "-n", target)
        assert "Nothing to be done" in plan.stdout + plan.stderr, target


# Issue #44: what is analysed is what was measured. Before: a record value multiplied by
# 1000 after its run entered the paper once runs.csv was rebuilt; raw/ folders linked to
# another campaign's records were analysed as this one's (its cells never run); a record
# named rep٠٠١.json (Arabic-Indic digits) was read as a second record of cell 1, and
# rep².json ended in "ValueError: invalid literal for int()"; runs of one environment under
# two image ids were pooled without a word.

def _record(cell: Path, rep: int, value: float = 1.0) -> Path:
    cell.mkdir(parents=True, exist_ok=True)
    path = cell / f"rep{rep:03d}.json"
    path.write_text(json.dumps({
        "cell": {"model": cell.parent.name, "environment": cell.name, "repetition": rep},
        "metrics": [{"name": "time_s", "value": value, "unit": "s"}]}))
    return path


def _ledgered(root: Path, raw: Path) -> None:
    """The run's end event, as the run step writes it: with the record's sha256."""
    import hashlib

    from containertax.core import records as core_records

    core_records.append_ledger(root, {
        "step": "run", "event": "end", "status": "ok", "model": raw.parent.parent.name,
        "environment": raw.parent.name, "repetition": int(raw.stem[3:]),
        "record_sha256": hashlib.sha256(raw.read_bytes()).hexdigest()})


def test_a_record_edited_after_its_run_is_named_and_never_analysed(tmp_path):
    paths = CampaignPaths(tmp_path)
    raw = _record(tmp_path / "raw" / "m" / "native", 1, value=1.25)
    _ledgered(tmp_path, raw)
    assert integrity.check_records(paths, [str(raw)], write_cache=True)[0] == []
    integrity.verify_for_analysis(paths, [raw])  # as written: analysed
    raw.write_text(raw.read_text().replace("1.25", "1250.0"))  # the planted hand edit
    damaged, _ = integrity.check_records(paths, [str(raw)], write_cache=False)
    assert len(damaged) == 1 and "edited after the run" in damaged[0].why
    with pytest.raises(integrity.ForeignRecords, match="edited after the run"):
        integrity.verify_for_analysis(paths, [raw])


def test_a_committed_record_edited_by_hand_is_caught_on_a_fresh_clone(tmp_path):
    """A fresh clone has no campaign ledger: the ledgers each GPU visit kept with the raw
    records (raw/visits/*/ledger.jsonl, committed) hold the records' sha256 (issue #44: a
    value of results/h200-factorial multiplied by 1000 passed check_records and the
    analysis)."""
    import shutil

    from tests.conftest import REPO

    root = tmp_path / "results" / "h200-factorial"
    shutil.copytree(REPO / "results" / "h200-factorial" / "raw", root / "raw")
    paths = CampaignPaths(root)
    present = paths.raw_records()
    assert len(present) == 36 and not list(root.glob("ledger*.jsonl"))
    assert len(integrity.ledger_hashes(root)) == 36
    integrity.verify_for_analysis(paths, present)  # as committed: analysed
    raw = root / "raw" / "mm-4096" / "f07" / "rep002.json"
    data = json.loads(raw.read_text())
    for metric in data["metrics"]:
        if metric["name"] == "compute_time_median_s":
            metric["value"] *= 1000  # the planted hand edit
    raw.write_text(json.dumps(data))
    damaged, _ = integrity.check_records(paths, [str(raw)], write_cache=False)
    assert len(damaged) == 1 and "edited after the run" in damaged[0].why
    with pytest.raises(integrity.ForeignRecords, match="edited after the run"):
        integrity.verify_for_analysis(paths, present)


def test_records_reached_through_a_link_are_foreign(tmp_path):
    other = _record(tmp_path / "other" / "raw" / "m" / "native", 1)
    mine = tmp_path / "mine"
    (mine / "raw").mkdir(parents=True)
    (mine / "raw" / "m").symlink_to(other.parent.parent)  # the planted link
    paths = CampaignPaths(mine)
    present = paths.raw_records()
    assert present == [mine / "raw" / "m" / "native" / "rep001.json"]
    damaged, _ = integrity.check_records(paths, [str(p) for p in present], write_cache=False)
    assert len(damaged) == 1 and "symbolic link" in damaged[0].why, damaged
    with pytest.raises(integrity.ForeignRecords, match="symbolic link"):
        integrity.verify_for_analysis(paths, present)


@pytest.mark.parametrize("name", ["rep\u0660\u0660\u0661.json", "rep\u00b2.json"])
def test_a_record_under_a_non_canonical_name_is_named_not_read(tmp_path, name):
    cell = tmp_path / "raw" / "m" / "native"
    good = _record(cell, 1)
    (cell / name).write_text(good.read_text())
    paths = CampaignPaths(tmp_path)
    present = paths.raw_records()
    assert cell / name in present
    found = integrity.unscheduled_records(present, {("m", "native", 1)}, {})
    assert [(u.path.name, "canonical name" in u.why) for u in found] == [(name, True)]
    with pytest.raises(integrity.ForeignRecords, match="canonical name"):
        integrity.verify_for_analysis(paths, present)


def test_runs_of_one_environment_under_two_images_are_named():
    import pandas as pd

    from containertax.statistics import quality

    runs = pd.DataFrame([
        {"model": "m", "environment": env, "repetition": rep, "metric": "time_s",
         "image_id": "" if env == "native" else f"sha256:{'a' if rep < 3 else 'b'}" * 2}
        for env in ("native", "docker") for rep in (1, 2, 3)])
    found = quality.images(runs)
    assert len(found) == 1 and found[0].details["images"] == {
        "docker": {"sha256:asha256:a": 2, "sha256:bsha256:b": 1}}
    assert "docker: " in found[0].message and "more than one image" in found[0].message
    assert quality.images(runs[runs["repetition"] < 3]) == []


def test_runs_under_two_configs_are_named_not_silently_pooled():
    """Issue #44: a second config under the campaign's name ran beside the first and the
    paper pooled both (runs.csv with two config hashes, no word). The quality step names
    each hash with its runs; one config (or none recorded) says nothing."""
    import pandas as pd

    from containertax.statistics import quality

    runs = pd.DataFrame([
        {"model": "m", "environment": env, "repetition": rep, "metric": metric,
         "config_hash": "a" * 64 if rep < 3 else "b" * 64}
        for env in ("native", "docker") for rep in (1, 2, 3) for metric in ("t_s", "w_s")])
    found = quality.configs(runs)
    assert len(found) == 1 and found[0].details["configs"] == {"a" * 64: 4, "b" * 64: 2}
    assert "2 configs (aaaaaaaaaaaa (4 runs), bbbbbbbbbbbb (2 runs))" in found[0].message
    assert quality.configs(runs[runs["repetition"] < 3]) == []
    assert quality.configs(runs.assign(config_hash=None)) == []


@slow
def test_the_run_step_ledgers_the_record_hash_and_a_later_edit_stops_the_workflow(tmp_path):
    """The planted edit of the issue: a value x1000 after the run, the file's mode and
    time set back as they were; the next invocation names it, and the analysis does not
    run on it."""
    import hashlib

    cfg = native_campaign(tmp_path, "edited", reps=2)
    root = tmp_path / "results" / "edited"
    out = snakemake(tmp_path, cfg, "cells")
    assert out.returncode == 0, why(out)
    record = records(root)[0]
    ends = {(e["environment"], e["repetition"]): e["record_sha256"] for e in ledger(root)
            if e["step"] == "run" and e["event"] == "end"}
    assert ends[("native", 1)] == hashlib.sha256(record.read_bytes()).hexdigest()
    assert record.name == "rep001.json" and len(ends) == 2
    data = json.loads(record.read_text())
    data["metrics"][0]["value"] *= 1000
    st = record.stat()
    record.chmod(0o644)
    record.write_text(json.dumps(data, indent=2) + "\n")
    record.chmod(0o444)
    os.utime(record, ns=(st.st_atime_ns, st.st_mtime_ns))
    out = snakemake(tmp_path, cfg, "cells", "-n")
    assert out.returncode != 0 and "edited after the run" in out.stdout + out.stderr
