"""Temperature sensors, the thermal gate before each run and the cooldown after it.

A run that starts on a hot chip starts throttled; the gate makes every run start from
the same thermal state and records what it waited for, so the wait is visible.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from containertax.core.errors import ContainertaxError
from containertax.core.records import LEDGER, read_ledger
from containertax.execution.gpu import nvml_handle


class GateTimeout(ContainertaxError, RuntimeError):
    """The gate stayed closed for longer than its timeout."""


class Sensor(Protocol):
    name: str

    def temperature_c(self) -> float | None: ...

    def describe(self) -> dict[str, Any]: ...


class NoSensor:
    """No temperature at all: the gate waits only for time, and the records say so."""

    name = "none"

    def __init__(self, reason: str = "configured thermal.sensor: none") -> None:
        self.reason = reason

    def temperature_c(self) -> float | None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"sensor": self.name, "note": f"temperature not measured: {self.reason}"}


class CpuSensor:
    """Hottest of the CPU thermal zones and hwmon temperature inputs."""

    name = "cpu"

    def __init__(self, sysfs: Path = Path("/sys")) -> None:
        self.files = sorted((sysfs / "class" / "thermal").glob("thermal_zone*/temp")) + sorted(
            (sysfs / "class" / "hwmon").glob("hwmon*/temp*_input")
        )

    def available(self) -> bool:
        return self.temperature_c() is not None

    def temperature_c(self) -> float | None:
        values = []
        for f in self.files:
            try:
                values.append(int(f.read_text().strip()) / 1000.0)
            except (OSError, ValueError):
                continue
        return max(values) if values else None

    def describe(self) -> dict[str, Any]:
        return {"sensor": self.name, "files": [str(f) for f in self.files]}


class SensorError(ContainertaxError, RuntimeError):
    """The thermal sensor cannot be read; the message says what failed and the way out."""


class NvmlSensor:
    """GPU core temperature through NVML (nvidia-ml-py, import name pynvml)."""

    name = "nvml"

    def __init__(self, device: int | str = 0, nvml: Any = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if nvml is None:
            import pynvml as nvml  # noqa: PLC0415 - optional at import time
        self.nvml = nvml
        self.sleep = sleep
        nvml.nvmlInit()
        self.handle = nvml_handle(nvml, device)
        self.device = device

    RETRIES = 3

    def temperature_c(self) -> float | None:
        """The GPU temperature; a failed NVML read is retried, then the gate cannot tell
        whether the GPU is cool: SensorError, a clear failure of this cell."""
        errors = []
        for attempt in range(self.RETRIES):
            try:
                return float(self.nvml.nvmlDeviceGetTemperature(
                    self.handle, self.nvml.NVML_TEMPERATURE_GPU))
            except Exception as exc:  # noqa: BLE001 - pynvml.NVMLError and its subclasses
                errors.append(f"{type(exc).__name__}: {exc}")
                if attempt + 1 < self.RETRIES:
                    self.sleep(0.5 * (attempt + 1))
        raise SensorError(
            f"NVML could not read the temperature of GPU {self.device} ({self.RETRIES} tries: "
            f"{'; '.join(errors)}); the thermal gate cannot tell whether it is cool, so this "
            "cell fails. Check nvidia-smi; thermal.sensor: cpu or none gates without NVML.")

    def describe(self) -> dict[str, Any]:
        name = self.nvml.nvmlDeviceGetName(self.handle)
        uuid = self.nvml.nvmlDeviceGetUUID(self.handle)
        return {
            "sensor": self.name,
            "device": self.device,
            "gpu_name": name.decode() if isinstance(name, bytes) else name,
            "gpu_uuid": uuid.decode() if isinstance(uuid, bytes) else uuid,
        }


def open_sensor(kind: str, device: int | str = 0, sysfs: Path = Path("/sys")) -> Sensor:
    """The configured sensor; 'auto' takes the first of NVML, CPU, none that answers."""
    if kind == "none":
        return NoSensor()
    if kind == "cpu":
        cpu = CpuSensor(sysfs)
        if not cpu.available():
            raise RuntimeError(
                "thermal.sensor is 'cpu' but no readable thermal zone or hwmon sensor exists "
                f"under {sysfs}/class; set thermal.sensor to 'none' (time-only gate) or 'auto'."
            )
        return cpu
    if kind == "nvml":
        return NvmlSensor(device)
    try:
        return NvmlSensor(device)
    except Exception as exc:  # any NVML failure means: no usable GPU here
        nvml_error = f"{type(exc).__name__}: {exc}"
    cpu = CpuSensor(sysfs)
    if cpu.available():
        return cpu
    return NoSensor(f"thermal.sensor auto found no GPU ({nvml_error}) and no CPU sensor")


def last_run_end(root: Path, ledger: str = LEDGER) -> datetime | None:
    """When the most recent run of the campaign (of one lane: its ledger) ended (failed
    runs too)."""
    ends = [e["utc"] for e in read_ledger(root, ledger, step="run", event="end")]
    return datetime.fromisoformat(max(ends)) if ends else None


log = logging.getLogger("containertax")
# a last run ending further ahead of now than this: the clock jumped (set back since)
CLOCK_JUMP_S = 60.0


@dataclass
class GateSettings:
    threshold_c: float
    min_interval_s: float
    timeout_s: float
    poll_s: float
    stability_s: float = 0.0  # below threshold for this long without interruption

    @classmethod
    def from_config(cls, thermal: dict[str, Any]) -> GateSettings:
        return cls(
            thermal["threshold_c"],
            thermal["min_interval_s"],
            thermal["timeout_s"],
            thermal["poll_s"],
            thermal.get("stability_s", 0.0),
        )


def wait_gate(
    sensor: Sensor,
    settings: GateSettings,
    last_end: datetime | None,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> dict[str, Any]:
    """Block until the sensor has read below threshold for stability_s (every reading)
    AND min_interval_s has passed since the last run ended; raise GateTimeout after
    timeout_s. Returns what was seen, the temperature trace included."""
    start = clock()
    trace: list[list[float | None]] = []
    below_since: float | None = None
    # the time since the last run, from the wall clock once and then from the monotonic
    # clock (a clock set during the wait cannot move it); a last run that ended in the
    # future is a clock that ran ahead and was set right since: waited from now
    since_at_start = (now() - last_end).total_seconds() if last_end else float("inf")
    jumped = None
    if since_at_start < -CLOCK_JUMP_S:
        jumped = round(-since_at_start, 3)
        log.warning("the ledger's last run ended %.0f s in the future (%s): this machine's "
                    "clock ran ahead and was set back since; the gate waits "
                    "thermal.min_interval_s = %s s from now instead", jumped,
                    last_end.isoformat() if last_end else "", settings.min_interval_s)
        since_at_start = 0.0
    while True:
        elapsed = clock() - start
        temp = sensor.temperature_c()
        trace.append([round(elapsed, 3), temp])
        since = since_at_start + elapsed
        below = temp is None or temp < settings.threshold_c
        below_since = (below_since if below_since is not None else elapsed) if below else None
        stable_for = 0.0 if below_since is None else elapsed - below_since
        cool = below and stable_for >= settings.stability_s
        rested = since >= settings.min_interval_s
        if cool and rested:
            return {
                "passed": True,
                "sensor": sensor.name,
                "threshold_c": settings.threshold_c,
                "min_interval_s": settings.min_interval_s,
                "stability_s": settings.stability_s,
                "temperature_c": temp,
                "since_last_run_s": None if last_end is None else round(since, 3),
                **({"clock_jumped_s": jumped} if jumped is not None else {}),
                "waited_s": round(elapsed, 3),
                "waited_for_temperature": any(
                    t is not None and t >= settings.threshold_c for _, t in trace
                ),
                "trace": trace,
            }
        if elapsed >= settings.timeout_s:
            if below and not cool:
                why = (
                    f"temperature from sensor '{sensor.name}' did not stay below "
                    f"thermal.threshold_c = {settings.threshold_c} C for "
                    f"thermal.stability_s = {settings.stability_s} s"
                )
            elif not cool:
                why = (
                    f"temperature {temp:.1f} C from sensor '{sensor.name}' stayed at or above "
                    f"thermal.threshold_c = {settings.threshold_c} C"
                )
            else:
                why = f"thermal.min_interval_s = {settings.min_interval_s} s did not pass"
            raise GateTimeout(
                f"thermal gate closed after {elapsed:.0f} s (thermal.timeout_s = "
                f"{settings.timeout_s} s): {why}. Check the cooling, or raise "
                "thermal.threshold_c / thermal.timeout_s in the config; the cell is failed "
                "and runs again on the next snakemake invocation."
            )
        wait = settings.poll_s
        if below and not cool:
            wait = min(wait, settings.stability_s - stable_for)
        if cool and not rested:
            wait = min(wait, settings.min_interval_s - since)
        sleep(max(0.0, min(wait, settings.timeout_s - elapsed + 1e-3)))


def _readings(sensor: Sensor, seconds: float, poll_s: float, clock: Callable[[], float],
              sleep: Callable[[float], None]) -> list[list[float | None]]:
    """[elapsed s, temperature] every poll_s for `seconds`, the last reading at the end."""
    start = clock()
    trace: list[list[float | None]] = []
    while True:
        elapsed = clock() - start
        trace.append([round(elapsed, 3), sensor.temperature_c()])
        if elapsed >= seconds:
            return trace
        sleep(min(poll_s, seconds - elapsed))


def idle_baseline(
    sensor: Sensor,
    seconds: float,
    poll_s: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """The idle temperature at the campaign's start (median of `seconds` of readings): the
    level an adaptive cooldown waits to get back to."""
    trace = _readings(sensor, seconds, poll_s, clock, sleep)
    temps = [t for _, t in trace if t is not None]
    median = statistics.median(temps) if temps else None
    return {"sensor": sensor.name, "baseline_c": median, "measured_s": round(seconds, 3),
            "utc": datetime.now(UTC).isoformat(timespec="seconds"), "trace": trace}


@dataclass
class AdaptiveSettings:
    """When an adaptive cooldown ends: the temperature is within band_c of the idle
    baseline AND has not fallen by more than drop_c over the last stable_s; never before
    min_s, always by max_s."""

    band_c: float
    stable_s: float
    min_s: float
    max_s: float
    drop_c: float = 0.5
    baseline_s: float = 30.0

    @classmethod
    def from_config(cls, thermal: dict[str, Any]) -> AdaptiveSettings:
        a = thermal.get("adaptive", {})
        return cls(a.get("band_c", 2.0), a.get("stable_s", 10.0), a.get("min_s", 5.0),
                   a.get("max_s", 300.0), a.get("drop_c", 0.5), a.get("baseline_s", 30.0))


def adaptive_cooldown(
    sensor: Sensor,
    settings: AdaptiveSettings,
    baseline_c: float | None,
    poll_s: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Wait until the chip is back near its idle baseline and has stopped cooling (or
    max_s), recording the whole decay. Without a temperature (no sensor, no baseline) it
    waits max_s: it cannot tell that the chip has settled."""
    start = clock()
    trace: list[list[float | None]] = []
    reason = "max_s"
    while True:
        elapsed = clock() - start
        temp = sensor.temperature_c()
        trace.append([round(elapsed, 3), temp])
        if elapsed >= settings.max_s:
            break
        if elapsed >= settings.min_s and _settled(trace, temp, baseline_c, settings):
            reason = "settled"
            break
        sleep(max(0.0, min(poll_s, settings.max_s - elapsed)))
    temps = [t for _, t in trace if t is not None]
    return {
        "sensor": sensor.name,
        "mode": "adaptive",
        "baseline_c": baseline_c,
        "band_c": settings.band_c,
        "stable_s": settings.stable_s,
        "drop_c": settings.drop_c,
        "min_s": settings.min_s,
        "max_s": settings.max_s,
        "ended_by": reason,
        "waited_s": round(clock() - start, 3),
        "start_c": temps[0] if temps else None,
        "end_c": temps[-1] if temps else None,
        "trace": trace,
    }


def _settled(trace: list[list[float | None]], temp: float | None, baseline_c: float | None,
             s: AdaptiveSettings) -> bool:
    """Within the band of the baseline now, and no fall of more than drop_c from the
    reading stable_s ago (or the latest before it) to now, every reading in between valid."""
    if temp is None or baseline_c is None or temp > baseline_c + s.band_c:
        return False
    now = trace[-1][0]
    assert now is not None
    starts = [i for i, (e, _) in enumerate(trace) if e is not None and e <= now - s.stable_s]
    if not starts:
        return False
    window = [t for _, t in trace[starts[-1]:]]
    if any(t is None for t in window):
        return False
    return window[0] - temp <= s.drop_c  # type: ignore[operator]


def cooldown(
    sensor: Sensor,
    seconds: float,
    poll_s: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Wait a fixed time after a run, recording how the temperature decays."""
    start = clock()
    trace = _readings(sensor, seconds, poll_s, clock, sleep)
    temps = [t for _, t in trace if t is not None]
    return {
        "sensor": sensor.name,
        "mode": "fixed",
        "cooldown_s": seconds,
        "waited_s": round(clock() - start, 3),
        "start_c": temps[0] if temps else None,
        "end_c": temps[-1] if temps else None,
        "trace": trace,
    }
