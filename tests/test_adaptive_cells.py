"""The adaptive cooldown in the cell steps: the first gate measures the idle baseline, the
cooldown returns to it and records it; another sensor (another machine) is measured again;
a cooldown never measures a baseline on a hot chip. FakeSensor is a TEST DOUBLE for the GPU
sensor this machine lacks."""

from __future__ import annotations

import json

import pytest

from containertax.campaign import config, schedule
from containertax.core import records
from containertax.execution import gating


class FakeSensor:
    """TEST DOUBLE: a chip at a fixed temperature, named like an NVML device."""

    name = "fake"

    def __init__(self, temp: float, uuid: str = "GPU-a") -> None:
        self.temp, self.uuid = temp, uuid

    def temperature_c(self) -> float:
        return self.temp

    def describe(self) -> dict:
        return {"sensor": self.name, "gpu_uuid": self.uuid}


@pytest.fixture
def campaign(config_dict, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config_dict["thermal"].update(cooldown="adaptive", poll_s=0.05, min_interval_s=0,
                                  adaptive={"baseline_s": 0.2, "band_c": 2, "stable_s": 0.2,
                                            "min_s": 0.1, "max_s": 0.6})
    loaded = config.load_campaign(config_dict, "adaptive.yaml")
    # the schedule step's file, from which a cell step reads its cell
    schedule.write_csv(schedule.plan(loaded), loaded.paths.schedule)
    return loaded


def test_first_gate_measures_the_baseline_and_the_cooldown_uses_it(campaign, tmp_path,
                                                                    monkeypatch):
    sensor = FakeSensor(39.0)
    monkeypatch.setattr(gating, "sensor_for", lambda c, lane=None: sensor)
    gating.gate(campaign, "n256", "native", "01", tmp_path / "g1.json")
    baseline = records.read_json(campaign.paths.baseline)
    assert baseline["baseline_c"] == 39.0 and baseline["identity"]["gpu_uuid"] == "GPU-a"
    gate_end = [e for e in records.read_ledger(campaign.root, step="gate", event="end")][-1]
    assert gate_end["waited_s"] >= 0.2  # the baseline's readings are deliberate waiting

    sensor.temp = 40.0  # within band_c of the baseline, not falling: settles
    out = tmp_path / "c1.json"
    gating.cool(campaign, "n256", "native", "01", out)
    cool = json.loads(out.read_text())
    assert cool["mode"] == "adaptive" and cool["ended_by"] == "settled"
    assert cool["baseline"]["baseline_c"] == 39.0 and cool["trace"]
    assert cool["waited_s"] < 0.6


def test_another_gpu_is_measured_again_and_a_cooldown_never_measures(campaign, tmp_path,
                                                                     monkeypatch):
    first = FakeSensor(39.0, "GPU-a")
    monkeypatch.setattr(gating, "sensor_for", lambda c, lane=None: first)
    gating.gate(campaign, "n256", "native", "01", tmp_path / "g1.json")
    other = FakeSensor(30.0, "GPU-b")
    monkeypatch.setattr(gating, "sensor_for", lambda c, lane=None: other)
    # the cooldown on a machine without its baseline waits max_s rather than take a hot
    # chip's temperature as idle
    out = tmp_path / "c.json"
    gating.cool(campaign, "n256", "native", "01", out)
    cool = json.loads(out.read_text())
    assert cool["ended_by"] == "max_s" and cool["baseline"] is None
    assert records.read_json(campaign.paths.baseline)["baseline_c"] == 39.0
    gating.gate(campaign, "n256", "native", "02", tmp_path / "g2.json")
    assert records.read_json(campaign.paths.baseline)["baseline_c"] == 30.0
