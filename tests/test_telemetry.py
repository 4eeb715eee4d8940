"""Host-side sampler: rows at about the configured rate, CSV and summary."""

from __future__ import annotations

import csv
import time

from containertax.telemetry import COLUMNS, Sampler
from containertax.thermal import NoSensor


def test_sampler_writes_rows_and_summary(tmp_path):
    with Sampler(NoSensor(), hz=20) as s:
        time.sleep(0.5)
    assert len(s.rows) >= 3
    s.write_csv(tmp_path / "t.csv")
    rows = list(csv.reader((tmp_path / "t.csv").open()))
    assert rows[0] == COLUMNS and len(rows) == len(s.rows) + 1
    summary = s.summary()
    assert summary["samples"] == len(s.rows) and summary["sensor"] == "none"
    assert summary["mem_used_peak_mib"] > 0
    times = [r[0] for r in s.rows]
    assert times == sorted(times)
