"""What an environment kind declares: one module per kind (native.py, chroot.py, docker.py,
podman.py, charliecloud.py, apptainer.py), each a `Runtime`, as a workload kind is a
`Workload`. Everything the rest of the project reads of a kind is here: how it launches,
which config keys it takes and their checks, whether it needs an image and how the image
gets there, what preflight requires, how it cleans up, its provenance (runtime name and
version, what is isolated) and its words in the paper. This layer sits below `campaign`
(config validation reads it) and imports only `core`; each kind's launcher is in its module
(launch.py what they share), and execution/environments.py starts it from the declaration
(`launcher_class`), never naming a kind.
tests/test_runtime_contract.py fails when a registered kind leaves a field undeclared.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from containertax.runtimes.launch import INSIDE, Launcher

Spec = dict[str, Any]


@dataclass(frozen=True)
class Bind:
    """A host folder at a place inside the environment."""

    host: Path
    inside: Path
    read_only: bool


@dataclass(frozen=True)
class CommandLaunch:
    """What a command-line runtime (Podman, Charliecloud, Apptainer) needs to build its
    command: the environment's settings, where its image is, the binds, the variables the
    process gets, and the workload's argv (the same in every environment)."""

    env_id: str
    spec: Spec
    image: str  # the image's name (or where the runtime keeps it: a folder, a .sif)
    binds: list[Bind]
    env: dict[str, str]
    argv: list[str]
    labels: dict[str, str] = field(default_factory=dict)
    cpuset: str | None = None
    limits: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> soft, hard


@dataclass(frozen=True)
class Ran:
    """An environment as a record holds it (environment.spec and .resolved) and whether
    the run saw a GPU (its telemetry): what a kind's `describe` renders its words from."""

    spec: Spec
    resolved: dict[str, Any]
    gpu_recorded: bool = False

    @property
    def options(self) -> Spec:
        return self.spec.get("options") or {}

    @property
    def image(self) -> str | None:
        return (self.resolved.get("image") or {}).get("name") or self.spec.get("image")


@dataclass(frozen=True)
class Entry:
    """One environment's set-up in its kind's own words, as the environments table prints
    it (publishing decodes nothing): where its software came from, the host folders bound
    ('host:inside:ro|rw'; the harness's probe and work folders left out), how it reached
    the GPU, what was isolated from the host and the flags that set it up, each from the
    options that ran."""

    software: str
    mounts: tuple[str, ...]
    gpu: str
    isolation: str
    flags: tuple[str, ...]


HARNESS = (INSIDE / "probe", INSIDE / "work")


def user_mounts(binds: list[str] | None) -> tuple[str, ...]:
    """'host:inside:mode' binds without the harness's own probe and work folders."""
    return tuple(b for b in binds or [] if not any(
        f":{t}:" in b or b.endswith(f":{t}") for t in map(str, HARNESS)))


def namespaces_words(options: Spec, user: bool = False) -> str:
    """A container's namespaces as its options left them: --ipc host and --network host
    share the host's; --network none leaves a namespace with only a loopback interface."""
    names = (["user"] if user else []) + ["mount", "PID"]
    if options.get("ipc") != "host":
        names.append("IPC")
    names.append("UTS")
    network = options.get("network")
    if network == "none":
        names.append("loopback-only network")
    elif network != "host":
        names.append("network")
    return f"namespaces ({', '.join(names)}) and cgroups"


@dataclass(frozen=True)
class Runtime:
    """One environment kind's declaration. Fields left None are what the contract test
    names (DECLARED); `command` is required only of launcher "command"."""

    kind: str
    # how it launches: "process" (the host's own), "chroot" (a mount-namespace script),
    # "docker" (the Docker SDK), "command" (the runtime's CLI, built by `command`)
    launcher: str | None = None
    # its launcher: a runtimes.launch.Launcher subclass in the kind's own module (native.py,
    # chroot.py, docker.py; command.py's CommandLauncher for a "command" launcher), which
    # execution/environments.py starts for an environment of this kind
    launcher_class: type | None = None
    # the paper's name of an environment of this kind, from its settings (e.g. rootless)
    words: Callable[[Spec], str] | None = None
    # the runtime software the system table names, and the command that prints its version
    runtime: str | None = None
    version_argv: tuple[str, ...] | None = None
    # its environments-table entry (Entry: software, mounts, GPU access, isolation words
    # and set-up flags) rendered from a record's settings, from the options that ran
    describe: Callable[[Ran], Entry] | None = None
    # image: whether it needs one, and how it gets to the runtime: "none", "engine" (used
    # from the local Docker Engine), "rootfs" (the rootfs rule exports it), "provide" (the
    # provide rule hands it to the runtime: `provide`)
    needs_image: bool | None = None
    image_step: str | None = None
    # config keys beyond kind/description/env/python: "options" (validated by the config
    # schema's $defs named here), "gpu", "mounts"
    options_schema: str | None = None
    keys: frozenset[str] | None = None
    # preflight: root required, binaries required on the host
    needs_root: bool | None = None
    binaries: tuple[str, ...] | None = None
    # what this host lacks for the kind beyond root and its binaries (Podman: an OCI runtime
    # that accepts the host's cgroup layout), each a sentence with the fix; preflight refuses
    # on any, and the tests that need the kind skip (or fail, where required) with them
    host_problems: Callable[[Spec], list[str]] | None = None
    # the semantic checks of an environment's settings beyond the schema, each naming the key
    problems: Callable[[str, Spec], list[str]] | None = None
    # a runtime's refusal (its own error output) as a sentence naming the runtime and the fix
    explain: Callable[[str, Spec, str, str], str | None] | None = None
    # what is left behind when a launcher is killed, and how it is removed (words; the
    # cleanup itself is `cleanup`, where a runtime leaves anything)
    cleanup_words: str | None = None
    # command launchers: the runtime's command line, the process environment it runs in,
    # the image handed to the runtime (returns facts; None where nothing to do); any kind:
    # the removal of what a killed launcher left (names of what was removed; before any
    # run, and after a command launcher's run)
    command: Callable[[CommandLaunch], list[str]] | None = None
    process_env: Callable[[Spec, dict[str, str]], dict[str, str]] | None = None
    provide: Callable[[str, Spec, Path], dict[str, Any]] | None = None
    cleanup: Callable[[Spec, dict[str, str]], list[str]] | None = None
    # the runtime's exit statuses that may mean it refused before the workload ran (Podman's
    # 125-127), where `explain` turns its output into a sentence (None: the workload's own)
    refusal_codes: tuple[int, ...] = ()
    # the host user the process runs as (rootless runtimes: its work folder is handed over)
    host_user: Callable[[Spec], str | None] | None = None
    # the process under test starts from the image's ENV (chroot, Charliecloud) rather than
    # from the runtime's own handling of it (Docker, Podman)
    image_env: bool = False
    # limits the runtime would set for the container unless told, passed explicitly as the
    # launching process's (native's) own (podman.py says why): name -> (soft, hard)
    limits: Callable[[Spec], dict[str, tuple[int, int]]] | None = None
    # the process sees the host's filesystem (a wrapper such as systemd-run or numactl, no
    # binds): the probe, work and cache folders keep their host paths
    host_paths: bool = False
    # the run context the kind itself gives a process, in words (campaign/parity.py):
    # ipc, shm, network, seccomp, user, ulimits, cgroup; a difference between two kinds'
    # defaults is part of the factor under test, one a config option makes is declared
    context: dict[str, str] | None = None
    # the runtime binds only onto folders the image already has (ch-run): the command
    # launcher makes each bind's target in the image directory before the run
    makes_bind_targets: bool = False
    # preflight's warnings of an environment's settings (a limit above the host's, ...)
    warnings: Callable[[str, Spec], list[str]] | None = None

    def label(self, spec: Spec) -> str:
        return self.words(spec) if self.words else self.kind

    def entry(self, environment: dict[str, Any], gpu_recorded: bool = False) -> Entry:
        """A record's environment (its spec and resolved settings) in this kind's words."""
        return self.describe(Ran(environment.get("spec") or {},  # type: ignore[misc]
                                 environment.get("resolved") or {}, gpu_recorded))

    def version(self) -> str | None:
        """The runtime's version as it reports it (None where it is absent)."""
        if not self.version_argv or shutil.which(self.version_argv[0]) is None:
            return None
        try:
            out = subprocess.run(list(self.version_argv), capture_output=True, text=True,
                                 timeout=30, check=False,  # ch-run wants $USER
                                 env={**os.environ, "USER": os.environ.get("USER", "root")})
        except (OSError, subprocess.TimeoutExpired):
            return None
        text = (out.stdout or out.stderr).strip().splitlines()
        return text[0].split()[-1].lstrip("v") if out.returncode == 0 and text else None


# What every kind must declare (tests/test_runtime_contract.py).
DECLARED = ("launcher", "launcher_class", "words", "runtime", "describe", "needs_image",
            "image_step", "keys", "needs_root", "binaries", "problems", "explain",
            "cleanup_words", "context")
LAUNCHERS = ("process", "chroot", "docker", "command")
IMAGE_STEPS = ("none", "engine", "rootfs", "provide")
KEYS = frozenset({"options", "gpu", "mounts"})


def contract_problems(r: Runtime) -> list[str]:
    """What a kind fails to declare, or declares inconsistently, each in words."""
    out = [f"environment kind {r.kind!r} does not declare {name!r} (runtimes/base.py "
           "Runtime)" for name in DECLARED if getattr(r, name) is None]
    if r.launcher is not None and r.launcher not in LAUNCHERS:
        out.append(f"environment kind {r.kind!r}: launcher {r.launcher!r} is not one of "
                   f"{list(LAUNCHERS)}")
    if r.image_step is not None and r.image_step not in IMAGE_STEPS:
        out.append(f"environment kind {r.kind!r}: image_step {r.image_step!r} is not one of "
                   f"{list(IMAGE_STEPS)}")
    if r.needs_image is not None and r.image_step is not None \
            and r.needs_image != (r.image_step != "none"):
        out.append(f"environment kind {r.kind!r}: needs_image and image_step disagree")
    if r.launcher_class is not None and not (isinstance(r.launcher_class, type)
                                             and issubclass(r.launcher_class, Launcher)):
        out.append(f"environment kind {r.kind!r}: launcher_class {r.launcher_class!r} is not "
                   "a runtimes.launch.Launcher")
    if r.launcher == "command" and (r.command is None or r.process_env is None):
        out.append(f"environment kind {r.kind!r}: a command launcher declares 'command' and "
                   "'process_env'")
    if r.image_step == "provide" and r.provide is None:
        out.append(f"environment kind {r.kind!r}: image_step 'provide' declares 'provide'")
    if r.keys is not None and not r.keys <= KEYS:
        out.append(f"environment kind {r.kind!r}: keys {sorted(r.keys - KEYS)} are not "
                   f"config keys of an environment ({sorted(KEYS)})")
    if r.keys is not None and ("options" in r.keys) != (r.options_schema is not None):
        out.append(f"environment kind {r.kind!r}: takes 'options' exactly when it names "
                   "their schema (options_schema)")
    if r.words is not None and (not r.words({}) or r.words({}) == r.kind):
        out.append(f"environment kind {r.kind!r}: words must be words, not the raw id")
    return out


# a host process's context (native, chroot, and runtimes that leave these to the host)
HOST_CONTEXT = {"ipc": "host", "shm": "the host's /dev/shm", "network": "host",
                "seccomp": "none", "user": "the launcher's", "ulimits": "the launcher's",
                "cgroup": "the launcher's"}


def limit_pairs(names: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    """The launching process's own soft and hard limits (what a native process gets)."""
    import resource

    out = {}
    for name in names:
        soft, hard = resource.getrlimit(getattr(resource, f"RLIMIT_{name.upper()}"))
        out[name] = (-1 if soft == resource.RLIM_INFINITY else soft,
                     -1 if hard == resource.RLIM_INFINITY else hard)
    return out


def run_quiet(argv: list[str], stdin: Any = None, timeout: float = 1800) -> str:
    """A step of handing an image over; its error output in the exception's message."""
    done = subprocess.run(argv, stdin=stdin, capture_output=True, text=True, timeout=timeout,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed (status {done.returncode}): "
                           f"{(done.stderr or done.stdout).strip()[-800:]}")
    return done.stdout


def no_problems(env_id: str, spec: Spec) -> list[str]:
    return []


def rlimit_names() -> dict[int, str]:
    """Resource limit number -> the name the config schema takes (ulimits keys): RLIMIT_OFILE
    is BSD's alias of RLIMIT_NOFILE (both 7 on Linux); `nofile` is the name Docker, Podman
    and the schema use, so a sorted scan that ends on OFILE named a key the schema refuses."""
    import resource

    names = ("as", "core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice",
             "nofile", "nproc", "rss", "rtprio", "rttime", "sigpending", "stack")
    return {getattr(resource, f"RLIMIT_{n.upper()}"): n for n in names
            if hasattr(resource, f"RLIMIT_{n.upper()}")}
