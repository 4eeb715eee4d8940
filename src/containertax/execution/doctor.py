"""`containertax doctor CONFIG`: is this machine ready for the campaign (or the study), in
seconds, before any download or GPU hour?

One row per thing the campaign depends on: ok, a warning, or what fails with the command
that fixes it. It reuses the checks the workflow itself makes later (preflight's page-cache
and ulimit checks, hostcpus' performance cores, NVML through execution.gpu, the trtllm
dialect's flags against the image's own --help) so the two cannot disagree; what it adds is
that everything is asked at once, up front, on the host. Everything it reads of the host is
reached through `Host`, so tests plant each failure (a dev folder without nvidia-uvm, an
image whose --help lacks a flag, a missing checkpoint) without a GPU or a real image.
"""

from __future__ import annotations

import json
import platform
import re
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from containertax import runtimes
from containertax.campaign import quantise as planned
from containertax.campaign.config import Campaign
from containertax.core.errors import ContainertaxError
from containertax.execution import hostmemory, quantise
from containertax.runtimes import hostcpus
from containertax.workloads import checkpoints, trtllm

OK, WARN, FAIL = "ok", "warn", "FAIL"


@dataclass(frozen=True)
class Row:
    """One readiness check: its status, what was found, and the command that fixes it."""

    check: str
    status: str
    found: str
    fix: str = ""


@dataclass(frozen=True)
class ImageFacts:
    """What an image says of itself: its TensorRT-LLM version and each --help asked."""

    present: bool
    size_bytes: int = 0
    version: str | None = None
    helps: dict[tuple[str, ...], str] = field(default_factory=dict)
    error: str = ""


@dataclass
class Host:
    """Everything the doctor reads of the machine (the real one by default)."""

    root: Path = Path("/")             # /etc/os-release, /dev, /proc, /sys below it
    machine: str = field(default_factory=platform.machine)
    nvml: Any = None                   # the pynvml module; None: import it
    docker_info: Callable[[], dict[str, Any]] | None = None
    image: Callable[[str, list[tuple[str, ...]]], ImageFacts] | None = None
    free_bytes: Callable[[Path], int] | None = None

    def dev(self) -> Path:
        return self.root / "dev"


# --- the host's answers, by default the real ones ---------------------------------------

def _docker_info() -> dict[str, Any]:
    from containertax.runtimes.docker import docker_client

    return dict(docker_client().info())


HELP_MARK = "=== containertax doctor: "


def _image_facts(image: str, helps: list[tuple[str, ...]]) -> ImageFacts:
    """The image from the local engine: its size, then one throwaway container that prints
    TensorRT-LLM's version and every --help asked (seconds; nothing is downloaded)."""
    import docker

    from containertax.runtimes.docker import docker_client

    client = docker_client()
    try:
        img = client.images.get(image)
    except docker.errors.ImageNotFound:
        return ImageFacts(False)
    script = ["python3 -c \"import importlib.metadata as m; print('" + HELP_MARK
              + "version', m.version('tensorrt_llm'))\" 2>&1"]
    for argv in helps:
        mark = shlex.quote(HELP_MARK + json.dumps(list(argv)))
        script.append(f"echo {mark}; {' '.join(shlex.quote(a) for a in argv)} 2>&1")
    try:
        out = client.containers.run(img.id, ["sh", "-c", "; ".join(script)], remove=True,
                                    entrypoint=[], network_mode="none")
    except docker.errors.DockerException as exc:
        return ImageFacts(True, int(img.attrs.get("Size") or 0), error=str(exc))
    return parse_image_output(out.decode(errors="replace"), int(img.attrs.get("Size") or 0))


def parse_image_output(text: str, size: int) -> ImageFacts:
    """The version line and the --help sections of `_image_facts`' container."""
    version = None
    helps: dict[tuple[str, ...], str] = {}
    current: tuple[str, ...] | None = None
    for line in text.splitlines():
        if line.startswith(HELP_MARK + "version "):
            version = line.split()[-1]
        elif line.startswith(HELP_MARK):
            current = tuple(json.loads(line[len(HELP_MARK):]))
            helps[current] = ""
        elif current is not None:
            helps[current] += line + "\n"
    return ImageFacts(True, size, version, helps)


def _free(path: Path) -> int:
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


# --- the checks -------------------------------------------------------------------------

def os_row(host: Host) -> Row:
    release = host.root / "etc" / "os-release"
    info = dict(re.findall(r'^(\w+)="?([^"\n]*)"?$', release.read_text(), re.M)) \
        if release.exists() else {}
    name = info.get("PRETTY_NAME", "unknown OS")
    found = f"{name}, {host.machine}"
    dgx = info.get("ID") == "ubuntu" and info.get("VERSION_ID") == "24.04" \
        and host.machine == "aarch64"
    if dgx:
        return Row("OS and architecture", OK, found + " (DGX OS's base)")
    return Row("OS and architecture", WARN, found + ": not Ubuntu 24.04 on aarch64 (DGX OS); "
               "the Spark study's set-up (scripts/setup-spark.sh) is written for that")


def needs_gpu(campaign: Campaign) -> bool:
    return any(e.spec.get("gpu") or (e.spec.get("options") or {}).get("gpus") is not None
               or (e.spec.get("options") or {}).get("nvidia_devices")
               for e in campaign.environments)


def nvml_rows(host: Host, gpu: bool) -> list[Row]:
    """Driver and CUDA, and the NVML readings the gate and the telemetry use (GB10 answers
    some with Not Supported: those fall back, the temperature may not)."""
    from containertax.execution.gpu import NvmlGpu

    try:
        g = NvmlGpu(0, nvml=host.nvml)
    except Exception as exc:  # noqa: BLE001 - no library, no driver, no device
        status = FAIL if gpu else WARN
        return [Row("driver and CUDA (NVML)", status, f"no GPU through NVML ({exc})",
                    "install the NVIDIA driver (DGX OS ships it; nvidia-smi must list the "
                    "GPU), then sudo reboot")]
    ident, sample = g.identity(), g.sample()
    rows = [Row("driver and CUDA (NVML)", OK, f"{ident['name']}, driver {ident['driver']}, "
                f"CUDA {ident['cuda_driver']}")]
    if sample["gpu_temperature_c"] is None:
        rows.append(Row("NVML temperature (thermal gate)", FAIL, "Not Supported",
                        "set thermal.sensor: cpu (or none) in the config"))
    else:
        rows.append(Row("NVML temperature (thermal gate)", OK,
                        f"{sample['gpu_temperature_c']:.0f} C"))
    optional = {"power_w": "power (energy integrated from it)",
                "energy_mj": "energy counter", "gpu_mem_used_mib": "GPU memory",
                "sm_clock_mhz": "SM clock"}
    missing = [words for key, words in optional.items() if sample.get(key) is None]
    rows.append(Row("NVML fields", WARN if missing else OK,
                    ("not supported: " + ", ".join(missing) + " (recorded as missing, "
                     "with the fall-backs of execution/gpu.py)") if missing
                    else "power, energy, GPU memory, clocks"))
    return rows


def docker_rows(host: Host, campaign: Campaign) -> list[Row]:
    if not any(runtimes.get(e.kind).needs_image for e in campaign.environments):
        return []  # no image from the local engine: Docker is not needed
    try:
        info = (host.docker_info or _docker_info)()
    except Exception as exc:  # noqa: BLE001 - no engine: said with the fix
        return [Row("Docker Engine", FAIL, str(exc).splitlines()[0],
                    "sudo systemctl enable --now docker")]
    rows = [Row("Docker Engine", OK, f"{info.get('ServerVersion', '?')}, cgroup "
                f"{info.get('CgroupVersion', '?')} ({info.get('CgroupDriver', '?')} driver)")]
    wants = [e.id for e in campaign.environments
             if (e.spec.get("options") or {}).get("gpus") is not None]
    if wants:
        names = sorted((info.get("Runtimes") or {}).keys())
        cdi = info.get("CDISpecDirs")
        if "nvidia" in names or cdi:
            rows.append(Row("NVIDIA container runtime", OK, f"runtimes {', '.join(names)}"))
        else:
            rows.append(Row("NVIDIA container runtime", FAIL,
                            f"runtimes {', '.join(names) or 'none'}; --gpus of "
                            f"{', '.join(wants)} needs the NVIDIA Container Toolkit",
                            "sudo apt-get install -y nvidia-container-toolkit && sudo "
                            "nvidia-ctk runtime configure --runtime=docker && sudo "
                            "systemctl restart docker"))
    return rows


MEMORY_LIMIT_UNVERIFIED = (
    "whether GB10's unified-memory CUDA allocations count against the container's memory "
    "cgroup is unverified here: if they do, TensorRT-LLM, which sizes its KV cache from "
    "the device's free memory (torch.cuda.mem_get_info, blind to the cgroup), can grow "
    "past the limit and be OOM-killed; if not, the limit bounds only host-side "
    "allocations. Each run under a limit records its cgroup's peak and memory.events "
    "oom_kill beside the engine's own memory (memory_chain.cgroup_accounting: counted, "
    "not counted or unclear), so the campaign measures which")


def memory_limit_rows(host: Host, campaign: Any) -> list[Row]:
    """Environments with a memory limit (phase 2B's docker_memory_100g): Docker must apply
    it (docker info MemoryLimit, cgroup v2), and what it bounds on GB10 is unknown."""
    users = [(e.id, (e.spec.get("options") or {})["memory"]) for e in campaign.environments
             if runtimes.get(e.kind).needs_image and (e.spec.get("options") or {}).get(
                 "memory")]
    if not users:
        return []
    names = ", ".join(f"{env} (--memory {limit})" for env, limit in users)
    try:
        info = (host.docker_info or _docker_info)()
    except Exception:  # noqa: BLE001 - the Docker Engine row names it
        return []
    if info.get("MemoryLimit") is False:
        return [Row("memory limit", FAIL, f"{names}: Docker reports no memory limit support "
                    "(docker info: MemoryLimit false): --memory would not be applied",
                    "enable the memory cgroup controller (DGX OS's default cgroup v2 has "
                    "it), then sudo systemctl restart docker")]
    version = str(info.get("CgroupVersion"))
    other = "" if version == "2" else (
        f"cgroup version {version}, not DGX OS's v2: the limit is accounted otherwise than on "
        "the Spark; ")
    return [Row("memory limit", WARN, f"{names}: {other}{MEMORY_LIMIT_UNVERIFIED}")]


def images(campaign: Campaign) -> dict[str, list[str]]:
    """Each image and the environments that use it."""
    out: dict[str, list[str]] = {}
    for e in campaign.environments:
        if e.image:
            out.setdefault(e.image, []).append(e.id)
    return out


def bench_segments(campaign: Campaign, dialect: trtllm.Dialect) -> list[list[list[str]]]:
    """Every trtllm model's command in this dialect (as the probe will build it)."""
    out = []
    for m in campaign.models:
        if campaign.workload_kind(m.id) == "trtllm":
            p = {**trtllm.DEFAULTS, **campaign.workload_params(m.id)}
            out.append(trtllm.bench_segments(p, trtllm.dataset_path(p), "/r.json", "/q.json",
                                             dialect))
    return out


def image_rows(host: Host, campaign: Campaign) -> tuple[list[Row], int]:
    """The image present, its TensorRT-LLM version and dialect, and every flag the dialect
    passes against its own --help; the bytes of the root filesystems to export."""
    rows: list[Row] = []
    rootfs = 0
    trt = any(campaign.workload_kind(m.id) == "trtllm" for m in campaign.models)
    for image, envs in images(campaign).items():
        # every dialect's help commands: the version picks which to read
        helps: list[tuple[str, ...]] = []
        if trt:
            for d in trtllm.DIALECTS:
                for segs in bench_segments(campaign, d):
                    helps += [a for a in trtllm.help_commands(segs) if a not in helps]
        facts = (host.image or _image_facts)(image, helps)
        name = f"image {image}"
        if not facts.present:
            rows.append(Row(name, FAIL, f"not in the local Docker Engine ({', '.join(envs)})",
                            f"docker pull {image}"))
            continue
        if any(runtimes.get(campaign.environment(e).kind).image_step == "rootfs"
               for e in envs):
            rootfs += facts.size_bytes
        if facts.error:
            rows.append(Row(name, FAIL, f"present, but a container of it failed: "
                            f"{facts.error[:300]}", "docker info; docker run --rm "
                            f"{image} true"))
            continue
        if not trt:
            rows.append(Row(name, OK, "present"))
            continue
        try:
            dialect = trtllm.dialect_for(facts.version or "")
        except ValueError as exc:
            rows.append(Row(name, FAIL, f"TensorRT-LLM version {facts.version!r}: {exc}",
                            "use an image of TensorRT-LLM 1.0 or later (docs/dgx-spark.md)"))
            continue
        missing: list[str] = []
        omitted: list[str] = []
        for segs in bench_segments(campaign, dialect):
            mi, om = trtllm.flag_verdict(dialect, facts.helps, segs)
            missing += [f for f in mi if f not in missing]
            omitted += [f for f in om if f not in omitted]
        found = f"TensorRT-LLM {facts.version}, dialect {dialect.name}"
        if missing:
            rows.append(Row(name, FAIL, f"{found}: trtllm-bench --help lacks "
                            f"{', '.join(missing)}", "use a release whose trtllm-bench has "
                            "them, or remove the workload key that passes them"))
        elif omitted:
            rows.append(Row(name, WARN, f"{found}: --help lacks the optional "
                            f"{', '.join(omitted)}, which the runs leave out (telemetry is "
                            "off through TRTLLM_NO_USAGE_STATS and friends)"))
        else:
            rows.append(Row(name, OK, f"{found}: every flag in trtllm-bench --help"))
    return rows, rootfs


def checkpoint_rows(campaign: Campaign) -> tuple[list[Row], int]:
    """Each model's checkpoint at its model_path, its quantisation the declared one; a
    missing one named with the command that fetches (or makes) it, gated ones with their
    licence page; the bytes still to download."""
    rows: list[Row] = []
    to_fetch = 0
    for m in campaign.models:
        p = campaign.workload_params(m.id)
        path = p.get("model_path")
        if not path:
            continue
        declared = p.get("quantization")
        image = next((e.image for e in campaign.environments if e.image),
                     checkpoints.DEFAULT_IMAGE)
        source = checkpoints.source_of(str(p.get("model", "")), str(path), declared, image)
        name = f"checkpoint {m.id}"
        cfg = Path(path, "config.json")
        made = checkpoints.SOURCES.get(str(p.get("model", "")))
        gated = (f"  # gated: accept the licence at {source.licence}, then .venv/bin/hf "
                 "auth login" if source.licence else "")
        if not cfg.is_file() and isinstance(made, checkpoints.Quantised):
            # the workflow makes it (rules fetch_base and quantise) before any run reads it
            to_fetch += source.download_bytes
            rows.append(Row(name, WARN, f"not made yet: the workflow quantises "
                            f"{made.base} to {declared or made.qformat} at {path} before "
                            f"the first run that reads it (~{made.hours}, "
                            f"{source.download_bytes / 1e9:.0f} GB)",
                            f"to make it now: .venv/bin/snakemake --cores 1 "
                            f"{shlex.quote(planned.marker(str(path)))}{gated}"))
            continue
        if not cfg.is_file():
            to_fetch += source.download_bytes
            rows.append(Row(name, FAIL, f"no config.json at {path}",
                            source.command + gated))
            continue
        if quantise.made_by_double(str(path)):
            rows.append(Row(name, FAIL, f"{path} was written by a TEST DOUBLE of hf_ptq.py "
                            f"({planned.marker(str(path))}): no real weights",
                            f"rm -r {shlex.quote(str(path))} "
                            f"{shlex.quote(planned.marker(str(path)))}, then run the "
                            f"workflow without {quantise.DOUBLE_ENV}"))
            continue
        have = checkpoints.quantisation(Path(path))
        if not checkpoints.matches(declared, have):
            rows.append(Row(name, FAIL, f"{path} is {have or 'not quantised'}, the config "
                            f"says {declared or 'unquantised'}",
                            f"fix models[].quantization of {m.id}, or fetch the "
                            f"{declared} checkpoint: {source.command}"))
        else:
            rows.append(Row(name, OK, f"{path} ({have or 'unquantised'})"))
    return rows, to_fetch


def device_rows(host: Host, gpu: bool) -> list[Row]:
    if not gpu:
        return []
    uvm = host.dev() / "nvidia-uvm"
    if uvm.exists():
        return [Row("/dev/nvidia-uvm", OK, "present")]
    return [Row("/dev/nvidia-uvm", FAIL, f"{uvm} is missing (CUDA cannot start; it appears "
                "after the first CUDA program, or not at all after a reboot)",
                "sudo nvidia-modprobe -u -c=0")]


def cpu_rows(host: Host, campaign: Campaign) -> list[Row]:
    users = [e.id for e in campaign.environments
             if (e.spec.get("options") or {}).get("cpuset_cpus") == "performance"]
    if not users:
        return []
    try:
        cores, source = hostcpus.performance_cores(host.root / "sys" / "devices" / "system"
                                                   / "cpu")
    except hostcpus.CpuTopologyError as exc:
        return [Row("performance cores", FAIL, str(exc), "give the cores as a list in "
                    "options.cpuset_cpus of " + ", ".join(users) + " (lscpu -e)")]
    total = len(list((host.root / "sys" / "devices" / "system" / "cpu").glob("cpu[0-9]*")))
    if len(cores) == total:
        return [Row("performance cores", WARN, f"all {total} cores show the same {source}: "
                    "'performance' would pin every core",
                    "give the Cortex-X925 cores as a list in options.cpuset_cpus of "
                    + ", ".join(users) + " (lscpu -e)")]
    return [Row("performance cores", OK, f"{hostcpus.cpulist(cores)} (highest {source})")]


def cache_row(host: Host, campaign: Campaign) -> Row:
    mode = campaign.raw["memory"]["drop_page_cache"]
    permitted, why = hostmemory.drop_permitted(host.root / "proc")
    if permitted or mode == "never":
        return Row("drop the page cache", OK, "permitted" if permitted else "not asked")
    return Row("drop the page cache", FAIL if mode == "required" else WARN, why,
               "run the campaign as root on the host (sudo)")


def limit_rows(campaign: Campaign) -> list[Row]:
    rows = []
    for e in campaign.environments:
        runtime = runtimes.get(e.kind)  # the kind's own warnings, as preflight gives them
        for problem in runtime.warnings(e.id, e.spec) if runtime.warnings else []:
            rows.append(Row(f"options of {e.id}", WARN, problem,
                            "raise the engine's limit (LimitMEMLOCK=infinity in docker's "
                            "systemd unit)" if "ulimits" in problem else ""))
    return rows


def cells(campaign: Campaign) -> int:
    return campaign.repetitions * len(campaign.models) * len(campaign.environments)


def waiting_s(campaign: Campaign) -> float:
    """Per cell the least time between runs: the cooldown, and the minimum interval from
    the previous run's end where it is longer (the gate's temperature wait comes on top)."""
    t = campaign.thermal
    return max(float(t["cooldown_s"]), float(t["min_interval_s"]))


def run_bound_s(campaign: Campaign) -> float:
    """Every cell at its model's timeout: the most the runs can take."""
    return campaign.repetitions * len(campaign.environments) * sum(
        float(campaign.workload_params(m.id).get("timeout_s", campaign.workload["timeout_s"]))
        for m in campaign.models)


def hours(s: float) -> str:
    return f"{s / 3600:.0f} h ({s / 86400:.1f} days)"


def time_row(campaigns: list[Campaign]) -> Row:
    n = sum(cells(c) for c in campaigns)
    wait = sum(cells(c) * waiting_s(c) for c in campaigns)
    bound = sum(run_bound_s(c) for c in campaigns)
    return Row("projected wall time", OK,
               f"{n} runs: at least {hours(wait)} of cooldowns and minimum intervals alone, "
               f"plus the runs (at most {hours(bound)} at their timeouts) and each gate's "
               "wait for 45 C; `containertax rehearse` measures the runs")


def disk_row(host: Host, campaigns: list[Campaign], rootfs: int, fetch: int) -> Row:
    """Free space where the exported root filesystem and the checkpoints go (one disk
    assumed: the results folder's; the checkpoints' folder is said where it differs)."""
    copies = rootfs_copies(campaigns)
    where = campaigns[0].root.parent
    free = (host.free_bytes or _free)(where)
    need = rootfs + fetch
    unknown = " (an image not pulled yet: its size not counted)" if not rootfs else ""
    found = (f"{free / 1e9:.0f} GB free at {where}{unknown}; needed {need / 1e9:.0f} GB: exported "
             f"root filesystem {rootfs / 1e9:.0f} GB (the image's size, {copies} cop"
             f"{'y' if copies == 1 else 'ies'}: every campaign of the results folder "
             "hard-links one export), checkpoints still to fetch "
             f"{fetch / 1e9:.0f} GB (estimates)")
    if free < need:
        return Row("disk", FAIL, found, "free space, or set results_dir / model_path on a "
                   "larger disk")
    return Row("disk", OK, found)


def study_configs(path: Path) -> list[Path]:
    from containertax.campaign import configfile

    return configfile.study_campaigns(path) or [path]


def diagnose(config_path: Path, host: Host | None = None) -> list[Row]:
    """Every row for a campaign config, or for each campaign of a study config."""
    from containertax.campaign.config import load_file

    host = host or Host()
    campaigns: list[Campaign] = []
    rows: list[Row] = []
    for path in study_configs(config_path):
        try:
            campaigns.append(load_file(path))
        except ContainertaxError as exc:
            rows.append(Row(f"config {path}", FAIL, " ".join(str(exc).split()),
                            f".venv/bin/containertax check {path}"))
    if not campaigns:
        return rows
    rows.append(Row("config", OK, ", ".join(f"{c.name} ({cells(c)} runs)" for c in campaigns)))
    # one of everything: the study's campaigns share machine, images and models
    union = campaigns[-1] if len(campaigns) == 1 else _widest(campaigns)
    gpu = any(needs_gpu(c) for c in campaigns)
    rows.append(os_row(host))
    rows += nvml_rows(host, gpu)
    rows += device_rows(host, gpu)
    rows += docker_rows(host, union)
    image, rootfs = image_rows(host, union)
    rootfs *= rootfs_copies(campaigns)
    rows += image
    ckpt, fetch = checkpoint_rows(union)
    rows += ckpt
    rows += cpu_rows(host, _with_options(campaigns))
    rows += memory_limit_rows(host, _with_options(campaigns))
    rows.append(cache_row(host, union))
    rows += limit_rows(union)
    rows.append(disk_row(host, campaigns, rootfs, fetch))
    rows.append(time_row(campaigns))
    return rows


def rootfs_copies(campaigns: list[Campaign]) -> int:
    """How many copies of an image's exported root filesystem the campaigns hold on disk:
    one per results folder, since a campaign hard-links the export of another campaign of
    the same folder (runtimes/chroot.py export_rootfs)."""
    roots = {c.root.parent for c in campaigns
             if any(runtimes.get(e.kind).image_step == "rootfs" for e in c.environments)}
    return max(1, len(roots))


def _widest(campaigns: list[Campaign]) -> Campaign:
    """The campaign with the most models (the study's full suite): its models and images
    are those every other campaign uses."""
    return max(campaigns, key=lambda c: (len(c.models), len(c.environments)))


class _Union:
    """The environments of every campaign, for checks about options (2B's variants)."""

    def __init__(self, campaigns: list[Campaign]) -> None:
        seen: dict[str, Any] = {}
        for c in campaigns:
            for e in c.environments:
                seen.setdefault(e.id, e)
        self.environments = list(seen.values())


def _with_options(campaigns: list[Campaign]) -> Any:
    return _Union(campaigns)


def failed(rows: list[Row]) -> bool:
    return any(r.status == FAIL for r in rows)


def render(rows: list[Row]) -> str:
    """The table, one row per check (Markdown), and the verdict."""
    lines = ["| check | status | found | fix |", "|---|---|---|---|"]
    for r in rows:
        cells_ = [r.check, r.status, r.found, f"`{r.fix}`" if r.fix and "`" not in r.fix
                  else r.fix]
        lines.append("| " + " | ".join(c.replace("|", "/").replace("\n", " ")
                                       for c in cells_) + " |")
    bad = [r.check for r in rows if r.status == FAIL]
    lines += ["", f"Not ready: {len(bad)} check(s) fail ({', '.join(bad)})." if bad
              else "Ready: every check passes (warnings are said above)."]
    return "\n".join(lines)


def doctor(config_path: Path, host: Host | None = None) -> tuple[str, int]:
    rows = diagnose(config_path, host)
    return render(rows), (1 if failed(rows) else 0)


