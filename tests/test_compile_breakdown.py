"""The LLM probe's breakdown of its first compiled step (issue #32): torch.compile's own
timings, Inductor's worker count and the probe's descendant processes, read in the probe
(probe/llm.py, standard library only). torch is not installed here: fake_torch() is a test
double of the few torch modules the breakdown reads (torch._dynamo.utils,
torch._inductor.config), shaped as torch 2.x has them; the /proc reading runs against
this machine's real /proc with a real child process."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

PROBE_DIR = Path(__file__).resolve().parents[1] / "src" / "containertax" / "workloads" / "probe"


@pytest.fixture
def llm(monkeypatch):
    monkeypatch.syspath_prepend(str(PROBE_DIR))
    spec = importlib.util.spec_from_file_location("llm_probe_under_test", PROBE_DIR / "llm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_torch(monkeypatch, metrics=None, compile_times=None, threads=32, phases_ns=None):
    """Test double: torch's module names in sys.modules, holding only what is read."""
    utils = types.ModuleType("torch._dynamo.utils")
    if metrics is not None:
        utils.compilation_time_metrics = metrics
    if compile_times is not None:
        utils.compile_times = compile_times
    if phases_ns is not None:
        utils.cumulative_time_spent_ns = phases_ns
    inductor_config = types.ModuleType("torch._inductor.config")
    if threads is not None:
        inductor_config.compile_threads = threads
    for name, module in {"torch": types.ModuleType("torch"),
                         "torch._dynamo": types.ModuleType("torch._dynamo"),
                         "torch._dynamo.utils": utils,
                         "torch._inductor": types.ModuleType("torch._inductor"),
                         "torch._inductor.config": inductor_config}.items():
        monkeypatch.setitem(sys.modules, name, module)
    return sys.modules["torch"]


def test_breakdown_sums_each_timed_function(llm, monkeypatch):
    torch = fake_torch(monkeypatch, metrics={"_compile.compile_inner": [4.0, 0.5],
                                             "async_compile.wait": [2.25]}, threads=16,
                       phases_ns={"backend_compile": 3_500_000_000})
    b = llm.compile_breakdown(torch)
    assert b["phases"] == {"backend_compile": 3.5}
    assert b["seconds"] == {"_compile.compile_inner": {"s": 4.5, "calls": 2},
                            "async_compile.wait": {"s": 2.25, "calls": 1}}
    assert b["compile_threads"] == 16


def test_breakdown_falls_back_to_compile_times_csv(llm, monkeypatch):
    def compile_times(repr="str", aggregate=False):  # noqa: A002 - torch's own argument name
        assert repr == "csv" and aggregate
        return ["compile_fx_inner", "PyCodeCache.load_by_key_path"], ["3.500000", "0.250000"]

    torch = fake_torch(monkeypatch, compile_times=compile_times)
    b = llm.compile_breakdown(torch)
    assert b["seconds"] == {"compile_fx_inner": {"s": 3.5, "calls": None},
                            "PyCodeCache.load_by_key_path": {"s": 0.25, "calls": None}}


def test_a_torch_without_these_apis_gives_null_not_an_error(llm, monkeypatch):
    torch = fake_torch(monkeypatch, threads=None)  # neither table nor compile_times
    b = llm.compile_breakdown(torch)
    assert b["seconds"] is None and b["compile_threads"] is None and b["phases"] is None
    monkeypatch.setitem(sys.modules, "torch._dynamo.utils", None)  # import fails
    assert llm.compile_breakdown(torch)["seconds"] is None


def test_descendants_are_this_process_children_and_grandchildren(llm):
    """Real /proc: a child shell that starts a grandchild; both are found, with start times
    after this process's own start (other descendants this process may have are ignored)."""
    child = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
    grand = []
    try:
        deadline = time.monotonic() + 10
        while True:
            d = llm.descendants()
            grand = [p for p in d["processes"] if p["parent"] == child.pid]
            if [p["comm"] for p in grand] == ["sleep"] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        mine = [p for p in d["processes"] if p["pid"] == child.pid]
        assert len(mine) == 1 and mine[0]["comm"] == "sh"
        assert [p["comm"] for p in grand] == ["sleep"]
        assert 0 <= mine[0]["start_s"] <= grand[0]["start_s"] <= d["now_s"]
        assert d["count"] >= 2 and d["last_start_s"] >= grand[0]["start_s"]
    finally:
        for p in grand:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p["pid"], signal.SIGKILL)
        child.kill()
        child.wait()


def test_descendants_without_proc_is_null(llm, tmp_path):
    assert llm.descendants(proc=str(tmp_path)) is None
