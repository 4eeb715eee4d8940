"""Host-side telemetry sampled while a run executes.

Sampling happens on the host, outside the environment under test, so every environment
is observed by the same code at the same rate.
"""

from __future__ import annotations

import csv
import threading
import time
from pathlib import Path
from typing import Any

from containertax.execution import gpu as gpu_mod
from containertax.execution.thermal import Sensor

COLUMNS = ["t_s", "temperature_c", "cpu_util_pct", "mem_used_mib"]


def _cpu_times(proc: Path) -> tuple[int, int] | None:
    try:
        fields = (proc / "stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return None
    values = [int(v) for v in fields]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values), idle


def _mem_used_mib(proc: Path) -> float | None:
    info: dict[str, int] = {}
    try:
        for line in (proc / "meminfo").read_text().splitlines():
            key, value = line.split(":", 1)
            info[key] = int(value.split()[0])
    except (OSError, ValueError):
        return None
    if "MemTotal" not in info or "MemAvailable" not in info:
        return None
    return round((info["MemTotal"] - info["MemAvailable"]) / 1024, 1)


class Sampler:
    """Samples sensor and host counters (and the GPU through NVML, when given) at `hz` in a
    thread until stopped; cumulative GPU counters are read before and after."""

    def __init__(self, sensor: Sensor, hz: float, proc: Path = Path("/proc"),
                 gpu: gpu_mod.NvmlGpu | None = None) -> None:
        self.sensor = sensor
        self.period = 1.0 / hz
        self.proc = proc
        self.gpu = gpu
        self.columns = COLUMNS + (gpu_mod.COLUMNS if gpu else [])
        self.rows: list[list[Any]] = []
        self.counters_before: dict[str, Any] = {}
        self.counters_after: dict[str, Any] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="telemetry", daemon=True)
        self._t0 = 0.0
        self.t0_unix = 0.0

    def __enter__(self) -> Sampler:
        if self.gpu:
            self.counters_before = self.gpu.counters()
        self._t0 = time.monotonic()
        self.t0_unix = time.time()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self.gpu:
            self.counters_after = self.gpu.counters()

    def _loop(self) -> None:
        prev = _cpu_times(self.proc)
        next_t = time.monotonic()
        while not self._stop.is_set():
            now = _cpu_times(self.proc)
            util = None
            if prev and now and now[0] > prev[0]:
                busy = (now[0] - prev[0]) - (now[1] - prev[1])
                util = round(100.0 * busy / (now[0] - prev[0]), 1)
            prev = now
            row: list[Any] = [
                round(time.monotonic() - self._t0, 4),
                self._temperature(),
                util,
                _mem_used_mib(self.proc),
            ]
            if self.gpu:
                sample = self.gpu.sample()
                row += [sample[c] for c in gpu_mod.COLUMNS]
            self.rows.append(row)
            next_t += self.period
            self._stop.wait(max(0.0, next_t - time.monotonic()))

    def _temperature(self) -> float | None:
        """A failed read is a missing sample here (the gate, not telemetry, fails a cell)."""
        try:
            return self.sensor.temperature_c()
        except Exception:  # noqa: BLE001 - e.g. thermal.SensorError after NVML's retries
            return None

    def window_energy_j(self, start_unix: float, end_unix: float) -> float | None:
        """GPU energy between two wall-clock times: the NVML energy counter interpolated at
        both ends, or, where a GPU has no counter, the power samples integrated."""
        import numpy as np  # noqa: PLC0415 - GPU runs only; a cell step starts without it

        for column in ("energy_mj", "power_w"):
            if column not in self.columns:
                continue
            i = self.columns.index(column)
            pts = np.array([(self.t0_unix + r[0], r[i]) for r in self.rows
                            if r[i] is not None], dtype=float).reshape(-1, 2)
            t, v = pts[:, 0], pts[:, 1]
            if len(t) < 2 or t[0] > start_unix or t[-1] < end_unix:
                continue  # the samples do not cover the window
            if column == "energy_mj":
                return float(np.diff(np.interp([start_unix, end_unix], t, v))[0]) / 1000.0
            inner = (t > start_unix) & (t < end_unix)
            knots = np.concatenate([[start_unix], t[inner], [end_unix]])
            return float(np.trapezoid(np.interp(knots, t, v), knots))
        return None

    def write_csv(self, path: Path) -> None:
        with path.open("w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(self.columns)
            writer.writerows(["" if v is None else v for v in row] for row in self.rows)

    def summary(self) -> dict[str, Any]:
        def col(i: int) -> list[float]:
            return [r[i] for r in self.rows if r[i] is not None]  # type: ignore[misc]

        temps, util, mem = col(1), col(2), col(3)
        gpu_summary: dict[str, Any] = {}
        if self.gpu:
            rows = [dict(zip(self.columns, r, strict=True)) for r in self.rows]
            gpu_summary = {
                "gpu": self.gpu.identity(),
                **gpu_mod.summarize(rows, self.counters_before, self.counters_after,
                                    self.period, self.gpu.max_sm_clock),
            }
        return {
            **gpu_summary,
            "samples": len(self.rows),
            "t0_unix": self.t0_unix,  # the wall-clock time of t_s = 0 in the CSV
            "rate_hz": round(1.0 / self.period, 3),
            "sensor": self.sensor.name,
            "temperature_max_c": max(temps) if temps else None,
            "temperature_mean_c": round(sum(temps) / len(temps), 2) if temps else None,
            "cpu_util_mean_pct": round(sum(util) / len(util), 1) if util else None,
            "mem_used_peak_mib": max(mem) if mem else None,
        }

