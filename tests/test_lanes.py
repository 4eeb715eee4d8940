"""Lanes: config, whole blocks per lane in the schedule, per-lane ledgers and gates, only
the lane's GPU for every environment, wall-time estimates, status per lane."""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import datetime

import pytest

from containertax.campaign import config, designs, lanes, schedule, status
from containertax.core import records
from containertax.execution import environments, gating, thermal
from containertax.runtimes import docker as docker_kind
from containertax.runtimes import passthrough
from tests.conftest import REPO


def two_lanes(config_dict, reps=4, **extra):
    config_dict["repetitions"] = reps
    config_dict["lanes"] = [{"id": "a", "gpu": 0, **extra}, {"id": "b", "gpu": 1}]
    return config.load_campaign(config_dict, "x.yaml")


def test_without_lanes_one_implicit_lane_and_nothing_changes(config_dict):
    campaign = config.load_campaign(config_dict, "x.yaml")
    (lane,) = lanes.lanes(campaign)
    assert lane.implicit and lane.id == "main" and lane.gpu == 0
    assert lane.ledger == records.LEDGER and lane.run_lock == ".run.lock"
    assert "lanes" not in campaign.raw  # no schema default: the hash cannot move
    assert {c.lane for c in schedule.plan(campaign)} == {"main"}


def test_committed_campaign_keeps_its_hash_and_schedule():
    """Outside check: the hash and cell positions written by the H100 run (its committed
    raw records) are what this code computes for the same config."""
    campaign = config.load_file(REPO / "config" / "h100-variants.yaml")
    raw = REPO / "results" / "h100-variants" / "raw"
    recs = [records.read_json(p) for p in raw.glob("*/*/rep*.json")
            if not p.name.endswith(".cooldown.json")]
    # the last visit ran this very config (earlier visits ran earlier edits of it)
    recs = [r for r in recs if r["provenance"]["config_hash"] == campaign.config_hash()]
    assert len(recs) >= 6
    planned = {c.position: (c.model, c.environment, c.repetition, c.sequence)
               for c in schedule.plan(campaign)}
    for rec in recs:
        cell = rec["cell"]
        assert planned[cell["position"]] == (cell["model"], cell["environment"],
                                             cell["repetition"], cell["sequence"])


def test_lanes_do_not_enter_the_hash_or_the_order(config_dict):
    one = config.load_campaign(config_dict, "x.yaml")
    two = two_lanes(config_dict, reps=one.repetitions)
    assert one.config_hash() == two.config_hash()
    strip = [(c.position, c.model, c.environment, c.repetition, c.sequence)
             for c in schedule.plan(one)]
    assert strip == [(c.position, c.model, c.environment, c.repetition, c.sequence)
                     for c in schedule.plan(two)]


@pytest.mark.parametrize("reps,n", [(4, 2), (5, 2), (7, 3), (30, 4)])
def test_whole_blocks_per_lane_balanced(config_dict, reps, n):
    config_dict["repetitions"] = reps
    config_dict["lanes"] = [{"id": f"g{i}", "gpu": i} for i in range(n)]
    cells_ = schedule.plan(config.load_campaign(config_dict, "x.yaml"))
    per_block = {}
    for c in cells_:
        per_block.setdefault((c.model, c.block), set()).add(c.lane)
    assert all(len(v) == 1 for v in per_block.values())  # a block never splits
    per_lane_model = Counter((c.lane, c.model) for c in cells_ if c.environment == "native")
    for model in {c.model for c in cells_}:  # every model: blocks per lane within one
        counts = [per_lane_model[(f"g{i}", model)] for i in range(n)]
        assert max(counts) - min(counts) <= 1 and sum(counts) == reps


@pytest.mark.parametrize("design,envs", [("alternating", 2), ("williams", 3),
                                         ("williams", 4)])
def test_every_lane_gets_every_sequence_of_the_design(config_dict, design, envs):
    """Planted confound: with plain turns, 2 lanes and ABBA, lane a would only ever run
    AB and lane b only BA."""
    names = list(config_dict["environments"])
    config_dict["environments"] = {f"e{i}": dict(config_dict["environments"][names[0]])
                                   for i in range(envs)}
    config_dict["reference_environment"] = "e0"
    config_dict["schedule"]["design"] = design
    n_seq = len(designs.williams_rows(envs)) if design == "williams" else 2
    config_dict["repetitions"] = 2 * n_seq
    config_dict["lanes"] = [{"id": "a", "gpu": 0}, {"id": "b", "gpu": 1}]
    plan = schedule.plan(config.load_campaign(config_dict, "x.yaml"))
    for lane in ("a", "b"):
        seqs = Counter(c.sequence for c in plan if c.lane == lane and c.environment == "e0")
        assert len(seqs) == n_seq, (lane, seqs)


def test_schedule_csv_has_the_lane(tmp_path, config_dict):
    campaign = two_lanes(config_dict)
    schedule.write_csv(schedule.plan(campaign), tmp_path / "s.csv")
    back = schedule.read_csv(tmp_path / "s.csv")
    assert back == schedule.plan(campaign)
    # williams with 3 environments: 6 sequences, so reps 1-4 run 4 different ones: turns
    assert [c.lane for c in back if c.environment == "native" and c.model == "n256"] == \
        ["a", "b", "a", "b"]


@pytest.mark.parametrize("lanes_value,message", [
    ([{"id": "a", "gpu": 0}, {"id": "a", "gpu": 1}], "duplicate id"),
    ([{"id": "a", "gpu": 0}, {"id": "b", "gpu": 0}], "more than one lane"),
    ([{"id": "a", "gpu": "card1"}], "lanes"),
    ([{"id": "a-b", "gpu": 0}], "lanes"),
    ([{"id": f"l{i}", "gpu": i} for i in range(5)], "at least one per lane"),
])
def test_bad_lanes_named(config_dict, lanes_value, message):
    config_dict["lanes"] = lanes_value
    with pytest.raises(config.ConfigError, match=message) as err:
        config.load_campaign(config_dict, "demo.yaml")
    assert "demo.yaml" in str(err.value)


def test_each_lane_its_own_ledger_and_minimum_interval(tmp_path, config_dict):
    config_dict["results_dir"] = str(tmp_path)
    config_dict["results_dir_absolute"] = True
    campaign = two_lanes(config_dict)
    plan = schedule.plan(campaign)
    a = next(c for c in plan if c.lane == "a")
    b = next(c for c in plan if c.lane == "b")
    with gating.ledgered(campaign, "run", a):
        pass
    assert (campaign.root / "ledger.a.jsonl").exists()
    assert not (campaign.root / "ledger.b.jsonl").exists()
    assert thermal.last_run_end(campaign.root, "ledger.b.jsonl") is None  # b need not wait
    end_a = thermal.last_run_end(campaign.root, "ledger.a.jsonl")
    with gating.ledgered(campaign, "gate", b):
        pass
    merged = records.read_ledger(campaign.root)  # every lane, in time order
    assert [(e["lane"], e["step"]) for e in merged] == [("a", "run")] * 2 + [("b", "gate")] * 2
    assert datetime.fromisoformat(merged[1]["utc"]) == end_a


def test_lane_bound_to_another_host_fails_its_gate(config_dict):
    campaign = two_lanes(config_dict, host="no-such-host")
    with pytest.raises(gating.RunFailed, match="bound to host no-such-host"):
        gating.check_host(lanes.lanes(campaign)[0])
    gating.check_host(lanes.lanes(campaign)[1])  # no host: anywhere


class FakeNvml:
    """TEST DOUBLE for pynvml (no GPU here): two GPUs, found by index or UUID."""

    NVML_TEMPERATURE_GPU = 0
    UUIDS = ["GPU-aaaa-0000", "GPU-bbbb-1111"]

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return self.UUIDS.index(uuid)

    def nvmlDeviceGetUUID(self, h):
        return self.UUIDS[h]

    def nvmlDeviceGetName(self, h):
        return "NVIDIA H200"

    def nvmlDeviceGetMinorNumber(self, h):
        return h

    def nvmlDeviceGetTemperature(self, h, kind):
        return 30.0 + h


def test_lane_gpu_by_uuid_or_index():
    nvml = FakeNvml()
    by_uuid = thermal.NvmlSensor("GPU-bbbb-1111", nvml=nvml)
    assert by_uuid.temperature_c() == 31.0
    lane = lanes.Lane("b", "GPU-bbbb-1111")
    assert gating.lane_gpu(lane, by_uuid) == {"visible": "GPU-bbbb-1111",
                                              "uuid": "GPU-bbbb-1111", "minor": 1}
    by_index = thermal.NvmlSensor(1, nvml=nvml)
    assert gating.lane_gpu(lanes.Lane("b", 1), by_index)["visible"] == "GPU-bbbb-1111"
    assert gating.lane_gpu(lanes.Lane("b", 1), thermal.NoSensor()) == {
        "visible": "1", "uuid": None, "minor": None}


def launch(tmp_path, **kw):
    return environments.Launch(["true"], tmp_path, tmp_path, **kw)


def test_native_sees_only_the_lane_gpu_and_cores(tmp_path, config_dict):
    campaign = config.load_campaign(config_dict, "x.yaml")
    native = environments.launcher(campaign, "native")
    env = native.environment_vars(launch(tmp_path, gpu="GPU-bbbb-1111"))
    assert env["CUDA_VISIBLE_DEVICES"] == env["NVIDIA_VISIBLE_DEVICES"] == "GPU-bbbb-1111"
    assert "CUDA_VISIBLE_DEVICES" not in native.environment_vars(launch(tmp_path))
    cpu = sorted(os.sched_getaffinity(0))[0]
    out = native.run(environments.Launch(
        ["sh", "-c", "grep Cpus_allowed_list /proc/self/status; env"], tmp_path, tmp_path,
        gpu="1", cpuset=str(cpu)))
    assert f"Cpus_allowed_list:\t{cpu}\n" in out.output
    assert "CUDA_VISIBLE_DEVICES=1\n" in out.output


def test_docker_gets_only_the_lane_gpu(tmp_path):
    lane_launch = launch(tmp_path, gpu="GPU-bbbb-1111", gpu_minor=1, cpuset="4-7")
    kw = docker_kind.docker_kwargs({"gpus": "all"}, lane_launch)
    assert kw["device_requests"][0]["DeviceIDs"] == ["GPU-bbbb-1111"]
    assert kw["cpuset_cpus"] == "4-7"
    assert docker_kind.docker_kwargs({"cpuset_cpus": "0-1"}, lane_launch)["cpuset_cpus"] \
        == "0-1"
    assert "device_requests" not in docker_kind.docker_kwargs({}, launch(tmp_path))


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of character devices needs root")
def test_only_the_lane_gpu_device_node(tmp_path):
    """Planted /dev: two GPUs' nodes and the control nodes (made with mknod, as /dev/null's
    numbers, so nothing real is touched)."""
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        os.mknod(tmp_path / name, 0o600 | 0o020000, os.makedev(1, 3))
    every = passthrough.device_nodes(tmp_path)
    assert len(every) == 4
    only = passthrough.device_nodes(tmp_path, minor=1)
    assert sorted(os.path.basename(p) for p in only) == ["nvidia-uvm", "nvidia1", "nvidiactl"]


def test_wall_time_estimate_per_lanes(config_dict):
    campaign = two_lanes(config_dict, reps=5)
    per_rep = len(campaign.models) * len(campaign.environments)  # the demo: 2 x 4 (A/A)
    assert per_rep == 8
    assert lanes.estimated_wall_s(campaign, 10.0, 1) == 10.0 * per_rep * 5
    assert lanes.estimated_wall_s(campaign, 10.0, 2) == 10.0 * per_rep * 3  # the busier lane
    assert lanes.estimated_wall_s(campaign, 10.0, 5) == 10.0 * per_rep


def test_status_per_lane(tmp_path, config_dict):
    config_dict["results_dir"] = str(tmp_path)
    config_dict["results_dir_absolute"] = True
    campaign = two_lanes(config_dict)
    plan = schedule.plan(campaign)
    first_a = next(c for c in plan if c.lane == "a")
    for step in ("gate", "run", "cooldown"):
        with gating.ledgered(campaign, step, first_a):
            pass
    raw = campaign.paths.cell(first_a.model, first_a.environment, first_a.repetition).raw
    records.write_json(raw, {"planted": True})
    summary = status.summarize(campaign)
    assert summary["lanes"]["a"]["done"] == 1 and summary["lanes"]["b"]["done"] == 0
    per_lane = len(plan) // 2  # 4 repetitions of 2 models x 4 environments, 2 lanes
    assert per_lane == 16
    assert summary["lanes"]["a"]["total"] == summary["lanes"]["b"]["total"] == per_lane
    assert summary["lanes"]["a"]["remaining"] == per_lane - 1
    assert summary["lanes"]["a"]["eta_utc"] is not None
    text = status.render(summary)
    assert "lane a" in text and "lane b" in text and "1 lane" in text
    json.dumps(summary)


def lane_runs(lane_of_rep, reps, missing=()):
    import pandas as pd

    rows = [{"model": "m", "environment": e, "repetition": r, "block": r,
             "lane": lane_of_rep(r), "metric": "t", "value": 1.0}
            for r in range(1, reps + 1) for e in ("native", "docker")
            if (r, e) not in missing]
    return pd.DataFrame(rows)


def test_quality_flags_lanes_with_too_few_blocks():
    from containertax.statistics.quality import lanes_with_few_blocks

    def dealt(r):
        return "a" if r % 2 else "b"

    assert lanes_with_few_blocks(lane_runs(dealt, 6)) == []  # 3 and 3 blocks
    # planted: lane b lost a run of two of its blocks (a GPU that died): 1 complete block
    (found,) = lanes_with_few_blocks(lane_runs(dealt, 6, missing={(2, "docker"),
                                                                  (4, "native")}))
    assert found.check == "lane_blocks"
    assert found.details["lanes"] == [{"model": "m", "lane": "b", "blocks": 1}]
    # planted: a lane far behind the other (5 blocks against 2), each over the minimum
    (behind,) = lanes_with_few_blocks(lane_runs(lambda r: "a" if r <= 5 else "b", 7))
    assert behind.details["lanes"] == [{"model": "m", "lane": "b", "blocks": 2}]
    assert lanes_with_few_blocks(lane_runs(lambda r: "", 6)) == []  # before lanes existed


def test_records_carry_the_lane_and_older_ones_still_read(tmp_path):
    """A committed record (before lanes) reads with no lane and aggregates with lane '';
    one written with a lane keeps it through the schema."""
    from dataclasses import replace

    from containertax.core import rawrecord
    from containertax.statistics import aggregate

    committed = REPO / "results" / "h100-variants"
    frame = aggregate.tidy(committed)
    assert len(frame) and set(frame["lane"]) == {""}
    old = rawrecord.read_record(next(iter(aggregate.read_records(committed)))[0])
    assert old.lane is None and old.cell.lane == ""
    lane = {"id": "gpu1", "gpu": 1, "gpu_uuid": "GPU-bbbb-1111", "hostname": "node4"}
    new = replace(old, lane=lane, cell=replace(old.cell, lane="gpu1"))
    rawrecord.write_record(tmp_path / "rec.json", new)
    back = rawrecord.read_record(tmp_path / "rec.json")
    assert back.lane == lane and back.cell.lane == "gpu1"
