"""results/h100-warmup-causes and results/h100-autotune-check (issue #32, lent H100s): the
READMEs' claims are held to the committed records, so a changed record or a changed tool
fails here. The table is tools/gpu/compile_pairs.py's output, row for row."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

CAUSES = REPO / "results" / "h100-warmup-causes"


def test_the_readme_table_is_the_tools_output():
    out = subprocess.run([sys.executable, str(REPO / "tools" / "gpu" / "compile_pairs.py"),
                          str(CAUSES)], capture_output=True, text=True, check=True).stdout
    rows = [line for line in out.splitlines() if line.startswith("|")]
    assert len(rows) == 12 and "6 blocks" in rows[0]
    readme = (CAUSES / "README.md").read_text()
    for row in rows:
        assert row in readme, row


def _benchmarked(path) -> bool:
    seconds = json.loads(path.read_text())["detail"]["compile_breakdown"]["seconds"]
    return "CachingAutotuner.benchmark_all_configs" in seconds


def test_every_docker_run_and_no_native_run_benchmarks_autotuning_configs():
    runs = {env: [_benchmarked(p) for p in sorted((CAUSES / "raw" / "llama3-8b" / env)
                                                  .glob("rep[0-9][0-9][0-9].json"))]
            for env in ("native", "docker", "docker-unconfined")}
    assert [len(v) for v in runs.values()] == [6, 6, 6]
    assert not any(runs["native"]) and all(runs["docker"]) and all(runs["docker-unconfined"])


def test_the_autotune_check_found_the_cache_unchanged():
    visit = REPO / "results" / "h100-autotune-check" / "raw" / "visits" / "20261126T233300Z"
    before = (visit / "after-prime.txt").read_text().splitlines()
    after = (visit / "after-block1.txt").read_text().splitlines()
    assert len(before) == 11 and before == after
    raw = REPO / "results" / "h100-autotune-check" / "raw" / "llama3-8b"
    assert _benchmarked(raw / "docker" / "rep001.json")
    assert not _benchmarked(raw / "native" / "rep001.json")
