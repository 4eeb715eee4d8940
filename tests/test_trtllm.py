"""trtllm-bench: command construction and its output in the exact shapes TensorRT-LLM
writes (tests/data/trtllm, built from its source and cited there). These stand in for a
run on a DGX Spark, which this project cannot make."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from containertax.campaign.paths import CampaignPaths
from containertax.execution import rawrecord
from containertax.workloads import trtllm

DATA = Path(__file__).parent / "data" / "trtllm"


def test_json_report_of_current_trtllm_bench():
    report = json.loads((DATA / "report_json.json").read_text())
    m = trtllm.parse_report(report)
    assert m["token_throughput"] == 2090.33 and m["request_throughput"] == 16.3307
    assert m["request_latency_s"] == pytest.approx(29.8761)
    assert m["ttft_s"] == pytest.approx(1.5237) and m["itl_s"] == pytest.approx(0.2234)
    assert m["trtllm_request_latency_p99_s"] == pytest.approx(45.0012)  # its own percentile
    facts = trtllm.engine_facts(report, "")
    assert facts["version"] == "1.0.0rc3" and facts["world_info"]["max_batch_size"] == 512


def test_log_only_output_of_early_trtllm_bench():
    log = (DATA / "log_only.txt").read_text()
    m = trtllm.parse_log(log)
    assert m == pytest.approx({"token_throughput": 1834.2211, "request_throughput": 14.3299,
                               "trtllm_total_latency_s": 69.7843010,
                               "request_latency_s": 31.2345678, "ttft_s": 1.7342,
                               "itl_s": 0.23228})
    assert trtllm.kv_cache(log) == {"kv_cache_gib": 26.91, "kv_cache_tokens": 220480.0}
    assert trtllm.engine_facts(None, log)["version"] == "0.12.0"


def test_unknown_output_is_a_clear_error():
    with pytest.raises(trtllm.TrtllmOutputError, match="report_json layout"):
        trtllm.parse_report({"performance": {"tokens_per_sec": 1}})
    with pytest.raises(trtllm.TrtllmOutputError, match="PERFORMANCE OVERVIEW"):
        trtllm.parse_log("nothing here")
    assert trtllm.kv_cache("no allocation line") is None


def test_commands_from_config():
    p = {"model": "Qwen/Qwen2-1.5B", "model_path": "/models/qwen2-1.5b", "max_batch_size": 512,
         "max_num_tokens": 8192, "concurrency": 64, "kv_cache_free_gpu_mem_fraction": 0.9,
         "extra_llm_api_options": "/cfg/extra.yaml", "num_requests": 1000}
    ds = trtllm.flatten(trtllm.dataset_segments(p, "/data/qwen.jsonl"))
    # prepare-dataset's tokenizer comes from --model: the local checkpoint, no download
    assert ds[:4] == ["trtllm-bench", "--model", "/models/qwen2-1.5b", "prepare-dataset"]
    assert ds[ds.index("--random-seed") + 1] == "0"
    assert ds[ds.index("--output-stdev") + 1] == "0" and "token-norm-dist" in ds
    argv = trtllm.flatten(trtllm.bench_segments(p, "/data/qwen.jsonl", "/work/report.json"))
    assert argv[5] == "throughput" and "--streaming" in argv
    for flag, value in [("--max_batch_size", "512"), ("--max_num_tokens", "8192"),
                        ("--concurrency", "64"), ("--kv_cache_free_gpu_mem_fraction", "0.9"),
                        ("--extra_llm_api_options", "/cfg/extra.yaml"),
                        ("--report_json", "/work/report.json"), ("--num_requests", "1000")]:
        assert argv[argv.index(flag) + 1] == value
    latency = trtllm.flatten(trtllm.bench_segments({**p, "mode": "latency"}, "/d", "/r"))
    assert "latency" in latency and "--max_batch_size" not in latency


def test_trtllm_workload_through_the_registry():
    """What the probe hands the host (probe/trtllm.py output) becomes metrics with units."""
    from containertax import workloads

    params = {"model": "Qwen/Qwen2-1.5B", "dataset_dir": "/datasets", "num_requests": 1000}
    argv, _ = workloads.build("trtllm", params, "python3", Path("/p"), Path("/w/result.json"))
    dataset = argv[argv.index("--dataset") + 1]
    assert dataset == "/datasets/Qwen_Qwen2-1.5B-in128-out128-n1000-seed0.jsonl"
    bench = json.loads(argv[argv.index("--bench") + 1])  # command segments, for preflight
    assert bench[0] == ["trtllm-bench", "--model", "Qwen/Qwen2-1.5B"]
    assert bench[1][:3] == ["throughput", "--dataset", dataset]
    log = (DATA / "log_only.txt").read_text()
    probe = {"t_enter_unix": 10.5, "import_s": 0.0, "max_rss_kib": 1024, "bench_s": 70.0,
             "log_tail": log, "report": json.loads((DATA / "report_json.json").read_text())}
    m = {x.name: (x.value, x.unit) for x in workloads.metrics("trtllm", probe, 10.0, 80.0)}
    assert m["token_throughput"] == (2090.33, "tok/s")  # the report wins over the log
    assert m["kv_cache_gib"] == (26.91, "GiB") and m["benchmark_s"] == (70.0, "s")
    with pytest.raises(workloads.WorkloadError, match="PERFORMANCE OVERVIEW"):
        workloads.metrics("trtllm", {**probe, "report": None, "log_tail": ""}, 10.0, 80.0)


# --- the probe and the workflow with a stand-in trtllm-bench (tests/data/trtllm/standin) ---

STANDIN = DATA / "standin"


def standin_env(**extra: str) -> dict[str, str]:
    """PATH with the stand-in trtllm-bench, PYTHONPATH with the stand-in torch ('a GPU')."""
    return {"PATH": f"{STANDIN / 'bin'}:/usr/bin:/bin", "PYTHONPATH": str(STANDIN), **extra}


def checkpoint(root: Path, name: str, quant_algo: str | None) -> Path:
    path = root / name
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    if quant_algo:
        (path / "hf_quant_config.json").write_text(
            json.dumps({"quantization": {"quant_algo": quant_algo}}))
    return path


def probe_check(tmp_path: Path, models: list[dict], env: dict[str, str]):
    import subprocess
    import sys

    from containertax import workloads

    params = {"model": "Qwen/Qwen2-1.5B", "model_path": models[0].get("model_path"),
              "dataset_dir": str(tmp_path)}
    argv, _ = workloads.build("trtllm", params, sys.executable, workloads.PROBE_DIR,
                              tmp_path / "check.json", check=True)
    argv += ["--check-models", json.dumps(models)]
    return subprocess.run(argv, capture_output=True, text=True, env=env), tmp_path / "check.json"


def test_preflight_check_passes_with_matching_checkpoints_and_flags(tmp_path):
    fp8 = checkpoint(tmp_path / "models", "fp8", "FP8")
    plain = checkpoint(tmp_path / "models", "plain", None)
    models = [{"id": "a", "model": "x", "model_path": str(fp8), "quantization": "fp8"},
              {"id": "b", "model": "y", "model_path": str(plain)}]
    out, result = probe_check(tmp_path, models, standin_env())
    assert out.returncode == 0, out.stderr
    check = json.loads(result.read_text())
    assert check["gpu"] == "stand-in GPU (test)"
    assert [m["checkpoint_quantization"] for m in check["models"]] == ["FP8", None]
    log = (tmp_path / "trtllm-bench.log").read_text()
    helps = [line for line in log.splitlines() if line.startswith("$ ")]
    # every subcommand's own help, each once (trtllm-bench --help serves both commands)
    assert len(helps) == 4 and helps[2].endswith("--random-seed 0 token-norm-dist --help")
    assert helps[0] == "$ trtllm-bench --help" and helps[3].endswith(" throughput --help")


@pytest.mark.parametrize(("case", "expected"), [
    ("flag", "trtllm-bench prepare-dataset has no --random-seed here"),
    ("quantisation", "model a: declared quantization 'w4a16_awq' but"),
    ("unquantised", "is not a quantised checkpoint"),
    ("missing", "model a: no checkpoint at"),
    ("no-gpu", "no GPU visible to the image's torch"),
    ("no-tool", "trtllm-bench is not on PATH in this environment"),
])
def test_preflight_check_names_what_differs(tmp_path, case, expected):
    path = checkpoint(tmp_path / "models", "m", None if case == "unquantised" else "FP8")
    model = {"id": "a", "model": "x", "model_path": str(path),
             "quantization": "w4a16_awq" if case == "quantisation" else "fp8"}
    if case == "missing":
        model["model_path"] = str(tmp_path / "nowhere")
    env = standin_env()
    if case == "flag":
        env["STANDIN_TRTLLM_WITHOUT"] = "--random-seed"
    if case == "no-gpu":
        env["PYTHONPATH"] = str(tmp_path)  # no torch at all
    if case == "no-tool":
        env["PATH"] = "/usr/bin:/bin"
    out, result = probe_check(tmp_path, [model], env)
    assert out.returncode != 0 and not result.exists()
    assert expected in out.stderr, out.stderr


@pytest.mark.slow
def test_trtllm_campaign_end_to_end_with_the_standin(tmp_path):
    """Real Snakemake, native environments, the stand-in tool: preflight, the dataset made
    once, reports parsed, memory recorded, the paper's memory table built."""
    import subprocess
    import sys

    import yaml

    from tests.conftest import REPO, demo_config

    ckpt = checkpoint(tmp_path / "models", "qwen", "FP8")
    (tmp_path / "datasets").mkdir()
    cfg = demo_config()
    env = {"kind": "native", "env": standin_env()}
    cfg.update(campaign="trt", repetitions=2, reference_environment="native_a",
               environments={"native_a": env, "native_b": env},
               workload={"kind": "trtllm", "dataset_dir": str(tmp_path / "datasets"),
                         "num_requests": 20, "timeout_s": 120},
               models=[{"id": "qwen", "model": "Qwen/Qwen2-1.5B", "model_path": str(ckpt),
                        "quantization": "fp8", "max_batch_size": 8}])
    cfg["thermal"].update(min_interval_s=0, cooldown_s=0.1, poll_s=0.1)
    path = tmp_path / "trt.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    out = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile",
                          str(REPO / "Snakefile"), "--directory", str(tmp_path),
                          "--configfile", str(path)], capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    root = tmp_path / "results" / "trt"
    recs = [rawrecord.read_record(p).to_dict() for p in CampaignPaths(root).raw_records()
            if p.parent.parent.name == "qwen"]
    assert len(recs) == 4
    assert sum(r["detail"]["prepared_dataset_here"] for r in recs) == 1  # once, then shared
    assert len(list((tmp_path / "datasets").iterdir())) == 1
    for r in recs:
        m = {x["name"]: x["value"] for x in r["metrics"]}
        assert m["token_throughput"] == 2090.33 and m["kv_cache_gib"] == 26.91
        assert m["mem_available_before_gib"] > 0 and "host_mem_rise_gib" in m
        assert set(r["memory"]) == {"mode", "drop", "before_kib", "after_kib"}
    pre = json.loads((root / "preflight" / "native_a.json").read_text())
    assert pre["checks"]["trtllm"]["models"][0]["checkpoint_quantization"] == "FP8"
    memory_tex = (root / "paper" / "tables" / "memory.tex").read_text()
    assert "KV-cache size" in memory_tex and "26.9" in memory_tex
    assert (root / "paper" / "paper.pdf").stat().st_size > 10000
