"""Environment kinds: one module each (native, chroot, docker, podman, charliecloud,
apptainer), each a `Runtime` declaration (base.py) with its launcher (launch.py: what every
launcher shares; command.py: the command-line runtimes' launcher; passthrough.py and
hostcpus.py: the GPU and cores a launcher hands the process). REGISTRY is the one list of kinds: the
config schema names none (validation refuses a kind the registry lacks, naming the key),
and tests/test_runtime_contract.py holds the record schema's list equal to it. Adding a
kind: a module here, one line in REGISTRY, its options' $defs in the config schema where
it takes options, its name in the record schema's list (docs/architecture.md, Where to
add)."""

from __future__ import annotations

from containertax.runtimes import apptainer, charliecloud, chroot, docker, native, podman
from containertax.runtimes.base import Bind, CommandLaunch, Runtime

__all__ = ["KINDS", "REGISTRY", "Bind", "CommandLaunch", "Runtime", "get"]

REGISTRY: dict[str, Runtime] = {r.kind: r for r in (
    native.RUNTIME, chroot.RUNTIME, docker.RUNTIME, podman.RUNTIME, charliecloud.RUNTIME,
    apptainer.RUNTIME)}
KINDS = tuple(REGISTRY)


def get(kind: str) -> Runtime:
    if kind not in REGISTRY:
        raise KeyError(f"unknown environment kind {kind!r} (known: {', '.join(KINDS)})")
    return REGISTRY[kind]
