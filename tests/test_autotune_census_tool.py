"""tools/gpu/autotune_census.py reads a campaign's records, and only its records: the
H100 visit of issue #40 stopped on KeyError 'cell', its pattern taking rep001.cooldown.json
for a run's record."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parent.parent / "tools" / "gpu" / "autotune_census.py"


def test_the_census_skips_a_cooldown_file_beside_the_records(tmp_path):
    """Planted: rep001.cooldown.json beside rep001.json."""
    cell = tmp_path / "raw" / "llama3-8b" / "docker"
    cell.mkdir(parents=True)
    census = {"kernels": 17, "counts": {"exists=True": 11, "state=hit": 11},
              "cache_dir": "/r/compile-cache/inductor", "multi_config": [], "sample": []}
    (cell / "rep001.json").write_text(json.dumps({
        "cell": {"environment": "docker", "repetition": 1},
        "detail": {"autotune_census": census}}))
    (cell / "rep001.cooldown.json").write_text(json.dumps({"seconds": 4.0}))
    done = subprocess.run([sys.executable, str(TOOL), str(tmp_path)], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "docker rep001: 17 kernels (exists=True 11, state=hit 11); cache_dir "
        "/r/compile-cache/inductor"]


PARITY = TOOL.parent / "parity_table.py"
VISIT = TOOL.parents[2] / "scripts" / "gpu-parity-visit.sh"


def test_the_parity_table_reads_runs_and_skips_what_is_not_one(tmp_path):
    """Per environment the median first compiled step, whole process and lookups."""
    for env, reps in (("native", (14.0, 14.4)), ("docker-oldpath", (16.5, 16.9))):
        cell = tmp_path / "raw" / "llama32-1b" / env
        cell.mkdir(parents=True)
        for i, compile_s in enumerate(reps, 1):
            (cell / f"rep00{i}.json").write_text(json.dumps({
                "cell": {"environment": env, "repetition": i},
                "metrics": [{"name": "process_wall_s", "value": compile_s + 30, "unit": "s"}],
                "timeline": {"phases_s": {"phase_compile_s": compile_s}},
                "detail": {"autotune_census": {"counts": {"state=hit": 2 if "old" in env
                                                          else 11}}}}))
        (cell / "rep001.cooldown.json").write_text("{}")
    done = subprocess.run([sys.executable, str(PARITY), str(tmp_path)], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "| docker-oldpath | 2 | 16.70 | 46.70 | 2.00 | - |" in lines
    assert "| native | 2 | 14.20 | 44.20 | 11.00 | - |" in lines


def test_the_visit_leaves_at_most_eight_files_under_out():
    """A device call returns at most 8 files from $OUT: the script names each it writes."""
    names = set(re.findall(r'"\$OUT/([^"]+)"', VISIT.read_text()))
    assert names == {"campaign.log", "table.txt", "census.txt", "raw.tgz", "logs.tgz"}
