"""Issue #45's memory items, built and tested without a Spark: the trtllm probe reads
MemFree, MemAvailable, Cached and the memory cgroup when the engine sizes its KV cache (the
last view before its sizing line appears in its log), not only before launch; the cgroup's
memory.events (oom_kill) are read; and a run under a memory limit says whether the limit
counted the engine's memory (docker_memory_100g: OOM-kills a 70B model, or bounds nothing).
The engine is a small Python program that writes TensorRT-LLM's sizing line; the memory
views are counters, so which view was kept is known exactly."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

import pytest

from containertax.execution import memorychain
from containertax.workloads import PROBE_DIR

GIB = 2**30
SIZING = ("[TRT-LLM] [I] Peak memory during memory usage profiling (torch + non-torch): "
          "13.65 GiB, available KV cache memory when calculating max tokens: 60.00 GiB")


def probe_modules() -> tuple[Any, Any]:
    sys.path.insert(0, str(PROBE_DIR))
    try:
        import memview
        import trtllm as probe_trtllm
    finally:
        sys.path.remove(str(PROBE_DIR))
    return memview, probe_trtllm


def engine(tmp_path: Path, before_s: float, line: str | None, after_s: float) -> list[str]:
    """A stand-in engine: loads for before_s, logs its sizing line, runs for after_s."""
    script = tmp_path / "engine.py"
    script.write_text(
        "import sys, time\n"
        f"print('loading', flush=True); time.sleep({before_s})\n"
        + (f"print({line!r}, flush=True)\n" if line else "")
        + f"time.sleep({after_s}); print('done', flush=True)\n")
    return [sys.executable, str(script)]


def test_the_view_kept_is_the_last_before_the_sizing_line_and_sampling_stops(tmp_path):
    _, probe = probe_modules()
    counter = itertools.count()
    taken: list[int] = []

    def sample() -> dict[str, int]:
        taken.append(next(counter))
        return {"n": taken[-1]}

    log = tmp_path / "bench.log"
    rc, seconds, sizing = probe.run(engine(tmp_path, 0.6, SIZING, 0.8), str(log),
                                    sample=sample, poll_s=0.05)
    assert rc == 0 and "done" in log.read_text()
    assert sizing is not None
    # the kept view is the one just before the view that found the line
    assert sizing["after"]["n"] == taken[-1] and sizing["before"]["n"] == taken[-2]
    assert sizing["lag_s"] > 0 and sizing["seen_after_start_s"] > 0.6
    # no view after the line: the engine's measured part runs beside nothing of the probe's
    assert seconds > 1.3 and len(taken) < 1.3 / 0.05


def test_without_the_sizing_line_the_run_says_so(tmp_path):
    """Planted: an engine that never logs its sizing (another release's wording): no view
    is called at sizing; the record falls back to before_launch."""
    _, probe = probe_modules()
    rc, _, sizing = probe.run(engine(tmp_path, 0.1, None, 0.1), str(tmp_path / "b.log"),
                              sample=lambda: {}, poll_s=0.05)
    assert rc == 0 and sizing is None


def test_the_sizing_line_of_both_releases_is_recognised():
    _, probe = probe_modules()
    assert probe.SIZING_LINE.search(SIZING)
    assert probe.SIZING_LINE.search("[I] Memory dynamically allocated during inference "
                                    "(inside torch) in memory usage profiling: 1.20 GiB")
    log_1x = (Path(__file__).parent / "data" / "trtllm" / "log_1x.txt").read_text()
    assert probe.SIZING_LINE.search(log_1x)  # 1.1.0rc3's log
    assert not probe.SIZING_LINE.search("Memory used after loading model weights (inside "
                                        "torch) in memory usage profiling: 3.0 GiB")


def test_memory_events_are_read_in_v2_and_v1(tmp_path):
    memview, _ = probe_modules()
    v2 = tmp_path / "v2"
    (v2 / "proc/self").mkdir(parents=True)
    (v2 / "proc/self/cgroup").write_text("0::/docker/abc\n")
    (v2 / "proc/meminfo").write_text("MemFree: 10 kB\n")
    cg = v2 / "sys/fs/cgroup/docker/abc"
    cg.mkdir(parents=True)
    for name, value in (("memory.max", str(100 * GIB)), ("memory.current", "4096"),
                        ("memory.peak", str(99 * GIB)),
                        ("memory.events", "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n")):
        (cg / name).write_text(value + "\n")
    view = memview.memory_view(str(v2), nvml=False)
    assert view["cgroup"]["events"] == {"low": 0, "high": 0, "max": 12, "oom": 1,
                                        "oom_kill": 1}
    assert view["nvml"] is None and view["mem_free_bytes"] == 10 * 1024
    v1 = tmp_path / "v1"
    (v1 / "proc/self").mkdir(parents=True)
    (v1 / "proc/self/cgroup").write_text("4:memory:/docker/abc\n")
    own = v1 / "sys/fs/cgroup/memory"
    own.mkdir(parents=True)
    (own / "memory.usage_in_bytes").write_text("4800\n")
    (own / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    assert memview.memory_view(str(v1))["cgroup"]["events"] == {"oom_kill": 2}


def chain(limit: int | None, peak: int | None, oom: int = 0) -> dict[str, Any]:
    """A trtllm probe's memory chain: a 70B engine of 45 GiB peak and 40 GiB KV cache."""
    cgroup = {"max_bytes": limit, "peak_bytes": peak, "events": {"oom_kill": oom}}
    probe = {"memory_chain": {"engine": "trtllm-bench", "seen_when": "at_sizing",
                              "sized_at": {"mem_free_bytes": 1}, "after_run": {"cgroup": cgroup}},
             "log_key_lines": [SIZING.replace("13.65", "45.00")]}
    out = memorychain.from_probe(probe, {"kv_cache_gib": 40.0})
    assert out is not None
    return out


@pytest.mark.parametrize(("limit", "peak", "verdict"), [
    (100 * GIB, 84 * GIB, "counted"),       # the limit sees the engine: it may OOM-kill it
    (100 * GIB, 3 * GIB, "not counted"),    # the limit bounds nothing of the engine's
    (100 * GIB, 40 * GIB, "unclear"),
])
def test_a_memory_limit_says_whether_it_counted_the_engine(limit, peak, verdict):
    acc = chain(limit, peak)["cgroup_accounting"]
    assert acc["verdict"] == verdict and acc["engine_bytes"] == 85 * GIB
    assert acc["limit_bytes"] == 100 * GIB


def test_no_limit_or_no_peak_gives_no_verdict_and_an_oom_kill_is_kept():
    assert chain(None, 84 * GIB)["cgroup_accounting"] is None
    assert chain(100 * GIB, None)["cgroup_accounting"] is None
    assert chain(100 * GIB, 100 * GIB, oom=1)["cgroup_accounting"]["oom_kill"] == 1


def test_doctor_says_what_a_memory_limit_bounds_and_fails_an_engine_without_limits(tmp_path):
    """The study's phase 2B has the --memory 100g factor: on cgroup v2 a warning with the
    sentence doctor prints; planted: an engine without memory limit support fails, naming
    the environments; a campaign without a limit has no row."""
    from containertax.execution import doctor
    from tests.conftest import REPO
    from tests.test_doctor import docker_info, host, rows_of, spark_config

    study = REPO / "config" / "study-spark.yaml"
    row = rows_of(study, host(tmp_path / "a"))["memory limit"]
    assert row.status == doctor.WARN and doctor.MEMORY_LIMIT_UNVERIFIED in row.found
    assert "(--memory 100g)" in row.found and "cgroup version" not in row.found
    v1 = rows_of(study, host(tmp_path / "b", docker_info=lambda: {
        **docker_info(), "CgroupVersion": "1"}))["memory limit"]
    assert v1.status == doctor.WARN and "cgroup version 1, not DGX OS's v2" in v1.found
    off = rows_of(study, host(tmp_path / "c", docker_info=lambda: {
        **docker_info(), "MemoryLimit": False}))["memory limit"]
    assert off.status == doctor.FAIL and "MemoryLimit false" in off.found
    assert "systemctl restart docker" in off.fix
    assert "memory limit" not in rows_of(spark_config(tmp_path / "d"), host(tmp_path / "e"))


def test_the_paper_says_when_trtllm_bench_chains_were_read():
    """Committed records read just before start-up; new ones at sizing; both named."""
    from types import SimpleNamespace

    def rec(when: str) -> Any:
        return SimpleNamespace(memory_chain={"engine": "trtllm-bench", "seen_when": when})

    assert memorychain.trtllm_when([rec("before_launch")]).startswith("just before start-up")
    assert memorychain.trtllm_when([rec("at_sizing")]).startswith("at sizing for")
    mixed = memorychain.trtllm_when([rec("at_sizing"), rec("before_launch"),
                                     rec("before_launch")])
    assert mixed.endswith("in 1 runs and just before its start-up in 2")
