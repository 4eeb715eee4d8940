"""The host's performance cores, for `cpuset_cpus: performance`.

GB10 (DGX Spark) pairs ten Cortex-X925 with ten Cortex-A725 cores; which numbers are which
is the kernel's to say, so the cpuset is read from sysfs on the machine that runs it: the
cores of highest `cpu_capacity` (arm64's relative performance), else of highest
`cpufreq/cpuinfo_max_freq`.
"""

from __future__ import annotations

from pathlib import Path

SYS_CPU = Path("/sys/devices/system/cpu")


class CpuTopologyError(RuntimeError):
    """The host does not say which cores are its fastest."""


def _online(sys_cpu: Path) -> list[int]:
    text = (sys_cpu / "online").read_text().strip() if (sys_cpu / "online").exists() else ""
    if not text:
        return sorted(int(p.name[3:]) for p in sys_cpu.glob("cpu[0-9]*"))
    return parse_cpulist(text)


def parse_cpulist(text: str) -> list[int]:
    """The kernel's list format (0-3,8) as core numbers."""
    cpus: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus += range(int(lo), int(hi or lo) + 1)
    return cpus


def _read(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def performance_cores(sys_cpu: Path = SYS_CPU) -> tuple[list[int], str]:
    """The online cores with the highest capacity (or maximum frequency), and which of the
    two sysfs files said so."""
    cpus = _online(sys_cpu)
    for source in ("cpu_capacity", "cpufreq/cpuinfo_max_freq"):
        values = {c: _read(sys_cpu / f"cpu{c}" / source) for c in cpus}
        if cpus and all(v is not None for v in values.values()):
            top = max(v for v in values.values() if v is not None)
            return [c for c in cpus if values[c] == top], source
    raise CpuTopologyError(
        f"{sys_cpu}: neither cpu_capacity nor cpufreq/cpuinfo_max_freq is readable for every "
        "online core, so 'performance' cannot be resolved; give the cores as a list "
        "(e.g. cpuset_cpus: '10-19'; lscpu shows which cores are which).")


def cpulist(cpus: list[int]) -> str:
    """Core numbers in the kernel's list format (0-3,8)."""
    runs: list[list[int]] = []
    for c in sorted(cpus):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)
