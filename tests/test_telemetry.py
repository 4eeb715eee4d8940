"""Host-side sampler: rows at about the configured rate, CSV and summary."""

from __future__ import annotations

import csv
import time

import pytest

from containertax.execution.telemetry import COLUMNS, Sampler
from containertax.execution.thermal import NoSensor


def test_sampler_writes_rows_and_summary(tmp_path):
    with Sampler(NoSensor(), hz=20) as s:
        time.sleep(0.5)
    assert len(s.rows) >= 3
    s.write_csv(tmp_path / "t.csv")
    rows = list(csv.reader((tmp_path / "t.csv").open()))
    assert rows[0] == COLUMNS and len(rows) == len(s.rows) + 1
    summary = s.summary()
    assert summary["samples"] == len(s.rows) and summary["sensor"] == "none"
    assert summary["mem_used_peak_mib"] > 0
    times = [r[0] for r in s.rows]
    assert times == sorted(times)


class FakeNvml:
    """TEST DOUBLE for pynvml (no GPU here): the calls NvmlGpu makes, with answers shaped as
    nvidia-ml-py returns them; memory info raises Not Supported, as on GB10."""

    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_PERF_POLICY_POWER = 0
    NVML_PERF_POLICY_THERMAL = 1

    def __init__(self):
        self.t0 = time.monotonic()
        self.reasons = 0x4  # SwPowerCap

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return 1980 if kind == 1 else 2619

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUUID(self, h):
        return "GPU-fake"

    def nvmlSystemGetDriverVersion(self):
        return "580.159.04"

    def nvmlSystemGetCudaDriverVersion(self):
        return 13000

    def nvmlDeviceGetPersistenceMode(self, h):
        return 1

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700_000

    def nvmlDeviceGetMemoryInfo(self, h):
        raise RuntimeError("Not Supported")

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        """Per-process accounting: 3 GiB and 1 GiB, and one process NVML gives no figure for
        (usedGpuMemory None, as nvidia-ml-py reports NVML_VALUE_NOT_AVAILABLE)."""
        p = type("P", (), {})
        return [type("P", (p,), {"pid": 1, "usedGpuMemory": 3 * 2**30})(),
                type("P", (p,), {"pid": 2, "usedGpuMemory": 2**30})(),
                type("P", (p,), {"pid": 3, "usedGpuMemory": None})()]

    def nvmlDeviceGetPowerUsage(self, h):
        return 650_000

    def nvmlDeviceGetUtilizationRates(self, h):
        return type("U", (), {"gpu": 97, "memory": 40})()

    def nvmlDeviceGetTemperature(self, h, kind):
        return 61

    def nvmlDeviceGetClockInfo(self, h, kind):
        return 1485 if kind == 1 else 2619

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self.reasons

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        """mJ since some start, as the real counter: here a constant 650 W."""
        return int(1_000_000 + 650_000 * (time.monotonic() - self.t0))

    def nvmlDeviceGetViolationStatus(self, h, policy):
        return type("V", (), {"violationTime": 2_000_000_000 if policy == 0 else 0})()


def test_gpu_telemetry_through_fake_nvml(tmp_path):
    from containertax.execution.gpu import NvmlGpu

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 1048576 kB\nMemAvailable: 524288 kB\n")
    (tmp_path / "stat").write_text("cpu 1 0 1 10 0 0 0 0 0 0\n")
    gpu = NvmlGpu(0, nvml=FakeNvml(), proc=tmp_path)
    assert gpu.identity()["cuda_driver"] == "13.0" and gpu.identity()["power_limit_w"] == 700
    sample = gpu.sample()
    # device query Not Supported (GB10): the processes' sum, labelled so; never meminfo's 512
    assert sample["gpu_mem_used_mib"] == 4096.0 and sample["gpu_mem_source"] == "nvml_processes"
    assert sample["power_w"] == 650 and sample["sm_clock_mhz"] == 1485
    with Sampler(NoSensor(), hz=20, proc=tmp_path, gpu=gpu) as s:
        t_start = time.time()
        time.sleep(0.3)
        window = (t_start + 0.05, time.time() - 0.05)
        time.sleep(0.1)
    summary = s.summary()
    assert summary["gpu"]["name"] == "NVIDIA H100 80GB HBM3"
    assert 650 * 0.4 <= summary["energy_j"] <= 650 * 0.6  # counter before minus after
    assert summary["energy_source"] == "nvml_counter"
    assert summary["gpu_mem_source"] == "nvml_processes"
    assert summary["gpu_mem_used_peak_mib"] == 4096.0
    # energy of a window inside the run: the sampled counter interpolated at both ends
    assert s.window_energy_j(*window) == pytest.approx(650 * (window[1] - window[0]), rel=0.1)
    assert s.window_energy_j(window[0] - 10, window[1]) is None  # not covered by samples
    assert summary["power_mean_w"] == 650 and summary["gpu_util_mean_pct"] == 97
    assert summary["throttled_s"] > 0 and summary["clock_event_reasons_seen"] == [4]
    assert summary["sm_clock_fraction_mean"] == round(1485 / 1980, 4)
    assert summary["violation_power_s"] == 0.0
    s.write_csv(tmp_path / "t.csv")
    header = (tmp_path / "t.csv").read_text().splitlines()[0].split(",")
    assert "power_w" in header and "clock_event_reasons" in header


def test_idle_reason_is_not_throttling():
    from containertax.execution.gpu import summarize

    rows = [{"clock_event_reasons": 0x1}, {"clock_event_reasons": 0x0},
            {"clock_event_reasons": 0x40}]  # idle, none, HwThermalSlowdown
    assert summarize(rows, {}, {}, 0.1, 1980)["throttled_s"] == 0.1


def test_window_energy_integrates_power_without_a_counter():
    """GPUs without an energy counter: the power samples, trapezoid-integrated."""
    s = Sampler(NoSensor(), hz=10)
    s.columns = ["t_s", "power_w"]
    s.t0_unix = 1000.0
    s.rows = [[0.0, 100.0], [1.0, 100.0], [2.0, 300.0], [3.0, 300.0]]
    # 1.5 -> 2.5: half a second rising 200 -> 300 W (avg 250), then 300 W for 0.5 s
    assert s.window_energy_j(1001.5, 1002.5) == pytest.approx(0.5 * 250 + 0.5 * 300)
    assert s.window_energy_j(999.0, 1002.0) is None


class FakeNvmlNoCounter(FakeNvml):
    """TEST DOUBLE: a GPU without NVML's energy counter (Not Supported)."""

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        raise RuntimeError("Not Supported")


def test_energy_from_power_where_no_counter(tmp_path):
    from containertax.execution.gpu import NvmlGpu

    (tmp_path / "meminfo").write_text("MemTotal: 1048576 kB\nMemAvailable: 524288 kB\n")
    (tmp_path / "stat").write_text("cpu 1 0 1 10 0 0 0 0 0 0\n")
    gpu = NvmlGpu(0, nvml=FakeNvmlNoCounter(), proc=tmp_path)
    with Sampler(NoSensor(), hz=20, proc=tmp_path, gpu=gpu) as s:
        time.sleep(0.4)
    summary = s.summary()
    span = s.rows[-1][0] - s.rows[0][0]
    assert summary["energy_source"] == "power_integration"
    assert summary["energy_j"] == pytest.approx(650 * span, rel=1e-6)  # 650 W throughout
