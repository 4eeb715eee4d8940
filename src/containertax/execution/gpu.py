"""GPU telemetry through NVML (nvidia-ml-py, import name pynvml), read on the host.

One sample costs a handful of NVML calls (microseconds); every reading that a GPU does not
support is None rather than an error. GPU memory comes from the device query where the GPU
answers it, else (GB10, unified memory: the device query is Not Supported) from NVML's
per-process accounting, the sum over the compute processes; each sample says which
(`gpu_mem_source`). Host memory (MemTotal - MemAvailable) is the telemetry's own column,
never labelled GPU. Energy: NVML's counter where the GPU has one, else the power samples
integrated over the run (`energy_source` says which).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# Clock-event reasons that are not throttling: the GPU is idle, or clocks are set on purpose.
NOT_THROTTLING = 0x1 | 0x2 | 0x100  # GpuIdle, ApplicationsClocksSetting, DisplayClockSetting
# The clock-event reason bits that lower the clocks (nvmlClocksEventReason*), by name
THROTTLE_REASONS = {0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x10: "sync_boost",
                    0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake"}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_handle(nvml: Any, device: int | str) -> Any:
    """The NVML handle of a device given by index or by UUID (a lane's `gpu`)."""
    if isinstance(device, str) and not device.isdigit():
        return nvml.nvmlDeviceGetHandleByUUID(device)
    return nvml.nvmlDeviceGetHandleByIndex(int(device))


class NvmlGpu:
    """One NVML device: identity, per-sample readings and cumulative counters."""

    def __init__(self, device: int | str = 0, nvml: Any = None,
                 proc: Path = Path("/proc")) -> None:
        if nvml is None:
            import pynvml as nvml
        self.nvml = nvml
        nvml.nvmlInit()
        self.device = device
        self.handle = nvml_handle(nvml, device)
        self.proc = proc
        self.max_sm_clock = self._try(nvml.nvmlDeviceGetMaxClockInfo, self.handle,
                                      nvml.NVML_CLOCK_SM)

    def _try(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:  # NVML raises NVMLError_NotSupported and friends per reading
            return None

    def identity(self) -> dict[str, Any]:
        n, h = self.nvml, self.handle
        limit = self._try(n.nvmlDeviceGetEnforcedPowerLimit, h)
        cuda = self._try(n.nvmlSystemGetCudaDriverVersion)
        persistence = self._try(n.nvmlDeviceGetPersistenceMode, h)
        return {
            "index": self.device,
            "name": _text(self._try(n.nvmlDeviceGetName, h)),
            "uuid": _text(self._try(n.nvmlDeviceGetUUID, h)),
            "driver": _text(self._try(n.nvmlSystemGetDriverVersion)),
            "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
            "persistence_mode": None if persistence is None else bool(persistence),
            "power_limit_w": limit / 1000 if limit else None,
            "max_sm_clock_mhz": self.max_sm_clock,
            "max_mem_clock_mhz": self._try(n.nvmlDeviceGetMaxClockInfo, h, n.NVML_CLOCK_MEM),
        }

    def peak_bandwidth(self) -> tuple[float | None, str]:
        n, h = self.nvml, self.handle
        width = self._try(getattr(n, "nvmlDeviceGetMemoryBusWidth", lambda _: None), h)
        return peak_bandwidth(_text(self._try(n.nvmlDeviceGetName, h)),
                              self._try(n.nvmlDeviceGetMaxClockInfo, h, n.NVML_CLOCK_MEM), width)

    def _mem_used(self) -> tuple[float | None, str | None]:
        """GPU memory in use (MiB) and where the number comes from."""
        n, h = self.nvml, self.handle
        info = self._try(n.nvmlDeviceGetMemoryInfo, h)
        if info is not None:
            return round(info.used / 2**20, 1), "nvml_device"
        procs = self._try(n.nvmlDeviceGetComputeRunningProcesses, h)
        used = [p.usedGpuMemory for p in procs or []
                if getattr(p, "usedGpuMemory", None) is not None]
        if used:
            return round(sum(used) / 2**20, 1), "nvml_processes"
        return None, None

    def sample(self) -> dict[str, Any]:
        n, h = self.nvml, self.handle
        power = self._try(n.nvmlDeviceGetPowerUsage, h)
        util = self._try(n.nvmlDeviceGetUtilizationRates, h)
        return {
            "gpu_temperature_c": self._try(n.nvmlDeviceGetTemperature, h,
                                           n.NVML_TEMPERATURE_GPU),
            "power_w": power / 1000 if power is not None else None,
            "sm_clock_mhz": self._try(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_SM),
            "mem_clock_mhz": self._try(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_MEM),
            "gpu_util_pct": None if util is None else util.gpu,
            "mem_util_pct": None if util is None else util.memory,
            **dict(zip(("gpu_mem_used_mib", "gpu_mem_source"), self._mem_used(), strict=True)),
            "clock_event_reasons": self._try(n.nvmlDeviceGetCurrentClocksEventReasons, h),
            "energy_mj": self._try(n.nvmlDeviceGetTotalEnergyConsumption, h),
        }

    def counters(self) -> dict[str, Any]:
        """Cumulative counters, read before and after a run."""
        n, h = self.nvml, self.handle
        out: dict[str, Any] = {"energy_mj": self._try(n.nvmlDeviceGetTotalEnergyConsumption, h)}
        for name in ("POWER", "THERMAL"):
            v = self._try(n.nvmlDeviceGetViolationStatus, h, getattr(n, f"NVML_PERF_POLICY_{name}"))
            out[f"violation_{name.lower()}_ns"] = None if v is None else v.violationTime
        return out


# Peak memory bandwidth from the vendors' data sheets, by a part of the NVML name; the
# first match wins (more specific names first).
PEAK_BANDWIDTH_GBPS = [
    ("H100 NVL", 3900.0), ("H100 PCIe", 2000.0), ("H100", 3350.0),  # H100 SXM5 80GB HBM3
    ("H200", 4800.0), ("GH200", 4000.0), ("B200", 8000.0),
    ("A100-SXM4-80GB", 2039.0), ("A100 80GB PCIe", 1935.0), ("A100", 1555.0),
    ("L40S", 864.0), ("GB10", 273.0),  # DGX Spark: LPDDR5x, unified memory
]


def peak_bandwidth(name: str | None, max_mem_clock_mhz: float | None,
                   bus_width_bits: float | None) -> tuple[float | None, str]:
    """Bytes per second the GPU's memory can deliver, and where the figure comes from: the
    data-sheet table, else NVML's maximum memory clock x bus width (x2, double data rate:
    H100 SXM5 2619 MHz x 5120 bit gives 3.35 TB/s, its data sheet's figure)."""
    for part, gbps in PEAK_BANDWIDTH_GBPS:
        if name and part in name:
            return gbps * 1e9, f"table: {part}"
    if max_mem_clock_mhz and bus_width_bits:
        bandwidth = max_mem_clock_mhz * 1e6 * 2 * bus_width_bits / 8
        return bandwidth, "nvml: max memory clock x bus width"
    return None, "unknown GPU and NVML reports no memory clock or bus width"


COLUMNS = ["gpu_temperature_c", "power_w", "sm_clock_mhz", "mem_clock_mhz", "gpu_util_pct",
           "mem_util_pct", "gpu_mem_used_mib", "gpu_mem_source", "clock_event_reasons",
           "energy_mj"]


def integrate_power_j(rows: list[dict[str, Any]]) -> float | None:
    """Energy from the power samples (trapezoids over their times): GPUs without NVML's
    energy counter."""
    pts = [(r["t_s"], r["power_w"]) for r in rows
           if r.get("power_w") is not None and r.get("t_s") is not None]
    if len(pts) < 2:
        return None
    return float(sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(pts, pts[1:],
                                                                             strict=False)))


def summarize(rows: list[dict[str, Any]], before: dict[str, Any], after: dict[str, Any],
              period_s: float, max_sm_clock: int | None) -> dict[str, Any]:
    """Energy, power, utilisation, temperature, throttling and clocks of one run."""

    def col(name: str) -> list[float]:
        return [r[name] for r in rows if r.get(name) is not None]

    def mean(v: list[float]) -> float | None:
        return round(sum(v) / len(v), 3) if v else None

    power, temp, util, sm = col("power_w"), col("gpu_temperature_c"), col("gpu_util_pct"), col(
        "sm_clock_mhz")
    reasons = col("clock_event_reasons")
    throttled = sum(1 for r in reasons if int(r) & ~NOT_THROTTLING)

    def delta(key: str) -> float | None:
        a, b = before.get(key), after.get(key)
        return None if a is None or b is None else b - a

    energy = delta("energy_mj")
    energy_j, source = (energy / 1000, "nvml_counter") if energy is not None else (
        integrate_power_j(rows), "power_integration")
    mem_sources = sorted({r["gpu_mem_source"] for r in rows if r.get("gpu_mem_source")})
    return {
        "energy_j": energy_j,
        "energy_source": source if energy_j is not None else None,
        "gpu_mem_source": "+".join(mem_sources) or None,
        "power_mean_w": mean(power),
        "power_peak_w": max(power) if power else None,
        "gpu_util_mean_pct": mean(util),
        "gpu_temperature_max_c": max(temp) if temp else None,
        "gpu_mem_used_peak_mib": max(col("gpu_mem_used_mib"), default=None),
        "throttled_s": round(throttled * period_s, 3),
        "clock_event_reasons_seen": sorted({int(r) for r in reasons}),
        "sm_clock_fraction_mean": (round(mean(sm) / max_sm_clock, 4)
                                   if sm and max_sm_clock else None),
        "violation_power_s": (delta("violation_power_ns") or 0) / 1e9
        if delta("violation_power_ns") is not None else None,
        "violation_thermal_s": (delta("violation_thermal_ns") or 0) / 1e9
        if delta("violation_thermal_ns") is not None else None,
    }
