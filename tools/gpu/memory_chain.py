"""The memory chain on a real GPU (GPU machine): the stand-in engine in each environment of a
GPU config, sized both ways: from host memory (the stand-in's model of unified memory) and
from torch.cuda.mem_get_info(), the call TensorRT-LLM sizes its KV cache from. Two Docker
variants are added to the config's docker environment: an explicit memory limit and a
cgroup parent (the study plan's hypotheses). On a discrete GPU a memory cgroup limits host
memory, not device memory: the host-sized cache shrinks under the limit, the CUDA-sized one
should not; on a GB10 the same command says whether CUDA's free memory honours the limit.

    python3 tools/gpu/memory_chain.py config/h100.yaml --out memory-chain.json
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

from containertax.campaign.config import load_campaign  # noqa: E402
from containertax.campaign.configfile import read_config_file  # noqa: E402
from containertax.execution import environments, memorychain  # noqa: E402
from containertax.runtimes import chroot as chroot_kind  # noqa: E402

LIMIT = "4g"  # room for Python, torch and a CUDA context; far below the host's memory
GIB = 2**30


def variants(raw: dict) -> dict:
    """The config with docker_memory and docker_cgroup_parent beside its docker env."""
    raw = copy.deepcopy(raw)
    envs = raw["environments"]
    docker = next(k for k, v in envs.items() if isinstance(v, dict) and v.get("kind") == "docker")
    base = envs[docker]
    envs["docker_memory"] = {**copy.deepcopy(base),
                             "options": {**base.get("options", {}), "memory": LIMIT}}
    envs["docker_cgroup_parent"] = {
        **copy.deepcopy(base),
        "options": {**base.get("options", {}), "cgroup_parent": "/containertax-bench"}}
    return raw


def row(env: str, device: str, out: dict) -> dict:
    ch = out["memory_chain"]
    seen = ch["seen"]
    cg = seen.get("cgroup") or {}
    return {"environment": env, "device": device, "free_source": ch["free_source"],
            "free_gib": ch["free_bytes"] / GIB if ch["free_bytes"] is not None else None,
            "kv_sized_gib": ch["kv_cache_sized_bytes"] / GIB,
            "kv_allocated_gib": ch["kv_cache_bytes"] / GIB,
            "mem_available_gib": (seen.get("mem_available_bytes") or 0) / GIB,
            "cgroup_max_gib": cg["max_bytes"] / GIB if cg.get("max_bytes") else None,
            "nvml_free_gib": ((seen.get("nvml") or {}).get("free_bytes") or 0) / GIB or None,
            "cuda_free_gib": ((seen.get("cuda") or {}).get("free_bytes") or 0) / GIB or None}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("config")
    p.add_argument("--out", required=True)
    p.add_argument("--max-alloc-mib", type=int, default=256)
    args = p.parse_args()
    raw = variants(read_config_file(Path(args.config)))
    campaign = load_campaign(raw, args.config)
    rows, runs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for env in campaign.environments:
            if env.kind == "chroot":  # the workflow's rootfs rule, done here
                rootfs = environments.launcher(campaign, env.id).rootfs()
                if not rootfs.exists():
                    chroot_kind.export_rootfs(env.image, rootfs)
            for device in ("host", "cuda"):
                try:
                    out = memorychain.run_standin(
                        campaign, env.id, Path(tmp) / f"{env.id}-{device}",
                        max_alloc_mib=args.max_alloc_mib, device=device, timeout_s=300)
                except Exception as exc:  # noqa: BLE001 - reported, the others still run
                    rows.append({"environment": env.id, "device": device, "error": str(exc)[-600:]})
                    continue
                runs.append(out)
                rows.append(row(env.id, device, out))
    Path(args.out).write_text(json.dumps({"rows": rows, "runs": runs}, indent=1, default=str))
    for r in rows:
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}))
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
