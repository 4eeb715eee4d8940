"""Raw records are written whole or not at all and never overwritten; the ledger keeps
every line whole under concurrent writers."""

from __future__ import annotations

import json
import multiprocessing

import pytest

from containertax.core import records


def test_atomic_write_refuses_to_overwrite(tmp_path):
    path = tmp_path / "raw" / "rep01.json"
    records.write_json(path, {"a": 1}, overwrite=False)
    with pytest.raises(records.RecordExistsError, match="never overwritten"):
        records.write_json(path, {"a": 2}, overwrite=False)
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in path.parent.iterdir()] == ["rep01.json"]  # no temp file left


def test_overwrite_allowed_for_non_records(tmp_path):
    path = tmp_path / "x.json"
    records.write_json(path, {"a": 1})
    records.write_json(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2}


def _writer(root, n):
    for i in range(n):
        records.append_ledger(root, {"step": "run", "i": i, "pad": "x" * 5000})


def test_ledger_lines_stay_whole_under_concurrent_writers(tmp_path):
    procs = [multiprocessing.Process(target=_writer, args=(tmp_path, 50)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    events = records.read_ledger(tmp_path)
    assert len(events) == 200
    assert all(e["pad"] == "x" * 5000 for e in events)


def test_ledger_reader_skips_a_line_cut_by_a_crash(tmp_path):
    records.append_ledger(tmp_path, {"step": "gate"})
    with (tmp_path / records.LEDGER).open("a") as fh:
        fh.write('{"step": "run", "event": "st')
    assert [e["step"] for e in records.read_ledger(tmp_path)] == ["gate"]


def _full_disk_after(monkeypatch, ledger, nbytes: int) -> None:
    """The next write to `ledger` stores its first `nbytes` and then fails with ENOSPC, as
    a disk that fills during the write: the fault planted (issue #21)."""
    import errno
    import os

    real_write = os.write
    state = {"armed": True}

    def write(fd, data):
        if state["armed"] and os.path.realpath(f"/proc/self/fd/{fd}") == str(ledger):
            state["armed"] = False
            real_write(fd, bytes(data[:nbytes]))
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)


def test_a_full_disk_leaves_no_torn_ledger_line(tmp_path, monkeypatch):
    ledger = (tmp_path / records.LEDGER).resolve()
    records.append_ledger(tmp_path, {"step": "gate", "event": "start"})
    before = ledger.read_bytes()
    _full_disk_after(monkeypatch, ledger, 20)
    with pytest.raises(OSError, match="No space left"):
        records.append_ledger(tmp_path, {"step": "gate", "event": "end"})
    assert ledger.read_bytes() == before  # cut back: the event is whole or absent
    records.append_ledger(tmp_path, {"step": "run", "event": "start"})
    assert [(e["step"], e["event"]) for e in records.read_ledger(tmp_path)] == [
        ("gate", "start"), ("run", "start")]
    assert records.ledger_damage(tmp_path) == {}


def test_a_torn_tail_never_swallows_the_next_event(tmp_path):
    records.append_ledger(tmp_path, {"step": "gate", "event": "start"})
    with (tmp_path / records.LEDGER).open("a") as fh:  # a crash cut this line
        fh.write('{"step": "gate", "event": "en')
    records.append_ledger(tmp_path, {"step": "run", "event": "start"})
    records.append_ledger(tmp_path, {"step": "run", "event": "end"})
    assert [(e["step"], e["event"]) for e in records.read_ledger(tmp_path)] == [
        ("gate", "start"), ("run", "start"), ("run", "end")]
    assert [e["event"] for e in records.read_ledger(tmp_path, step="run")] == ["start", "end"]
    assert records.ledger_damage(tmp_path) == {records.LEDGER: 1}


def test_readers_of_cells_read_only_cells_events_and_hashes_stay_out_of_the_ledger(tmp_path):
    """A reader that pairs or counts cells (status, rehearsal, the workflow tests) took every
    ledger line for a cell's and failed with KeyError 'model' on another step's event. Planted:
    a record moved aside (no repetition), a cell step's line without its model, and a derived
    file's sha256, which goes to hashes.jsonl, never the cells' ledger."""
    cell = {"model": "m", "environment": "native", "repetition": 1}
    records.append_ledger(tmp_path, {"step": "gate", "event": "start", **cell})
    records.append_ledger(tmp_path, {"step": "supersede", "event": "moved_aside",
                                     "model": "m", "environment": "native"})
    records.append_ledger(tmp_path, {"step": "run", "event": "start", "environment": "x",
                                     "repetition": 1})
    (tmp_path / "runs.csv").write_text("a\n1\n")
    records.hash_written(tmp_path, tmp_path / "runs.csv", "aggregate", "a\n1\n")
    assert len(records.read_ledger(tmp_path)) == 3  # no 'written' event among them
    assert [(e["step"], e["event"]) for e in records.cell_events(
        records.read_ledger(tmp_path))] == [("gate", "start")]
    assert records.written_mismatch(tmp_path, tmp_path / "runs.csv", b"a\n1\n") is None
    assert records.written_mismatch(tmp_path, tmp_path / "runs.csv", b"a\n2\n")  # edited
