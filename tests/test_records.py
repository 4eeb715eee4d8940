"""Raw records are written whole or not at all and never overwritten; the ledger keeps
every line whole under concurrent writers."""

from __future__ import annotations

import json
import multiprocessing

import pytest

from containertax.execution import records


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
