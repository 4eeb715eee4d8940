"""What every launcher shares, whatever the kind: the Launch (a command and the host folders
it needs), the Outcome with the timeline's marks, the process-group runner, the variables
the project adds in every environment, the binds of probe, work and cache folders, and the
labels naming who made a container. Each kind's own launcher lives in its module
(native.py NativeLauncher, chroot.py ChrootLauncher, docker.py DockerLauncher, command.py
CommandLauncher for the runtimes started by their command line), declared as its
`Runtime.launcher_class`; execution/environments.py picks it through the registry.

This sits in the runtimes layer, below `campaign`: a launcher is handed its campaign and
environment (campaign.config's Campaign and Environment) and reads only their attributes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from containertax.core.errors import ContainertaxError
from containertax.runtimes import hostcpus, passthrough

INSIDE = Path("/containertax")  # not under /opt: GPU hosts bind their /opt read-only
# usage telemetry off in every environment, whatever the release: TensorRT-LLM's usage
# module reads these three (tensorrt_llm/usage/usage_lib.py, is_usage_stats_enabled, @
# cb61a8a1f19584170756c26dfdfd93133a488efe: TRTLLM_NO_USAGE_STATS == "1", TELEMETRY_DISABLED
# in ("1", "true"), DO_NOT_TRACK == "1"); the 1.3 dialect also passes --no-telemetry
TELEMETRY_OPT_OUT = {"TRTLLM_NO_USAGE_STATS": "1", "TELEMETRY_DISABLED": "1",
                     "DO_NOT_TRACK": "1"}
# what the project adds in every environment (never PATH and friends: an image's own ENV
# carries its libraries, MPI and CUDA settings, and Docker keeps it)
PROJECT_ENV = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", **TELEMETRY_OPT_OUT}
# Docker's own defaults for a container whose image does not set them (moby: the default
# PATH of oci defaults, HOME of the user): the chroot gets the same
DOCKER_DEFAULT_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
}
BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "HOME": "/root",
    **PROJECT_ENV,
}
LABEL = "containertax.campaign"



class EnvironmentFailure(ContainertaxError, RuntimeError):
    """An environment that cannot launch; the message names the config key to fix."""


@dataclass
class Launch:
    """A command to run in an environment, with the host folders it needs."""

    argv: list[str]
    probe_dir: Path
    work_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 3600.0
    label: str = ""
    # the cell's lane (campaign.lanes): the one GPU the process may see (its UUID where NVML
    # knows it, else the configured index), that GPU's /dev/nvidia<minor>, and its cores
    gpu: str | None = None
    gpu_minor: int | None = None
    cpuset: str | None = None
    # the campaign's compile cache, read-write, at cache_inside() (its host path) in every
    # environment
    cache_dir: Path | None = None


@dataclass
class Outcome:
    returncode: int
    launched_unix: float
    exited_unix: float
    wall_s: float
    output: str
    resolved: dict[str, Any]
    timed_out: bool = False
    phases_s: dict[str, float] = field(default_factory=dict)
    # the launcher's marks on CLOCK_MONOTONIC (workloads/timeline.py): launch, created
    # (Docker), started, exited, removed (Docker)
    marks: dict[str, float] = field(default_factory=dict)


def image_config(attrs: dict[str, Any]) -> dict[str, Any]:
    """An image's run-time environment from its metadata (`docker image inspect`): ENV as a
    mapping, WORKDIR, ENTRYPOINT and CMD (Docker runs ENTRYPOINT with the workload's argv;
    the chroot does the same, ChrootLauncher.script)."""
    cfg = attrs.get("Config") or {}
    env = dict(item.split("=", 1) for item in cfg.get("Env") or [] if "=" in item)
    return {"env": env, "working_dir": cfg.get("WorkingDir") or "/",
            "entrypoint": list(cfg.get("Entrypoint") or []), "cmd": list(cfg.get("Cmd") or [])}


def telemetry_state(env: dict[str, str]) -> dict[str, Any]:
    """What the process was given to keep usage telemetry off (the provenance of the
    opt-out); `off` is false where a config's env overrode one of the variables."""
    seen = {k: env.get(k) for k in TELEMETRY_OPT_OUT}
    return {"env": seen, "off": seen == TELEMETRY_OPT_OUT}



class Launcher:
    """One environment's launcher: its campaign (campaign.config.Campaign), its environment
    (campaign.config.Environment) and its kind's declaration (runtimes.base.Runtime)."""

    def __init__(self, campaign: Any, env: Any, runtime: Any) -> None:
        self.campaign = campaign
        self.env = env
        self.kind = env.kind
        self.runtime = runtime

    def preflight(self) -> dict[str, Any]:
        """What this environment checks before any cell beyond starting the workload
        (facts for the preflight record; raises EnvironmentFailure with the fix)."""
        return {}

    def inside(self, probe_dir: Path, work_dir: Path) -> tuple[Path, Path]:
        """Where the host's probe and work folders appear to the process under test."""
        return INSIDE / "probe", INSIDE / "work"

    def cache_inside(self, cache_dir: Path) -> Path:
        """Where the campaign's compile cache (Launch.cache_dir) appears: at its own host
        path in every kind (parity by construction). Inductor keys a kernel's autotuned
        .best_config by the folder of the kernel's file, so a cache bound elsewhere (the
        old /containertax/cache) missed what native had tuned (issue #40); Docker's
        options.cache_mount: inside keeps that old path as a declared factor."""
        return cache_dir

    def environment_vars(self, launch: Launch) -> dict[str, str]:
        return {**BASE_ENV, **launch.env, **self.env.spec.get("env", {}),
                **visible_gpu_env(launch.gpu)}

    def describe(self) -> dict[str, Any]:
        return {"id": self.env.id, "kind": self.kind, "spec": self.env.spec}

    def run(self, launch: Launch) -> Outcome:
        raise NotImplementedError



def visible_gpu_env(gpu: str | None) -> dict[str, str]:
    """Only the lane's GPU, for CUDA (and, in Docker, the NVIDIA Container Toolkit); PCI
    order makes an index mean what NVML and nvidia-smi mean by it."""
    if gpu is None:
        return {}
    return {"CUDA_VISIBLE_DEVICES": gpu, "NVIDIA_VISIBLE_DEVICES": gpu,
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def _die_with_parent() -> None:
    """In the child: SIGKILL when the launching process dies (even by SIGKILL), so that an
    interrupted campaign leaves no workload running beside the next one."""
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def run_process(argv: list[str], env: dict[str, str], timeout_s: float,
                 cpuset: str | None = None, marks: dict[str, float] | None = None) -> tuple:
    """Run argv in its own process group (on the lane's cores, where it has a cpuset);
    kill the whole group on timeout or Ctrl-C. marks: filled with the timeline's launch,
    started (Popen returned: the child has exec'd), exited (the process itself exited,
    seen by waitid without reaping it) and output_closed (the last holder of its output
    pipe gone: children it left, such as torch.compile's worker pool, keep the pipe open
    after it exits; in Docker the kernel kills them with the container's first process).
    The wall time ends at exited, as a container's ends when its first process exits."""
    marks = {} if marks is None else marks
    cpus = hostcpus.parse_cpulist(cpuset) if cpuset else None

    def preexec() -> None:
        _die_with_parent()
        if cpus:
            os.sched_setaffinity(0, cpus)

    launched = time.time()
    t0 = marks["launch"] = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=preexec,
        )
        marks["started"] = time.monotonic()
    except OSError as exc:  # e.g. a native environment's python that does not exist
        raise EnvironmentFailure(f"cannot start {argv[0]!r}: {exc.strerror}") from None
    waiter = threading.Thread(target=_mark_exit, args=(proc.pid, marks), daemon=True)
    waiter.start()
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    marks["output_closed"] = time.monotonic()
    waiter.join(timeout=5)
    marks.setdefault("exited", marks["output_closed"])  # reaped before waitid saw it
    wall = marks["exited"] - t0  # one reading: the timeline's phases add up to it
    return proc.returncode, launched, time.time(), wall, out.decode(errors="replace"), timed_out


def _mark_exit(pid: int, marks: dict[str, float]) -> None:
    """Mark the moment process pid exits, leaving it for Popen to reap."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        marks["exited"] = time.monotonic()



def driver_libraries(env: Any) -> dict[str, str]:
    try:
        return passthrough.driver_libraries()
    except passthrough.PassthroughError as exc:
        raise EnvironmentFailure(f"environment {env.id}: {exc}") from None


def parse_mount(spec: str, env_id: str) -> tuple[Path, Path, bool]:
    parts = spec.split(":")
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
        raise EnvironmentFailure(
            f"environments.{env_id}.mounts: '{spec}' is not HOST:TARGET[:ro|rw]."
        )
    return Path(parts[0]), Path(parts[1]), len(parts) == 3 and parts[2] == "ro"



def _process_start(pid: int) -> str | None:
    """The kernel's start time of a process (clock ticks since boot), None if it is gone:
    with the pid it names one process, even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def owner_labels(campaign: str, root: Path) -> dict[str, str]:
    """Labels naming who made a container: the campaign, this checkout's campaign folder on
    this host, and the launching process (pid and start time)."""
    pid = os.getpid()
    return {LABEL: campaign, "containertax.root": str(Path(root).resolve()),
            "containertax.host": socket.gethostname(), "containertax.owner_pid": str(pid),
            "containertax.owner_start": _process_start(pid) or ""}


def owner_gone(labels: dict[str, str]) -> bool:
    pid = int(labels.get("containertax.owner_pid") or 0)
    return pid <= 0 or _process_start(pid) != labels.get("containertax.owner_start")

