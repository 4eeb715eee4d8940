"""The KV cache against free memory at sizing (statistics/kvmodel.py): plain and adjusted
differences, and the planted page-cache case on this machine with the stand-in engine."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from containertax.campaign import config
from containertax.execution import hostmemory, memorychain
from containertax.publishing import kvmodel_paper
from containertax.statistics import kvmodel

GIB = 2**30


def _frame(env_free_shift: float, env_kv_shift: float, blocks: int = 5,
           seed: int = 1) -> pd.DataFrame:
    """KV = 0.9 x free (+ env_kv_shift in 'container'), free drifting by block and lower
    by env_free_shift in 'container'."""
    rng = np.random.default_rng(seed)
    rows = []
    for b in range(1, blocks + 1):
        base = 20 + rng.normal(0, 1.0)
        for env in ("native", "container"):
            free = base - (env_free_shift if env == "container" else 0) + rng.normal(0, 0.05)
            kv = 0.9 * free + (env_kv_shift if env == "container" else 0) \
                + rng.normal(0, 0.01)
            rows.append({"model": "m", "environment": env, "block": b, "kv_gib": kv,
                         "free_gib": free, "covariate": "MemFree"})
    return pd.DataFrame(rows)


def test_a_difference_through_free_memory_is_attributed_to_it():
    r = kvmodel.analyse(_frame(2.0, 0.0), "native").iloc[0]
    assert r.plain_high < -1.5  # the plain comparison shows the container's smaller cache
    assert r.adj_low < 0 < r.adj_high and abs(r.adj_est) < 0.1
    assert r.verdict == "explained by free memory at sizing"
    assert r.slope == pytest.approx(0.9, abs=0.05)


def test_an_effect_beyond_free_memory_remains():
    """Planted: at equal free memory the container sizes 1 GiB less (a cgroup limit)."""
    r = kvmodel.analyse(_frame(0.0, -1.0), "native").iloc[0]
    assert r.verdict == "remains with free memory accounted for"
    assert r.adj_low < -1.0 < r.adj_high


def test_degenerate_inputs_give_a_defined_result():
    const = _frame(0.0, 0.0).assign(free_gib=20.0)
    r = kvmodel.analyse(const, "native").iloc[0]
    assert r.verdict == "not estimable" and "did not vary" in r.reason
    one = _frame(2.0, 0.0, blocks=1)
    assert kvmodel.analyse(one, "native").iloc[0].verdict == "not estimable"
    assert kvmodel.analyse(_frame(2.0, 0.0).iloc[0:0], "native").empty
    assert kvmodel_paper.table(kvmodel.analyse(_frame(2.0, 0.0).iloc[0:0], "native")) == ""


def _fill(path: Path) -> mmap.mmap:
    """The planted state: the file in the page cache (MemFree falls by its size), its pages
    touched through a mapping that the caller holds: mapped pages are never dropped by
    drop_caches, which other processes on a shared machine (every demo campaign run as
    root) write at any moment, so a plain read was undone in some blocks."""
    with path.open("rb") as fh:
        view = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)
    for i in range(0, len(view), mmap.PAGESIZE):
        view[i]
    return view


def _evict(path: Path) -> None:
    """Only the planted file's pages leave the cache (no global drop)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _campaign(config_dict, tmp_path):
    config_dict["results_dir"] = str(tmp_path / "results")
    config_dict["results_dir_absolute"] = True
    config_dict["environments"] = {"native": {"kind": "native"},
                                   "filled": {"kind": "native"}}
    return config.load_campaign(config_dict, "test.yaml")


def _blocks(c, tmp_path: Path, planted: Path, drop: bool, blocks: int) -> pd.DataFrame:
    """Each block: native, then 'filled' with the planted file read into the page cache
    just before its run only (evicted after it); drop: the page cache dropped before each
    run, as memory.drop_page_cache does."""
    chains = []
    for b in range(1, blocks + 1):
        for env in ("native", "filled"):
            held = _fill(planted) if env == "filled" else None
            if drop:  # the workflow's drop comes after whatever filled the cache
                if held is not None:
                    held.close()
                assert hostmemory.drop_page_cache()["dropped"]
            chain = memorychain.run_standin(c, env, tmp_path / f"w-{env}", free="mem_free",
                                            max_alloc_mib=1)["memory_chain"]
            if held is not None and not held.closed:
                held.close()
            _evict(planted)
            chains.append({"model": "standin", "environment": env, "block": b,
                           "chain": chain})
    return kvmodel.frame(chains)


@pytest.mark.slow
@pytest.mark.skipif(not hostmemory.drop_permitted()[0],
                    reason="dropping the page cache needs root on the host (/proc/sys/vm/"
                           "drop_caches writable)")
def test_planted_page_cache_before_one_environment_then_dropped(config_dict, tmp_path):
    """The stand-in engine sized from MemFree (as a GB10's CUDA free memory follows it):
    a 3 GiB file read into the page cache before one environment's runs only makes its KV
    cache about 2.7 GiB smaller in the plain comparison (6 blocks); the covariate model
    attributes it to free memory; dropping the page cache before each run removes it.
    Bounds: a third of the planted 2.7 GiB either way, so that other processes' memory
    (tens to hundreds of MiB between two runs a second apart on this shared machine, once
    about 2 GiB in one block during development) cannot decide the outcome."""
    planted = tmp_path / "planted.bin"
    with planted.open("wb") as fh:
        chunk = os.urandom(2**20)
        for _ in range(3072):
            fh.write(chunk)
        fh.flush()
        os.fsync(fh.fileno())
    _evict(planted)
    c = _campaign(config_dict, tmp_path)
    filled = kvmodel.analyse(_blocks(c, tmp_path, planted, drop=False, blocks=6), "native")
    r = filled.iloc[0]
    assert r.covariate == "MemFree"
    assert r.plain_high < -0.9 and r.plain_est < -0.9, filled.to_dict("records")
    assert r.verdict == "explained by free memory at sizing", filled.to_dict("records")
    dropped = kvmodel.analyse(_blocks(c, tmp_path, planted, drop=True, blocks=6), "native")
    d = dropped.iloc[0]
    assert abs(d.plain_est) < 0.9, dropped.to_dict("records")
    assert d.verdict != "remains with free memory accounted for"
    planted.unlink()
