"""Host-side sampler: rows at about the configured rate, CSV and summary."""

from __future__ import annotations

import csv
import math
import time

import pandas as pd
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
    assert summary["t0_unix"] == s.t0_unix > 0  # the CSV's t_s = 0, for window cuts
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


# --- clock events inside the measured window (statistics/clocks.py) ---------------------

def planted_telemetry(reasons: list[int], clocks: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"t_s": [0.1 * i for i in range(len(reasons))],
                         "clock_event_reasons": reasons, "sm_clock_mhz": clocks})


def test_window_clocks_of_planted_telemetry():
    from containertax.statistics import clocks

    t0 = 1000.0
    # 0 %: the cap (0x4) only outside the window (t 0.0-0.4 and 1.5-1.9); idle (0x1) inside
    # is no throttling
    reasons = [4] * 5 + [0, 1, 0, 0, 0, 0, 0, 0, 0, 0] + [4] * 5
    f = clocks.summarise(planted_telemetry(reasons, [1590] * 5 + [1980] * 10 + [1590] * 5),
                         t0, t0 + 0.5, t0 + 1.4)
    assert f["window_samples"] == 10 and f["window_sw_power_cap_frac"] == 0.0
    assert f["window_throttled_frac"] == 0.0 and f["window_sm_clock_mhz"] == 1980.0
    # 100 %: power cap plus a thermal slowdown in every sample of the window
    f = clocks.summarise(planted_telemetry([4 | 0x20] * 10, [1600] * 10), t0, t0, t0 + 0.95)
    assert f["window_sw_power_cap_frac"] == 1.0 and f["window_sw_thermal_frac"] == 1.0
    assert f["window_hw_slowdown_frac"] == 0.0 and f["window_sm_clock_mhz"] == 1600.0
    # no NVML column (a CPU run) or no sample in the window: NaN, never a traceback
    assert math.isnan(clocks.summarise(planted_telemetry([], []), t0, t0, t0 + 1)[
        "window_throttled_frac"])
    cpu = clocks.summarise(pd.DataFrame({"t_s": [0.0, 0.1], "temperature_c": [40, 41]}),
                           t0, t0, t0 + 1)
    assert math.isnan(cpu["window_sw_power_cap_frac"]) and cpu["window_samples"] == 0


def test_window_finding_names_reason_share_and_environments():
    from containertax.statistics import clocks

    rows = [{"model": "m", "environment": env, "repetition": rep, "clock_window": "measured",
             "window_sm_clock_mhz": 1700.0, "window_throttled_frac": frac,
             **{c: 0.0 for c in clocks.FRACTIONS.values()}, "window_sw_power_cap_frac": frac}
            for env, fracs in (("native", [0.0, 0.0]), ("docker", [0.30, 0.04]))
            for rep, frac in enumerate(fracs, 1)]
    found = clocks.findings(pd.DataFrame(rows))
    assert [f["reason"] for f in found] == ["sw_power_cap"]  # 0.30 > 5 %; 4 % is not
    assert found[0]["message"].startswith("software power cap: 30 % of the measured window "
                                          "in 1 of 4 runs, in docker")
    rows = [{**r, "window_sw_power_cap_frac": 0.04, "window_throttled_frac": 0.04}
            for r in rows]
    assert clocks.findings(pd.DataFrame(rows)) == []  # under the 5 % threshold: no threat


def test_committed_gqa_runs_were_power_capped_for_40_to_45_pct_of_the_window():
    """The H100 engine campaign: NVML's software power cap held in a large share of every
    run's measured window, in every environment (their record's window and CSV)."""
    from containertax.statistics import aggregate, clocks
    from tests.conftest import REPO

    rows = []
    for path, rec in aggregate.read_records(REPO / "results" / "h100-engine-gqa"):
        rows.append({"model": rec.cell.model, "environment": rec.cell.environment,
                     "repetition": rec.cell.repetition, **clocks.of_record(path, rec)})
    runs = pd.DataFrame(rows)
    assert len(runs) == 18 and set(runs["clock_window"]) == {"measured"}
    assert (runs["window_samples"] >= 100).all()  # about 10.6 s at 10 Hz
    cap = runs["window_sw_power_cap_frac"]
    assert cap.between(0.39, 0.45).all(), cap.tolist()  # 0.396 to 0.448
    assert (runs["window_throttled_frac"] == cap).all()  # the cap is the only reason
    found = clocks.findings(runs)
    assert len(found) == 1 and found[0]["message"].startswith(
        "software power cap: 40 to 45 % of the measured window in every run, in every "
        "environment")
