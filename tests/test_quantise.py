"""The quantised checkpoints no one publishes (Mixtral-8x7B and Qwen2.5-72B in FP8), made by
the workflow's rule quantise once, before any run reads them, with a TEST DOUBLE of Model
Optimizer's hf_ptq.py (tests/doubles/hf_ptq: it takes the real script's arguments and
writes a unified checkpoint's layout, no weights). hf_ptq.py itself cannot run here: no
GPU that runs it. Each planted failure of the quantiser is named and leaves no marker."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from containertax.campaign import quantise as planned
from containertax.execution import doctor, quantise
from containertax.workloads import checkpoints
from tests.conftest import REPO
from tests.test_doctor import host, rows_of, spark_config
from tests.test_trtllm import tiny_checkpoint

DOUBLE = str(REPO / "tests" / "doubles" / "hf_ptq")
MIXTRAL = "mistralai/Mixtral-8x7B-Instruct-v0.1"


def mixtral(tmp_path: Path) -> tuple[str, str]:
    """A base checkpoint where the rule looks for it; the quantised folder's path."""
    models = tmp_path / "models"
    tiny_checkpoint(models, "Mixtral-8x7B-Instruct-v0.1", arch="MixtralForCausalLM")
    base = models / "Mixtral-8x7B-Instruct-v0.1"
    return str(base), f"{base}-FP8"


def test_the_arguments_are_hf_ptqs_and_the_base_is_the_local_folder():
    """What hf_ptq.py's argparse declares (Model-Optimizer 9196696d): the local base folder
    in, fp8 weights and KV cache, the model_path out; run in the image with both folders
    bound and the playbook's ulimits."""
    q = checkpoints.SOURCES[MIXTRAL]
    assert isinstance(q, checkpoints.Quantised)
    dest = "/models/Mixtral-8x7B-Instruct-v0.1-FP8"
    base = checkpoints.base_path(q, dest)
    assert base == "/models/Mixtral-8x7B-Instruct-v0.1"
    assert checkpoints.hf_ptq_args(q, base, dest) == [
        "--pyt_ckpt_path", base, "--qformat", "fp8", "--kv_cache_qformat", "fp8",
        "--export_path", dest]
    argv = checkpoints.quantise_argv(q, base, dest, checkpoints.DEFAULT_IMAGE)
    assert argv[:2] == ["docker", "run"] and "-v" in argv and "/models:/models" in argv
    assert "memlock=-1" in argv and checkpoints.DEFAULT_IMAGE in argv
    assert f"hf_ptq.py --pyt_ckpt_path {base} --qformat fp8" in argv[-1]


def test_the_step_with_the_double_writes_the_checkpoint_and_its_marker(tmp_path, monkeypatch):
    base, dest = mixtral(tmp_path)
    monkeypatch.setenv(quantise.DOUBLE_ENV, DOUBLE)
    log = tmp_path / "q.log"
    done = quantise.quantise(MIXTRAL, dest, checkpoints.DEFAULT_IMAGE, str(log))
    assert checkpoints.quantisation(Path(dest)) == "FP8"
    marker = json.loads(Path(planned.marker(dest)).read_text())
    assert marker == done
    assert marker["test_double"] is True and marker["quantiser"] == f"TEST DOUBLE {DOUBLE}"
    assert marker["command"] == [DOUBLE, "--pyt_ckpt_path", base, "--qformat", "fp8",
                                 "--kv_cache_qformat", "fp8", "--export_path", dest]
    assert marker["bytes"] > 0 and marker["quant_algo"] == "FP8"
    text = log.read_text()
    assert text.startswith(f"$ {DOUBLE} --pyt_ckpt_path") and "hf_ptq TEST DOUBLE" in text


PLANTED = {
    "the quantiser fails": ("exit", "exited with status 3"),
    "another quantisation": ("wrong-quant", "is NVFP4"),
    "no weights": ("no-shards", "no .safetensors"),
}


@pytest.mark.parametrize("case", PLANTED)
def test_a_failed_or_wrong_quantisation_is_named_and_leaves_no_marker(tmp_path, monkeypatch,
                                                                        case):
    plant, message = PLANTED[case]
    _, dest = mixtral(tmp_path)
    monkeypatch.setenv(quantise.DOUBLE_ENV, DOUBLE)
    monkeypatch.setenv("HF_PTQ_DOUBLE_PLANT", plant)
    with pytest.raises(quantise.QuantiseError, match=re.escape(message)):
        quantise.quantise(MIXTRAL, dest, checkpoints.DEFAULT_IMAGE, str(tmp_path / "q.log"))
    assert not Path(planned.marker(dest)).exists()


def test_no_base_checkpoint_is_named_with_its_download(tmp_path, monkeypatch):
    monkeypatch.setenv(quantise.DOUBLE_ENV, DOUBLE)
    dest = str(tmp_path / "models" / "Mixtral-8x7B-Instruct-v0.1-FP8")
    with pytest.raises(quantise.QuantiseError, match="no base checkpoint at .*hf download "
                       "mistralai/Mixtral-8x7B-Instruct-v0.1"):
        quantise.quantise(MIXTRAL, dest, checkpoints.DEFAULT_IMAGE, str(tmp_path / "q.log"))


def campaign_with_mixtral(tmp_path: Path) -> tuple[Path, str]:
    config = spark_config(tmp_path)
    cfg = yaml.safe_load(config.read_text())
    _, dest = mixtral(tmp_path)
    cfg["models"].append({"id": "mixtral-8x7b", "model": MIXTRAL, "model_path": dest,
                          "quantization": "fp8", "max_batch_size": 8})
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return config, dest


def smk(tmp_path: Path, config: Path, *args: str, env: dict[str, str] | None = None):
    return subprocess.run([sys.executable, "-m", "snakemake", *args, "--snakefile",
                           str(REPO / "Snakefile"), "--directory", str(tmp_path),
                           "--configfile", str(config)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def test_the_workflow_quantises_once_before_any_preflight(tmp_path):
    """The campaign's plan runs quantise before every environment's preflight and before
    the model's dataset (whose inputs the marker is); the rule, run with the double, makes
    it once and a second plan has no quantise job; the log and the command are beside the
    checkpoint."""
    config, dest = campaign_with_mixtral(tmp_path)
    plan = smk(tmp_path, config, "-n", "-p")
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert re.search(r"rule quantise:\n.*\n    output: " + re.escape(dest), plan.stdout)
    # the lanes' resources, as every cell step takes them: never beside a measured run
    assert re.search(r"resources: tmpdir=/tmp, lane\w*=1\n",
                     plan.stdout.split("rule quantise:")[1])
    preflights = plan.stdout.split("rule preflight:")[1:]
    assert len(preflights) == 3 and all(planned.marker(dest) in p.split("output:")[0]
                                        for p in preflights)
    # the dataset reads the checkpoint's vocabulary: Mixtral's waits for the quantisation
    datasets = [d.split("output:")[0] for d in plan.stdout.split("rule dataset:")[1:]]
    assert sum(planned.marker(dest) in d for d in datasets) == 1, datasets
    made = smk(tmp_path, config, "--cores", "1", planned.marker(dest),
               env={quantise.DOUBLE_ENV: DOUBLE})
    assert made.returncode == 0, made.stderr[-3000:]
    assert json.loads(Path(planned.marker(dest)).read_text())["test_double"] is True
    assert "hf_ptq TEST DOUBLE" in Path(dest + ".quantise.log").read_text()
    again = smk(tmp_path, config, "-n")
    assert again.returncode == 0 and "rule quantise:" not in again.stdout


def test_the_study_plans_both_checkpoints_before_phase_2d():
    """`snakemake -n` of the default study: a download and a quantisation for each of
    Mixtral and Qwen2.5-72B, and 2D's campaign job waits for both markers."""
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--snakefile",
                          str(REPO / "Snakefile"), "--directory", str(REPO)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out.stdout, re.M))
    assert jobs["fetch_base"] == "2" and jobs["quantise"] == "2"
    d2 = out.stdout.split("output: results/study-spark/campaigns/dgx-spark.json")[1]
    reason = d2.split("reason:")[1].splitlines()[0]
    assert "/models/Mixtral-8x7B-Instruct-v0.1-FP8.quantised.json" in reason
    assert "/models/Qwen2.5-72B-Instruct-FP8.quantised.json" in reason


def test_doctor_says_the_workflow_makes_it_and_fails_a_doubles_checkpoint(tmp_path,
                                                                           monkeypatch):
    config, dest = campaign_with_mixtral(tmp_path)
    row = rows_of(config, host(tmp_path))["checkpoint mixtral-8x7b"]
    assert row.status == doctor.WARN and "not made yet: the workflow quantises" in row.found
    assert f"snakemake --cores 1 {planned.marker(dest)}" in row.fix
    assert "accept the licence at https://huggingface.co/mistralai/" in row.fix
    # planted: the double's checkpoint left where the runs would read it
    monkeypatch.setenv(quantise.DOUBLE_ENV, DOUBLE)
    quantise.quantise(MIXTRAL, dest, checkpoints.DEFAULT_IMAGE, str(tmp_path / "q.log"))
    row = rows_of(config, host(tmp_path / "h2"))["checkpoint mixtral-8x7b"]
    assert row.status == doctor.FAIL and "TEST DOUBLE" in row.found
    assert f"without {quantise.DOUBLE_ENV}" in row.fix


def test_the_configs_quantization_is_the_one_made(tmp_path, monkeypatch):
    """The fallback for Mixtral on GB10 (docs/dgx-spark.md, models at risk): the config says
    nvfp4 at another model_path; the job quantises to NVFP4 (weights and KV cache), and the
    check holds the checkpoint to that format."""
    from containertax.campaign.config import load_file

    config, _ = campaign_with_mixtral(tmp_path)
    cfg = yaml.safe_load(config.read_text())
    dest = str(tmp_path / "models" / "Mixtral-8x7B-Instruct-v0.1-NVFP4")
    cfg["models"][-1].update(model_path=dest, quantization="nvfp4")
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    job = planned.jobs(load_file(config))[dest]
    assert job.qformat == "nvfp4" and job.base.endswith("/models/Mixtral-8x7B-Instruct-v0.1")
    monkeypatch.setenv(quantise.DOUBLE_ENV, DOUBLE)
    done = quantise.quantise(MIXTRAL, dest, job.image, str(tmp_path / "q.log"), job.qformat)
    assert done["quant_algo"] == "NVFP4" and "--kv_cache_qformat" in done["command"]
    assert done["command"][done["command"].index("--qformat") + 1] == "nvfp4"
