"""podman: a container of Podman (Debian's podman), rootful or, with `options.rootless:
USER`, rootless as that host user (its subordinate ids in /etc/subuid and /etc/subgid;
scripts/setup.sh creates the demo's user `containertax`). Podman keeps its own image
store: the provide rule hands it the image from the local Docker Engine (`podman pull
docker-daemon:IMAGE` rootful; rootless, `docker save | podman load` as the user, who
cannot reach the engine's socket), and the run names the image by its id, the same id as
Docker's.

Limits: Podman gives a rootful container RLIMIT_NOFILE and RLIMIT_NPROC of 1048576 unless
told (podman-run(1), --ulimit), which a host whose limits are lower refuses ("error setting
rlimit type 7" and "type 6"), and Podman lowers its own RLIMIT_NPROC to 32768 before it
starts any container (seen with strace on Podman 4.3.1), rootful and rootless. So every
launch passes --ulimit nofile and nproc explicitly: the launching process's own soft and
hard limits, what a native process of the same campaign gets, nproc capped at 32768 where
the host's is higher; the values are recorded with the run (resolved.limits), printed among
the flags of the environments table, and preflight warns where the cap makes them differ
from native's.
"""

from __future__ import annotations

import json
import pwd
import shutil
import subprocess
from pathlib import Path
from typing import Any

from containertax.runtimes import docker
from containertax.runtimes.base import (
    CommandLaunch,
    Entry,
    Ran,
    Runtime,
    Spec,
    limit_pairs,
    namespaces_words,
    run_quiet,
    user_mounts,
)
from containertax.runtimes.command import CommandLauncher

PODMAN_NPROC = 32768  # Podman 4.3 sets its own RLIMIT_NPROC to this before any container
LIMITS = ("nofile", "nproc")


CGROUP_ROOT = Path("/sys/fs/cgroup")


def cgroup_layout(mountinfo: str | None = None,
                  root: Path = CGROUP_ROOT) -> tuple[str, tuple[str, ...]]:
    """The host's cgroup layout as crun tells them apart: 'v2' (cgroup2 at the root), 'hybrid'
    (cgroup v1 hierarchies and cgroup2 at root/unified) or 'v1', with the controllers that
    the unified hierarchy holds (crun refuses a hybrid host where there are any)."""
    if mountinfo is None:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    fstypes = {}
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" in fields:  # mountinfo(5): ... mount point (5th) ... - fstype source options
            fstypes[fields[4]] = fields[fields.index("-") + 1]
    if fstypes.get(str(root)) == "cgroup2":
        return "v2", ()
    unified = root / "unified"
    if fstypes.get(str(unified)) != "cgroup2":
        return "v1", ()
    try:
        controllers = tuple((unified / "cgroup.controllers").read_text().split())
    except OSError:
        controllers = ()
    return "hybrid", controllers


def oci_runtime(layout: tuple[str, tuple[str, ...]] | None = None) -> str | None:
    """The OCI runtime every launch names: runc where crun refuses the host's layout (a
    hybrid host with controllers in the unified hierarchy); None keeps Podman's default."""
    kind, controllers = layout or cgroup_layout()
    return "runc" if kind == "hybrid" and controllers else None


def host_problems(spec: Spec, layout: tuple[str, tuple[str, ...]] | None = None) -> list[str]:
    """What this host lacks for Podman beyond its binary, in words with the fix."""
    layout = layout or cgroup_layout()
    wanted = oci_runtime(layout)
    if wanted and shutil.which(wanted) is None:
        return [f"{words(spec)}: this host's cgroups are hybrid (cgroup v1 hierarchies, and "
                f"the unified one at /sys/fs/cgroup/unified holds {' '.join(layout[1])}), which "
                f"Podman's default OCI runtime crun refuses; {wanted} runs there and is not "
                f"installed. Fix: apt-get install {wanted} (scripts/setup.sh installs it)."]
    return []


def rootless_user(spec: Spec) -> str | None:
    return (spec.get("options") or {}).get("rootless")


def words(spec: Spec) -> str:
    return "Podman (rootless)" if rootless_user(spec) else "Podman (rootful)"


def _as_user(spec: Spec, argv: list[str]) -> list[str]:
    """argv run as the rootless user, with that user's HOME (Podman's store is there), from
    / (Podman changes back into its working folder, which the user may not reach)."""
    user = rootless_user(spec)
    if not user:
        return argv
    home = pwd.getpwnam(user).pw_dir
    return ["runuser", "-u", user, "--", "env", "-C", "/", f"HOME={home}", *argv]


def limits(spec: Spec) -> dict[str, tuple[int, int]]:
    """nofile and nproc as a native process has them (nproc at most PODMAN_NPROC), unless
    options.ulimits names them."""
    asked = (spec.get("options") or {}).get("ulimits", {})
    out = {}
    for name, (soft, hard) in limit_pairs(LIMITS).items():
        if name in asked:
            continue
        if name == "nproc":
            soft = PODMAN_NPROC if soft < 0 or soft > PODMAN_NPROC else soft
            hard = PODMAN_NPROC if hard < 0 or hard > PODMAN_NPROC else hard
        out[name] = (soft, hard)
    return out


def setup_flags(options: Spec, limits: dict[str, Any], cpuset: str | None) -> list[str]:
    """The flags that set the container up, from its options, the limits passed and the
    lane's cores: the command's (`command`) and the environments table's (`describe`)."""
    argv = []
    for key in ("network", "ipc"):
        if key in options:
            argv.append(f"--{key}={options[key]}")
    if "shm_size" in options:
        argv.append(f"--shm-size={options['shm_size']}")
    ulimits = {**{k: f"{s}:{h}" for k, (s, h) in limits.items()},
               **{k: (f"{v}:{v}" if isinstance(v, int) else v)
                  for k, v in (options.get("ulimits") or {}).items()}}
    argv += [f"--ulimit={k}={v}" for k, v in sorted(ulimits.items())]
    if cpuset:
        argv.append(f"--cpuset-cpus={cpuset}")
    return argv


def describe(ran: Ran) -> Entry:
    """The image in Podman's store; its namespaces and flags from the options that ran
    and the limits and cores the run recorded (resolved.limits, resolved.cpuset_cpus)."""
    user = rootless_user(ran.spec)
    isolation = namespaces_words(ran.options, user=bool(user))
    if user:
        isolation += f"; rootless, as host user {user}"
    # the OCI runtime named where the host needed it (oci_runtime), as the command ran
    runtime = [a for a in ran.resolved.get("command") or [] if a.startswith("--runtime=")]
    flags = runtime[:1] + setup_flags(ran.options, ran.resolved.get("limits") or {},
                                      ran.resolved.get("cpuset_cpus"))
    return Entry(software=f"image {ran.image}", mounts=user_mounts(ran.resolved.get("binds")),
                 gpu="none", isolation=isolation, flags=tuple(flags))


def command(launch: CommandLaunch) -> list[str]:
    options = launch.spec.get("options") or {}
    runtime = oci_runtime()
    argv = ["podman", *([f"--runtime={runtime}"] if runtime else []), "run", "--rm",
            "--name", launch.labels["containertax.name"]]
    argv += [f"--label={k}={v}" for k, v in sorted(launch.labels.items())]
    argv += setup_flags(options, launch.limits, launch.cpuset)
    for b in launch.binds:
        argv += ["-v", f"{b.host}:{b.inside}:{'ro' if b.read_only else 'rw'}"]
    for k, v in sorted(launch.env.items()):
        argv += ["-e", f"{k}={v}"]
    return _as_user(launch.spec, [*argv, launch.image, *launch.argv])


def process_env(spec: Spec, env: dict[str, str]) -> dict[str, str]:
    """The podman client's own environment: only what it needs (the container's is passed
    with -e); the image's ENV is Podman's to apply, as Docker's."""
    return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/root", "LANG": "C.UTF-8"}


def _image_id(spec: Spec, image: str) -> str | None:
    out = subprocess.run(_as_user(spec, ["podman", "image", "inspect", "--format",
                                         "{{.Id}}", image]),
                         capture_output=True, text=True, check=False)
    return out.stdout.strip() or None if out.returncode == 0 else None


def provide(image: str, spec: Spec, dest: Path) -> dict[str, Any]:
    """Hand the Docker Engine's image to Podman's store (nothing when the same id is
    there); returns the facts the run names the image by."""
    info = json.loads(run_quiet(["docker", "image", "inspect", image]))[0]
    wanted = info["Id"].removeprefix("sha256:")
    if _image_id(spec, wanted) is None:
        if rootless_user(spec):
            saved = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
            assert saved.stdout is not None
            try:
                run_quiet(_as_user(spec, ["podman", "load"]), stdin=saved.stdout)
            finally:
                saved.stdout.close()  # a load that failed early must not leave save blocked
                if saved.poll() is None:
                    saved.kill()
                saved.wait()
        else:
            run_quiet(["podman", "pull", "-q", f"docker-daemon:{image}"])
    found = _image_id(spec, wanted)
    if found != wanted:
        raise RuntimeError(f"Podman holds image {found} after the hand-over, not Docker's "
                           f"{wanted}")
    return {"name": image, "id": f"sha256:{wanted}", "runtime_ref": wanted,
            "user": rootless_user(spec), "config": docker_config(info)}


def docker_config(info: dict[str, Any]) -> dict[str, Any]:
    cfg = info.get("Config") or {}
    env = dict(item.split("=", 1) for item in cfg.get("Env") or [] if "=" in item)
    return {"env": env, "working_dir": cfg.get("WorkingDir") or "/",
            "entrypoint": list(cfg.get("Entrypoint") or []), "cmd": list(cfg.get("Cmd") or [])}


def cleanup(spec: Spec, labels: dict[str, str]) -> list[str]:
    """Remove containers of this checkout's campaign whose launcher is gone (a killed run:
    the podman client dies with its launcher, conmon keeps the container)."""
    filters = [f"--filter=label={k}={labels[k]}" for k in
               ("containertax.campaign", "containertax.root", "containertax.host")]
    out = subprocess.run(_as_user(spec, ["podman", "ps", "-a", "--format", "json", *filters]),
                         capture_output=True, text=True, check=False)
    if out.returncode != 0 or not out.stdout.strip():
        return []
    removed = []
    for c in json.loads(out.stdout):
        mine = c.get("Labels") or {}
        named = labels.get("remove")  # the run's own container, left by a timeout
        if _owner_gone(mine) or (named is not None and mine.get("containertax.name") == named):
            name = (c.get("Names") or [c.get("Id")])[0]
            subprocess.run(_as_user(spec, ["podman", "rm", "-f", name]), capture_output=True,
                           check=False)
            removed.append(name)
    return removed


def _owner_gone(labels: dict[str, str]) -> bool:
    pid = int(labels.get("containertax.owner_pid") or 0)
    try:
        start = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return True
    return pid <= 0 or start != labels.get("containertax.owner_start")


def explain(env_id: str, spec: Spec, message: str, source: str) -> str | None:
    """Podman's own error ('Error: ...', exit status 125 or 126: podman-run(1)) as a
    sentence; None for anything else (the workload's own failure)."""
    if not any(line.startswith("Error: ") for line in message.splitlines()):
        return None
    name = words(spec)
    user = rootless_user(spec)
    said = docker.rlimit_refusal(
        name, env_id, spec, message, source,
        "set the limit explicitly and at most the host's hard limit "
        f"(environments.{env_id}.options.ulimits), or raise the host's limit once "
        "(/etc/security/limits.d or the service's LimitNOFILE/LimitNPROC),")
    if said:
        return said
    if user and "permission denied" in message.lower():
        return (f"environment {env_id}: {name}: the host user '{user}' cannot reach a folder "
                f"the run binds ({' '.join(message.split())[-300:]}). Fix: make the campaign's "
                "results folder and every folder above it searchable by that user (chmod "
                "o+x), or run the campaign from such a folder.")
    if "/dev/mqueue" in message:
        return (f"environment {env_id}: {name} cannot share the host's IPC namespace: this "
                "host has no /dev/mqueue (POSIX message queues; systemd mounts it, a "
                "container host may not). Fix, once for the host: mkdir -p /dev/mqueue && "
                "mount -t mqueue mqueue /dev/mqueue; or remove "
                f"environments.{env_id}.options.ipc from {source}.")
    if "cgroups in hybrid mode not supported" in message:
        return (f"environment {env_id}: {name}: crun refuses this host's hybrid cgroups. Fix: "
                "apt-get install runc (scripts/setup.sh does); every launch then names it "
                "(runtimes/podman.py, oci_runtime).")
    if "image not known" in message or "unable to find" in message.lower():
        return (f"environment {env_id}: {name} does not hold image '{spec.get('image')}'. "
                "Fix: let the workflow hand it over (its provide rule runs podman pull "
                "docker-daemon:IMAGE, or docker save | podman load for a rootless user): run "
                "snakemake rather than this step alone; or correct "
                f"environments.{env_id}.image in {source}.")
    if user and ("does not exist" in message or "no such user" in message.lower()):
        return (f"environment {env_id}: {name}: host user '{user}' does not exist. Fix: "
                f"create it with subordinate ids (scripts/setup.sh does: useradd {user}; "
                f"usermod --add-subuids 200000-265535 --add-subgids 200000-265535 {user}), or "
                f"correct environments.{env_id}.options.rootless in {source}.")
    if user and ("subuid" in message or "newuidmap" in message or "subgid" in message):
        return (f"environment {env_id}: {name}: user '{user}' has no subordinate ids. Fix: "
                f"usermod --add-subuids 200000-265535 --add-subgids 200000-265535 {user} "
                "(scripts/setup.sh does it), then podman system migrate as that user.")
    return (f"environment {env_id}: {name} refused to run the container: "
            f"{' '.join(message.split())[-600:]}. Fix the host's Podman (podman info) or "
            f"environments.{env_id}.options in {source}.")


def warnings(env_id: str, spec: Spec) -> list[str]:
    out = docker.warnings(env_id, spec)
    _, hard = limit_pairs(("nproc",))["nproc"]
    if "nproc" not in ((spec.get("options") or {}).get("ulimits") or {}) \
            and (hard < 0 or hard > PODMAN_NPROC):
        out.append(f"environments.{env_id}: {words(spec)} runs with RLIMIT_NPROC "
                   f"{PODMAN_NPROC}, native with {'unlimited' if hard < 0 else hard} (Podman "
                   f"lowers its own to {PODMAN_NPROC}); to run every environment with the "
                   f"same, set this host's nproc hard limit to at most {PODMAN_NPROC} once "
                   "(ulimit -Hu in the shell that runs snakemake, or LimitNPROC)")
    return out


def problems(env_id: str, spec: Spec) -> list[str]:
    user = rootless_user(spec)
    if user:
        try:
            pwd.getpwnam(user)
        except KeyError:
            return [f"key 'environments.{env_id}.options.rootless': host user {user!r} does "
                    f"not exist; create it with subordinate ids (scripts/setup.sh creates "
                    f"'containertax'), or name another."]
    return []


RUNTIME = Runtime(
    kind="podman", launcher="command", launcher_class=CommandLauncher,
    words=words, runtime="Podman",
    version_argv=("podman", "--version"), describe=describe,
    needs_image=True, image_step="provide",
    options_schema="podman_options", keys=frozenset({"options", "mounts"}),
    needs_root=True, binaries=("podman",), problems=problems, explain=explain,
    cleanup_words="a container of a killed launcher (conmon keeps it) is removed before "
                  "the next run, by its labels",
    command=command, process_env=process_env, provide=provide, cleanup=cleanup,
    refusal_codes=(125, 126, 127), host_user=rootless_user, limits=limits, warnings=warnings,
    host_problems=host_problems,
    context={"ipc": "private", "shm": "private, 64m", "network": "bridge",
             "seccomp": "Podman's default filter", "user": "root in the container",
             "ulimits": "the launcher's (nproc at most 32768)",
             "cgroup": "a container cgroup"})
