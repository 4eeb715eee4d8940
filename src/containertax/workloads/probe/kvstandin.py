"""A stand-in engine for the memory chain (TEST DOUBLE of trtllm-bench's KV-cache sizing,
no GPU needed): reads what memory it sees, sizes a 'KV cache' as a fraction of the free
memory the way TensorRT-LLM does (available = free * free_gpu_memory_fraction, see
memview), allocates it (up to a cap, so a test on a shared machine never takes 90 % of
its memory) and reports the whole chain.

Free memory, --device host (the default): host memory (unified memory's equivalent),
MemAvailable, or the memory cgroup's headroom where that is smaller (memview.free_bytes): a
model of what GB10 might report. --device cuda: what TensorRT-LLM itself reads,
torch.cuda.mem_get_info() (KVCacheManager.calculate_max_num_blocks, tensorrt_llm/_torch/
pyexecutor/resource_manager.py: max_tokens = free_gpu_memory_fraction * free_mem / bytes per
token), the cache allocated on the device; run on a GB10 this answers whether cudaMemGetInfo
honours a container's memory limit there. The record keeps every input either way.
"""

import time

T_ENTER, T_ENTER_MONO = time.time(), time.monotonic()

import argparse  # noqa: E402
import sys  # noqa: E402

from memview import free_bytes, memory_view  # noqa: E402
from probe_common import finish, header, mark  # noqa: E402

mark("enter", T_ENTER_MONO)

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
    p.add_argument("--device", choices=("host", "cuda"), default="host",
                   help="size from host memory (a model of unified memory) or from "
                        "torch.cuda.mem_get_info() as TensorRT-LLM does")
    p.add_argument("--free", choices=("mem_available", "mem_free"), default="mem_available",
                   help="--device host: size from MemAvailable or from MemFree (the page "
                        "cache counted as used, as a GB10's CUDA free memory counts it)")
    args = p.parse_args(argv)
    result = header("kvstandin", T_ENTER, 0.0, {"engine": "kvstandin"})
    if args.device == "cuda":
        try:
            import torch
        except ImportError:
            print("kvstandin: --device cuda needs PyTorch in this environment's python",
                  file=sys.stderr)
            return 2
        if not torch.cuda.is_available():
            print("kvstandin: --device cuda: no CUDA device is visible here", file=sys.stderr)
            return 2
        mark("imports")
        torch.cuda.init()
        mark("device")
    seen = memory_view()
    if args.device == "cuda":
        free_dev, total_dev = torch.cuda.mem_get_info()
        seen["cuda"] = {"device": torch.cuda.get_device_name(0), "free_bytes": int(free_dev),
                        "total_bytes": int(total_dev), "torch": torch.__version__}
        free, source = int(free_dev), "cuda_mem_get_info"
    else:
        free, source = free_bytes(seen, args.free)
    sized = int((free or 0) * args.fraction)
    cap = args.max_alloc_mib * 2**20
    n = min(sized, cap)
    t0 = time.time()
    if args.device == "cuda":
        cache = torch.empty(n, dtype=torch.uint8, device="cuda")
        cache.fill_(1)
        torch.cuda.synchronize()
        allocated = cache.numel()
    else:
        cache = allocate(n)
        allocated = len(cache)
    mark("model")  # the KV cache sized and allocated
    after = memory_view()
    if args.device == "cuda":
        free_after, _ = torch.cuda.mem_get_info()
        after["cuda"] = {"free_bytes": int(free_after)}
    # TensorRT-LLM's own log line (kvCacheManager.cpp), so the host's parser reads it too
    print(f"[MemUsageChange] Allocated {n / GIB:0.2f} GiB for max tokens in paged KV cache "
          f"({n // 1024}).", flush=True)
    result["memory_chain"] = {
        "engine": "kvstandin", "sized_at": seen, "free_bytes": free, "free_source": source,
        "fraction": args.fraction, "kv_cache_sized_bytes": sized,
        "kv_cache_allocated_bytes": allocated, "alloc_cap_bytes": cap, "device": args.device,
        "alloc_s": time.time() - t0, "after_allocation": after}
    return finish(args.out, result)


if __name__ == "__main__":
    sys.exit(main())
