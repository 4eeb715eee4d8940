"""What every probe reports about the environment it ran in, and how it writes its output.

Probes run with the probe folder first on sys.path, in whatever interpreter the environment
has: standard library only here.
"""

import contextlib
import errno
import json
import os
import platform
import resource
import sys
import time

# The probe's marks on CLOCK_MONOTONIC, which a container shares with its host: the
# launcher's marks and these lie on one axis (containertax.workloads.timeline names them).
MARKS: dict = {}


def mark(name: str, t: float | None = None) -> None:
    """The moment `name` of this run (now, or t read earlier with time.monotonic())."""
    MARKS[name] = time.monotonic() if t is None else t


def process_status() -> dict:
    """What the kernel applies to this process that a launcher may change: the seccomp
    mode (Docker's default profile is mode 2), the speculative-store-bypass mitigation
    (forced on for seccomp'd processes where the kernel's default is 'seccomp'), no_new_privs
    and the cores it may run on."""
    keys = ("Seccomp", "Seccomp_filters", "NoNewPrivs", "Speculation_Store_Bypass",
            "SpeculationIndirectBranch", "Cpus_allowed_list", "Mems_allowed_list")
    out = {}
    text = _read("/proc/self/status") or ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in keys:
            out[key] = value.strip()
    return out


def environment_facts() -> dict:
    facts = {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "platform": platform.platform(),
        "hostname": platform.node(),
        "cpus_allowed": len(os.sched_getaffinity(0)),
        "pid": os.getpid(),
    }
    try:
        with open("/proc/self/cgroup") as fh:
            facts["cgroup"] = fh.read().strip().splitlines()[-1]
    except OSError:
        facts["cgroup"] = None
    facts["in_container_hint"] = os.path.exists("/.dockerenv")
    facts["markers"] = host_markers()
    facts["status"] = process_status()
    return facts


def _read(path: str) -> str | None:
    try:
        with open(path, errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def host_markers(root: str = "/") -> dict:
    """What this process can see of virtualisation and containment, read from inside the
    environment (a "native" run may itself be in a VM or a container; the paper says so).
    None where a file is unreadable: unknown, not absent. systemd-detect-virt is not in
    every image, so the files are read directly. root: a fake root for tests."""
    def at(path: str) -> str:
        return os.path.join(root, path.lstrip("/"))

    cpuinfo = _read(at("/proc/cpuinfo"))
    hypervisor = None
    if cpuinfo is not None:
        flags = [line.split(":", 1)[1].split() for line in cpuinfo.splitlines()
                 if line.startswith("flags") and ":" in line]
        hypervisor = any("hypervisor" in f for f in flags) if flags else None
    dmi = {}
    for key in ("sys_vendor", "product_name"):
        text = _read(at(f"/sys/class/dmi/id/{key}"))
        dmi[key] = text.strip() if text is not None else None
    cgroup = _read(at("/proc/self/cgroup"))
    return {
        "hypervisor_flag": hypervisor,
        "dmi": dmi,
        "dockerenv": os.path.exists(at("/.dockerenv")),
        "containerenv": os.path.exists(at("/run/.containerenv")),
        "cgroup": cgroup.strip().splitlines() if cgroup is not None else None,
    }


def header(probe: str, t_enter: float, import_s: float, software: dict) -> dict:
    """What every probe's output starts with: the host computes start-up from t_enter."""
    return {"probe": probe, "t_enter_unix": t_enter, "import_s": import_s,
            "environment": environment_facts(), "software": software}


def vm_hwm_kib() -> int | None:
    """This process's own peak resident set (VmHWM): the kernel keeps it per address space,
    and exec starts a new one, so nothing of the launching process is counted."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def max_rss_kib(children: bool = False) -> tuple[int, str]:
    """Peak RSS and where it was read. Own process: VmHWM. Not getrusage(RUSAGE_SELF):
    ru_maxrss carries over fork and exec, so a probe started by a large launcher (the
    harness, natively) reports the launcher's peak while one started by a container
    runtime does not. children=True (the probe only launches the benchmark): the largest
    reaped child's ru_maxrss, whose inherited part is this small probe's own RSS, the same
    in every environment."""
    if children:
        return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "ru_maxrss_children"
    hwm = vm_hwm_kib()
    if hwm is None:  # no /proc: say so rather than report an inherited value as ours
        return -1, "unavailable"
    return hwm, "VmHWM"


def write_atomic(path: str, data: dict) -> None:
    """The result, whole or not at all; a full disk is one line on stderr and exit status
    28 (ENOSPC), not a traceback that the run step's message would repeat."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w") as fh:
            json.dump(data, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        sys.stderr.write(f"containertax probe: cannot write {path}: {exc.strerror} "
                         "(disk full)\n")
        raise SystemExit(errno.ENOSPC) from None


def finish(path: str, result: dict, children: bool = False) -> int:
    """A measured run's last step: peak RSS, exit time, the output written atomically."""
    result["max_rss_kib"], result["max_rss_source"] = max_rss_kib(children)
    mark("teardown")
    result["timeline"] = {"clock": "CLOCK_MONOTONIC", "marks": dict(MARKS)}
    result["t_exit_unix"] = time.time()
    write_atomic(path, result)
    return 0


def torch_facts(torch, device: str) -> dict:
    cuda = device.startswith("cuda") and torch.cuda.is_available()
    return {"torch": torch.__version__, "cuda": torch.version.cuda,
            "device_name": torch.cuda.get_device_name(0) if cuda else None}


def torch_sync(torch, device: str):
    return torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)


def torch_peak_bytes(torch, device: str) -> dict:
    if not device.startswith("cuda"):
        return {"peak_device_bytes": 0}
    return {"peak_device_bytes": torch.cuda.max_memory_allocated(),
            "peak_reserved_bytes": torch.cuda.max_memory_reserved()}
