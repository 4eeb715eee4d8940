"""Thermal gate and cooldown. Temperatures come from FakeSensor, a labelled test double
for a GPU or CPU sensor this machine lacks; clocks are simulated so no test sleeps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from containertax.execution import thermal


class FakeSensor:
    """TEST DOUBLE: replays a temperature sequence, as a cooling chip would report it."""

    name = "fake"

    def __init__(self, temps):
        self.temps = list(temps)

    def temperature_c(self):
        return self.temps.pop(0) if len(self.temps) > 1 else self.temps[0]

    def describe(self):
        return {"sensor": self.name}


class FakeClock:
    def __init__(self):
        self.t = 0.0
        self.start = datetime(2026, 1, 1, tzinfo=UTC)

    def monotonic(self):
        return self.t

    def sleep(self, s):
        assert s >= 0
        self.t += s

    def now(self):
        return self.start + timedelta(seconds=self.t)


def gate(sensor, settings, last_end, clock):
    return thermal.wait_gate(sensor, settings, last_end, clock=clock.monotonic,
                             sleep=clock.sleep, now=clock.now)


def test_gate_waits_until_below_threshold():
    clock = FakeClock()
    settings = thermal.GateSettings(threshold_c=45, min_interval_s=0, timeout_s=600, poll_s=1)
    out = gate(FakeSensor([60, 55, 50, 46, 44]), settings, None, clock)
    assert out["passed"] and out["temperature_c"] == 44
    assert out["waited_s"] == pytest.approx(4)
    assert out["waited_for_temperature"] is True
    assert [t for _, t in out["trace"]] == [60, 55, 50, 46, 44]


def test_gate_waits_for_min_interval_even_when_cool():
    clock = FakeClock()
    settings = thermal.GateSettings(threshold_c=45, min_interval_s=300, timeout_s=1000, poll_s=7)
    last_end = clock.now() - timedelta(seconds=100)
    out = gate(FakeSensor([30]), settings, last_end, clock)
    assert out["waited_s"] == pytest.approx(200, abs=0.01)
    assert out["since_last_run_s"] >= 300
    assert out["waited_for_temperature"] is False


def test_gate_times_out_with_a_clear_message():
    clock = FakeClock()
    settings = thermal.GateSettings(threshold_c=45, min_interval_s=0, timeout_s=30, poll_s=5)
    with pytest.raises(thermal.GateTimeout) as err:
        gate(FakeSensor([70]), settings, None, clock)
    msg = str(err.value)
    assert "70.0 C" in msg and "thermal.threshold_c = 45" in msg and "thermal.timeout_s" in msg
    assert clock.t <= 31


def test_gate_stability_window_restarts_when_the_temperature_rises():
    clock = FakeClock()
    settings = thermal.GateSettings(threshold_c=45, min_interval_s=0, timeout_s=600, poll_s=1,
                                    stability_s=2)
    # below at t=1, back above at t=2: the window restarts at t=3 and holds until t=5
    out = gate(FakeSensor([50, 44, 46, 44, 43, 42, 41]), settings, None, clock)
    assert out["waited_s"] == pytest.approx(5) and out["temperature_c"] == 42
    assert out["stability_s"] == 2


def test_gate_stability_timeout_names_the_key():
    clock = FakeClock()
    settings = thermal.GateSettings(threshold_c=45, min_interval_s=0, timeout_s=10, poll_s=1,
                                    stability_s=3)
    with pytest.raises(thermal.GateTimeout, match="thermal.stability_s = 3"):
        gate(FakeSensor([44, 46] * 20), settings, None, clock)


def test_gate_without_sensor_is_time_only():
    clock = FakeClock()
    settings = thermal.GateSettings(threshold_c=45, min_interval_s=5, timeout_s=60, poll_s=1)
    out = gate(thermal.NoSensor(), settings, clock.now(), clock)
    assert out["sensor"] == "none" and out["temperature_c"] is None
    assert out["waited_s"] == pytest.approx(5, abs=0.01)


def test_cooldown_records_decay():
    clock = FakeClock()
    out = thermal.cooldown(FakeSensor([60, 55, 50, 48]), 3, 1, clock=clock.monotonic,
                           sleep=clock.sleep)
    assert out["start_c"] == 60 and out["end_c"] == 48 and out["waited_s"] == pytest.approx(3)


def test_cpu_sensor_reads_zones_and_hwmon(tmp_path):
    """A fake sysfs tree (TEST DOUBLE for a host's thermal zones and hwmon)."""
    zone = tmp_path / "class" / "thermal" / "thermal_zone0"
    zone.mkdir(parents=True)
    (zone / "temp").write_text("41000\n")
    hw = tmp_path / "class" / "hwmon" / "hwmon1"
    hw.mkdir(parents=True)
    (hw / "temp1_input").write_text("52500\n")
    sensor = thermal.open_sensor("cpu", sysfs=tmp_path)
    assert sensor.temperature_c() == 52.5
    assert thermal.open_sensor("auto", sysfs=tmp_path).name in ("nvml", "cpu")


def test_cpu_sensor_missing_is_a_clear_error(tmp_path):
    with pytest.raises(RuntimeError, match="thermal.sensor is 'cpu'"):
        thermal.open_sensor("cpu", sysfs=tmp_path)


def test_auto_falls_back_to_none_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(thermal, "NvmlSensor", _raise_no_gpu)
    sensor = thermal.open_sensor("auto", sysfs=tmp_path)
    assert sensor.name == "none"
    assert "no GPU" in sensor.describe()["note"]


def _raise_no_gpu(*_a, **_k):
    raise RuntimeError("NVML Shared Library Not Found")


class FakeNvml:
    """TEST DOUBLE for the pynvml module: the calls NvmlSensor makes, with fixed answers."""

    NVML_TEMPERATURE_GPU = 0

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, i):
        return f"handle{i}"

    def nvmlDeviceGetTemperature(self, handle, kind):
        assert handle == "handle0" and kind == 0
        return 43

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUUID(self, handle):
        return "GPU-1234"


def test_nvml_sensor_through_fake_nvml():
    sensor = thermal.NvmlSensor(0, nvml=FakeNvml())
    assert sensor.temperature_c() == 43.0
    assert sensor.describe()["gpu_name"] == "NVIDIA H100 80GB HBM3"


def test_last_run_end_reads_the_ledger(tmp_path):
    from containertax.core import records

    assert thermal.last_run_end(tmp_path) is None
    records.append_ledger(tmp_path, {"step": "run", "event": "start"})
    records.append_ledger(tmp_path, {"step": "run", "event": "end", "status": "failed"})
    records.append_ledger(tmp_path, {"step": "cooldown", "event": "end"})
    end = [e for e in records.read_ledger(tmp_path) if e["step"] == "run"][-1]["utc"]
    assert thermal.last_run_end(tmp_path) == datetime.fromisoformat(end)


def decay(seconds, poll_s=1.0, idle=39.0, hot=60.0, tau=8.0):
    """A chip cooling after a load, read as NVML reads it (whole degrees): the H100 fell
    from 60 C to below 45 C within about 10 s and idled at 39 C (results/h100-checks)."""
    import math

    return [round(idle + (hot - idle) * math.exp(-i * poll_s / tau))
            for i in range(int(seconds / poll_s) + 1)]


ADAPTIVE = thermal.AdaptiveSettings(band_c=2, stable_s=10, min_s=5, max_s=300, drop_c=0.5)


def adaptive(temps, settings=ADAPTIVE, baseline=39.0, poll_s=1.0):
    clock = FakeClock()
    return thermal.adaptive_cooldown(FakeSensor(temps), settings, baseline, poll_s,
                                     clock=clock.monotonic, sleep=clock.sleep)


def test_adaptive_cooldown_ends_when_back_at_baseline_and_settled():
    out = adaptive(decay(600))
    assert out["ended_by"] == "settled" and out["mode"] == "adaptive"
    assert out["end_c"] <= 39 + 2
    # the trace shows no fall beyond drop_c over the final stable_s
    window = [t for e, t in out["trace"] if e >= out["waited_s"] - 10]
    assert window[0] - window[-1] <= 0.5
    # far shorter than a fixed wait of max_s, and every reading kept
    assert 15 <= out["waited_s"] < 60
    assert len(out["trace"]) == int(out["waited_s"]) + 1


def test_adaptive_cooldown_waits_while_the_chip_still_cools_inside_the_band():
    # inside the band (<= 41 C) from the start, but still falling 1 C every 4 s
    temps = [41, 41, 41, 41, 40, 40, 40, 40, 39, 39, 39, 39] + [38] * 100
    out = adaptive(temps, baseline=39.0)
    assert out["ended_by"] == "settled"
    assert out["end_c"] == 38
    assert out["waited_s"] >= 8 + 10  # settled only 10 s after the last fall


def test_adaptive_cooldown_stops_at_max_s_on_a_chip_that_stays_hot():
    out = adaptive([50] * 400, thermal.AdaptiveSettings(2, 10, 5, 60))
    assert out["ended_by"] == "max_s" and out["waited_s"] == pytest.approx(60)


def test_adaptive_cooldown_waits_at_least_min_s():
    out = adaptive([39] * 100, thermal.AdaptiveSettings(2, 10, 30, 300))
    assert out["ended_by"] == "settled" and out["waited_s"] == pytest.approx(30)


def test_adaptive_cooldown_without_temperature_waits_max_s():
    out = adaptive([None] * 10, thermal.AdaptiveSettings(2, 10, 5, 40), baseline=None)
    assert out["ended_by"] == "max_s" and out["waited_s"] == pytest.approx(40)


def test_idle_baseline_is_the_median_of_the_readings():
    clock = FakeClock()
    out = thermal.idle_baseline(FakeSensor([39, 40, 39, 38, 41, 39]), 5, 1,
                                clock=clock.monotonic, sleep=clock.sleep)
    assert out["baseline_c"] == 39 and len(out["trace"]) == 6
class FlakyNvml(FakeNvml):
    """TEST DOUBLE: NVML temperature reads that fail `failures` times (pynvml raises
    NVMLError subclasses, e.g. NVMLError_Unknown / GpuIsLost) before answering."""

    def __init__(self, failures):
        self.failures = failures

    def nvmlDeviceGetTemperature(self, handle, kind):
        if self.failures:
            self.failures -= 1
            raise RuntimeError("NVML_ERROR_UNKNOWN")
        return 44


def test_nvml_read_errors_are_retried_then_fail_the_cell_clearly():
    slept = []
    sensor = thermal.NvmlSensor(0, nvml=FlakyNvml(2), sleep=slept.append)
    assert sensor.temperature_c() == 44.0 and slept == [0.5, 1.0]  # two retries, then read
    sensor = thermal.NvmlSensor(0, nvml=FlakyNvml(99), sleep=lambda s: None)
    with pytest.raises(thermal.SensorError, match="3 tries: RuntimeError: NVML_ERROR_UNKNOWN"):
        thermal.wait_gate(sensor, thermal.GateSettings(threshold_c=45, min_interval_s=0,
                                                       timeout_s=10, poll_s=0.01), None)
