"""What every probe reports about the environment it ran in, and how it writes its output.

Probes run with the probe folder first on sys.path, in whatever interpreter the environment
has: standard library only here.
"""

import json
import os
import platform
import resource
import sys
import time


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
    return facts


def header(probe: str, t_enter: float, import_s: float, software: dict) -> dict:
    """What every probe's output starts with: the host computes start-up from t_enter."""
    return {"probe": probe, "t_enter_unix": t_enter, "import_s": import_s,
            "environment": environment_facts(), "software": software}


def max_rss_kib(children: bool = False) -> int:
    """Peak RSS of this process, or (children=True) of the largest finished child: the
    benchmark itself when the probe only launches it."""
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    return resource.getrusage(who).ru_maxrss


def write_atomic(path: str, data: dict) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=1)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def finish(path: str, result: dict, children: bool = False) -> int:
    """A measured run's last step: peak RSS, exit time, the output written atomically."""
    result["max_rss_kib"] = max_rss_kib(children)
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
