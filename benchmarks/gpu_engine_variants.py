"""On a GPU machine: the engine step's attention and compilation against its roofline.

Runs the transformers probe once per variant (workload keys `attn_implementation`,
`compile_mode` and `coordinate_descent`), each with a fresh compile cache so that each pays
its own compilation, through the workflow's native launcher as benchmarks/gpu_engine.py
does. Per variant: median decoding step, roofline fraction, token throughput and the
warm-up latency (compilation included). The checksum of the greedy tokens shows whether
the variants decode alike (with random weights the logits lie close together, so kernels
that round differently may pick other tokens; tests/test_workloads.py compares logits).

    python3 benchmarks/gpu_engine_variants.py config/h100-engine.yaml --out DIR
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from gpu_engine import run_probe  # noqa: E402

from containertax.campaign import config  # noqa: E402
from containertax.core import records  # noqa: E402
from containertax.execution import thermal  # noqa: E402
from containertax.execution.gpu import NvmlGpu  # noqa: E402

RO = {"compile_mode": "reduce-overhead", "coordinate_descent": False}
VARIANTS = {  # transformers' sdpa repeats the cached K and V per query head; sdpa_gqa does not
    "reduce-overhead": {"attn_implementation": "sdpa", **RO},
    "reduce-overhead+cd": {"attn_implementation": "sdpa", **RO, "coordinate_descent": True},
    "max-autotune": {"attn_implementation": "sdpa", **RO, "compile_mode": "max-autotune"},
    "max-autotune+cd": {"attn_implementation": "sdpa", "compile_mode": "max-autotune",
                        "coordinate_descent": True},
    "sdpa_gqa": {"attn_implementation": "sdpa_gqa", **RO},
    "sdpa_gqa+cd": {"attn_implementation": "sdpa_gqa", **RO, "coordinate_descent": True},
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("config")
    p.add_argument("--model", default="llama3-8b")
    p.add_argument("--out", required=True)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--budget-s", type=float, default=540.0,
                   help="no variant starts after this many seconds")
    args = p.parse_args()
    campaign = config.load_file(args.config)
    base = dict(campaign.workload)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sensor = thermal.NvmlSensor(campaign.thermal["device"])
    gpu = NvmlGpu(sensor.device, nvml=sensor.nvml)
    result: dict = {"config": args.config, "model": args.model, "gpu": gpu.identity(),
                    "runs": []}
    t0 = time.monotonic()
    for name in args.variants.split(","):
        if time.monotonic() - t0 > args.budget_s:
            result["stopped"] = f"{name} not run: past {args.budget_s} s"
            break
        campaign.workload.clear()
        campaign.workload.update(base | VARIANTS[name])
        cache = (out / f"cache-{name}").resolve()
        cache.mkdir(parents=True, exist_ok=True)
        cache.chmod(0o777)
        row = run_probe(campaign, args.model, cache, sensor, gpu,
                        campaign.workload.get("timeout_s", 400))
        row = {"variant": name, **VARIANTS[name], **row}
        result["runs"].append(row)
        print(json.dumps({k: row.get(k) for k in (
            "variant", "returncode", "wall_s", "decode_step_s", "hbm_roofline_pct",
            "token_throughput", "warmup_latency_s", "checksum")}), flush=True)
        records.write_json(out / "variants.json", result)
    return 0 if all(r["returncode"] == 0 for r in result["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
