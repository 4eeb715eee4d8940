"""The timeline of every run (workloads/timeline.py): marks of the launcher and of the probe
on CLOCK_MONOTONIC, phases that add up to the wall time, read the same way from records
of any date; and the phases compared per environment in their own family."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from containertax.campaign.paths import CampaignPaths
from containertax.core import rawrecord
from containertax.publishing import phases_paper, tables
from containertax.runtimes import launch
from containertax.statistics import aggregate, phases
from containertax.statistics import comparisons as st
from containertax.workloads import timeline
from containertax.workloads.metric_registry import REGISTRY
from tests.conftest import REPO, needs_docker

# The phases telescope between marks, and the wall time is exited - launch read from the
# same marks: floating-point rounding of monotonic seconds (~1e6 s) is below 1e-9 s.
SUM_TOLERANCE_S = 1e-6


def test_phases_merge_marks_a_run_does_not_take_and_add_up_to_the_wall():
    marks = {"launch": 100.0, "created": 100.01, "started": 100.2, "enter": 100.3,
             "imports": 105.0, "model": 105.2, "window_end": 105.4, "teardown": 105.45,
             "exited": 106.0}
    found = timeline.phases(marks)
    # no device and no compile mark: their time is part of the next phase present;
    # 'created' ends no phase, so Docker and native have the same phases
    assert list(found) == ["phase_start_s", "phase_interpreter_s", "phase_imports_s",
                           "phase_model_s", "phase_measure_s", "phase_teardown_s",
                           "phase_exit_s"]
    assert found["phase_start_s"] == pytest.approx(0.2)
    assert found["phase_measure_s"] == pytest.approx(0.2)
    assert sum(found.values()) == pytest.approx(6.0, abs=SUM_TOLERANCE_S)
    built = timeline.build({"launch": 100.0, "created": 100.01, "started": 100.2,
                            "exited": 106.0, "removed": 106.05},
                           {"timeline": {"clock": "CLOCK_MONOTONIC", "marks": {
                               k: v for k, v in marks.items()
                               if k not in ("launch", "created", "started", "exited")}}},
                           6.0)
    assert built["marks"]["created"] == 100.01 and built["after_exit_s"]["removed"] == \
        pytest.approx(0.05)
    assert timeline.problems(built, SUM_TOLERANCE_S) == []
    assert all(m in REGISTRY and REGISTRY[m].unit == "s" for m in timeline.METRICS)


def test_a_child_that_ran_before_its_launcher_saw_it_start_has_no_negative_phase():
    """A loaded machine may run the child's first statement before the launcher, back from
    its start call, reads 'started' (a whole run of the suite: phase_interpreter_s =
    -0.0019 s). The start phase then ends at the child's first mark and the interpreter
    phase is zero; the phases still add up to the wall time, and the record keeps the
    marks as taken. Planted both ways: a probe mark before launch is not moved, and
    problems() names it."""
    crossed = {"launch": 10.0, "started": 10.005, "enter": 10.003, "imports": 11.0,
               "teardown": 11.5, "exited": 12.0}
    found = timeline.phases(crossed)
    assert found["phase_start_s"] == pytest.approx(0.003)
    assert found["phase_interpreter_s"] == 0.0
    assert all(v >= 0 for v in found.values()), found
    assert sum(found.values()) == pytest.approx(2.0, abs=SUM_TOLERANCE_S)
    built = timeline.build({k: crossed[k] for k in ("launch", "started", "exited")},
                           {"timeline": {"marks": {k: crossed[k] for k in
                                                   ("enter", "imports", "teardown")}}}, 2.0)
    assert built["marks"]["started"] == 10.005  # kept as taken
    assert timeline.problems(built, SUM_TOLERANCE_S) == []
    before_launch = {**crossed, "enter": 9.0}  # another clock: outside the phase
    said = timeline.problems(timeline.build(
        {k: before_launch[k] for k in ("launch", "started", "exited")},
        {"timeline": {"marks": {k: before_launch[k] for k in ("enter", "imports",
                                                              "teardown")}}}, 2.0),
        SUM_TOLERANCE_S)
    assert any("phase_interpreter_s" in s and "< 0" in s for s in said), said


def test_a_probe_on_another_clock_is_caught():
    """Planted: the probe's marks on the wall clock (time.time()) instead of the monotonic
    clock its launcher reads: phases go negative, and problems() names them."""
    launcher = {"launch": 5000.0, "started": 5000.01, "exited": 5002.0}
    wall_clock = 1.79e9
    probe = {"timeline": {"marks": {"enter": wall_clock, "imports": wall_clock + 1,
                                    "teardown": wall_clock + 1.5}}}
    built = timeline.build(launcher, probe, 2.0)
    said = timeline.problems(built, SUM_TOLERANCE_S)
    assert any("phase_exit_s" in s and "< 0" in s for s in said), said
    with pytest.raises(timeline.TimelineError):
        timeline.phases({"launch": 1.0, "enter": 2.0})  # no exit: no timeline


def test_native_wall_time_ends_when_the_process_exits_not_when_its_children_do():
    """Planted: the process leaves a child holding its output pipe for 1 s (as torch.compile's
    worker pool does). The wall time ends at the process's own exit, as a container's ends
    when its first process exits; the pipe's end is recorded after it."""
    marks: dict[str, float] = {}
    rc, _, _, wall, out, _ = launch.run_process(
        ["sh", "-c", "(sleep 1; echo child) & echo parent"], {"PATH": "/usr/bin:/bin"}, 30,
        None, marks)
    assert rc == 0 and "parent" in out and "child" in out
    assert marks["output_closed"] - marks["exited"] > 0.9  # the child held the pipe
    assert wall == marks["exited"] - marks["launch"] < 0.9


def test_a_version_3_record_reads_with_no_timeline():
    data = json.loads(next((REPO / "results" / "h100-engine-balanced" / "raw").rglob(
        "rep001.json")).read_text())
    assert data["schema_version"] == 2
    rec = rawrecord.RawRecord.from_dict(rawrecord.migrate(data, "test"))
    assert rec.timeline is None and rec.schema_version == rawrecord.SCHEMA_VERSION
    assert aggregate.metrics_of(rec) == list(rec.metrics)  # nothing to recompute


@needs_docker
@pytest.mark.docker
@pytest.mark.slow
def test_a_real_run_in_native_chroot_and_docker_has_phases_that_add_up_to_its_wall(tmp_path):
    """The demo's matmul through the real workflow (Snakemake, Docker Engine, the chroot):
    every record's phases, read as the analysis reads them, add up to its process wall time
    within SUM_TOLERANCE_S; the probe's marks, taken inside the environment, lie between the
    launcher's launch and exit marks and in order; every environment has the same phases."""
    from tests.test_workflow import make_campaign, snakemake

    cfg = make_campaign(tmp_path, "timeline", ["native", "chroot", "docker"], reps=2)
    out = snakemake(tmp_path, cfg, "cells")
    assert out.returncode == 0, out.stderr[-3000:]
    root = tmp_path / "results" / "timeline"
    seen = {}
    for path in CampaignPaths(root).raw_records():
        rec = rawrecord.read_record(path)
        tl = rec.timeline
        assert tl is not None and tl["clock"] == "CLOCK_MONOTONIC", path
        found = {m.name: m.value for m in aggregate.metrics_of(rec)}
        wall = found["process_wall_s"]
        parts = {k: v for k, v in found.items() if k in timeline.METRICS}
        assert abs(sum(parts.values()) - wall) < SUM_TOLERANCE_S, (path, parts, wall)
        marks = tl["marks"]
        inside = [marks[m] for m in ("enter", "imports", "model", "warm", "window_end",
                                     "teardown")]
        assert inside == sorted(inside), (path, marks)
        assert marks["launch"] < inside[0] and inside[-1] < marks["exited"], (path, marks)
        kind = rec.environment["kind"]
        if kind == "docker":
            assert marks["launch"] < marks["created"] < marks["started"] < marks["exited"]
            assert tl["after_exit_s"]["removed"] > 0
        seen.setdefault(kind, set(parts))
        assert set(parts) == seen[kind]
    assert set(seen) == {"native", "chroot", "docker"}
    assert seen["native"] == seen["chroot"] == seen["docker"] == {
        "phase_start_s", "phase_interpreter_s", "phase_imports_s", "phase_model_s",
        "phase_warmup_s", "phase_measure_s", "phase_teardown_s", "phase_exit_s"}


def _runs(shift: dict[str, float], blocks: int = 6, seed: int = 3) -> pd.DataFrame:
    """A tidy table of two environments whose phases differ by `shift` seconds per phase
    (planted), with block-to-block noise of 5 ms."""
    rng = np.random.default_rng(seed)
    base = {"phase_start_s": 0.01, "phase_imports_s": 5.0, "phase_measure_s": 0.15,
            "phase_exit_s": 0.8}
    rows = []
    for b in range(1, blocks + 1):
        drift = rng.normal(0, 0.005, len(base))
        for env in ("native", "docker"):
            values = {m: v + d + (shift.get(m, 0.0) if env == "docker" else 0.0)
                      + rng.normal(0, 0.002) for (m, v), d in zip(base.items(), drift,
                                                                 strict=True)}
            values["process_wall_s"] = sum(values.values())
            rows += [{"model": "mm", "environment": env, "repetition": b, "block": b,
                      "metric": m, "value": v, "unit": "s"} for m, v in values.items()]
    return pd.DataFrame(rows)


def test_each_phase_is_compared_in_its_own_family_and_the_planted_phase_carries_it():
    """Planted: Docker's start phase 0.2 s longer, nothing else. The phases are their own
    family; the start phase is an overhead with its difference in seconds, the wall time
    carries the same 0.2 s, and the general tables leave the phases out."""
    runs = _runs({"phase_start_s": 0.2})
    metrics = ["process_wall_s", *[m for m in timeline.METRICS if m in set(runs.metric)]]
    plan = st.Plan("native", {}, {"mm": ["process_wall_s"]}, {})
    results = st.analyse(runs, st.Settings("native"), metrics, plan)
    fam = dict(zip(results.metric, results.family, strict=True))
    assert fam["process_wall_s"] == "primary"
    assert {fam[m] for m in metrics[1:]} == {"phases"}
    found = {r["metric"]: r for r in phases.rows(runs, results, 0.05, REGISTRY)}
    start = found["phase_start_s"]
    assert start["verdict"] == "overhead"
    assert start["diff_low"] < 0.2 < start["diff_high"]
    assert found["process_wall_s"]["diff_s"] == pytest.approx(0.2, abs=0.01)
    for m in ("phase_imports_s", "phase_measure_s", "phase_exit_s"):
        assert found[m]["verdict"] != "overhead", found[m]
    assert "Process or container start" not in tables.tests_table(results, REGISTRY)
    assert "Process or container start" in phases_paper.table(list(found.values()))
    assert math.isclose(phases.sum_gap(runs), 0.0, abs_tol=1e-9)


def test_phase_values_of_a_table_without_phases_are_empty():
    runs = _runs({})
    runs = runs[runs.metric == "process_wall_s"]
    results = st.analyse(runs, st.Settings("native"), ["process_wall_s"])
    assert phases.rows(runs, results, 0.05, REGISTRY) == []
    assert phases_paper.table([]) == "" and math.isnan(phases.sum_gap(runs))


def test_probe_marks_its_phases_in_order(tmp_path):
    """The matmul probe natively (numpy): its own marks in the order the timeline reads."""
    out = tmp_path / "r.json"
    subprocess.run([sys.executable, str(REPO / "src/containertax/workloads/probe/matmul.py"),
                    "--out", str(out), "--size", "32", "--warmup", "1", "--repeats", "2"],
                   check=True, cwd=tmp_path)
    marks = json.loads(out.read_text())["timeline"]["marks"]
    assert list(marks) == ["enter", "imports", "model", "warm", "window_end", "teardown"]
    assert list(marks.values()) == sorted(marks.values())
    assert Path(out).exists()
