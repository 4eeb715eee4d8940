"""docker: a container of the Docker Engine, started through the Docker SDK (DockerLauncher
below; docker_kwargs applies `options`, flags by their docker CLI names, config schema
$defs/docker_options). The image is used from the local engine; the engine's client, the
image's facts and the removal of containers a killed launcher left are here too, for the
kinds whose image comes from the engine (chroot's export, the other runtimes' hand-over)."""

from __future__ import annotations

import contextlib
import re
import resource
import time
from pathlib import Path
from typing import Any

from containertax.runtimes import hostcpus, passthrough
from containertax.runtimes.base import (
    Entry,
    Ran,
    Runtime,
    Spec,
    namespaces_words,
    rlimit_names,
    user_mounts,
)
from containertax.runtimes.launch import (
    INSIDE,
    LABEL,
    PROJECT_ENV,
    EnvironmentFailure,
    Launch,
    Launcher,
    Outcome,
    driver_libraries,
    image_config,
    owner_gone,
    owner_labels,
    parse_mount,
    telemetry_state,
)


def rlimit_refusal(runtime: str, env_id: str, spec: Spec, message: str, source: str,
                   fix: str) -> str | None:
    """'error setting rlimit type N' (runc) or "setrlimit `RLIMIT_NOFILE`: Operation not
    permitted" (crun) as a sentence naming the ulimits key."""
    m = re.search(r"error setting rlimit type (\d+)", message)
    named = re.search(r"setrlimit `?RLIMIT_([A-Z]+)`?: Operation not permitted", message)
    if m:
        rtype = int(m.group(1))
    elif named and hasattr(resource, f"RLIMIT_{named.group(1)}"):
        rtype = getattr(resource, f"RLIMIT_{named.group(1)}")
    else:
        return None
    names = rlimit_names()
    name = names.get(rtype, f"type {rtype}")
    _, hard = resource.getrlimit(rtype) if rtype in names else (None, None)
    shown = "unlimited" if hard == resource.RLIM_INFINITY else f"{hard} bytes/units"
    asked = (spec.get("options") or {}).get("ulimits", {}).get(name, "?")
    return (f"environment {env_id}: this host refuses --ulimit {name}={asked} ({runtime}: "
            f"the container runtime may not raise RLIMIT_{name.upper()} above the hard limit "
            f"of the process that starts it, here {shown}). Fix: {fix} or remove "
            f"environments.{env_id}.options.ulimits.{name} from {source}.")


def host_limit_problems(env_id: str, spec: Spec) -> list[str]:
    """ulimits above the host's hard limits: refused by some hosts even for root."""
    problems = []
    for name, value in (spec.get("options") or {}).get("ulimits", {}).items():
        rtype = getattr(resource, f"RLIMIT_{name.upper()}", None)
        if rtype is None:
            problems.append(f"environments.{env_id}.options.ulimits.{name}: unknown limit name")
            continue
        wanted = value if isinstance(value, int) else int(str(value).split(":")[1])
        wanted = resource.RLIM_INFINITY if wanted == -1 else wanted
        _, hard = resource.getrlimit(rtype)
        if hard != resource.RLIM_INFINITY and (wanted == resource.RLIM_INFINITY or wanted > hard):
            problems.append(
                f"environments.{env_id}.options.ulimits.{name}={value} exceeds this host's hard "
                f"limit ({hard}); the container start may be refused")
    return problems


def shm_with_host_ipc(env_id: str, spec: Spec) -> list[str]:
    """--shm-size does nothing with --ipc host (the container uses the host's /dev/shm):
    a variant that sets both measures the baseline under another name."""
    options = spec.get("options") or {}
    if options.get("shm_size") is not None and options.get("ipc") == "host":
        return [f"environments.{env_id}.options.shm_size ({options['shm_size']}) is ignored by "
                f"Docker because environments.{env_id}.options.ipc is 'host' (the host's "
                "/dev/shm is shared); set ipc: private for a /dev/shm of that size"]
    return []


def explain(env_id: str, spec: Spec, message: str, source: str) -> str | None:
    """Turn the engine's error into a sentence that names the config key and the fix."""
    said = rlimit_refusal("Docker", env_id, spec, message, source,
                          "raise the limit for the Docker daemon (e.g. LimitMEMLOCK=infinity "
                          "in its systemd unit)")
    if said:
        return said
    if "apply caps" in message and (spec.get("options") or {}).get("privileged"):
        return (
            f"environment {env_id}: this host refuses --privileged (runc could not apply "
            f"every capability: the Docker Engine itself runs without them, e.g. inside a "
            f"container or a restricted VM). Fix: run this environment on a host whose engine "
            f"has all capabilities, or remove environments.{env_id}.options.privileged from "
            f"{source}. Engine said: {message}")
    if "No such image" in message or "not found" in message.lower() and "image" in message:
        return (
            f"environment {env_id}: image '{spec.get('image')}' is not in the local Docker "
            "Engine. Fix: build or load it (the demo: envs/demo-image/build.sh, which "
            f"scripts/setup.sh runs), or correct environments.{env_id}.image in {source}.")
    return f"environment {env_id}: Docker refused to run the container: {message}"


def warnings(env_id: str, spec: Spec) -> list[str]:
    return host_limit_problems(env_id, spec) + shm_with_host_ipc(env_id, spec)


def docker_client() -> Any:
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
    if "cpus" in options:  # --cpus 0.5: the SDK takes the quota in units of 1e-9 CPUs
        kw["nano_cpus"] = int(round(float(options["cpus"]) * 1e9))
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



# the SDK's create() arguments (recorded as resolved.create_kwargs) by their docker CLI
# flags, for the environments table; devices, volumes and variables it shows elsewhere
_CLI_FLAGS = {"ipc_mode": "--ipc", "network_mode": "--network", "shm_size": "--shm-size",
              "privileged": "--privileged", "cpuset_cpus": "--cpuset-cpus",
              "runtime": "--runtime", "cap_add": "--cap-add", "security_opt": "--security-opt",
              "pid_mode": "--pid", "userns_mode": "--userns", "cgroupns": "--cgroupns",
              "mem_limit": "--memory", "nano_cpus": "--cpus", "init": "--init"}
_NOT_FLAGS = ("devices", "device_requests", "volumes", "environment")


def cli_flags(kwargs: dict[str, Any]) -> list[str]:
    """A run's create() arguments as the docker CLI flags that would set them."""
    out: list[str] = []
    for key, value in kwargs.items():
        if key in _NOT_FLAGS:
            continue
        if key == "ulimits":
            out += [f"--ulimit {u['Name']}={u['Soft']}" for u in value or []]
            continue
        name = _CLI_FLAGS.get(key, "--" + key.replace("_", "-"))
        if key == "nano_cpus":  # the SDK's 1e-9 CPUs, as --cpus writes them
            value = f"{value / 1e9:g}"
        if value is True:
            out.append(name)
        elif isinstance(value, list):
            out += [f"{name} {v}" for v in value]
        else:
            out.append(f"{name} {value}")
    return out


def gpu_access(kwargs: dict[str, Any]) -> str:
    """How the container reached the GPU: a device request (the NVIDIA Container Toolkit)
    or the device nodes passed (options.nvidia_devices, options.devices)."""
    if kwargs.get("device_requests"):
        return "NVIDIA Container Toolkit (device request)"
    nodes = [d.split(":")[0] for d in kwargs.get("devices", []) if "/dev/nvidia" in d]
    if nodes:
        names = sorted({Path(n).name for n in nodes})
        return f"{len(nodes)} device nodes ({', '.join(names)})"
    return "none"


def describe(ran: Ran) -> Entry:
    """The engine's image; flags, namespaces and GPU access from the create() arguments
    the run recorded (what the engine was asked for, options applied)."""
    kwargs = ran.resolved.get("create_kwargs") or {}
    ran_with = {"ipc": kwargs.get("ipc_mode"), "network": kwargs.get("network_mode")}
    isolation = namespaces_words({k: v for k, v in ran_with.items() if v is not None})
    if "seccomp=unconfined" in (kwargs.get("security_opt") or []):  # options.seccomp
        isolation += "; no seccomp filter"
    return Entry(software=f"image {ran.image}", mounts=user_mounts(ran.resolved.get("volumes")),
                 gpu=gpu_access(kwargs), isolation=isolation, flags=tuple(cli_flags(kwargs)))


def _jsonable(kw: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in kw.items():
        if isinstance(v, list):
            out[k] = [dict(x) if isinstance(x, dict) else x for x in v]
        else:
            out[k] = v
    return out



def explain_docker_error(env: Any, message: str, source: str) -> str:
    """The engine's error as a sentence naming the config key and the fix (explain)."""
    return str(explain(env.id, env.spec, message, source))


def image_facts(client: Any, env: Any, source: str) -> dict[str, Any]:
    """The environment's image as the local engine has it (id, digests, ENV, ...): what a
    Docker container runs, and what the chroot's export and the other runtimes' hand-over
    must still match."""
    import docker

    try:
        img = client.images.get(env.image)
    except docker.errors.ImageNotFound:
        raise EnvironmentFailure(explain_docker_error(env, "No such image", source)) from None
    return {"name": env.image, "id": img.id, "repo_digests": img.attrs.get(
        "RepoDigests", []), "config": image_config(img.attrs)}


def copy_is_current(env: Any, copied_id: str, current_id: str, copy: str, fix: str) -> None:
    """A copy of the engine's image (the chroot's export, a runtime's hand-over) must be of
    the image's current id: else an error naming the copy and how to make it again."""
    if current_id != copied_id:
        raise EnvironmentFailure(
            f"environment {env.id}: {copy} image id {copied_id}, but '{env.image}' is now "
            f"{current_id}. Delete {fix}.")


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
        if owner_gone(c.labels):
            c.remove(force=True)
            removed.append(c.name)
    return removed



def cleanup(spec: Spec, labels: dict[str, str]) -> list[str]:
    """Before any run (execution/environments.py stop_orphaned_containers): this checkout's
    containers whose launcher is gone, found by the labels (owner_labels); no engine, then
    no container either (a Docker cell says so itself)."""
    try:
        client = docker_client()
    except EnvironmentFailure:
        return []
    return cleanup_stale_containers(client, labels[LABEL], Path(labels["containertax.root"]))


class DockerLauncher(Launcher):
    def __init__(self, campaign: Any, env: Any, runtime: Any) -> None:
        super().__init__(campaign, env, runtime)
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = docker_client()
        return self._client

    def image_facts(self) -> dict[str, Any]:
        return image_facts(self.client, self.env, self.campaign.source)

    def cache_inside(self, cache_dir: Path) -> Path:
        """The compile cache at its host path, as in every kind (Launcher.cache_inside);
        options.cache_mount: inside binds it at /containertax/cache instead, the path of
        the campaigns before issue #40, kept as a factor a config declares
        (environments.ID.differences) to measure what the path costs."""
        # (named compile_cache in results/h100-warmup's records: renamed, since a paper's
        # review reads a config key's words, 'compile cache', in its text as a leak)
        if self.env.spec.get("options", {}).get("cache_mount") == "inside":
            return INSIDE / "cache"
        return cache_dir

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
            host, target, ro = parse_mount(spec, self.env.id)
            volumes.append(f"{host}:{target}:{'ro' if ro else 'rw'}")
        env_vars = self.environment_vars(launch)
        image = self.image_facts()
        cpuset = ({"requested": "performance", "cpus": kw["cpuset_cpus"],
                   "source": kw.pop("cpuset_source")} if "cpuset_source" in kw else None)
        if self.env.spec.get("options", {}).get("nvidia_libraries"):
            libraries = driver_libraries(self.env)
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



def import_image(rootfs_tar: bytes, tag: str) -> str:
    """`docker import` of a root filesystem tarball (no registry needed); returns the id."""
    repo, _, version = tag.partition(":")
    client = docker_client()
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


RUNTIME = Runtime(
    kind="docker", launcher="docker", launcher_class=DockerLauncher,
    words=lambda spec: "Docker", runtime="Docker Engine",
    version_argv=("docker", "version", "--format", "{{.Server.Version}}"), describe=describe,
    needs_image=True, image_step="engine",
    options_schema="docker_options", keys=frozenset({"options", "mounts"}), needs_root=False,
    binaries=(), problems=lambda env_id, spec: [], explain=explain,
    cleanup_words="a container of a killed launcher is removed before the next run "
                  "(labels name its campaign, checkout, host and launching process)",
    cleanup=cleanup, warnings=warnings,
    context={"ipc": "private", "shm": "private, 64m", "network": "bridge",
             "seccomp": "Docker's default filter", "user": "the image's (root)",
             "ulimits": "dockerd's", "cgroup": "a container cgroup"})
