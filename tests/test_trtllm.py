"""trtllm-bench: release dialects, the synthetic dataset, command construction and its
output in the exact shapes TensorRT-LLM writes (tests/data/trtllm, built from its source
and cited there). These stand in for a run on a DGX Spark, which this project cannot make."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from containertax import workloads
from containertax.campaign.paths import CampaignPaths
from containertax.core import rawrecord
from containertax.workloads import trtllm

DATA = Path(__file__).parent / "data" / "trtllm"
STANDIN = DATA / "standin"
RELEASES = ["1.0.0", "1.1.0rc3", "1.2.0rc6", "1.3.0rc5"]


def log_1x(progress_lines: int = 800) -> str:
    """The 1.x log with the engine's progress between the KV lines and the report."""
    progress = "\n".join(f"[TRT-LLM] [I] iteration {i}: 64 requests in flight"
                         for i in range(progress_lines))
    return (DATA / "log_1x.txt").read_text().replace("{PROGRESS}", progress)


def test_json_report_every_field():
    report = json.loads((DATA / "report_json.json").read_text())
    m = trtllm.parse_report(report)
    assert m["token_throughput"] == 2090.33 and m["request_throughput"] == 16.3307
    assert m["total_token_throughput"] == 4180.66  # input + output: not the output rate
    assert m["per_user_output_throughput"] == 4.38 and m["per_gpu_output_throughput"] == 2090.33
    assert m["per_user_generation_speed"] == 4.41 and m["concurrency"] == 487.2
    assert m["input_len_actual"] == 128 and m["output_len_actual"] == 128
    assert m["request_latency_s"] == pytest.approx(29.8761)
    assert m["ttft_s"] == pytest.approx(1.5237) and m["itl_s"] == pytest.approx(0.2234)
    for q, latency, ttft, itl in [("p50", 30.0124, 1.4002, 0.2251),
                                  ("p90", 41.123, 2.5001, 0.2402),
                                  ("p95", 43.2109, 2.7008, 0.2433),
                                  ("p99", 45.0012, 3.0125, 0.2509),
                                  ("minimum", 8.1234, 0.1203, 0.1802),
                                  ("maximum", 45.8765, 3.0507, 0.251)]:
        assert m[f"trtllm_request_latency_{q}_s"] == pytest.approx(latency)
        assert m[f"trtllm_ttft_{q}_s"] == pytest.approx(ttft)
        assert m[f"trtllm_itl_{q}_s"] == pytest.approx(itl)
    assert m["trtllm_gen_tps_p90"] == 5.1 and trtllm.unit("trtllm_gen_tps_p90") == "tok/s"
    facts = trtllm.engine_facts(report, "")
    assert facts["machine"]["name"] == "NVIDIA GB10" and facts["dataset"]["max_isl"] == 128
    assert facts["world_info"]["max_batch_size"] == 512


def test_log_only_output_of_0x_trtllm_bench():
    log = (DATA / "log_only.txt").read_text()
    m = trtllm.parse_log(log)
    assert m["token_throughput"] == 1834.2211 and m["request_throughput"] == 14.3299
    assert m["itl_s"] == pytest.approx(0.23228) and m["ttft_s"] == pytest.approx(1.7342)
    assert m["trtllm_total_latency_s"] == pytest.approx(69.7843010)
    assert trtllm.kv_cache(log) == {"kv_cache_gib": 26.91, "kv_cache_tokens": 220480.0}
    assert trtllm.engine_facts(None, log)["version"] == "0.12.0"


def test_log_only_output_of_1x_trtllm_bench():
    """1.x wording: 'Total Token Throughput' is input + output (the old parser took it for the
    output rate), TPOT is the inter-token latency, and the percentile breakdowns."""
    m = trtllm.parse_log(log_1x())
    assert m["token_throughput"] == 2090.33 and m["total_token_throughput"] == 4180.66
    assert m["itl_s"] == pytest.approx(0.2234) and m["ttft_s"] == pytest.approx(1.5237)
    assert m["trtllm_itl_p99_s"] == pytest.approx(0.2509)
    assert m["trtllm_request_latency_maximum_s"] == pytest.approx(45.8765)
    assert m["concurrency"] == 487.2 and m["requests_completed"] == 1000
    assert trtllm.engine_facts(None, log_1x())["version"] == "1.1.0rc3"


def test_kv_cache_from_the_whole_log():
    """The KV lines come before ~35 kB of progress: the probe keeps them from the whole log,
    and the last allocation (after memory profiling) counts, not the profiling one."""
    log = log_1x()
    key_lines = [ln for ln in log.splitlines() if trtllm.KEY_LINE.search(ln)]
    assert trtllm.kv_cache(log[-20000:]) is None  # what a tail-only search saw
    probe = {"t_enter_unix": 10.5, "import_s": 0.0, "max_rss_kib": 1024, "bench_s": 70.0,
             "log_tail": log[-20000:], "log_key_lines": key_lines, "report": None,
             "expected": {"input_len": 128, "output_len": 128, "num_requests": 1000}}
    m = {x.name: (x.value, x.unit) for x in workloads.metrics("trtllm", probe, 10.0, 80.0)}
    assert m["kv_cache_gib"] == (26.91, "GiB") and m["kv_cache_tokens"] == (220480.0, "tokens")
    assert m["token_throughput"] == (2090.33, "tok/s") and m["concurrency"][1] == "requests"


def test_actual_lengths_checked_against_the_config():
    report = json.loads((DATA / "report_json.json").read_text())
    expected = {"input_len": 128, "output_len": 128, "num_requests": 1000}
    trtllm.check_lengths(trtllm.parse_report(report), expected)  # as asked: passes
    report["request_info"]["avg_output_length"] = 127.4  # EOS reached early in some requests
    with pytest.raises(trtllm.TrtllmOutputError, match="workload.output_len = 128"):
        trtllm.check_lengths(trtllm.parse_report(report), expected)
    with pytest.raises(trtllm.TrtllmOutputError, match="workload.input_len = 256"):
        trtllm.check_lengths(trtllm.parse_log(log_1x()), {**expected, "input_len": 256})


def test_unknown_output_is_a_clear_error():
    with pytest.raises(trtllm.TrtllmOutputError, match="report_json layout"):
        trtllm.parse_report({"performance": {"tokens_per_sec": 1}})
    with pytest.raises(trtllm.TrtllmOutputError, match="PERFORMANCE OVERVIEW"):
        trtllm.parse_log("nothing here")
    assert trtllm.kv_cache("no allocation line") is None


@pytest.mark.parametrize(("version", "dialect"), [
    ("1.0.0", "1.0"), ("1.0.0rc4", "1.0"), ("1.1.0rc3", "1.1"), ("1.1.0", "1.1"),
    ("1.2.0rc6", "1.2"), ("1.2.1", "1.2"), ("1.3.0rc26", "1.3"), ("1.4.0", "1.3")])
def test_dialect_from_version(version, dialect):
    assert trtllm.dialect_for(version).name == dialect


def test_versions_before_1_0_are_refused():
    with pytest.raises(ValueError, match="older than the releases"):
        trtllm.dialect_for("0.21.0rc1")
    assert trtllm.version_key("1.1.0rc3") < trtllm.version_key("1.1.0")


def test_commands_per_dialect():
    p = {"model": "Qwen/Qwen2-1.5B", "model_path": "/models/qwen2-1.5b", "max_batch_size": 512,
         "max_num_tokens": 8192, "concurrency": 64, "kv_cache_free_gpu_mem_fraction": 0.9,
         "extra_llm_api_options": "/cfg/extra.yaml", "num_requests": 1000}
    by = {d.name: d for d in trtllm.DIALECTS}
    old = trtllm.flatten(trtllm.bench_segments(p, "/d/q.jsonl", "/w/r.json", "/w/q.json",
                                               by["1.1"]))
    new = trtllm.flatten(trtllm.bench_segments(p, "/d/q.jsonl", "/w/r.json", "/w/q.json",
                                               by["1.3"]))
    # the model is a name and the checkpoint a path in every release (1.2+ refuse a path)
    assert old[:5] == ["trtllm-bench", "--model", "Qwen/Qwen2-1.5B", "--model_path",
                       "/models/qwen2-1.5b"]
    assert "--no-telemetry" in new and "--no-telemetry" not in old
    assert old[5] == "throughput" and "--streaming" in old
    for flag, value in [("--max_batch_size", "512"), ("--max_num_tokens", "8192"),
                        ("--concurrency", "64"), ("--kv_cache_free_gpu_mem_fraction", "0.9"),
                        ("--extra_llm_api_options", "/cfg/extra.yaml"),
                        ("--report_json", "/w/r.json"), ("--request_json", "/w/q.json"),
                        ("--num_requests", "1000"), ("--dataset", "/d/q.jsonl")]:
        assert old[old.index(flag) + 1] == value and new[new.index(flag) + 1] == value
    latency = trtllm.flatten(trtllm.bench_segments({**p, "mode": "latency"}, "/d", "/r", "/q"))
    assert "latency" in latency and "--max_batch_size" not in latency


def tiny_checkpoint(root: Path, name: str = "tiny", quant_algo: str | None = None,
                    arch: str = "Qwen2ForCausalLM") -> Path:
    """A checkpoint folder as the workflow reads it: config.json (100 ids, eos 2, bos 1) and
    tokenizer.json (a base vocabulary of 90 and one special added token, 95)."""
    path = root / name
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(
        {"model_type": "qwen2", "architectures": [arch], "vocab_size": 100,
         "eos_token_id": 2, "bos_token_id": 1}))
    (path / "tokenizer.json").write_text(json.dumps(
        {"model": {"vocab": {f"t{i}": i for i in range(90)}},
         "added_tokens": [{"id": 95, "content": "<|x|>", "special": True}]}))
    if quant_algo:
        (path / "hf_quant_config.json").write_text(
            json.dumps({"quantization": {"quant_algo": quant_algo}}))
    return path


def test_synthetic_dataset(tmp_path):
    ckpt = tiny_checkpoint(tmp_path)
    p = {"model": "x/y", "model_path": str(ckpt), "num_requests": 50, "input_len": 64,
         "output_len": 32, "seed": 7, "dataset_dir": str(tmp_path / "ds")}
    out = Path(trtllm.dataset_path(p))
    meta = trtllm.write_dataset(p, out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 50 and [r["task_id"] for r in rows] == list(range(50))
    ids = [t for r in rows for t in r["input_ids"]]
    assert all(len(r["input_ids"]) == 64 and r["output_tokens"] == 32 for r in rows)
    assert max(ids) < 90 and not {1, 2} & set(ids)  # base vocabulary, no specials
    assert meta["vocab_size"] == 90 and meta["excluded_special_ids"] == [1, 2]
    assert meta["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert json.loads(trtllm.sidecar(out).read_text())["sha256"] == meta["sha256"]
    again = trtllm.write_dataset(p, tmp_path / "again.jsonl")
    other = trtllm.write_dataset({**p, "seed": 8}, tmp_path / "other.jsonl")
    assert again["sha256"] == meta["sha256"] != other["sha256"]  # seeded
    with pytest.raises(trtllm.DatasetError, match="models\\[\\].vocab_size"):
        trtllm.write_dataset({**p, "model_path": str(tmp_path / "nowhere")}, tmp_path / "n")


def test_a_path_as_model_name_is_a_config_error(config_dict):
    from containertax.campaign.config import ConfigError, load_campaign

    config_dict["workload"] = {"kind": "trtllm", "dataset_dir": "/datasets"}
    config_dict["models"] = [{"id": "q", "model": "/models/qwen"}]
    with pytest.raises(ConfigError, match="reject a path as --model"):
        load_campaign(config_dict, "c.yaml")


def test_request_rows_from_request_json():
    rows = trtllm.request_rows([{"id": 3, "num_input_tokens": 128, "end_to_end_latency": 3e10,
                                 "time_to_first_token": 1.5e9, "intertoken_latency": 2.2e8,
                                 "num_total_output_tokens": 128}])
    assert rows == [{"index": 3, "latency_s": 30.0, "ttft_s": 1.5, "itl_mean_s": 0.22,
                     "tokens": 128, "input_tokens": 128}]


# --- the probe with the stand-in trtllm-bench (tests/data/trtllm/standin), per release ---

def standin_env(tmp_path: Path, version: str = "1.2.0rc6", **extra: str) -> dict[str, str]:
    """PATH with the stand-in trtllm-bench; PYTHONPATH with the stand-in torch ('a GPU'),
    registry and a tensorrt_llm dist-info of `version` (what importlib.metadata reads)."""
    site = tmp_path / f"site-{version}"
    dist = site / f"tensorrt_llm-{version}.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: tensorrt_llm\n"
                                   f"Version: {version}\n")
    return {"PATH": f"{STANDIN / 'bin'}:/usr/bin:/bin", "PYTHONPATH": f"{site}:{STANDIN}",
            **extra}


def probe(tmp_path: Path, models: list[dict], env: dict[str, str], check: bool = True,
          **params):
    p = {"model": "Qwen/Qwen2-1.5B", "model_path": models[0].get("model_path"),
         "dataset_dir": str(tmp_path / "ds"), "num_requests": 20, **params}
    argv, _ = workloads.build("trtllm", p, sys.executable, workloads.PROBE_DIR,
                              tmp_path / "out.json", check=check)
    if check:
        argv += ["--check-models", json.dumps(models)]
    return subprocess.run(argv, capture_output=True, text=True, env=env), tmp_path / "out.json"


@pytest.mark.parametrize("version", RELEASES)
def test_preflight_passes_in_every_release(tmp_path, version):
    fp8 = tiny_checkpoint(tmp_path / "models", "fp8", "FP8")
    plain = tiny_checkpoint(tmp_path / "models", "plain")
    (tmp_path / "ds").mkdir()
    models = [{"id": "a", "model": "x", "model_path": str(fp8), "quantization": "fp8"},
              {"id": "b", "model": "y", "model_path": str(plain)}]
    out, result = probe(tmp_path, models, standin_env(tmp_path, version))
    assert out.returncode == 0, out.stderr
    check = json.loads(result.read_text())
    assert check["software"]["tensorrt_llm"] == version
    assert check["dialect"]["name"] == trtllm.dialect_for(version).name
    assert check["gpu"] == "stand-in GPU (test)" and check["compute_capability"] == [12, 1]
    assert [m["checkpoint_quantization"] for m in check["models"]] == ["FP8", None]
    assert "Qwen2ForCausalLM" in check["model_registry"]
    helps = [ln for ln in (tmp_path / "trtllm-bench.log").read_text().splitlines()
             if ln.startswith("$ ")]
    assert len(helps) == 2 and helps[1].endswith(" throughput --help")
    assert ("--no-telemetry" in helps[1]) == version.startswith("1.3")


@pytest.mark.parametrize(("case", "expected"), [
    ("flag", "trtllm-bench throughput has no --request_json here"),
    ("quantisation", "model a: declared quantization 'w4a16_awq' but"),
    ("unquantised", "is not a quantised checkpoint"),
    ("missing", "model a: no checkpoint at"),
    ("no-gpu", "no GPU visible to the image's torch"),
    ("no-tool", "trtllm-bench is not on PATH in this environment"),
    ("old", "TensorRT-LLM 0.21.0 is older than the release lines"),
    ("gemma1", "architecture GemmaForCausalLM is not in this TensorRT-LLM's model registry"),
    ("awq-on-gb10", "quantisation W4A16_AWQ (W4A16_AWQ) is not supported by TensorRT-LLM on "
                    "compute capability 12.1"),
    ("trt-backend-1.3", "backend 'tensorrt' is not one of TensorRT-LLM 1.3.0rc5's"),
])
def test_preflight_names_what_differs(tmp_path, case, expected):
    algo = {"unquantised": None, "awq-on-gb10": "W4A16_AWQ"}.get(case, "FP8")
    path = tiny_checkpoint(tmp_path / "models", "m", algo,
                           "GemmaForCausalLM" if case == "gemma1" else "Qwen2ForCausalLM")
    model = {"id": "a", "model": "x", "model_path": str(path),
             "quantization": {"quantisation": "w4a16_awq", "awq-on-gb10": "w4a16_awq"}
             .get(case, "fp8")}
    if case == "missing":
        model["model_path"] = str(tmp_path / "nowhere")
    version = {"old": "0.21.0", "trt-backend-1.3": "1.3.0rc5"}.get(case, "1.1.0rc3")
    env = standin_env(tmp_path, version)
    if case == "flag":
        env["STANDIN_TRTLLM_WITHOUT"] = "--request_json"
    if case == "no-gpu":
        env["PYTHONPATH"] = env["PYTHONPATH"].split(":")[0]  # no torch at all
    if case == "no-tool":
        env["PATH"] = "/usr/bin:/bin"
    params = {"backend": "tensorrt"} if case == "trt-backend-1.3" else {}
    out, result = probe(tmp_path, [model], env, **params)
    assert out.returncode != 0 and not result.exists()
    assert expected in out.stderr, out.stderr


def test_awq_passes_where_the_gpu_runs_it(tmp_path):
    """The same AWQ checkpoint on a Hopper (9.0): the support matrix allows it there."""
    path = tiny_checkpoint(tmp_path / "models", "m", "W4A16_AWQ")
    (tmp_path / "ds").mkdir()
    model = {"id": "a", "model": "x", "model_path": str(path), "quantization": "w4a16_awq"}
    out, _ = probe(tmp_path, [model], standin_env(tmp_path, STANDIN_GPU_CC="9.0"))
    assert out.returncode == 0, out.stderr


def test_standin_1_2_refuses_a_path_as_model(tmp_path):
    """The double's validator (general.py verify_model_name) is live, so the measured run
    below shows the workflow never passes a path as --model."""
    out = subprocess.run(["trtllm-bench", "--model", str(tmp_path), "throughput", "--help"],
                         capture_output=True, text=True, env=standin_env(tmp_path, "1.2.0rc6"))
    assert out.returncode == 1 and "Model is a file or directory" in out.stderr
    old = subprocess.run(["trtllm-bench", "--model", str(tmp_path), "throughput", "--help"],
                         capture_output=True, text=True, env=standin_env(tmp_path, "1.1.0rc3"))
    assert old.returncode == 0


@pytest.mark.parametrize("version", ["1.1.0rc3", "1.2.0rc6"])
def test_measured_run_reads_the_workflow_dataset(tmp_path, version):
    ckpt = tiny_checkpoint(tmp_path / "models")
    p = {"model": "Qwen/Qwen2-1.5B", "model_path": str(ckpt),
         "dataset_dir": str(tmp_path / "ds"), "num_requests": 20}
    env = standin_env(tmp_path, version)
    out, result = probe(tmp_path, [p], env, check=False)
    assert out.returncode == 3 and "dataset rule writes it" in out.stderr  # none yet
    dataset = Path(trtllm.dataset_path({**trtllm.DEFAULTS, **p}))
    trtllm.write_dataset({**trtllm.DEFAULTS, **p}, dataset)
    out, result = probe(tmp_path, [p], env, check=False)
    assert out.returncode == 0, out.stderr
    got = json.loads(result.read_text())
    assert got["dialect"]["name"] == version[:3] and "--model_path" in got["bench_argv"]
    m = {x.name: x.value for x in workloads.metrics("trtllm", got, got["t_enter_unix"], 1.0)}
    assert m["input_len_actual"] == 128 and m["requests_completed"] == 20
    assert m["kv_cache_gib"] == 26.91
    rows = workloads.requests_rows("trtllm", got)
    assert len(rows) == 20 and rows[0]["latency_s"] == 30.0
    assert workloads.detail("trtllm", got)["dataset"]["sha256"] == hashlib.sha256(
        dataset.read_bytes()).hexdigest()
    dataset.write_text(dataset.read_text().replace('"output_tokens":128', '"output_tokens":64'))
    out, _ = probe(tmp_path, [p], env, check=False)
    assert out.returncode == 3 and "does not match the sha256" in out.stderr


@pytest.mark.slow
def test_trtllm_campaign_end_to_end_with_the_standin(tmp_path):
    """Real Snakemake, native environments with the stand-in of TensorRT-LLM 1.1.0rc3 (no
    prepare-dataset) and of 1.2.0rc6 (refuses a path as --model): preflight, the dataset
    written once by its own rule before any run, reports parsed, memory recorded, the
    paper's memory table built."""
    import yaml

    from tests.conftest import REPO, demo_config

    ckpt = tiny_checkpoint(tmp_path / "models", "qwen", "FP8")
    cfg = demo_config()
    envs = {"native_a": {"kind": "native", "env": standin_env(tmp_path, "1.1.0rc3")},
            "native_b": {"kind": "native", "env": standin_env(tmp_path, "1.2.0rc6")}}
    cfg.update(campaign="trt", repetitions=2, reference_environment="native_a",
               environments=envs,
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
    datasets = sorted((tmp_path / "datasets").iterdir())
    assert [d.name for d in datasets] == [
        "Qwen_Qwen2-1.5B-in128-out128-n20-seed0.jsonl",
        "Qwen_Qwen2-1.5B-in128-out128-n20-seed0.jsonl.json"]
    sha = json.loads(datasets[1].read_text())["sha256"]
    assert {r["detail"]["dataset"]["sha256"] for r in recs} == {sha}  # one file for all
    assert {r["detail"]["dialect"]["name"] for r in recs} == {"1.1", "1.2"}
    for r in recs:
        m = {x["name"]: x["value"] for x in r["metrics"]}
        assert m["token_throughput"] == 2090.33 and m["kv_cache_gib"] == 26.91
        assert m["output_len_actual"] == 128 and "trtllm_itl_p99_s" in m
        assert m["mem_available_before_gib"] > 0 and "host_mem_rise_gib" in m
    requests_csv = root / "raw" / "qwen" / "native_a" / "rep001.requests.csv"
    assert len(requests_csv.read_text().splitlines()) == 21
    pre = json.loads((root / "preflight" / "native_a.json").read_text())
    assert pre["checks"]["trtllm"]["models"][0]["checkpoint_quantization"] == "FP8"
    assert pre["checks"]["trtllm"]["dialect"]["name"] == "1.1"  # recorded in preflight
    assert pre["inside"]["software"]["tensorrt_llm"] == "1.1.0rc3"
    memory_tex = (root / "paper" / "tables" / "memory.tex").read_text()
    assert "KV-cache size" in memory_tex and "26.9" in memory_tex
    assert (root / "paper" / "paper.pdf").stat().st_size > 10000


def test_a_release_without_no_telemetry_runs_without_it(tmp_path):
    """Planted: a 1.3 release candidate from before TensorRT-LLM PR #12384, whose --help
    lacks --no-telemetry and which refuses it. Preflight passes and records the flag as
    omitted; the run, given preflight's finding (Workload.run_argv), leaves it out and
    succeeds; without it, the same run fails as the real tool would."""
    ckpt = tiny_checkpoint(tmp_path / "models")
    p = {"model": "Qwen/Qwen2-1.5B", "model_path": str(ckpt),
         "dataset_dir": str(tmp_path / "ds"), "num_requests": 20}
    env = standin_env(tmp_path, "1.3.0rc5", STANDIN_TRTLLM_WITHOUT="--no-telemetry")
    model = {"id": "a", "model": "x", "model_path": str(ckpt)}
    (tmp_path / "ds").mkdir()
    out, result = probe(tmp_path, [model], env, **{k: v for k, v in p.items()
                                                    if k != "model_path"})
    assert out.returncode == 0, out.stderr
    check = json.loads(result.read_text())
    assert check["omitted_flags"] == ["--no-telemetry"]
    assert trtllm.run_argv(check) == ["--omit-flags", '["--no-telemetry"]']
    trtllm.write_dataset({**trtllm.DEFAULTS, **p}, Path(trtllm.dataset_path(
        {**trtllm.DEFAULTS, **p})))
    argv, _ = workloads.build("trtllm", p, sys.executable, workloads.PROBE_DIR,
                              tmp_path / "run.json")
    refused = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert refused.returncode != 0 and "No such option: --no-telemetry" in refused.stderr
    ran = subprocess.run(argv + trtllm.run_argv(check), capture_output=True, text=True,
                         env=env)
    assert ran.returncode == 0, ran.stderr
    got = json.loads((tmp_path / "run.json").read_text())
    assert "--no-telemetry" not in got["bench_argv"] and got["omitted_flags"] == [
        "--no-telemetry"]
    assert workloads.detail("trtllm", got)["omitted_flags"] == ["--no-telemetry"]


def test_a_missing_required_flag_is_not_omitted():
    """Only a dialect's optional flags are left out: a missing --request_json stays a
    failure (host-side verdict, as doctor uses it)."""
    d = trtllm.dialect_for("1.3.0rc5")
    segs = trtllm.bench_segments({"model": "m", "dataset_dir": "/d"}, "/d/x", "/r", "/q", d)
    helps = {argv: " ".join(f for f in flags if f not in ("--no-telemetry", "--request_json"))
             for argv, flags in trtllm.help_commands(segs).items()}
    assert trtllm.flag_verdict(d, helps, segs) == (["--request_json"], ["--no-telemetry"])
    assert "--no-telemetry" not in trtllm.flatten(trtllm.omit_flags(segs, ["--no-telemetry"]))


def test_a_run_takes_the_omitted_flags_from_its_environments_preflight(tmp_path):
    """execution/preflight.run_argv: the run step reads what preflight found in the same
    environment (nothing where the record or the finding is absent)."""
    from containertax.campaign import config
    from containertax.core import records
    from containertax.execution import preflight
    from tests.test_doctor import spark_config

    c = config.load_file(spark_config(tmp_path))
    assert preflight.run_argv(c, "chroot", "trtllm") == []  # no preflight record yet
    records.write_json(c.paths.preflight("chroot"),
                       {"checks": {"trtllm": {"omitted_flags": ["--no-telemetry"]}}})
    records.write_json(c.paths.preflight("docker_baseline"), {"checks": {"trtllm": {}}})
    assert preflight.run_argv(c, "chroot", "trtllm") == ["--omit-flags", '["--no-telemetry"]']
    assert preflight.run_argv(c, "docker_baseline", "trtllm") == []
