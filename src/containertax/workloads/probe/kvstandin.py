"""A stand-in engine for the memory chain (TEST DOUBLE of trtllm-bench's KV-cache sizing,
no GPU needed): reads what memory it sees, sizes a 'KV cache' as a fraction of the free
memory the way TensorRT-LLM does (available = free * free_gpu_memory_fraction, see
memview), allocates it (up to a cap, so a test on a shared machine never takes 90 % of
its memory) and reports the whole chain.

Free memory here is host memory (unified memory's equivalent): MemAvailable, or the
memory cgroup's headroom where that is smaller (memview.free_bytes). Whether the real
driver's cudaMemGetInfo honours a cgroup limit on GB10 is not known; the record keeps
every input, so the real engine's view ('device total memory' in its log) can be set
beside it.
"""

import time

T_ENTER = time.time()

import argparse  # noqa: E402
import sys  # noqa: E402

from memview import free_bytes, memory_view  # noqa: E402
from probe_common import finish, header  # noqa: E402

GIB = 2**30
PAGE = 4096


def allocate(n):
    """n bytes, every page written (resident, counted by the memory cgroup)."""
    buf = bytearray(n)
    for i in range(0, n, PAGE):
        buf[i] = 1
    return buf


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--fraction", type=float, default=0.9,
                   help="like --kv_cache_free_gpu_mem_fraction (TensorRT-LLM's default 0.9)")
    p.add_argument("--max-alloc-mib", type=int, default=64,
                   help="allocate at most this much of the sized cache")
    args = p.parse_args(argv)
    result = header("kvstandin", T_ENTER, 0.0, {"engine": "kvstandin"})
    seen = memory_view()
    free, source = free_bytes(seen)
    sized = int((free or 0) * args.fraction)
    cap = args.max_alloc_mib * 2**20
    n = min(sized, cap)
    t0 = time.time()
    cache = allocate(n)
    after = memory_view()
    # TensorRT-LLM's own log line (kvCacheManager.cpp), so the host's parser reads it too
    print(f"[MemUsageChange] Allocated {n / GIB:0.2f} GiB for max tokens in paged KV cache "
          f"({n // 1024}).", flush=True)
    result["memory_chain"] = {
        "engine": "kvstandin", "sized_at": seen, "free_bytes": free, "free_source": source,
        "fraction": args.fraction, "kv_cache_sized_bytes": sized,
        "kv_cache_allocated_bytes": len(cache), "alloc_cap_bytes": cap,
        "alloc_s": time.time() - t0, "after_allocation": after}
    return finish(args.out, result)


if __name__ == "__main__":
    sys.exit(main())
