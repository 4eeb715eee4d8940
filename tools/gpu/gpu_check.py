"""Checks and measurements that need a real NVIDIA GPU (run on the GPU machine).

1. NVML identity, one sample, and the cost of one sample (containertax.gpu).
2. Sampler perturbation: a bf16 matmul loop timed with the 10 Hz host sampler on and off,
   interleaved ABAB, as a ratio of medians from one run.
3. Temperature right after that load and the time until it falls below 45 C (and 40 C),
   then the real NVML thermal gate (containertax.thermal) against 45 C.
GPU passthrough into chroot and Docker is checked by gpu_passthrough.py, the workloads in
every environment by gpu_workloads.py (both through the workflow's own launchers).

    python3 tools/gpu/gpu_check.py --out gpu_check.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from containertax.execution import thermal  # noqa: E402
from containertax.execution.gpu import NvmlGpu  # noqa: E402
from containertax.execution.telemetry import Sampler  # noqa: E402


def matmul_loop(torch, n: int, iters: int) -> float:
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        a @ b
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def perturbation(gpu: NvmlGpu, blocks: int, n: int, iters: int) -> dict:
    import torch

    matmul_loop(torch, n, 20)  # warm-up
    on, off, summaries = [], [], []
    for _ in range(blocks):
        off.append(matmul_loop(torch, n, iters))
        with Sampler(thermal.NvmlSensor(0), 10, gpu=gpu) as s:
            on.append(matmul_loop(torch, n, iters))
        summaries.append(s.summary())
    flops = 2 * n**3 * iters
    return {
        "n": n, "iters": iters, "blocks": blocks,
        "seconds_off": off, "seconds_on": on,
        "ratio_on_over_off_median": statistics.median(on) / statistics.median(off),
        "tflops_off_median": flops / statistics.median(off) / 1e12,
        "telemetry_last_block": summaries[-1],
    }


def cooling(gpu: NvmlGpu, limit_s: float) -> dict:
    t0 = time.monotonic()
    trace = []
    below45 = below40 = None
    while time.monotonic() - t0 < limit_s:
        t = gpu.sample()["gpu_temperature_c"]
        el = round(time.monotonic() - t0, 2)
        trace.append([el, t])
        if below45 is None and t < 45:
            below45 = el
        if below40 is None and t < 40:
            below40 = el
            break
        time.sleep(0.5)
    return {"start_c": trace[0][1], "below_45_after_s": below45, "below_40_after_s": below40,
            "trace": trace}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--blocks", type=int, default=6)
    p.add_argument("--iters", type=int, default=400)
    args = p.parse_args()
    result: dict = {}
    gpu = NvmlGpu(0)
    result["identity"] = gpu.identity()
    result["sample"] = gpu.sample()
    t0 = time.perf_counter()
    for _ in range(200):
        gpu.sample()
    result["sample_cost_us"] = (time.perf_counter() - t0) / 200 * 1e6
    result["perturbation"] = perturbation(gpu, args.blocks, 8192, args.iters)
    result["cooling"] = cooling(gpu, 150)
    settings = thermal.GateSettings(threshold_c=45, min_interval_s=0, timeout_s=120, poll_s=1)
    try:
        gate = thermal.wait_gate(thermal.NvmlSensor(0), settings, None)
        result["gate"] = {k: v for k, v in gate.items() if k != "trace"}
    except thermal.GateTimeout as exc:
        result["gate"] = {"timeout": str(exc)}
    Path(args.out).write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps({k: v for k, v in result.items() if k != "cooling"}, indent=1,
                     default=str)[:6000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
