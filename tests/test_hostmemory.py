"""Host state around a run: the page cache dropped where permitted, MemAvailable before and
after, and the performance cores a cpuset names. The /proc and /sys trees here are
stand-ins written by the test (this machine's own are used in test_workflow's campaigns)."""

from __future__ import annotations

from pathlib import Path

import pytest

from containertax.execution import environments, hostmemory
from containertax.runtimes import docker as docker_kind
from containertax.runtimes import hostcpus

MEMINFO = """MemTotal:       131072000 kB
MemFree:         2097152 kB
MemAvailable:   104857600 kB
Buffers:          102400 kB
Cached:         62914560 kB
SwapCached:            0 kB
Shmem:            524288 kB
SwapFree:              0 kB
"""


def fake_proc(tmp_path: Path, writable: bool = True) -> Path:
    proc = tmp_path / "proc"
    (proc / "sys" / "vm").mkdir(parents=True)
    (proc / "meminfo").write_text(MEMINFO)
    drop = proc / "sys" / "vm" / "drop_caches"
    drop.write_text("0\n")
    if not writable:
        drop.chmod(0o444)
    return proc


def test_meminfo_fields_in_kib(tmp_path):
    info = hostmemory.meminfo(fake_proc(tmp_path))
    assert info["MemAvailable"] == 104857600 and info["Cached"] == 62914560
    assert "SwapCached" not in info


def test_auto_drops_the_cache_and_records_the_state(tmp_path):
    proc = fake_proc(tmp_path)
    state = hostmemory.before_run("auto", proc)
    assert state["drop"]["dropped"] is True
    assert (proc / "sys" / "vm" / "drop_caches").read_text() == "3\n"
    assert state["before_kib"]["MemAvailable"] == 104857600


def test_never_leaves_the_cache(tmp_path):
    proc = fake_proc(tmp_path)
    state = hostmemory.before_run("never", proc)
    assert state["drop"] == {"dropped": False, "reason": "memory.drop_page_cache: never"}
    assert (proc / "sys" / "vm" / "drop_caches").read_text() == "0\n"


def test_refusal_is_recorded_or_fails_when_required(tmp_path):
    proc = fake_proc(tmp_path)
    (proc / "sys" / "vm" / "drop_caches").unlink()
    (proc / "sys" / "vm" / "drop_caches").mkdir()  # writing to it fails even for root
    state = hostmemory.before_run("auto", proc)
    assert state["drop"]["dropped"] is False and "IsADirectoryError" in state["drop"]["reason"]
    with pytest.raises(hostmemory.PageCacheError, match="memory.drop_page_cache: auto"):
        hostmemory.before_run("required", proc)
    assert hostmemory.drop_permitted(tmp_path / "nowhere")[0] is False


def test_memory_metrics_of_a_run(tmp_path):
    state = hostmemory.before_run("never", fake_proc(tmp_path))
    state["after_kib"] = {**state["before_kib"], "MemAvailable": 100 * 2**20}
    start_used_mib = (131072000 - 104857600) / 1024  # 25 GiB in use at the start
    m = {n: v for n, v, _ in hostmemory.metrics(state, start_used_mib + 30 * 1024)}
    assert m["mem_available_before_gib"] == pytest.approx(100.0)
    assert m["mem_available_after_gib"] == pytest.approx(100.0)
    assert m["host_mem_rise_gib"] == pytest.approx(30.0)
    assert m["host_mem_used_peak_gib"] == pytest.approx(55.0)
    assert "host_mem_used_peak_gib" not in dict(
        (n, v) for n, v, _ in hostmemory.metrics(state, None))


def fake_sys(tmp_path: Path, capacity: dict[int, int] | None, freq: dict[int, int] | None,
             online: str) -> Path:
    root = tmp_path / "cpu"
    root.mkdir(parents=True)
    (root / "online").write_text(online + "\n")
    for c in range(20):
        d = root / f"cpu{c}"
        (d / "cpufreq").mkdir(parents=True)
        if capacity:
            (d / "cpu_capacity").write_text(f"{capacity[c]}\n")
        if freq:
            (d / "cpufreq" / "cpuinfo_max_freq").write_text(f"{freq[c]}\n")
    return root


def test_performance_cores_from_capacity_then_frequency(tmp_path):
    # GB10-like: ten small cores 0-9, ten big ones 10-19 (numbers are the kernel's to say)
    cap = {c: 1024 if c >= 10 else 470 for c in range(20)}
    root = fake_sys(tmp_path / "a", cap, None, "0-19")
    assert hostcpus.performance_cores(root) == (list(range(10, 20)), "cpu_capacity")
    freq = {c: 3900000 if c % 2 else 2800000 for c in range(20)}
    root = fake_sys(tmp_path / "b", None, freq, "0-17")  # 18, 19 offline
    cores, source = hostcpus.performance_cores(root)
    assert cores == list(range(1, 18, 2)) and source == "cpufreq/cpuinfo_max_freq"
    assert hostcpus.cpulist([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    with pytest.raises(hostcpus.CpuTopologyError, match="cpuset_cpus: '10-19'"):
        hostcpus.performance_cores(fake_sys(tmp_path / "c", None, None, "0-19"))


def test_cpuset_performance_resolves_on_this_host():
    """This machine's own sysfs: 'performance' becomes a core list, or a clear error."""
    try:
        cores, _ = hostcpus.performance_cores()
    except hostcpus.CpuTopologyError:
        with pytest.raises(environments.EnvironmentFailure, match="options.cpuset_cpus"):
            docker_kind.docker_kwargs({"cpuset_cpus": "performance"})
        return
    kw = docker_kind.docker_kwargs({"cpuset_cpus": "performance"})
    assert kw["cpuset_cpus"] == hostcpus.cpulist(cores)


@pytest.mark.parametrize("mode", ["auto", "required", "never"])
def test_preflight_says_where_the_cache_cannot_be_dropped(config_dict, monkeypatch, mode):
    from containertax.campaign import config
    from containertax.execution import preflight

    monkeypatch.setattr(hostmemory, "drop_permitted", lambda: (False, "stand-in refusal"))
    campaign = config.load_campaign({**config_dict, "memory": {"drop_page_cache": mode}},
                                    "x.yaml")
    if mode == "required":
        with pytest.raises(preflight.PreflightError,
                           match="'required' but stand-in refusal.*x.yaml"):
            preflight.page_cache_problems(campaign)
    elif mode == "auto":
        assert "stand-in refusal" in preflight.page_cache_problems(campaign)[0]
    else:
        assert preflight.page_cache_problems(campaign) == []
    monkeypatch.setattr(hostmemory, "drop_permitted", lambda: (True, ""))
    assert preflight.page_cache_problems(campaign) == []
