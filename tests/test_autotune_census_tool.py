"""tools/gpu/autotune_census.py reads a campaign's records, and only its records: the
H100 visit of issue #40 stopped on KeyError 'cell', its pattern taking rep001.cooldown.json
for a run's record."""

from __future__ import annotations

import json
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
