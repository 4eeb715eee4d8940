"""What a process sees of memory at the moment an engine sizes its KV cache, read from
inside the environment (standard library only: probes run in the image's interpreter).

TensorRT-LLM's PyTorch backend sizes the KV cache from the device's free memory:
KvCacheCreator.estimate_max_tokens reads torch.cuda.mem_get_info() after a profiling run,
and _cal_max_tokens takes available = (total - peak + tmp_kv) * free_gpu_memory_fraction
(default 0.9; tensorrt_llm/_torch/pyexecutor/_util.py, read in the code index, the version
whose log line ends "device total memory %.2f GiB"). On GB10 device memory is the host's
unified memory, so what the driver calls free depends on the host's free memory, and
whether a container's memory cgroup enters it is the open question. This module records
every input to that chain: NVML/CUDA free where a GPU answers, MemAvailable and Cached
(/proc/meminfo), and the process's own memory cgroup (v2: memory.max/current/peak/stat and
memory.events; v1: limit_in_bytes/usage_in_bytes/max_usage_in_bytes/stat and oom_control):
the events' oom_kill says whether the cgroup's limit killed a process (a 70B model under
`--memory 100g` where unified-memory allocations are charged to the cgroup).
"""

import ctypes
import os

STAT_KEYS = ("anon", "file", "shmem", "file_mapped", "kernel", "sock", "unevictable",
             "cache", "rss", "mapped_file", "total_cache", "total_rss", "hierarchical_memory_limit")
UNLIMITED = 2**62  # v1 prints 9223372036854771712 for no limit


def _read(path):
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


def meminfo(root="/"):
    """MemTotal, MemAvailable, Cached, ... in bytes."""
    text = _read(os.path.join(root, "proc/meminfo")) or ""
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[name] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return out


def _int(text):
    if text is None:
        return None
    text = text.strip()
    if text == "max":
        return None  # no limit
    try:
        value = int(text)
    except ValueError:
        return None
    return None if value >= UNLIMITED else value


def _stat(text):
    out = {}
    for line in (text or "").splitlines():
        k, _, v = line.partition(" ")
        if k in STAT_KEYS and v.strip().isdigit():
            out[k] = int(v)
    return out


def _events(text):
    """memory.events (v2: 'oom_kill 1') or memory.oom_control (v1: 'oom_kill 1')."""
    out = {}
    for line in (text or "").splitlines():
        k, _, v = line.partition(" ")
        if k in ("low", "high", "max", "oom", "oom_kill", "oom_group_kill") \
                and v.strip().isdigit():
            out[k] = int(v)
    return out


def cgroup_memory(root="/"):
    """The memory cgroup of this process, read where this environment mounts it: the path
    of /proc/self/cgroup under /sys/fs/cgroup, else the mount's root (a container without
    its own cgroup namespace names the host's path, but mounts its own cgroup at the root)."""
    lines = (_read(os.path.join(root, "proc/self/cgroup")) or "").splitlines()
    v1 = [ln.split(":", 2)[2] for ln in lines if ln.split(":")[1:2] == ["memory"]]
    v2 = [ln.split(":", 2)[2] for ln in lines if ln.startswith("0::")]
    base = os.path.join(root, "sys/fs/cgroup")
    if v1 and os.path.isdir(os.path.join(base, "memory")):
        version, mount, own = 1, os.path.join(base, "memory"), v1[0]
        names = {"max": "memory.limit_in_bytes", "current": "memory.usage_in_bytes",
                 "peak": "memory.max_usage_in_bytes", "stat": "memory.stat",
                 "events": "memory.oom_control"}
    elif v2:
        version, mount, own = 2, base, v2[0]
        names = {"max": "memory.max", "current": "memory.current", "peak": "memory.peak",
                 "stat": "memory.stat", "events": "memory.events"}
    else:
        return {"version": None, "path": None, "read_at": None}
    folder = os.path.join(mount, own.lstrip("/"))
    if not os.path.exists(os.path.join(folder, names["current"])):
        folder = mount  # this environment's own cgroup, mounted at the root
    values = {k: _int(_read(os.path.join(folder, names[k]))) for k in ("max", "current", "peak")}
    return {"version": version, "path": own, "read_at": folder,
            "max_bytes": values["max"], "current_bytes": values["current"],
            "peak_bytes": values["peak"], "stat": _stat(_read(os.path.join(folder,
                                                                           names["stat"]))),
            "events": _events(_read(os.path.join(folder, names["events"])))}


def nvml_free():
    """Device memory free/total from NVML (None where no GPU or, as on GB10, where the
    query is Not Supported)."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None

    class Mem(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                    ("used", ctypes.c_ulonglong)]

    if nvml.nvmlInit_v2() != 0:
        return None
    try:
        dev, mem = ctypes.c_void_p(), Mem()
        if nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev)) != 0:
            return None
        rc = nvml.nvmlDeviceGetMemoryInfo(dev, ctypes.byref(mem))
        return {"free_bytes": mem.free, "total_bytes": mem.total} if rc == 0 else \
            {"error": f"nvmlDeviceGetMemoryInfo returned {rc}"}
    finally:
        nvml.nvmlShutdown()


def memory_view(root="/", nvml=True):
    """Everything an engine sizing its KV cache could have seen, at this moment (nvml=False:
    without NVML's query, for samples taken every fraction of a second)."""
    info = meminfo(root)
    return {"mem_total_bytes": info.get("MemTotal"),
            "mem_free_bytes": info.get("MemFree"),
            "mem_available_bytes": info.get("MemAvailable"),
            "cached_bytes": info.get("Cached"),
            "buffers_bytes": info.get("Buffers"),
            "cgroup": cgroup_memory(root),
            "nvml": nvml_free() if nvml else None}


# What the stand-in calls free: MemAvailable (reclaimable page cache counted as free) or
# MemFree (the page cache counted as used, as the CUDA driver's free memory on a GB10
# follows it: writing a 60 GiB file dropped it from 103.25 to 41.52 GiB, unsloth PR #10705)
FREE_RULES = {"mem_available": "mem_available_bytes", "mem_free": "mem_free_bytes"}


def free_bytes(view, rule="mem_available"):
    """Free memory by the stand-in's rule for unified memory: the host's MemAvailable (or
    MemFree, rule 'mem_free'), less where the process's memory cgroup leaves less (limit -
    usage). Returns (bytes, source)."""
    avail = view.get(FREE_RULES[rule])
    cg = view.get("cgroup") or {}
    limit, used = cg.get("max_bytes"), cg.get("current_bytes")
    headroom = None if limit is None or used is None else max(limit - used, 0)
    if headroom is not None and (avail is None or headroom < avail):
        return headroom, "cgroup_headroom"
    return avail, rule
