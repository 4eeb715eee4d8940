"""`containertax doctor`: every check against a stand-in machine (a root folder with
os-release, /dev, /proc/sys/vm and the CPU topology; a fake NVML; a Docker Engine's info; an
image whose trtllm-bench is the stand-in of tests/data/trtllm) that is ready, then with each
failure planted, one at a time: the row names it, with its fix, and the exit status is 1."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from containertax.execution import doctor
from containertax.workloads import checkpoints
from tests.conftest import DEMO_IMAGE, REPO, needs_docker
from tests.test_trtllm import standin_env, tiny_checkpoint

VERSION = "1.3.0rc13"


class FakeNvml:
    """pynvml as a GB10 answers it (device memory Not Supported), or with no GPU."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 1, 0
    NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL = 0, 1

    def __init__(self, gpu: bool = True, temperature: bool = True) -> None:
        self.gpu, self.temperature = gpu, temperature

    def __getattr__(self, name: str) -> Any:
        def unsupported(*_: Any) -> Any:
            raise RuntimeError("Not Supported")
        return unsupported

    def nvmlInit(self) -> None:  # noqa: N802 - NVML's names
        if not self.gpu:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:  # noqa: N802
        return i

    def nvmlDeviceGetName(self, h: int) -> str:  # noqa: N802
        return "NVIDIA GB10"

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        return "580.95.05"

    def nvmlSystemGetCudaDriverVersion(self) -> int:  # noqa: N802
        return 13000

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:  # noqa: N802
        if not self.temperature:
            raise RuntimeError("Not Supported")
        return 38

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:  # noqa: N802
        return 11000


def fake_root(tmp_path: Path, uvm: bool = True, capacities: tuple[int, ...] = (1024, 1024,
                                                                               700, 700)) -> Path:
    root = tmp_path / "host"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "os-release").write_text(
        'PRETTY_NAME="Ubuntu 24.04.3 LTS"\nID=ubuntu\nVERSION_ID="24.04"\n')
    (root / "dev").mkdir()
    if uvm:
        (root / "dev" / "nvidia-uvm").write_text("")
    (root / "proc" / "sys" / "vm").mkdir(parents=True)
    (root / "proc" / "sys" / "vm" / "drop_caches").write_text("")
    cpu = root / "sys" / "devices" / "system" / "cpu"
    for i, cap in enumerate(capacities):
        (cpu / f"cpu{i}").mkdir(parents=True)
        (cpu / f"cpu{i}" / "cpu_capacity").write_text(f"{cap}\n")
    (cpu / "online").write_text(f"0-{len(capacities) - 1}\n")
    return root


def standin_image(tmp_path: Path, version: str = VERSION, without: str | None = None,
                  present: bool = True) -> Any:
    """The image as `doctor` asks it: the stand-in trtllm-bench's --help texts."""
    extra = {"STANDIN_TRTLLM_WITHOUT": without} if without else {}
    env = standin_env(tmp_path, version, **extra)

    def facts(image: str, helps: list[tuple[str, ...]]) -> doctor.ImageFacts:
        if not present:
            return doctor.ImageFacts(False)
        texts = {argv: subprocess.run(list(argv), capture_output=True, text=True,
                                      env=env).stdout for argv in helps}
        return doctor.ImageFacts(True, 30 * 10**9, version, texts)
    return facts


def docker_info(nvidia: bool = True) -> dict[str, Any]:
    runtimes = {"runc": {}, **({"nvidia": {}} if nvidia else {})}
    return {"ServerVersion": "28.3.3", "CgroupVersion": "2", "CgroupDriver": "systemd",
            "Runtimes": runtimes}


def spark_config(tmp_path: Path, **change: Any) -> Path:
    """config/config.yaml with its checkpoints in tmp_path (two models: one FP8)."""
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    models = tmp_path / "models"
    tiny_checkpoint(models, "small")
    tiny_checkpoint(models, "fp8", "FP8")
    cfg["models"] = [
        {"id": "small", "model": "Qwen/Qwen2-1.5B-Instruct", "model_path": str(models / "small"),
         "max_batch_size": 8},
        {"id": "fp8", "model": "nvidia/Llama-3.1-8B-Instruct-FP8",
         "model_path": str(models / "fp8"), "quantization": "fp8", "max_batch_size": 8}]
    cfg["environments"]["docker_optimised"] = {
        "extends": "docker_baseline", "declared_by_hand": True, "options": {}}
    cfg["results_dir"] = str(tmp_path / "results")
    cfg["results_dir_absolute"] = True
    for key, value in change.items():
        cfg[key] = value
    path = tmp_path / "spark.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def host(tmp_path: Path, **change: Any) -> doctor.Host:
    tmp_path.mkdir(parents=True, exist_ok=True)
    base: dict[str, Any] = {"root": fake_root(tmp_path), "machine": "aarch64",
                            "nvml": FakeNvml(), "docker_info": docker_info,
                            "image": standin_image(tmp_path),
                            "free_bytes": lambda _: 10**13}
    return doctor.Host(**{**base, **change})


def rows_of(config: Path, h: doctor.Host) -> dict[str, doctor.Row]:
    return {r.check: r for r in doctor.diagnose(config, h)}


def test_a_ready_machine_passes_every_check(tmp_path):
    config = spark_config(tmp_path)
    rows = rows_of(config, host(tmp_path))
    assert not [r for r in rows.values() if r.status == doctor.FAIL], rows
    image = rows["image nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc13"]
    assert "TensorRT-LLM 1.3.0rc13, dialect 1.3" in image.found and image.status == "ok"
    assert rows["checkpoint fp8"].status == "ok" and "(FP8)" in rows["checkpoint fp8"].found
    assert rows["OS and architecture"].status == "ok"
    assert rows["NVML temperature (thermal gate)"].found == "38 C"
    assert "energy counter" in rows["NVML fields"].found  # GB10: Not Supported, a warning
    assert rows["projected wall time"].found.startswith("180 runs: at least 15 h ")
    table, code = doctor.doctor(config, host(tmp_path / "again"))
    assert code == 0 and table.splitlines()[-1].startswith("Ready")


PLANTED = {
    "flag missing from --help": (
        {"image_without": "--request_json"},
        "image nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc13",
        "trtllm-bench --help lacks --request_json", "use a release"),
    "image not pulled": (
        {"image_present": False},
        "image nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc13",
        "not in the local Docker Engine", "docker pull nvcr.io/nvidia/tensorrt-llm"),
    "TensorRT-LLM too old": (
        {"image_version": "0.21.0"},
        "image nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc13",
        "older than the releases", "1.0 or later"),
    "checkpoint missing": (
        {"delete": "small"}, "checkpoint small", "no config.json at",
        ".venv/bin/hf download Qwen/Qwen2-1.5B-Instruct --include '*.json'"),
    "checkpoint of another quantisation": (
        {"unquantise": "fp8"}, "checkpoint fp8", "is not quantised, the config says fp8",
        "fix models[].quantization of fp8"),
    "no /dev/nvidia-uvm": (
        {"uvm": False}, "/dev/nvidia-uvm", "is missing", "sudo nvidia-modprobe -u -c=0"),
    "no GPU through NVML": (
        {"nvml": FakeNvml(gpu=False)}, "driver and CUDA (NVML)",
        "NVML Shared Library Not Found", "install the NVIDIA driver"),
    "no temperature": (
        {"nvml": FakeNvml(temperature=False)}, "NVML temperature (thermal gate)",
        "Not Supported", "thermal.sensor: cpu"),
    "no NVIDIA runtime": (
        {"docker_info": lambda: docker_info(nvidia=False)}, "NVIDIA container runtime",
        "needs the NVIDIA Container Toolkit", "nvidia-ctk runtime configure"),
    "no Docker Engine": (
        {"docker_info": lambda: (_ for _ in ()).throw(RuntimeError("cannot connect"))},
        "Docker Engine", "cannot connect", "systemctl enable --now docker"),
    "page cache not droppable, required": (
        {"no_drop_caches": True, "memory": {"drop_page_cache": "required"}},
        "drop the page cache", "drop_caches does not exist", "sudo"),
    "disk too small": (
        {"free_bytes": lambda _: 10**9, "delete": "small"}, "disk",
        "1 GB free", "larger disk"),
}


@pytest.mark.parametrize("case", PLANTED)
def test_each_planted_failure_is_named_with_its_fix(tmp_path, case):
    plant, check, found, fix = PLANTED[case]
    change = {k: v for k, v in plant.items() if k in ("memory",)}
    config = spark_config(tmp_path, **change)
    h = host(tmp_path, **{k: v for k, v in plant.items()
                          if k in ("nvml", "docker_info", "free_bytes")})
    if "image_without" in plant or "image_version" in plant or "image_present" in plant:
        h.image = standin_image(tmp_path, plant.get("image_version", VERSION),
                                plant.get("image_without"), plant.get("image_present", True))
    if "uvm" in plant:
        h.root = fake_root(tmp_path / "other", uvm=False)
    if "no_drop_caches" in plant:  # a container's /proc without it (root writes any file)
        (h.root / "proc" / "sys" / "vm" / "drop_caches").unlink()
    if "delete" in plant:
        shutil.rmtree(tmp_path / "models" / plant["delete"])
    if "unquantise" in plant:
        (tmp_path / "models" / plant["unquantise"] / "hf_quant_config.json").unlink()
    rows = rows_of(config, h)
    row = rows[check]
    assert row.status == doctor.FAIL, row
    assert found in row.found, row
    assert fix in row.fix, row
    failing = [r.check for r in rows.values() if r.status == doctor.FAIL]
    assert failing == [check] or case == "disk too small" and check in failing, failing
    table, code = doctor.doctor(config, h)
    assert code == 1 and f"Not ready: 1 check(s) fail ({check})" in table \
        or case == "disk too small"


def test_an_optional_flag_missing_is_a_warning_not_a_failure(tmp_path):
    """A 1.3 release candidate from before --no-telemetry: the runs leave it out."""
    h = host(tmp_path, image=standin_image(tmp_path, "1.3.0rc5", "--no-telemetry"))
    row = rows_of(spark_config(tmp_path), h)[
        "image nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc13"]
    assert row.status == doctor.WARN and "optional --no-telemetry" in row.found


def test_uniform_cores_warn_for_the_cpuset_variant(tmp_path):
    """Phase 2B's docker_cpuset_perf on a machine whose cores all look alike."""
    config = REPO / "config" / "study-spark.yaml"
    h = host(tmp_path, root=fake_root(tmp_path / "u", capacities=(1024,) * 4))
    rows = rows_of(config, h)
    assert rows["performance cores"].status == doctor.WARN
    assert "all 4 cores show the same cpu_capacity" in rows["performance cores"].found
    h = host(tmp_path / "b")
    assert rows_of(config, h)["performance cores"].found == "0-1 (highest cpu_capacity)"


def test_the_study_counts_every_phase_and_its_downloads(tmp_path):
    """The Spark study: 2A, 2F (issue #40's falsifiers), 2B (the factorial), 2C and 2D,
    1,480 runs, the 5-minute interval alone 123 h; the checkpoints missing here (all of
    them) named with their commands, the two FP8 models no one publishes with the
    workflow's target that makes them (rules fetch_base and quantise)."""
    rows = rows_of(REPO / "config" / "study-spark.yaml", host(tmp_path))
    assert rows["config"].found.count("runs)") == 5
    assert "dgx-spark-2f (160 runs)" in rows["config"].found
    assert rows["projected wall time"].found.startswith("1480 runs: at least 123 h ")
    mixtral = rows["checkpoint mixtral-8x7b"]  # the workflow's rule quantise makes it
    assert mixtral.status == doctor.WARN and "the workflow quantises" in mixtral.found
    assert "snakemake --cores 1 /models/Mixtral-8x7B-Instruct-v0.1-FP8.quantised.json" \
        in mixtral.fix and "gated: accept the licence at https://huggingface.co/mistralai/" \
        in mixtral.fix
    assert "gated" not in rows["checkpoint qwen2-1.5b"].fix
    assert "--exclude 'original/*'" in rows["checkpoint llama-3-8b"].fix


def test_every_suite_model_has_a_source():
    """Each model of config/config.yaml is published or made by a named recipe."""
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    for m in cfg["models"]:
        assert m["model"] in checkpoints.SOURCES, m["id"]
        made = checkpoints.SOURCES[m["model"]]
        if isinstance(made, checkpoints.Quantised):
            assert made.qformat == m["quantization"]


def test_image_output_is_read_back():
    text = (f"banner\n{doctor.HELP_MARK}version 1.3.0rc13\n"
            f'{doctor.HELP_MARK}["trtllm-bench", "--help"]\n  --model TEXT\n')
    facts = doctor.parse_image_output(text, 5)
    assert facts.version == "1.3.0rc13"
    assert facts.helps == {("trtllm-bench", "--help"): "  --model TEXT\n"}


def test_no_nvml_on_a_cpu_campaign_is_only_a_warning(tmp_path):
    rows = doctor.nvml_rows(SimpleNamespace(nvml=FakeNvml(gpu=False)), gpu=False)
    assert rows[0].status == doctor.WARN


@needs_docker
@pytest.mark.docker
def test_the_image_is_asked_in_one_throwaway_container():
    """The real path: one container of the image prints the version line and each --help
    asked (the demo image has no TensorRT-LLM: no version; its sh answers the 'help')."""
    facts = doctor._image_facts(DEMO_IMAGE, [("sh", "-c", "echo '  --model TEXT'")])
    assert facts.present and facts.size_bytes > 0 and facts.version is None
    assert facts.helps == {("sh", "-c", "echo '  --model TEXT'"): "  --model TEXT\n"}
    assert not doctor._image_facts("containertax-absent:none", []).present
