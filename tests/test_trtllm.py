"""trtllm-bench: command construction and its output in the exact shapes TensorRT-LLM
writes (tests/data/trtllm, built from its source and cited there). These stand in for a
run on a DGX Spark, which this project cannot make."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from containertax import trtllm

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
    ds = trtllm.dataset_argv(p, "/data/qwen.jsonl")
    assert ds[:5] == ["trtllm-bench", "--model", "Qwen/Qwen2-1.5B", "--model_path",
                      "/models/qwen2-1.5b"]
    assert ds[ds.index("--output-stdev") + 1] == "0" and "token-norm-dist" in ds
    argv = trtllm.bench_argv(p, "/data/qwen.jsonl", "/work/report.json")
    assert argv[5] == "throughput" and "--streaming" in argv
    for flag, value in [("--max_batch_size", "512"), ("--max_num_tokens", "8192"),
                        ("--concurrency", "64"), ("--kv_cache_free_gpu_mem_fraction", "0.9"),
                        ("--extra_llm_api_options", "/cfg/extra.yaml"),
                        ("--report_json", "/work/report.json"), ("--num_requests", "1000")]:
        assert argv[argv.index(flag) + 1] == value
    latency = trtllm.bench_argv({**p, "mode": "latency"}, "/d", "/r")
    assert "latency" in latency and "--max_batch_size" not in latency


def test_trtllm_workload_through_the_registry():
    """What the probe hands the host (probe/trtllm.py output) becomes metrics with units."""
    from containertax import workloads

    params = {"model": "Qwen/Qwen2-1.5B", "dataset_dir": "/datasets", "num_requests": 1000}
    argv, _ = workloads.build("trtllm", params, "python3", Path("/p"), Path("/w/result.json"))
    dataset = argv[argv.index("--dataset") + 1]
    assert dataset == "/datasets/Qwen_Qwen2-1.5B-in128-out128-n1000-seed0.jsonl"
    assert dataset in json.loads(argv[argv.index("--bench") + 1])
    log = (DATA / "log_only.txt").read_text()
    probe = {"t_enter_unix": 10.5, "import_s": 0.0, "max_rss_kib": 1024, "bench_s": 70.0,
             "log_tail": log, "report": json.loads((DATA / "report_json.json").read_text())}
    m = {x.name: (x.value, x.unit) for x in workloads.metrics("trtllm", probe, 10.0, 80.0)}
    assert m["token_throughput"] == (2090.33, "tok/s")  # the report wins over the log
    assert m["kv_cache_gib"] == (26.91, "GiB") and m["benchmark_s"] == (70.0, "s")
    with pytest.raises(workloads.WorkloadError, match="PERFORMANCE OVERVIEW"):
        workloads.metrics("trtllm", {**probe, "report": None, "log_tail": ""}, 10.0, 80.0)
