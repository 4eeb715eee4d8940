"""The LLM probe's breakdown of its first compiled step (issue #32): torch.compile's own
timings, Inductor's worker count and the probe's descendant processes, read in the probe
(probe/llm.py, standard library only). torch is not installed here: fake_torch() is a test
double of the few torch modules the breakdown reads (torch._dynamo.utils,
torch._inductor.config), shaped as torch 2.x has them; the /proc reading runs against
this machine's real /proc with a real child process."""

from __future__ import annotations

import contextlib
import importlib.util
import json
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
            # exec sets comm before the new command line is readable: wait for both
            if ([(p["comm"], p["cmd"]) for p in grand] == [("sleep", "sleep 30")]
                    or time.monotonic() > deadline):
                break
            time.sleep(0.05)
        mine = [p for p in d["processes"] if p["pid"] == child.pid]
        assert len(mine) == 1 and mine[0]["comm"] == "sh"
        assert mine[0]["cmd"] == "sh -c sleep 30 & wait" and grand[0]["cmd"] == "sleep 30"
        assert [p["comm"] for p in grand] == ["sleep"]
        # start times in /proc are whole clock ticks, so the grandchild's may round one tick
        # past the 'now' read beside it (2575.15 against 2575.14 in one whole run)
        tick = 1 / os.sysconf("SC_CLK_TCK")
        assert 0 <= mine[0]["start_s"] <= grand[0]["start_s"] <= d["now_s"] + tick + 1e-9
        assert d["count"] >= 2 and d["last_start_s"] >= grand[0]["start_s"]
    finally:
        for p in grand:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p["pid"], signal.SIGKILL)
        child.kill()
        child.wait()


def test_descendants_without_proc_is_null(llm, tmp_path):
    assert llm.descendants(proc=str(tmp_path)) is None


def test_the_record_keeps_the_breakdown():
    """workloads/transformers.detail() carries the probe's breakdown into the raw record."""
    from containertax import workloads

    breakdown = {"seconds": {"compile_fx_inner": {"s": 1.0, "calls": 1}}, "phases": None,
                 "compile_threads": 32, "descendants": None}
    detail = workloads.get("transformers").detail({"compile_breakdown": breakdown})
    assert detail["compile_breakdown"] == breakdown


def _record(env: str, compile_s: float, wait_s: float, seccomp: str) -> dict:
    return {"status": "ok", "cell": {"environment": env},
            "timeline": {"phases_s": {"phase_compile_s": compile_s, "phase_imports_s": 9.0}},
            "detail": {"compile_breakdown": {
                "seconds": {"async_compile.wait": {"s": wait_s, "calls": 1}},
                "phases": {"inductor_compile": wait_s + 1}, "compile_threads": 32,
                "descendants": {"count": 33, "first_start_s": 20.0, "last_start_s": 21.5}}},
            "inside": {"environment": {"status": {"Seccomp": seccomp}}}}


def test_compile_breakdown_tool_tabulates_each_environment(tmp_path):
    """tools/gpu/compile_breakdown.py: per environment (in the order of the records' paths)
    the mean (min-max, n) of each sub-step over its ok runs; a failed run is left out."""

    runs = {("native", 1): _record("native", 13.0, 2.0, "0"),
            ("docker", 1): _record("docker", 17.0, 5.0, "2"),
            ("docker", 2): _record("docker", 19.0, 7.0, "2"),
            ("docker", 3): {**_record("docker", 99.0, 99.0, "2"), "status": "failed"}}
    for (env, rep), record in runs.items():
        folder = tmp_path / "raw" / "llama3-8b" / env
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"rep{rep:03d}.json").write_text(json.dumps(record))
    tool = Path(__file__).resolve().parents[1] / "tools" / "gpu" / "compile_breakdown.py"
    out = subprocess.run([sys.executable, str(tool), str(tmp_path)], capture_output=True,
                         text=True, check=True).stdout
    rows = {line.split(" | ")[0].lstrip("| "): line for line in out.splitlines()}
    assert rows["sub-step (seconds unless named)"].endswith("| docker | native |")
    assert rows["first compiled step (timeline)"].endswith("| 18 (17-19, n=2) | 13 |")
    assert rows["torch: async_compile.wait"].endswith("| 6 (5-7, n=2) | 2 |")
    assert rows["torch phase: inductor_compile"].endswith("| 7 (6-8, n=2) | 3 |")
    assert rows["Seccomp (0 none, 2 filter)"].endswith("| 2 | 0 |")
    assert rows["descendant processes at the step's end"].endswith("| 33 (33-33, n=2) | 33 |")
    empty = subprocess.run([sys.executable, str(tool), str(tmp_path / "raw" / "none")],
                           capture_output=True, text=True)
    assert empty.returncode == 2 and "no such folder" in empty.stderr


def test_a_real_torch_compile_fills_the_breakdown(llm):
    """With torch importable (not in the project's .venv: checked on 2026-11-26 with torch
    2.13.0+cpu from /opt/wheels in a separate venv), a tiny compiled function's first call
    is broken down into Dynamo's own timed functions and phases."""
    torch = pytest.importorskip("torch")

    def f(x, y):
        return (x @ y).relu().sum(-1)

    torch.compile(f, fullgraph=True)(torch.randn(8, 8), torch.randn(8, 8))
    b = llm.compile_breakdown(torch)
    assert b["seconds"]["_compile.compile_inner"]["s"] > 0
    assert b["seconds"]["_compile.compile_inner"]["calls"] >= 1
    assert b["phases"]["entire_frame_compile"] > 0 and b["compile_threads"] >= 1
    assert b["descendants"]["count"] >= 0


def test_the_device_script_packs_what_it_measured_when_its_limit_cuts_it(tmp_path):
    """scripts/gpu-warmup-causes.sh with test doubles of the GPU machine's parts (its
    set-up, the priming run and a campaign that writes one record and then hangs): cut by
    its own 4 s limit, it still leaves the record, this visit's ledger (raw/visits/*-cut)
    and the breakdown table under $OUT."""
    import shutil
    import tarfile

    repo = Path(__file__).resolve().parents[1]
    tree = tmp_path / "tree"
    (tree / "scripts").mkdir(parents=True)
    (tree / "tools" / "gpu").mkdir(parents=True)
    (tree / "config").mkdir()
    shutil.copy(repo / "scripts" / "gpu-warmup-causes.sh", tree / "scripts")
    shutil.copy(repo / "tools" / "gpu" / "compile_breakdown.py", tree / "tools" / "gpu")
    (tree / "scripts" / "gpu-machine.sh").write_text("echo set-up double\n")
    (tree / "tools" / "gpu" / "prime_compile_cache.py").write_text("print('primed')\n")
    record = json.dumps(_record("native", 13.0, 2.0, "0"))
    (tree / "scripts" / "gpu-campaign.sh").write_text(
        "root=$CONTAINERTAX_WORKDIR/results/h100-warmup-causes\n"
        "mkdir -p $root/raw/llama3-8b/native $root/work/x\n"
        f"echo '{record}' > $root/raw/llama3-8b/native/rep001.json\n"
        "echo '{}' > $root/ledger.jsonl\nexec sleep 60\n")
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "OUT": str(out), "CONTAINERTAX_WORKDIR": str(tmp_path / "work"),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    t0 = time.monotonic()
    done = subprocess.run(["bash", str(tree / "scripts" / "gpu-warmup-causes.sh"), "4"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert time.monotonic() - t0 < 30
    assert "campaign exit 124" in (out / "run.log").read_text()
    with tarfile.open(out / "campaign.tgz") as tar:
        names = tar.getnames()
    assert "./raw/llama3-8b/native/rep001.json" in names
    assert any(n.endswith("-cut/ledger.jsonl") and "/raw/visits/" in n for n in names)
    assert not any("/work" in n for n in names)
    assert "| first compiled step (timeline) | 13 |" in (out / "breakdown.md").read_text()
    assert "packed in" in done.stdout


def fake_inductor_runtime(monkeypatch):
    """Test double of the two torch modules autotune_census reads, shaped as torch 2.x has
    them: triton_heuristics (CachingAutotuner, hash_configs) and autotune_cache
    (AutotuneCache._prepare_key: sha256 of 'basename:tag'), with cache_dir_utils."""
    import hashlib

    heuristics = types.ModuleType("torch._inductor.runtime.triton_heuristics")

    class CachingAutotuner:
        def __init__(self, filename, configs, info):
            self.filename, self.configs, self.autotune_cache_info = filename, configs, info
            self.launchers = configs[:1]

    heuristics.CachingAutotuner = CachingAutotuner
    heuristics.hash_configs = lambda configs: hashlib.sha256(
        repr(sorted(configs)).encode()).hexdigest()
    cache = types.ModuleType("torch._inductor.runtime.autotune_cache")

    class AutotuneCache:
        @staticmethod
        def _prepare_key(filename):
            return hashlib.sha256(f"{os.path.basename(filename)}:".encode()).hexdigest()

    cache.AutotuneCache = AutotuneCache
    dirs = types.ModuleType("torch._inductor.runtime.cache_dir_utils")
    dirs.cache_dir = lambda: "/cache/inductor"
    for name, module in {"torch._inductor.runtime.triton_heuristics": heuristics,
                         "torch._inductor.runtime.autotune_cache": cache,
                         "torch._inductor.runtime.cache_dir_utils": dirs}.items():
        monkeypatch.setitem(sys.modules, name, module)
    return heuristics, AutotuneCache


def test_autotune_census_tells_a_hit_a_stale_entry_and_a_missing_file(llm, monkeypatch,
                                                                       tmp_path):
    heuristics, cache = fake_inductor_runtime(monkeypatch)
    kernels = tmp_path / "ab"
    kernels.mkdir()
    hit, stale, missing = (str(kernels / f"{n}.py") for n in ("hit", "stale", "missing"))
    # the hit kept its one cached configuration; the stale entry was tuned over other
    # configurations (another configs_hash); the missing one has no .best_config at all
    for name, stored in ((hit, "whatever"), (stale, "another-hash")):
        Path(f"{kernels}/{cache._prepare_key(name)}.best_config").write_text(
            json.dumps({"configs_hash": stored, "num_warps": 4}))
    keep = [heuristics.CachingAutotuner(hit, ["c1"], {"autotune_cache_state": "hit"}),
            heuristics.CachingAutotuner(stale, ["c1", "c2"], {"autotune_cache_state": "miss"}),
            heuristics.CachingAutotuner(missing, ["c1", "c2", "c3"],
                                        {"autotune_cache_state": "miss"})]
    census = llm.autotune_census()
    assert census["kernels"] == 3 and census["cache_dir"] == "/cache/inductor"
    assert census["counts"] == {"state=hit": 1, "state=miss": 2, "exists=True": 2,
                                "exists=False": 1, "hash_matches=False": 1}
    rows = {Path(r["file"]).stem: r for r in census["sample"]}
    assert rows["stale"]["stored_hash"] == "another-hash" != rows["stale"]["hash"]
    assert rows["missing"]["best_config"].startswith(str(kernels))
    assert {Path(r["file"]).stem for r in census["multi_config"]} == {"stale", "missing"}
    assert rows["hit"]["hash_matches"] is None  # one configuration left: nothing to compare
    del keep


def test_autotune_census_survives_a_dead_weakref_and_finds_torch_2_11_names(
        llm, monkeypatch, tmp_path):
    """Planted: a weakref proxy whose referent is gone among gc's objects (isinstance on it
    raised ReferenceError in every compiled run on torch 2.11), and .best_config files named
    as torch 2.11 names them (AutotuneCache.create's local cache: sha256 of the first key
    and torch_key(); torch/_inductor/runtime/autotune_cache.py _setup_local_cache), which
    the first hash alone never found ("exists" False for all 17 kernels on the H100)."""
    import hashlib
    import weakref

    heuristics, cache = fake_inductor_runtime(monkeypatch)
    torch_key = b"torch-2.11-test-double"

    def create(meta, filename, configs_hash):
        key = hashlib.sha256(cache._prepare_key(filename).encode() + torch_key).hexdigest()
        made = types.SimpleNamespace(local_cache=(object(), f"{os.path.dirname(filename)}/"
                                                  f"{key}.best_config"))
        return made if meta.get("autotune_local_cache") else None

    monkeypatch.setattr(cache, "create", staticmethod(create), raising=False)
    kernels = tmp_path / "cd"
    kernels.mkdir()
    hit = str(kernels / "hit.py")
    name = create({"autotune_local_cache": True}, hit, "")
    Path(name.local_cache[1]).write_text(json.dumps({"configs_hash": "h", "num_warps": 4}))
    keep = [heuristics.CachingAutotuner(hit, ["c1"], {"autotune_cache_state": "hit"})]

    class Gone:
        pass

    gone = Gone()
    dead = weakref.proxy(gone)
    del gone
    with pytest.raises(ReferenceError):
        isinstance(dead, heuristics.CachingAutotuner)
    census = llm.autotune_census()
    assert census["kernels"] == 1
    assert census["counts"]["exists=True"] == 1
    assert census["sample"][0]["best_config"] == name.local_cache[1]
    del keep, dead


def test_autotune_census_is_none_without_triton_kernels(llm, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch._inductor.runtime.triton_heuristics",
                        raising=False)
    assert llm.autotune_census() is None
