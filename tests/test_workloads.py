"""Workload commands and the metrics read from probe output: transformers (LLM) and the
GPU microbenchmarks. The probes themselves run on the GPU machine (scripts/gpu-check.sh);
a tiny CPU model runs here when torch and transformers are importable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from containertax import workloads
from containertax.campaign import config
from containertax.workloads import transformers
from containertax.workloads.base import Where

TINY = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 1000}


def probe_output(steps: list[list[float]], latencies: list[float], batch: int = 4) -> dict:
    """LLM probe output as probe/llm.py writes it; request 0 is the warm-up."""
    return {
        "t_enter_unix": 100.5, "import_s": 2.0, "build_s": 3.0, "max_rss_kib": 2048,
        "peak_device_bytes": 3 * 2**30, "peak_reserved_bytes": 4 * 2**30,
        "measure_window_unix": [110.0, 120.0],
        "requests": [{"index": i, "warmup": i == 0, "batch_size": batch, "input_len": 16,
                      "output_len": len(s), "latency_s": lat, "step_s": s}
                     for i, (s, lat) in enumerate(zip(steps, latencies, strict=True))],
    }


def test_transformers_metrics_from_step_times():
    probe = probe_output([[9.0, 9.5, 9.9], [0.2, 0.3, 0.5], [0.1, 0.2, 0.3]],
                         [10.0, 0.5, 0.3])
    m = {x.name: x.value for x in workloads.metrics("transformers", probe, 100.0, 30.0)}
    # warm-up (request 0) excluded: 2 requests x 4 sequences x 3 tokens in 0.8 s busy
    assert m["token_throughput"] == pytest.approx(24 / 0.8)
    assert m["request_throughput"] == pytest.approx(8 / 0.8)
    assert m["ttft_s"] == pytest.approx(0.15)
    assert m["itl_s"] == pytest.approx((0.1 + 0.2 + 0.1 + 0.1) / 4)
    assert m["itl_p50_s"] == pytest.approx(0.1)
    assert m["itl_p99_s"] == pytest.approx(0.1 + 0.1 * 0.97)  # linear, as numpy's default
    assert m["request_latency_s"] == pytest.approx(0.4)
    assert m["startup_s"] == pytest.approx(0.5) and m["process_wall_s"] == 30.0
    assert m["peak_memory_gib"] == 3 and m["peak_reserved_gib"] == 4
    assert workloads.get("transformers").window_tokens(probe) == 24
    rows = workloads.requests_rows("transformers", probe)
    assert [r["index"] for r in rows] == [1, 2] and rows[0]["ttft_s"] == 0.2


def test_transformers_output_without_measured_requests_is_an_error():
    probe = probe_output([[0.1, 0.2]], [0.3])
    with pytest.raises(workloads.WorkloadError, match="measured no request"):
        workloads.metrics("transformers", probe, 100.0, 1.0)


def test_microbench_metrics_are_medians():
    probe = {"t_enter_unix": 1.2, "import_s": 1.0, "max_rss_kib": 1024, "copy_bytes": 10**9,
             "copy_s": {"h2d": [0.1, 0.04, 0.05], "d2h": [0.05, 0.05, 0.2]},
             "conv_s": {"conv_7x7x512_n2_k2048_1x1_s1": [70e-6, 71e-6, 500e-6]}}
    m = {x.name: x.value for x in workloads.metrics("microbench", probe, 1.0, 3.0)}
    assert m["h2d_gbps"] == pytest.approx(20.0) and m["d2h_gbps"] == pytest.approx(20.0)
    assert m["conv_7x7x512_n2_k2048_1x1_s1_us"] == pytest.approx(71.0)
    assert workloads.requests_rows("microbench", probe) == []


def test_commands_are_identical_but_for_paths(tmp_path):
    params = {"model_config": TINY, "batch_size": 2, "decoding": "static"}
    a, env = workloads.build("transformers", params, "python3", Path("/p"), Path("/w/o.json"))
    b, _ = workloads.build("transformers", params, "python3", Path("/q"), Path("/v/o.json"))
    assert [x for x in a if not x.startswith("/")] == [x for x in b if not x.startswith("/")]
    assert a[a.index("--decoding") + 1] == "static" and a[a.index("--batch-size") + 1] == "2"
    assert json.loads(a[a.index("--model-config") + 1]) == TINY
    assert env["OMP_NUM_THREADS"] == "1"
    check, _ = workloads.build("microbench", {}, "python3", Path("/p"), Path("/o"), check=True)
    assert check[-1] == "--check"


@pytest.mark.parametrize("model,fragment", [
    ({"id": "m", "kind": "transformers"}, "needs exactly one of 'model_config'"),
    ({"id": "m", "kind": "transformers", "model_config": {"hidden_size": 8}}, "model_type"),
    ({"id": "m", "kind": "transformers", "model_config": TINY, "decoding": "fast"},
     "'workload.decoding' (or 'models[0].decoding')"),
    ({"id": "m", "kind": "transformers", "model_config": TINY, "output_len": 1},
     "'workload.output_len' (or 'models[0].output_len')"),
    ({"id": "m", "kind": "microbench", "repeats": 1}, "'workload.repeats'"),
    # every closed set (issue #21): a value outside it names the key, not a probe traceback
    ({"id": "m", "kind": "transformers", "model_config": TINY, "dtype": "float999"},
     "'workload.dtype' (or 'models[0].dtype')"),
    ({"id": "m", "kind": "transformers", "model_config": TINY, "device": "tpu"},
     "'workload.device' (or 'models[0].device')"),
    ({"id": "m", "kind": "transformers", "model_config": TINY,
      "attn_implementation": "flash"}, "'workload.attn_implementation'"),
    ({"id": "m", "kind": "transformers", "model_config": TINY, "compile_mode": "fast"},
     "'workload.compile_mode'"),
    ({"id": "m", "kind": "microbench", "dtype": "int8"}, "'workload.dtype'"),
    ({"id": "m", "kind": "matmul", "size": 8, "backend": "jax"}, "'workload.backend'"),
    ({"id": "m", "kind": "matmul", "size": 8, "dtype": "bfloat16", "backend": "numpy"},
     "numpy has no bfloat16"),
    ({"id": "m", "kind": "trtllm", "model": "x", "dataset_dir": "/d", "mode": "offline"},
     "'workload.mode'"),
    ({"id": "m", "kind": "trtllm", "model": "x", "dataset_dir": "/d", "backend": "vllm"},
     "'workload.backend'"),
])
def test_bad_workload_parameters_name_the_key(config_dict, model, fragment):
    config_dict["models"] = [model]
    with pytest.raises(ValueError) as err:
        config.load_campaign(config_dict, "x.yaml")
    assert fragment in str(err.value) and "x.yaml" in str(err.value)


def test_every_default_is_in_its_own_closed_set():
    """A kind's default outside its own choices would refuse every config that omits it."""
    for kind, w in workloads.REGISTRY.items():
        for key, allowed in w.choices.items():
            assert key not in w.defaults or w.defaults[key] in allowed, (kind, key)


def test_models_of_different_kinds_in_one_campaign(config_dict):
    config_dict["models"].append({"id": "llm", "kind": "transformers", "model_config": TINY})
    campaign = config.load_campaign(config_dict, "x.yaml")
    assert campaign.workload_kind("n256") == "matmul"
    assert campaign.workload_kind("llm") == "transformers"
    assert "kind" not in campaign.workload_params("llm")


def torch_python() -> str | None:
    """An interpreter with torch and transformers (CONTAINERTAX_TORCH_PYTHON, else this one)."""
    for python in (os.environ.get("CONTAINERTAX_TORCH_PYTHON"), shutil.which("python3")):
        if python and subprocess.run([python, "-c", "import torch, transformers"],
                                     capture_output=True).returncode == 0:
            return python
    return None


@pytest.mark.skipif(torch_python() is None, reason="no interpreter with torch + transformers "
                    "(set CONTAINERTAX_TORCH_PYTHON); the GPU machine runs the real thing")
def test_llm_probe_runs_a_tiny_model_on_the_cpu(tmp_path):
    params = {"model_config": TINY, "device": "cpu", "dtype": "float32", "batch_size": 2,
              "input_len": 8, "output_len": 5, "warmup": 1, "requests": 2}
    out = tmp_path / "r.json"
    argv, env = workloads.build("transformers", params, torch_python(), workloads.PROBE_DIR, out)
    proc = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    probe = json.loads(out.read_text())
    assert probe["model"]["parameters"] > 0 and probe["model"]["source"] == "config"
    assert [len(r["step_s"]) for r in probe["requests"]] == [5, 5, 5]
    m = {x.name: x.value for x in workloads.metrics("transformers", probe, probe["t_enter_unix"],
                                                     1.0)}
    assert m["token_throughput"] > 0 and 0 < m["ttft_s"] < m["request_latency_s"]


@pytest.mark.skipif(torch_python() is None, reason="no interpreter with torch + transformers "
                    "(set CONTAINERTAX_TORCH_PYTHON); the GPU machine runs the real thing")
def test_engine_decoding_emits_the_tokens_generate_does_and_reuses_its_compile_cache(tmp_path):
    """The engine's own loop (static cache, one torch.compile'd step) against transformers'
    generate as the reference: the same greedy tokens for the same seeded prompts; a second
    process finds the compiled code in the cache and its warm-up is shorter."""
    params = {"model_config": TINY, "device": "cpu", "dtype": "float32", "batch_size": 2,
              "input_len": 8, "output_len": 5, "warmup": 1, "requests": 2}
    runs = {}
    for name, decoding, attention in [("plain", "plain", "sdpa"), ("engine", "engine", "sdpa"),
                                      ("again", "engine", "sdpa"),
                                      ("gqa", "engine", "sdpa_gqa")]:
        out = tmp_path / f"{name}.json"
        argv, env = workloads.build("transformers", {**params, "decoding": decoding,
                                                     "attn_implementation": attention},
                                    torch_python(), workloads.PROBE_DIR, out,
                                    cache=tmp_path / "cache")
        proc = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[name] = json.loads(out.read_text())
    plain, engine, again = runs["plain"], runs["engine"], runs["again"]
    assert engine["decoding"] == "engine" and plain["compile_cache"] is None
    assert engine["compile_cache"] == str(tmp_path / "cache" / "inductor")
    assert engine["compile"] == {"mode": "reduce-overhead", "coordinate_descent": False}
    assert plain["compile"] is None
    # the engine decodes as generate does, with either attention
    for run in (engine, runs["gqa"]):
        assert [r["token_sum"] for r in run["requests"]] == \
            [r["token_sum"] for r in plain["requests"]]
    assert runs["gqa"]["model"]["attention"] == "sdpa_gqa"
    assert [len(r["step_s"]) for r in engine["requests"]] == [5, 5, 5]
    assert any((tmp_path / "cache" / "inductor").rglob("*")), "nothing was cached"
    assert again["requests"][0]["latency_s"] < engine["requests"][0]["latency_s"]
    weights = engine["model"]
    assert 0 < weights["weight_bytes_per_step"] < weights["weight_bytes"]  # untied embedding


def test_decoding_auto_is_the_engine_on_a_gpu_and_plain_on_a_cpu(tmp_path):
    gpu, env = workloads.build("transformers", {"model_config": TINY}, "python3", Path("/p"),
                               Path("/w/o.json"), cache=Path("/containertax/cache"))
    assert gpu[gpu.index("--decoding") + 1] == "engine"
    # the compiled code is kept in the campaign's cache, at the same path everywhere
    assert env["TORCHINDUCTOR_CACHE_DIR"] == "/containertax/cache/inductor"
    assert env["TRITON_CACHE_DIR"] == "/containertax/cache/triton"
    cpu, env = workloads.build("transformers", {"model_config": TINY, "device": "cpu"},
                               "python3", Path("/p"), Path("/w/o.json"),
                               cache=Path("/containertax/cache"))
    assert cpu[cpu.index("--decoding") + 1] == "plain"
    assert "TORCHINDUCTOR_CACHE_DIR" not in env  # plain decoding compiles nothing


def test_roofline_is_weight_bytes_over_median_step_over_peak_bandwidth():
    # Llama-3-8B bf16 without its input embedding table: 15.0e9 bytes a step; steps of
    # 6 ms on a 3.35 TB/s H100 read the weights at 74.6 % of the peak
    steps = [0.050 + 0.006 * i for i in range(128)]
    probe = {"model": {"weight_bytes_per_step": 15.0e9},
             "requests": [{"warmup": True, "batch_size": 8, "output_len": 128, "latency_s": 9,
                           "step_s": [0.5 + 0.03 * i for i in range(128)]},
                          {"warmup": False, "batch_size": 8, "output_len": 128, "latency_s": 1,
                           "step_s": steps}]}
    assert transformers.decode_step_s(probe) == pytest.approx(0.006)
    expected = 100 * 15.0e9 / 0.006 / 3.35e12
    assert transformers.roofline_pct(probe, 3.35e12) == pytest.approx(expected)
    assert transformers.roofline_pct({"model": {}, "requests": probe["requests"]}, 3.35e12) is None


def test_peak_bandwidth_from_the_table_or_nvml():
    from containertax.execution import gpu

    assert gpu.peak_bandwidth("NVIDIA H100 80GB HBM3", 2619, 5120) == (3.35e12, "table: H100")
    assert gpu.peak_bandwidth("NVIDIA H100 PCIe", None, None)[0] == 2.0e12
    # an unknown part: NVML's maximum memory clock x bus width x 2 (double data rate)
    bw, source = gpu.peak_bandwidth("Some Future GPU", 2619, 5120)
    assert bw == pytest.approx(3.352e12, rel=1e-3) and source.startswith("nvml")
    assert gpu.peak_bandwidth("Some Future GPU", None, 5120)[0] is None


SDPA_GQA_CHECK = """
import json, sys, types
import torch, transformers
sys.path.insert(0, sys.argv[1])
import llm

def logits(attention, ids):
    args = types.SimpleNamespace(dtype="float32", seed=0, model_path=None, device="cpu",
                                 model_config=sys.argv[2], attn_implementation=attention,
                                 batch_size=ids.shape[0])
    model, _ = llm.build_model(torch, transformers, args)
    cache = llm.static_cache(transformers, model, args, ids.shape[1] + 3)
    out = []
    with torch.no_grad():
        n = ids.shape[1]
        out.append(model(input_ids=ids, cache_position=torch.arange(n), past_key_values=cache,
                         use_cache=True).logits)
        for i in range(3):
            step = out[-1][:, -1:].argmax(-1)
            out.append(model(input_ids=step, cache_position=torch.tensor([n + i]),
                             past_key_values=cache, use_cache=True).logits)
    return out

ids = torch.randint(1, 1000, (2, 8), generator=torch.Generator().manual_seed(1))
changed = ids.clone()
changed[:, -1] = (changed[:, -1] + 1) % 1000
sdpa, gqa, later = logits("sdpa", ids), logits("sdpa_gqa", ids), logits("sdpa_gqa", changed)
print(json.dumps({
    "max_diff": [float((a - b).abs().max()) for a, b in zip(sdpa, gqa)],
    # causal: the first position cannot see the last one's token
    "first_position_moved": float((gqa[0][:, 0] - later[0][:, 0]).abs().max()),
    "last_position_moved": float((gqa[0][:, -1] - later[0][:, -1]).abs().max()),
}))
"""


@pytest.mark.skipif(torch_python() is None, reason="no interpreter with torch + transformers "
                    "(set CONTAINERTAX_TORCH_PYTHON); the GPU machine runs the real thing")
def test_sdpa_gqa_attends_as_sdpa_does_without_repeating_the_cache():
    """The probe's `sdpa_gqa` attention against transformers' own sdpa on a grouped-query
    model (4 query heads on 2 K/V heads): the same logits for a prompt prefilled into a
    static cache and for three decoding steps after it, and still causal (a later token
    does not move an earlier position's logits; it does move its own)."""
    proc = subprocess.run([torch_python(), "-c", SDPA_GQA_CHECK, str(workloads.PROBE_DIR),
                           json.dumps(TINY)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(r["max_diff"]) == 4 and max(r["max_diff"]) < 1e-4, r
    assert r["first_position_moved"] < 1e-5 < r["last_position_moved"], r


@pytest.mark.skipif(torch_python() is None, reason="no interpreter with torch + transformers "
                    "(set CONTAINERTAX_TORCH_PYTHON); the GPU machine runs the real thing")
def test_the_logits_check_catches_attention_without_its_mask():
    """The planted case for the logits check above (not its causality check): with the
    mask builder's registration dropped (transformers then builds no mask for the name),
    the prefill is still causal (SDPA's causal flag stands in), but every decoding step
    attends to the static cache's unwritten slots too, and its logits leave sdpa's.
    Measured on the H100 machine (torch 2.11, transformers 5.17): prefill 0.0, steps 0.066,
    0.75, 0.58."""
    no_mask = ("from transformers import masking_utils\n"
               "masking_utils.AttentionMaskInterface.register = "
               "classmethod(lambda cls, key, value: None)\n")
    proc = subprocess.run([torch_python(), "-c", no_mask + SDPA_GQA_CHECK,
                           str(workloads.PROBE_DIR), json.dumps(TINY)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["max_diff"][0] < 1e-4 and min(r["max_diff"][1:]) > 1e-2, r


def test_the_engine_is_compiled_as_configured_and_bad_values_are_named():
    argv, _ = workloads.build("transformers", {"model_config": TINY,
                                               "compile_mode": "max-autotune",
                                               "coordinate_descent": True},
                              "python3", Path("/p"), Path("/w/o.json"), cache=Path("/c"))
    assert argv[argv.index("--compile-mode") + 1] == "max-autotune"
    assert "--coordinate-descent" in argv and "--no-coordinate-descent" not in argv
    plain, _ = workloads.build("transformers", {"model_config": TINY, "device": "cpu"},
                               "python3", Path("/p"), Path("/w/o.json"))
    assert "--compile-mode" not in plain  # only the engine compiles a step of its own
    default, _ = workloads.build("transformers", {"model_config": TINY}, "python3", Path("/p"),
                                 Path("/w/o.json"), cache=Path("/c"))
    assert "--no-coordinate-descent" in default
    problems = workloads.problems("transformers", {"model_config": TINY, "compile_mode": "fast",
                                                   "coordinate_descent": "yes"},
                                  Where("c.yaml", 0, "m"))
    assert any("'workload.compile_mode'" in p and "'fast'" in p for p in problems)
    assert any("'workload.coordinate_descent'" in p and "'yes'" in p for p in problems)


def test_attention_auto_is_sdpa_gqa_under_the_engine_and_sdpa_elsewhere():
    def attention(params):
        argv, _ = workloads.build("transformers", {"model_config": TINY, **params}, "python3",
                                  Path("/p"), Path("/w/o.json"), cache=Path("/c"))
        return argv[argv.index("--attn-implementation") + 1]

    assert attention({}) == "sdpa_gqa"  # a GPU: engine decoding
    assert attention({"device": "cpu"}) == "sdpa"  # plain decoding
    assert attention({"decoding": "compiled"}) == "sdpa"
    assert attention({"attn_implementation": "sdpa"}) == "sdpa"  # as committed configs pin
    assert attention({"attn_implementation": "eager", "device": "cpu"}) == "eager"
