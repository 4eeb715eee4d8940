"""The GPU workloads of a campaign, once each, through the workflow's own launchers (GPU
machine): do they run natively and in Docker, what do they measure, how long does a run
take (to size the campaign), and how much do LLM requests spread with plain, static-cache
and compiled decoding.

    python3 tools/gpu/gpu_workloads.py config/h100.yaml --out workloads.json \
        [--decoding-model qwen2-0.5b --decoding-requests 10]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from containertax import workloads  # noqa: E402
from containertax.campaign import config  # noqa: E402
from containertax.execution import probing  # noqa: E402


def run_once(campaign: config.Campaign, model: str, env: str,
             overrides: dict | None = None) -> dict:
    kind = campaign.workload_kind(model)
    params = {**campaign.workload_params(model), **(overrides or {})}
    work = Path(tempfile.mkdtemp(prefix="gpu-workloads-"))
    t0 = time.monotonic()
    launched = probing.launch_probe(campaign, env, kind, params, work, label=f"{model}/{env}",
                                    timeout_s=params.get("timeout_s", 600))
    out = launched.outcome
    row: dict = {"model": model, "environment": env, "overrides": overrides or {},
                 "returncode": out.returncode, "wall_s": round(time.monotonic() - t0, 3)}
    probe = launched.result
    if probe is None:
        row["output"] = out.output[-3000:]
        return row
    row["metrics"] = {m.name: m.value for m in
                      workloads.metrics(kind, probe, out.launched_unix, out.wall_s)}
    # the spread of the measured requests, from the kind's own per-request rows (any kind
    # whose rows have a latency), and what the probe says of its model and software
    lat = [float(r["latency_s"]) for r in workloads.requests_rows(kind, probe)
           if r.get("latency_s") not in (None, "")]
    if len(lat) > 1:
        row["request_latency_cv"] = statistics.stdev(lat) / statistics.fmean(lat)
    requests = probe.get("requests")
    if isinstance(requests, list) and requests and isinstance(requests[0], dict):
        row["warmup_latency_s"] = [r.get("latency_s") for r in requests if r.get("warmup")]
    if isinstance(probe.get("model"), dict) and "parameters" in probe["model"]:
        row["parameters"] = probe["model"]["parameters"]
    if "software" in probe:
        row["software"] = probe["software"]
    shutil.rmtree(work, ignore_errors=True)
    return row


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("config")
    p.add_argument("--out", required=True)
    p.add_argument("--decoding-model", default=None)
    p.add_argument("--decoding-requests", type=int, default=10)
    p.add_argument("--docker-models", nargs="*", default=None,
                   help="models to run in the non-reference environments too (default all)")
    args = p.parse_args()
    campaign = config.load_file(args.config)
    rows = []

    def add(row: dict) -> None:
        rows.append(row)
        print(json.dumps(row, default=str)[:1500], flush=True)
        Path(args.out).write_text(json.dumps(rows, indent=1, default=str))

    for model in campaign.models:
        for env in campaign.environments:
            if env.id != campaign.reference and args.docker_models is not None \
                    and model.id not in args.docker_models:
                continue
            add(run_once(campaign, model.id, env.id))
    if args.decoding_model:
        for decoding in ("plain", "static", "compiled"):
            add(run_once(campaign, args.decoding_model, campaign.reference,
                         {"decoding": decoding, "requests": args.decoding_requests,
                          "warmup": 2, "timeout_s": 400}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
