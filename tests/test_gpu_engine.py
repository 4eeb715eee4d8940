"""benchmarks/gpu_engine.py, the lead's one-command GPU check, rehearsed on the CPU: a tiny
model instead of Llama-3-8B and FakeNvml (a TEST DOUBLE for pynvml: no GPU here), so that
the script that spends GPU time has run end to end before it does."""

from __future__ import annotations

import json
import sys

import pytest
import yaml

from tests.conftest import REPO
from tests.test_telemetry import FakeNvml
from tests.test_workloads import TINY, torch_python

sys.path.insert(0, str(REPO / "benchmarks"))
import gpu_engine  # noqa: E402


def test_blocks_for_a_2_percent_ci_half_width():
    # sd of a paired difference sqrt(2) * 2 % (a per-run CV of 2 %): 11 blocks (t = 2.23)
    assert gpu_engine.blocks_for(0.02) == 11
    assert gpu_engine.blocks_for(0.01) < gpu_engine.blocks_for(0.02) < gpu_engine.blocks_for(0.04)


@pytest.mark.skipif(torch_python() is None, reason="no interpreter with torch + transformers "
                    "(set CONTAINERTAX_TORCH_PYTHON)")
def test_the_gpu_check_runs_end_to_end_on_the_cpu(tmp_path, monkeypatch):
    cfg = yaml.safe_load((REPO / "config" / "h100-engine.yaml").read_text())
    cfg["environments"] = {"native": {"kind": "native", "python": torch_python()}}
    cfg["workload"].update(device="cpu", dtype="float32", batch_size=2, input_len=8,
                           output_len=5, warmup=1, requests=3)
    cfg["models"] = [{"id": "tiny", "model_config": TINY}]
    cfg["thermal"]["adaptive"].update(baseline_s=1, stable_s=1, min_s=0.5, max_s=3)
    cfg["thermal"]["poll_s"] = 0.25
    path = tmp_path / "engine.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml())
    monkeypatch.setattr(sys, "argv", ["gpu_engine.py", str(path), "--model", "tiny", "--out",
                                      str(tmp_path / "out"), "--runs", "4", "--fixed-s", "1"])
    assert gpu_engine.main() == 0
    result = json.loads((tmp_path / "out" / "engine.json").read_text())
    s = result["summary"]
    assert s["runs_ok"] == 4 and s["token_throughput_cv"] is not None
    assert [r["decoding"] for r in result["runs"]] == ["engine"] * 4
    assert any((tmp_path / "out" / "compile-cache").rglob("*")), "cache empty"
    assert [c["mode"] for c in result["cooldowns"]] == ["fixed", "adaptive", "fixed"]
    assert s["fixed"]["cooldowns"] == 2 and s["adaptive"]["cooldowns"] == 1
    # FakeNvml names an H100: the roofline comes from the data-sheet bandwidth
    assert result["runs"][0]["peak_bandwidth_source"] == "table: H100"
    assert s["hbm_roofline_pct_mean"] > 0
