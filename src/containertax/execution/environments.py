"""How a process is launched: natively, in a chroot of an image's root filesystem, in
Docker, or through a runtime's command line (Podman, Charliecloud, Apptainer). The same
command runs in each; only the isolation differs. What each kind is, and everything the
launchers read of it, is its declaration in containertax/runtimes/<kind>.py; a launcher
here is chosen by the declaration's `launcher` and never by the kind's name.

Each launcher measures the process from launch to exit on the host, maps the probe and a
work folder to the same place inside, and cleans up after itself on any failure.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from containertax import runtimes
from containertax.campaign.config import Campaign, Environment
from containertax.campaign.paths import image_slug
from containertax.core import records
from containertax.core.errors import ContainertaxError
from containertax.execution import hostcpus, passthrough

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
RLIMIT_NAMES = runtimes.base.rlimit_names()  # 7 -> nofile (the schema's name), not ofile


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
    # the campaign's compile cache, read-write, at cache_inside() in every environment
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
    def __init__(self, campaign: Campaign, env: Environment) -> None:
        self.campaign = campaign
        self.env = env
        self.kind = env.kind
        self.runtime = runtimes.get(env.kind)

    def preflight(self) -> dict[str, Any]:
        """What this environment checks before any cell beyond starting the workload
        (facts for the preflight record; raises EnvironmentFailure with the fix)."""
        return {}

    def inside(self, probe_dir: Path, work_dir: Path) -> tuple[Path, Path]:
        """Where the host's probe and work folders appear to the process under test."""
        return INSIDE / "probe", INSIDE / "work"

    def cache_inside(self, cache_dir: Path) -> Path:
        """Where the campaign's compile cache (Launch.cache_dir) appears."""
        return INSIDE / "cache"

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


def _run_process(argv: list[str], env: dict[str, str], timeout_s: float,
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


class NativeLauncher(Launcher):
    def inside(self, probe_dir: Path, work_dir: Path) -> tuple[Path, Path]:
        return probe_dir, work_dir

    def cache_inside(self, cache_dir: Path) -> Path:
        return cache_dir

    def run(self, launch: Launch) -> Outcome:
        marks: dict[str, float] = {}
        try:
            rc, t_in, t_out, wall, out, to = _run_process(
                launch.argv, self.environment_vars(launch), launch.timeout_s, launch.cpuset,
                marks)
        except EnvironmentFailure as exc:  # e.g. an interpreter that does not exist
            raise EnvironmentFailure(self.runtime.explain(  # type: ignore[misc]
                self.env.id, self.env.spec, str(exc), self.campaign.source)) from None
        env_vars = self.environment_vars(launch)
        return Outcome(rc, t_in, t_out, wall, out,
                       {"argv": launch.argv, "telemetry": telemetry_state(env_vars)}, to,
                       marks=marks)


class ChrootLauncher(Launcher):
    """A chroot into the image's exported root filesystem, inside a private mount
    namespace: every bind mount disappears with the namespace, even after SIGKILL."""

    def rootfs(self) -> Path:
        return self.campaign.paths.rootfs(image_slug(self.env.image or "")).resolve()

    def rootfs_marker(self) -> Path:
        """The exported image's facts, written beside its root filesystem."""
        return self.campaign.paths.rootfs_marker(image_slug(self.env.image or "")).resolve()

    @property
    def gpu(self) -> bool:
        return bool(self.env.spec.get("gpu"))

    def image(self) -> dict[str, Any]:
        """What the rootfs rule recorded of the image: id, ENV, WORKDIR."""
        import json

        marker = self.rootfs_marker()
        return json.loads(marker.read_text()) if marker.exists() else {}

    def environment_vars(self, launch: Launch) -> dict[str, str]:
        """The image's own ENV (as Docker would start it), then the project's and the
        config's variables: native and container run the same environment."""
        image_env = self.image().get("config", {}).get("env", {})
        env = {**DOCKER_DEFAULT_ENV, **image_env, **PROJECT_ENV, **launch.env,
               **self.env.spec.get("env", {})}
        if self.gpu:
            env["LD_LIBRARY_PATH"] = passthrough.ld_library_path(env.get("LD_LIBRARY_PATH"))
        return env

    def preflight(self) -> dict[str, Any]:
        """The exported root filesystem is still the image's current content."""
        import json

        exported = records.read_json(self.rootfs_marker())
        image = DockerLauncher(self.campaign, self.env).image_facts()
        current = image["id"]
        if current == exported["id"] and "entrypoint" not in exported.get("config", {}):
            # exported by an older containertax: the same image's ENV, WORKDIR, ENTRYPOINT
            # and CMD, added
            exported["config"] = image["config"]
            records.atomic_write_text(self.rootfs_marker(),
                                      json.dumps(exported, indent=2) + "\n")
        if current != exported["id"]:
            raise EnvironmentFailure(
                f"environment {self.env.id}: {self.rootfs()} was exported from image id "
                f"{exported['id']}, but '{self.env.image}' is now {current}. Delete that "
                "folder and its .image.json to export the current image.")
        return {"rootfs": exported}

    def gpu_lines(self, libraries: dict[str, str]) -> list[str]:
        """The host driver's libraries under their sonames in a tmpfs (gone with the mount
        namespace); /dev, bound whole, already holds the device nodes."""
        d = shlex.quote(str(passthrough.DRIVER_DIR))
        lines = [f'mkdir -p "$R"{d}', f'mount -t tmpfs -o size=1m,mode=755 tmpfs "$R"{d}']
        for soname, path in sorted(libraries.items()):
            t = shlex.quote(f"{passthrough.DRIVER_DIR}/{soname}")
            lines += [f'touch "$R"{t}', f'mount --bind {shlex.quote(path)} "$R"{t}',
                      f'mount -o remount,bind,ro "$R"{t}']
        return lines

    def script(self, launch: Launch, libraries: dict[str, str] | None = None) -> str:
        root = shlex.quote(str(self.rootfs()))
        lines = [
            "set -eu",
            # the host's tools for the mounts; the process gets the image's PATH back below
            f"PATH={DOCKER_DEFAULT_ENV['PATH']}",
            f"R={root}",
            'mount -t proc proc "$R/proc"',
            'mount --rbind /sys "$R/sys"',
            'mount --rbind /dev "$R/dev"',
        ]
        binds = [
            (launch.probe_dir, INSIDE / "probe", True),
            (launch.work_dir, INSIDE / "work", False),
        ]
        if launch.cache_dir is not None:
            binds.append((launch.cache_dir, INSIDE / "cache", False))
        for spec in self.env.spec.get("mounts", []):
            host, target, ro = _parse_mount(spec, self.env.id)
            binds.append((host, self.inside_rootfs(target, spec), ro))
        for host, target, ro in binds:
            h, t = shlex.quote(str(host)), shlex.quote(str(target))
            lines.append(f'mkdir -p "$R"{t}')
            lines.append(f'mount --bind {h} "$R"{t}')
            if ro:
                lines.append(f'mount -o remount,bind,ro "$R"{t}')
        if libraries:
            lines += self.gpu_lines(libraries)
        workdir = shlex.quote(self.image().get("config", {}).get("working_dir", "/"))
        # the image's ENTRYPOINT runs around the workload, as Docker runs it: NVIDIA's images
        # set up their environment there (nvidia_entrypoint.sh sources entrypoint.d/*.sh,
        # then exec "$@"); running it rather than copying what it exports keeps the chroot
        # right for any image and release, including what a script does besides exporting
        entry = " ".join(shlex.quote(w) for w in self.entrypoint())
        # the image's WORKDIR, as Docker starts the container there
        path = shlex.quote(self.environment_vars(launch)["PATH"])
        chroot = shutil.which("chroot", path=DOCKER_DEFAULT_ENV["PATH"]) or "chroot"
        enter = "'cd \"$0\" && unset OLDPWD PWD && exec \"$@\"'"
        lines.append(f'exec env PATH={path} {chroot} "$R" /bin/sh -c {enter} {workdir} '
                     f'{entry + " " if entry else ""}"$@"')
        return "\n".join(lines)

    def entrypoint(self) -> list[str]:
        """The image's ENTRYPOINT as recorded at export (Docker's: an exported root
        filesystem of an older containertax lacks it until preflight refreshes it)."""
        return list(self.image().get("config", {}).get("entrypoint") or [])

    def inside_rootfs(self, target: Path, spec: str) -> Path:
        """A mount target, normalised, that stays in the root filesystem: mkdir -p of
        '$R/../x', or through a symlink of the image to an absolute path, would create a
        folder on the host."""
        norm = Path("/" + os.path.normpath("/" + str(target)).lstrip("/"))
        root = self.rootfs()
        real = (root / norm.relative_to("/")).resolve()
        if not real.is_relative_to(root):
            raise EnvironmentFailure(
                f"environments.{self.env.id}.mounts: '{spec}': the target leaves the image's "
                f"root filesystem ({real}); give a path inside it, e.g. /data.")
        return norm

    def run(self, launch: Launch) -> Outcome:
        if not (self.rootfs() / "bin").exists():
            raise EnvironmentFailure(
                f"environment {self.env.id}: root filesystem {self.rootfs()} is missing; the "
                "workflow's rootfs rule exports it from the image (run snakemake, not this step "
                "alone)."
            )
        unshare = shutil.which("unshare")
        if unshare is None:
            raise EnvironmentFailure("chroot environments need unshare (util-linux).")
        libraries = _driver_libraries(self.env) if self.gpu else None
        argv = [unshare, "--mount", "--propagation", "private", "--", "sh", "-c",
                self.script(launch, libraries), "containertax-chroot", *launch.argv]
        marks: dict[str, float] = {}
        rc, t_in, t_out, wall, out, to = _run_process(
            argv, self.environment_vars(launch), launch.timeout_s, launch.cpuset, marks)
        env_vars = self.environment_vars(launch)
        resolved = {"argv": launch.argv, "rootfs": str(self.rootfs()), "wrapper": argv[:5],
                    "driver_libraries": libraries, "image": self.image(),
                    "entrypoint": self.entrypoint(), "env": env_vars,
                    "telemetry": telemetry_state(env_vars)}
        return Outcome(rc, t_in, t_out, wall, out, resolved, to, marks=marks)


def _driver_libraries(env: Environment) -> dict[str, str]:
    try:
        return passthrough.driver_libraries()
    except passthrough.PassthroughError as exc:
        raise EnvironmentFailure(f"environment {env.id}: {exc}") from None


def _parse_mount(spec: str, env_id: str) -> tuple[Path, Path, bool]:
    parts = spec.split(":")
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
        raise EnvironmentFailure(
            f"environments.{env_id}.mounts: '{spec}' is not HOST:TARGET[:ro|rw]."
        )
    return Path(parts[0]), Path(parts[1]), len(parts) == 3 and parts[2] == "ro"


def _docker_client() -> Any:
    import docker

    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as exc:
        raise EnvironmentFailure(
            f"cannot reach the Docker Engine ({exc}); start dockerd (e.g. "
            "'systemctl start docker') or remove docker environments from the config."
        ) from None
    return client


def docker_kwargs(options: dict[str, Any], launch: Launch | None = None) -> dict[str, Any]:
    """docker CLI flag names from the config, as docker SDK create() arguments; with a
    lane's launch, only the lane's GPU (and cores, unless the options name some)."""
    import docker

    kw: dict[str, Any] = {}
    simple = {
        "ipc": "ipc_mode",
        "shm_size": "shm_size",
        "network": "network_mode",
        "cpuset_cpus": "cpuset_cpus",
        "privileged": "privileged",
        "cgroup_parent": "cgroup_parent",
        "memory": "mem_limit",
        "runtime": "runtime",
        "init": "init",
        "user": "user",
        "devices": "devices",
    }
    for key, arg in simple.items():
        if key in options:
            kw[arg] = options[key]
    if options.get("seccomp") == "unconfined":  # --security-opt seccomp=unconfined
        kw["security_opt"] = ["seccomp=unconfined"]
    if options.get("cpuset_cpus") == "performance":
        try:
            cores, source = hostcpus.performance_cores()
            kw["cpuset_cpus"] = hostcpus.cpulist(cores)
            kw["cpuset_source"] = source  # recorded; popped before create()
        except hostcpus.CpuTopologyError as exc:
            raise EnvironmentFailure(f"options.cpuset_cpus: {exc}") from None
    if "ulimits" in options:
        kw["ulimits"] = []
        for name, value in options["ulimits"].items():
            soft, hard = (
                (int(value), int(value))
                if isinstance(value, int)
                else tuple(int(v) for v in str(value).split(":"))
            )
            kw["ulimits"].append(docker.types.Ulimit(name=name, soft=soft, hard=hard))
    if options.get("nvidia_devices"):
        # the GPU without the NVIDIA Container Toolkit: its device nodes, as the toolkit
        # would pass them; driver libraries come with nvidia_libraries or `mounts`
        nodes = passthrough.device_nodes(
            minor=launch.gpu_minor if launch is not None else None)
        kw["devices"] = list(kw.get("devices", [])) + [f"{n}:{n}:rwm" for n in nodes]
    if "gpus" in options:
        gpus = options["gpus"]
        if gpus == "all":
            req = docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])
        elif isinstance(gpus, int):
            req = docker.types.DeviceRequest(count=gpus, capabilities=[["gpu"]])
        else:
            ids = gpus if isinstance(gpus, list) else str(gpus).split(",")
            req = docker.types.DeviceRequest(device_ids=ids, capabilities=[["gpu"]])
        if launch is not None and launch.gpu is not None:
            req = docker.types.DeviceRequest(device_ids=[launch.gpu], capabilities=[["gpu"]])
        kw["device_requests"] = [req]
    if launch is not None and launch.cpuset and "cpuset_cpus" not in options:
        kw["cpuset_cpus"] = launch.cpuset
    return kw


def _jsonable(kw: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in kw.items():
        if isinstance(v, list):
            out[k] = [dict(x) if isinstance(x, dict) else x for x in v]
        else:
            out[k] = v
    return out


def explain_docker_error(env: Environment, message: str, source: str) -> str:
    """The engine's error as a sentence naming the config key and the fix
    (runtimes/docker.py)."""
    return str(runtimes.docker.explain(env.id, env.spec, message, source))


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


def _owner_gone(labels: dict[str, str]) -> bool:
    pid = int(labels.get("containertax.owner_pid") or 0)
    return pid <= 0 or _process_start(pid) != labels.get("containertax.owner_start")


def cleanup_stale_containers(client: Any, campaign: str, root: Path) -> list[str]:
    """Remove this checkout's containers of this campaign whose launching process is
    provably gone (e.g. SIGKILL): made on this host for this campaign folder, and that
    process (pid and start time) no longer exists. A container of another checkout or host
    sharing the engine, or of a live launcher, is never touched."""
    mine = owner_labels(campaign, root)
    removed = []
    for c in client.containers.list(all=True, filters={"label": [
            f"{LABEL}={campaign}", f"containertax.root={mine['containertax.root']}",
            f"containertax.host={mine['containertax.host']}"]}):
        if _owner_gone(c.labels):
            c.remove(force=True)
            removed.append(c.name)
    return removed


def stop_orphaned_containers(campaign: Campaign) -> list[str]:
    """Before any run: no container left by a killed run of this checkout measures beside
    it (native and chroot workloads die with their launcher; a container does not): each
    kind's own clean-up (its declaration's `cleanup`), the Docker SDK's for the engine."""
    removed: list[str] = []
    labels = owner_labels(campaign.name, campaign.root)
    for env in campaign.environments:
        runtime = runtimes.get(env.kind)
        if runtime.cleanup is not None:
            with contextlib.suppress(OSError, ValueError):
                removed += runtime.cleanup(env.spec, labels)
    if not any(runtimes.get(e.kind).launcher == "docker" for e in campaign.environments):
        return removed
    try:
        return removed + cleanup_stale_containers(_docker_client(), campaign.name,
                                                  campaign.root)
    except EnvironmentFailure:
        return removed  # no engine: then no container either; a docker cell says so itself


class DockerLauncher(Launcher):
    def __init__(self, campaign: Campaign, env: Environment) -> None:
        super().__init__(campaign, env)
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = _docker_client()
        return self._client

    def image_facts(self) -> dict[str, Any]:
        import docker

        try:
            img = self.client.images.get(self.env.image)
        except docker.errors.ImageNotFound:
            raise EnvironmentFailure(
                explain_docker_error(self.env, "No such image", self.campaign.source)
            ) from None
        return {"name": self.env.image, "id": img.id, "repo_digests": img.attrs.get(
            "RepoDigests", []), "config": image_config(img.attrs)}

    def cache_inside(self, cache_dir: Path) -> Path:
        """options.cache_mount: host_path binds the compile cache at the host's own path,
        where a native run finds it (a diagnosis of the cache's path in its keys)."""
        # (named compile_cache in results/h100-warmup's records: renamed, since a paper's
        # review reads a config key's words, 'compile cache', in its text as a leak)
        if self.env.spec.get("options", {}).get("cache_mount") == "host_path":
            return cache_dir
        return INSIDE / "cache"

    def environment_vars(self, launch: Launch) -> dict[str, str]:
        """Only what the project and the config add: Docker starts from the image's own
        ENV (PATH, LD_LIBRARY_PATH, ...) and keeps every variable not named here."""
        return {**PROJECT_ENV, **launch.env, **self.env.spec.get("env", {})}

    def run(self, launch: Launch) -> Outcome:
        import docker
        import requests

        client = self.client
        cleanup_stale_containers(client, self.campaign.name, self.campaign.root)
        try:
            kw = docker_kwargs(self.env.spec.get("options", {}), launch)
        except EnvironmentFailure as exc:
            raise EnvironmentFailure(f"environment {self.env.id}: {exc}") from None
        volumes = [
            f"{launch.probe_dir}:{INSIDE / 'probe'}:ro",
            f"{launch.work_dir}:{INSIDE / 'work'}:rw",
        ]
        if launch.cache_dir is not None:
            volumes.append(f"{launch.cache_dir}:{self.cache_inside(launch.cache_dir)}:rw")
        for spec in self.env.spec.get("mounts", []):
            host, target, ro = _parse_mount(spec, self.env.id)
            volumes.append(f"{host}:{target}:{'ro' if ro else 'rw'}")
        env_vars = self.environment_vars(launch)
        image = self.image_facts()
        cpuset = ({"requested": "performance", "cpus": kw["cpuset_cpus"],
                   "source": kw.pop("cpuset_source")} if "cpuset_source" in kw else None)
        if self.env.spec.get("options", {}).get("nvidia_libraries"):
            libraries = _driver_libraries(self.env)
            volumes += [f"{path}:{passthrough.DRIVER_DIR / soname}:ro"
                        for soname, path in sorted(libraries.items())]
            env_vars["LD_LIBRARY_PATH"] = passthrough.ld_library_path(
                env_vars.get("LD_LIBRARY_PATH", image["config"]["env"].get("LD_LIBRARY_PATH")))
        resolved = {
            "argv": launch.argv,
            "image": image,
            "create_kwargs": _jsonable(kw),
            "env": env_vars,  # added to the image's ENV (image.config.env)
            "entrypoint": image["config"].get("entrypoint", []),  # Docker runs it
            "telemetry": telemetry_state({**image["config"]["env"], **env_vars}),
            "cpuset": cpuset,  # the cores `cpuset_cpus: performance` resolved to here
            "volumes": volumes,
            "engine_version": client.version().get("Version"),
        }
        resolved["runtime"] = {"name": self.runtime.runtime,
                               "words": self.runtime.label(self.env.spec),
                               "version": resolved["engine_version"]}
        labels = {**owner_labels(self.campaign.name, self.campaign.root),
                  "containertax.cell": launch.label}
        launched = time.time()
        t0 = time.monotonic()
        marks = {"launch": t0}  # the timeline's (workloads/timeline.py)
        container = None
        timed_out = False
        try:
            try:
                container = client.containers.create(
                    image["id"], command=launch.argv, environment=env_vars,
                    volumes=volumes, labels=labels, detach=True, **kw,
                )
                t_created = marks["created"] = time.monotonic()
                container.start()
            except docker.errors.APIError as exc:
                raise EnvironmentFailure(
                    explain_docker_error(self.env, str(exc), self.campaign.source)
                ) from None
            t_started = marks["started"] = time.monotonic()
            try:
                rc = container.wait(timeout=launch.timeout_s)["StatusCode"]
            except requests.exceptions.RequestException as exc:
                # the wait's own timeout (a ReadTimeout, or a ConnectionError wrapping
                # urllib3's ReadTimeoutError); anything else is the engine lost (below)
                if not (isinstance(exc, requests.exceptions.ReadTimeout)
                        or "Read timed out" in str(exc)):
                    raise
                timed_out = True
                container.kill()
                rc = container.wait(timeout=60)["StatusCode"]
            marks["exited"] = time.monotonic()
            wall = marks["exited"] - t0  # one reading: the phases add up to it
            exited = time.time()
            out = container.logs(stdout=True, stderr=True).decode(errors="replace")
        except (requests.exceptions.RequestException, docker.errors.DockerException) as exc:
            # (a ReadTimeout of the wait is the run's timeout, above; this is the engine)
            raise EnvironmentFailure(
                f"environment {self.env.id}: lost the Docker Engine during the run "
                f"({type(exc).__name__}: {exc}); dockerd restarted or stopped? This cell "
                "failed and runs again with the next invocation once the engine answers "
                "('docker info')."
            ) from None
        finally:
            if container is not None:
                with contextlib.suppress(requests.exceptions.RequestException,
                                         docker.errors.DockerException):
                    container.remove(force=True)  # gone with the engine, or removed later
                    marks["removed"] = time.monotonic()
        phases = {"create_s": t_created - t0, "start_s": t_started - t_created}
        return Outcome(rc, launched, exited, wall, out, resolved, timed_out, phases, marks)


class CommandLauncher(Launcher):
    """A runtime started by its command line (Podman, Charliecloud, Apptainer): the kind's
    declaration builds the command from the binds, variables and argv, and turns the
    runtime's refusal into a sentence; the image is the one the provide rule handed over."""

    def marker(self) -> Path:
        return self.campaign.paths.provided(self.env.id).resolve()

    def inside(self, probe_dir: Path, work_dir: Path) -> tuple[Path, Path]:
        if self.runtime.host_paths:
            return probe_dir, work_dir
        return super().inside(probe_dir, work_dir)

    def cache_inside(self, cache_dir: Path) -> Path:
        return cache_dir if self.runtime.host_paths else super().cache_inside(cache_dir)

    def image(self) -> dict[str, Any]:
        """What the provide rule handed to the runtime: name, id, where, its ENV (a kind
        that takes no image: nothing)."""
        import json

        if self.runtime.image_step != "provide":
            return {"name": self.env.image, "runtime_ref": self.env.image or "", "config": {}}
        marker = self.marker()
        if not marker.exists():
            raise EnvironmentFailure(
                f"environment {self.env.id}: the image was not handed to "
                f"{self.runtime.label(self.env.spec)} ({marker} is missing); the workflow's "
                "provide rule does it (run snakemake, not this step alone).")
        return dict(json.loads(marker.read_text()))

    def preflight(self) -> dict[str, Any]:
        """The image handed over is still the Docker Engine's current one."""
        if self.runtime.image_step != "provide":
            return {}
        image = self.image()
        current = DockerLauncher(self.campaign, self.env).image_facts()["id"]
        if current != image["id"]:
            raise EnvironmentFailure(
                f"environment {self.env.id}: {self.marker()} names image id {image['id']}, but "
                f"'{self.env.image}' is now {current}. Delete that file to hand over the "
                "current image.")
        return {"provided": image}

    def environment_vars(self, launch: Launch) -> dict[str, str]:
        """Like Docker where the runtime applies the image's ENV (Podman, Apptainer); like
        the chroot where the process starts from it (Charliecloud)."""
        own = {**PROJECT_ENV, **launch.env, **self.env.spec.get("env", {}),
               **visible_gpu_env(launch.gpu)}
        if not self.runtime.image_env:
            return own
        image_env = self.image().get("config", {}).get("env", {})
        return {**DOCKER_DEFAULT_ENV, **image_env, **own}

    def run(self, launch: Launch) -> Outcome:
        image = self.image()
        runtime, spec = self.runtime, self.env.spec
        user = runtime.host_user(spec) if runtime.host_user else None
        if user:  # a rootless runtime writes as that user
            for folder in (launch.work_dir, launch.cache_dir):
                if folder is not None:
                    shutil.chown(folder, user)
        probe_in, work_in = self.inside(launch.probe_dir, launch.work_dir)
        binds = [runtimes.Bind(launch.probe_dir, probe_in, True),
                 runtimes.Bind(launch.work_dir, work_in, False)]
        if launch.cache_dir is not None:
            binds.append(runtimes.Bind(launch.cache_dir, self.cache_inside(launch.cache_dir),
                                       False))
        for mount in spec.get("mounts", []):
            host, target, ro = _parse_mount(mount, self.env.id)
            binds.append(runtimes.Bind(host, target, ro))
        env_vars = self.environment_vars(launch)
        name = f"containertax-{os.getpid()}-{time.time_ns()}"
        labels = {**owner_labels(self.campaign.name, self.campaign.root),
                  "containertax.cell": launch.label, "containertax.name": name,
                  "containertax.workdir": image.get("config", {}).get("working_dir", "/")}
        limits = runtime.limits(spec) if runtime.limits else {}
        command = runtime.command(runtimes.CommandLaunch(  # type: ignore[misc]
            env_id=self.env.id, spec=spec, image=image["runtime_ref"], binds=binds,
            env=env_vars, argv=launch.argv, labels=labels, cpuset=launch.cpuset,
            limits=limits))
        # the runtime's binary as preflight found it, on the launcher's own PATH
        command[0] = shutil.which(command[0]) or command[0]
        process_env = runtime.process_env(spec, env_vars)  # type: ignore[misc]
        try:
            rc, t_in, t_out, wall, out, to = _run_process(command, process_env,
                                                          launch.timeout_s, launch.cpuset)
        finally:
            if runtime.cleanup is not None:  # a container its client left (a timeout)
                with contextlib.suppress(OSError, ValueError):
                    runtime.cleanup(spec, {**labels, "remove": name})
        if rc in runtime.refusal_codes and not to:
            said = runtime.explain(self.env.id, spec, out, self.campaign.source)  # type: ignore[misc]
            if said:
                raise EnvironmentFailure(said)
        resolved = {"argv": launch.argv, "image": image, "command": command,
                    "env": env_vars, "telemetry": telemetry_state(
                        {**image.get("config", {}).get("env", {}), **env_vars}),
                    "limits": {k: list(v) for k, v in limits.items()},
                    "runtime": {"name": runtime.runtime, "words": runtime.label(spec),
                                "version": runtime_version(self.env.kind)},
                    # a wrapper that sees the host's filesystem binds nothing
                    "binds": [] if runtime.host_paths else [
                        f"{b.host}:{b.inside}:{'ro' if b.read_only else 'rw'}" for b in binds]}
        return Outcome(rc, t_in, t_out, wall, out, resolved, to)


_VERSIONS: dict[str, str | None] = {}


def runtime_version(kind: str) -> str | None:
    """A kind's runtime version, asked once per process."""
    if kind not in _VERSIONS:
        _VERSIONS[kind] = runtimes.get(kind).version()
    return _VERSIONS[kind]


LAUNCHERS: dict[str, type[Launcher]] = {
    "process": NativeLauncher,
    "chroot": ChrootLauncher,
    "docker": DockerLauncher,
    "command": CommandLauncher,
}


def launcher(campaign: Campaign, env_id: str) -> Launcher:
    env = campaign.environment(env_id)
    return LAUNCHERS[str(runtimes.get(env.kind).launcher)](campaign, env)


def provide_image(campaign: Campaign, env_id: str, out: Path) -> dict[str, Any]:
    """Hand the environment's image from the local Docker Engine to its runtime (the
    provide rule; the kind's declaration says how) and write what was handed over."""
    import json

    env = campaign.environment(env_id)
    runtime = runtimes.get(env.kind)
    if runtime.provide is None:
        raise EnvironmentFailure(f"environment {env_id}: kind {env.kind} takes no image "
                                 "hand-over (its image_step is not 'provide').")
    dest = campaign.paths.image_dir(env_id).resolve()
    try:
        facts = runtime.provide(str(env.image), env.spec, dest)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        raise EnvironmentFailure(
            f"environment {env_id}: handing image '{env.image}' to "
            f"{runtime.label(env.spec)} failed: {exc}. Fix: check that the image is in the "
            f"local Docker Engine (docker image ls) and that {runtime.runtime} works here "
            f"(docs/environments.md), or correct environments.{env_id} in "
            f"{campaign.source}.") from None
    facts["provided_unix"] = time.time()
    records.atomic_write_text(out, json.dumps(facts, indent=2) + "\n")
    return facts


def export_rootfs(image: str, dest: Path) -> dict[str, Any]:
    """Export an image's root filesystem into dest (via a temporary folder and a rename),
    so that chroot runs the same bytes the container does."""
    import json

    import docker

    client = _docker_client()
    try:
        img = client.images.get(image)
    except docker.errors.ImageNotFound:  # the engine's 404: a sentence, not a traceback
        raise EnvironmentFailure(
            f"image '{image}' is not in the local Docker Engine, so its root filesystem "
            f"cannot be exported for the chroot. Fix: docker pull {image} (or build/load "
            "it), or correct the chroot environment's image in the config.") from None
    tmp = dest.parent / f".{dest.name}.partial"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    root = dest.parent.parent  # <results_dir>/<campaign>/rootfs/<image>
    cleanup_stale_containers(client, root.name, root)  # an export killed before this one
    container = client.containers.create(
        img.id, command=["true"],
        labels={**owner_labels(root.name, root), "containertax.cell": f"rootfs/{dest.name}"})
    try:
        tar = subprocess.Popen(["tar", "-x", "-C", str(tmp)], stdin=subprocess.PIPE)
        assert tar.stdin is not None
        for chunk in container.export():
            tar.stdin.write(chunk)
        tar.stdin.close()
        if tar.wait() != 0:
            raise EnvironmentFailure(f"tar failed while exporting {image} into {tmp}")
    finally:
        container.remove(force=True)
    (tmp / ".dockerenv").unlink(missing_ok=True)  # docker's marker, not part of the image
    for d in ("proc", "sys", "dev", "containertax/probe", "containertax/work",
              str(passthrough.DRIVER_DIR).lstrip("/")):
        (tmp / d).mkdir(parents=True, exist_ok=True)
    facts = {"name": image, "id": img.id, "exported_unix": time.time(),
             "config": image_config(img.attrs)}
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)
    (dest.parent / f"{dest.name}.image.json").write_text(json.dumps(facts, indent=2) + "\n")
    return facts


def import_image(rootfs_tar: bytes, tag: str) -> str:
    """`docker import` of a root filesystem tarball (no registry needed); returns the id."""
    repo, _, version = tag.partition(":")
    client = _docker_client()
    client.api.import_image_from_data(rootfs_tar, repository=repo, tag=version or "latest")
    return str(client.images.get(tag).id)


def host_software_image(tag: str) -> str:
    """An image of empty top-level folders, for running the host's own software in a
    container (with /usr, /opt, /etc bound read-only): the GPU machine has no registry."""
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in ("usr", "opt", "etc", "proc", "sys", "dev", "tmp", "root", "run", "var",
                  "usr/local/nvidia", "containertax"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
        for link, target in (("bin", "usr/bin"), ("sbin", "usr/sbin"), ("lib", "usr/lib"),
                             ("lib64", "usr/lib64")):
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return import_image(buf.getvalue(), tag)
