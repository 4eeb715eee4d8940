"""The GPU for a chroot or a container without the NVIDIA Container Toolkit.

What the toolkit does, done by hand: the /dev/nvidia* device nodes, and the host driver's
user-space libraries (found through the dynamic linker's cache, as the toolkit finds them)
bound into one folder of the environment under their sonames, which LD_LIBRARY_PATH names.
The driver libraries must match the host's kernel module, so they always come from the
host, never from the image.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

# Where the driver libraries appear inside the environment (a tmpfs in a chroot).
DRIVER_DIR = Path("/usr/local/containertax-driver")
# The driver's compute and utility libraries (the toolkit's "compute,utility" set).
DRIVER_LIBRARIES = (
    "libcuda.so", "libcudadebugger.so", "libnvidia-ml.so", "libnvidia-cfg.so",
    "libnvidia-ptxjitcompiler.so", "libnvidia-nvvm.so", "libnvidia-gpucomp.so",
    "libnvidia-opencl.so", "libnvidia-allocator.so", "libnvidia-pkcs11.so",
    "libnvidia-pkcs11-openssl3.so", "libnvidia-fatbinaryloader.so", "libnvidia-compiler.so",
)
FALLBACK_DIRS = ("/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/x86_64-linux-gnu",
                 "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")
_LDCONFIG_LINE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$")


class PassthroughError(RuntimeError):
    """No GPU driver to pass through; the message says what was searched."""


def is_driver_library(name: str) -> bool:
    return any(name == lib or name.startswith(lib + ".") for lib in DRIVER_LIBRARIES)


def parse_ldconfig(text: str, machine: str = os.uname().machine) -> dict[str, str]:
    """soname -> path of the driver libraries in `ldconfig -p` output, for this machine's
    architecture only (a 32-bit copy must not shadow the 64-bit one)."""
    arch = {"x86_64": "x86-64", "aarch64": "AArch64"}.get(machine, machine)
    found: dict[str, str] = {}
    for line in text.splitlines():
        m = _LDCONFIG_LINE.match(line)
        if m and is_driver_library(m.group(1)) and arch in m.group(2):
            found.setdefault(m.group(1), m.group(3))
    return found


def scan_dirs(dirs: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for d in dirs:
        base = Path(d)
        if not base.is_dir():
            continue
        for path in sorted(base.glob("lib*.so*")):
            if is_driver_library(path.name) and path.exists():
                found.setdefault(path.name, str(path))
    return found


def driver_libraries() -> dict[str, str]:
    """soname -> real file of every driver library on this host."""
    try:
        text = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True,
                              check=False).stdout
    except OSError:
        text = ""
    found = parse_ldconfig(text)
    if not any(name.startswith("libcuda.so") for name in found):
        extra = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
        found = {**scan_dirs([*extra, *FALLBACK_DIRS]), **found}
    libs = {name: os.path.realpath(path) for name, path in found.items()
            if os.path.exists(path)}
    if not any(name.startswith("libcuda.so") for name in libs):
        raise PassthroughError(
            "no NVIDIA driver library (libcuda.so*) found through `ldconfig -p` or in "
            f"{', '.join(FALLBACK_DIRS)}: install the driver, or remove the GPU options "
            "(environments.<id>.gpu / options.nvidia_libraries) from the config."
        )
    return libs


def device_nodes(dev: Path = Path("/dev"), minor: int | None = None) -> list[str]:
    """The GPU device nodes: every /dev/nvidia<N>, or (a lane's GPU, by its NVML minor
    number) only that one, with the control nodes (nvidiactl, nvidia-uvm, ...) either way."""
    nodes = sorted(str(p) for p in dev.glob("nvidia*") if p.is_char_device()
                   and (minor is None or not p.name[len("nvidia"):].isdigit()
                        or int(p.name[len("nvidia"):]) == minor))
    nodes += sorted(str(p) for p in (dev / "nvidia-caps").glob("*") if p.is_char_device())
    return nodes


def ld_library_path(current: str | None) -> str:
    return f"{DRIVER_DIR}:{current}" if current else str(DRIVER_DIR)
