"""Host memory state around a run: the page cache dropped where permitted, MemAvailable
before and after.

On unified-memory machines (GB10) the GPU allocates from the same pool as the page cache,
and TensorRT-LLM sizes its KV cache as a fraction of the memory it finds free: a run that
starts with 40 GiB of cached model files sees a different machine from one that starts
with none. Dropping the cache before every run gives each environment the same start; where
that is refused (not root, or /proc/sys read-only in a container) the state is recorded so
that the paper can say which it was.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

FIELDS = ("MemTotal", "MemFree", "MemAvailable", "Cached", "Buffers", "Shmem", "SwapFree")


class PageCacheError(RuntimeError):
    """memory.drop_page_cache is 'required' and this host refuses it."""


def meminfo(proc: Path = Path("/proc")) -> dict[str, int]:
    """The fields of /proc/meminfo that describe the pool, in KiB."""
    out: dict[str, int] = {}
    for line in (proc / "meminfo").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in FIELDS:
            out[key] = int(value.split()[0])
    return out


def drop_permitted(proc: Path = Path("/proc")) -> tuple[bool, str]:
    target = proc / "sys" / "vm" / "drop_caches"
    if not target.exists():
        return False, f"{target} does not exist"
    if not os.access(target, os.W_OK):
        return False, (f"{target} is not writable here (needs root on the host itself, not "
                       "in a container with a read-only /proc/sys)")
    return True, ""


def drop_page_cache(proc: Path = Path("/proc")) -> dict[str, Any]:
    """sync, then drop clean page cache, dentries and inodes (echo 3 > drop_caches)."""
    t0 = time.monotonic()
    os.sync()
    try:
        (proc / "sys" / "vm" / "drop_caches").write_text("3\n")
    except OSError as exc:
        return {"dropped": False, "reason": f"{type(exc).__name__}: {exc}",
                "s": round(time.monotonic() - t0, 3)}
    return {"dropped": True, "s": round(time.monotonic() - t0, 3)}


def before_run(mode: str, proc: Path = Path("/proc")) -> dict[str, Any]:
    """The page cache dropped as the config says, then the memory state the run starts in."""
    if mode == "never":
        state: dict[str, Any] = {"dropped": False, "reason": "memory.drop_page_cache: never"}
    else:
        state = drop_page_cache(proc)
        if not state["dropped"] and mode == "required":
            raise PageCacheError(
                f"memory.drop_page_cache is 'required' but the page cache could not be "
                f"dropped ({state['reason']}). Fix: run the campaign as root on the host, or "
                "set memory.drop_page_cache: auto to record the state instead.")
    return {"mode": mode, "drop": state, "before_kib": meminfo(proc)}


def metrics(state: dict[str, Any], used_peak_mib: float | None) -> list[tuple[str, float, str]]:
    """MemAvailable before and after, the peak in use during the run (10 Hz telemetry,
    MemTotal - MemAvailable) and how far it rose above the level the run started from."""
    before, after_kib = state["before_kib"], state["after_kib"]
    out = []
    if "MemAvailable" in before and "MemAvailable" in after_kib:
        out += [("mem_available_before_gib", before["MemAvailable"] / 2**20, "GiB"),
                ("mem_available_after_gib", after_kib["MemAvailable"] / 2**20, "GiB")]
    if used_peak_mib is not None:
        out.append(("host_mem_used_peak_gib", used_peak_mib / 1024, "GiB"))
        if "MemTotal" in before and "MemAvailable" in before:
            start_mib = (before["MemTotal"] - before["MemAvailable"]) / 1024
            out.append(("host_mem_rise_gib", max(0.0, used_peak_mib - start_mib) / 1024, "GiB"))
    return out
