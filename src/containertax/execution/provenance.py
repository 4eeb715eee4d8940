"""System facts recorded with every campaign and run: what ran, where, from which code."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

from containertax.core import packaged

REPO = packaged.checkout()  # the checkout whose commit a record names
PACKAGES = ["containertax", "snakemake", "docker", "numpy", "pandas", "nvidia-ml-py"]


def _cmd(argv: list[str], cwd: Path | None = None) -> str | None:
    try:
        out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


@cache
def git() -> dict[str, Any]:
    commit = _cmd(["git", "rev-parse", "HEAD"], REPO)
    status = _cmd(["git", "status", "--porcelain", "--untracked-files=no"], REPO)
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def host() -> dict[str, Any]:
    uname = platform.uname()
    return {
        "hostname": uname.node,
        "kernel": uname.release,
        "machine": uname.machine,
        "python": platform.python_version(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_total_mib": memory_total_mib(),
        "packages": package_versions(),
    }


def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def memory_total_mib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def gpu() -> dict[str, Any]:
    """GPU and driver through NVML, or why there is none."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:
        return {"present": False, "reason": f"{type(exc).__name__}: {exc}"}
    try:
        def text(v: Any) -> str:
            return v.decode() if isinstance(v, bytes) else str(v)

        devices = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            devices.append({"index": i, "name": text(pynvml.nvmlDeviceGetName(h)),
                            "uuid": text(pynvml.nvmlDeviceGetUUID(h))})
        return {
            "present": bool(devices),
            "driver": text(pynvml.nvmlSystemGetDriverVersion()),
            "devices": devices,
        }
    finally:
        pynvml.nvmlShutdown()


def docker_engine() -> dict[str, Any]:
    if shutil.which("docker") is None and not Path("/var/run/docker.sock").exists():
        return {"present": False}
    try:
        import docker

        v = docker.from_env(timeout=20).version()
        return {"present": True, "version": v.get("Version"), "api": v.get("ApiVersion")}
    except Exception as exc:
        return {"present": False, "reason": f"{type(exc).__name__}: {exc}"}


def runtime_versions() -> dict[str, str | None]:
    """Each registered command-line runtime's version on this host (None: absent)."""
    from containertax import runtimes

    return {kind: r.version() for kind, r in runtimes.REGISTRY.items()
            if r.launcher == "command"}


def system_facts() -> dict[str, Any]:
    return {
        "host": host(),
        "cpu": {"model": cpu_model(), "count": os.cpu_count()},
        "memory_total_mib": memory_total_mib(),
        "docker": docker_engine(),
        "runtimes": runtime_versions(),
        "gpu": gpu(),
        "packages": package_versions(),
        "git": git(),
    }
