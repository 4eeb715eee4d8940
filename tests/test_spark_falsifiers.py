"""The DGX Spark falsifiers (issue #40, config/phase-2f.yaml): a pinned KV cache against
the dynamic one, and the page cache dropped against inherited, each arm a model entry so
the schedule counterbalances it."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from containertax import workloads
from containertax.campaign import config
from containertax.execution.cells import page_cache_mode
from containertax.workloads import trtllm

REPO = Path(__file__).resolve().parent.parent


def test_a_model_arm_overrides_the_campaigns_page_cache_mode():
    campaign = SimpleNamespace(raw={"memory": {"drop_page_cache": "auto"}})
    assert page_cache_mode(campaign, {"page_cache": "dropped"}) == "required"
    assert page_cache_mode(campaign, {"page_cache": "inherited"}) == "never"
    assert page_cache_mode(campaign, {}) == "auto"


def test_the_pinned_arm_hands_trtllm_bench_a_fixed_kv_size(tmp_path):
    """KvCacheConfig.max_tokens, in an --extra_llm_api_options file the probe writes in its
    work folder; the dynamic arm passes no such file."""
    p = {**trtllm.DEFAULTS, "model": "m", "dataset_dir": "/datasets", "vocab_size": 10,
         "kv_cache_max_tokens": 65536}
    out = tmp_path / "work" / "result.json"
    argv = trtllm.argv(p, "python3", Path("/probe"), out, check=False)
    assert argv[argv.index("--kv-max-tokens") + 1] == "65536"
    bench = json.loads(argv[argv.index("--bench") + 1])
    sub = bench[-1]["segments"][1]
    assert sub[sub.index("--extra_llm_api_options") + 1] == str(out.parent / trtllm.KV_PINNED_FILE)
    dynamic = trtllm.argv({**p, "kv_cache_max_tokens": None}, "python3", Path("/probe"), out,
                          check=False)
    assert "--kv-max-tokens" not in dynamic and "--extra_llm_api_options" not in dynamic[-1]


def test_the_probe_writes_the_pinned_options_file(tmp_path):
    """The probe's first act with --kv-max-tokens (before it looks for TensorRT-LLM, which
    this machine lacks: it then stops on the missing dataset)."""
    import subprocess
    import sys

    probe = REPO / "src" / "containertax" / "workloads" / "probe" / "trtllm.py"
    subprocess.run([sys.executable, str(probe), "--out", str(tmp_path / "result.json"),
                    "--dataset", str(tmp_path / "none.jsonl"), "--bench", "[]",
                    "--kv-max-tokens", "4096"], capture_output=True, check=False, timeout=60)
    assert (tmp_path / trtllm.KV_PINNED_FILE).read_text() == \
        "kv_cache_config:\n  max_tokens: 4096\n"


def test_a_bad_pinned_size_or_two_option_files_are_refused():
    where = workloads.Where("c.yaml", 0, "m")
    base = {**trtllm.DEFAULTS, "model": "m", "dataset_dir": "/d"}
    said = workloads.problems("trtllm", {**base, "kv_cache_max_tokens": 0}, where)
    assert any("kv_cache_max_tokens" in s and ">= 1" in s for s in said)
    said = workloads.problems("trtllm", {**base, "kv_cache_max_tokens": 8,
                                         "extra_llm_api_options": "/x.yaml"}, where)
    assert any("sets both" in s for s in said)


def test_phase_2f_crosses_the_arms_and_counterbalances_them():
    c = config.load_file(str(REPO / "config" / "phase-2f.yaml"), REPO)
    arms = {(m.params.get("kv_cache_max_tokens") is not None, m.params["page_cache"])
            for m in c.models}
    assert arms == {(False, "dropped"), (False, "inherited"), (True, "dropped"),
                    (True, "inherited")}
    assert c.schedule["shuffle_models"] is True and c.schedule["design"] == "williams"
    assert len(c.models) * len(c.environments) * c.repetitions == 160
