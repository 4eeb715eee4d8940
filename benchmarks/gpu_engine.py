"""On a GPU machine, in one go (under 8 minutes on an H100): the engine-grade LLM workload
and the adaptive cooldown, measured on the same runs.

(a) Runs the transformers probe (decoding from the config, `engine` in
    config/h100-engine-gqa.yaml) for one model several times through the workflow's native
    launcher, with the campaign's compile cache: per run token throughput, median decoding
    step and its roofline fraction (weights a step reads / step time / peak HBM bandwidth);
    across runs the CV of token throughput, and the blocks a 95 % CI half-width of 2 % calls
    for at that CV.
(b) After each run a cooldown, alternately fixed (--fixed-s) and adaptive (the config's
    thermal.adaptive, baseline measured first): total waiting time per mode, and the spread
    of the start temperature of the runs that follow each mode.

    python3 benchmarks/gpu_engine.py config/h100-engine-gqa.yaml --model llama3-8b --out DIR
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from containertax import workloads  # noqa: E402
from containertax.campaign import config  # noqa: E402
from containertax.core import records  # noqa: E402
from containertax.execution import environments, thermal  # noqa: E402
from containertax.execution.gpu import NvmlGpu  # noqa: E402
from containertax.execution.telemetry import Sampler  # noqa: E402
from containertax.workloads import transformers  # noqa: E402


def blocks_for(cv: float, half_width: float = 0.02) -> int | None:
    """Blocks for a 95 % CI half-width of the mean paired relative difference, if each
    run's CV is `cv` and the two environments' runs are independent."""
    try:
        from scipy.stats import t as student_t
        quantile = student_t.ppf
    except ImportError:  # normal quantile: slightly optimistic at small n
        def quantile(p: float, df: int) -> float:
            return statistics.NormalDist().inv_cdf(p)
    sd = math.sqrt(2) * cv
    for n in range(2, 500):
        if quantile(0.975, n - 1) * sd / math.sqrt(n) <= half_width:
            return n
    return None


def run_probe(campaign: config.Campaign, model: str, cache: Path, sensor: thermal.Sensor,
              gpu: NvmlGpu, timeout_s: float) -> dict:
    kind = campaign.workload_kind(model)
    params = campaign.workload_params(model)
    launcher = environments.launcher(campaign, campaign.reference)
    work = Path(tempfile.mkdtemp(prefix="gpu-engine-"))
    work.chmod(0o777)
    probe_in, work_in = launcher.inside(workloads.PROBE_DIR, work)
    argv, env = workloads.build(kind, params, launcher.env.python, probe_in,
                                work_in / "result.json", cache=launcher.cache_inside(cache))
    launch = environments.Launch(argv=argv, probe_dir=workloads.PROBE_DIR, work_dir=work,
                                 env=env, timeout_s=timeout_s, label=model, cache_dir=cache)
    with Sampler(sensor, 10, gpu=gpu) as sampler:
        out = launcher.run(launch)
    row: dict = {"returncode": out.returncode, "wall_s": round(out.wall_s, 2)}
    if out.returncode != 0 or not (work / "result.json").exists():
        row["output"] = out.output[-3000:]
        return row
    probe = records.read_json(work / "result.json")
    metrics = {m.name: m.value for m in workloads.metrics(kind, probe, out.launched_unix,
                                                          out.wall_s)}
    peak, source = gpu.peak_bandwidth()
    telemetry = sampler.summary()
    row.update({
        "decoding": probe.get("decoding"),
        "token_throughput": metrics["token_throughput"],
        "itl_p50_s": metrics["itl_p50_s"],
        "ttft_s": metrics["ttft_s"],
        "decode_step_s": transformers.decode_step_s(probe),
        "weight_bytes_per_step": probe["model"]["weight_bytes_per_step"],
        "peak_bandwidth_bytes_per_s": peak, "peak_bandwidth_source": source,
        "hbm_roofline_pct": transformers.roofline_pct(probe, peak) if peak else None,
        "warmup_latency_s": [r["latency_s"] for r in probe["requests"] if r["warmup"]],
        "request_latency_cv": _cv([r["latency_s"] for r in probe["requests"]
                                   if not r["warmup"]]),
        "power_mean_w": telemetry.get("power_mean_w"),
        "gpu_temperature_max_c": telemetry.get("gpu_temperature_max_c"),
        "software": probe.get("software"), "checksum": probe.get("checksum"),
    })
    return row


def _cv(values: list[float]) -> float | None:
    return statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else None


def summarize(runs: list[dict], cooldowns: list[dict]) -> dict:
    ok = [r for r in runs if r.get("token_throughput")]
    tput = [r["token_throughput"] for r in ok]
    roof = [r["hbm_roofline_pct"] for r in ok if r.get("hbm_roofline_pct") is not None]
    out: dict = {
        "runs_ok": len(ok), "runs": len(runs),
        "token_throughput_mean": statistics.fmean(tput) if tput else None,
        "token_throughput_cv": _cv(tput),
        # the first run compiled (into the cache); its measured requests are warm all the same
        "token_throughput_cv_without_first": _cv(tput[1:]),
        "hbm_roofline_pct_mean": statistics.fmean(roof) if roof else None,
        "hbm_roofline_pct_range": [min(roof), max(roof)] if roof else None,
        "decode_step_ms_mean": 1000 * statistics.fmean(r["decode_step_s"] for r in ok)
        if ok else None,
    }
    cv = out["token_throughput_cv"]
    out["blocks_for_2pct_ci"] = blocks_for(cv) if cv else None
    for mode in ("fixed", "adaptive"):
        mine = [c for c in cooldowns if c["mode"] == mode]
        starts = [c["next_start_c"] for c in mine if c.get("next_start_c") is not None]
        out[mode] = {
            "cooldowns": len(mine),
            "total_wait_s": round(sum(c["waited_s"] for c in mine), 1),
            "mean_wait_s": round(statistics.fmean(c["waited_s"] for c in mine), 1)
            if mine else None,
            "ended_by": [c.get("ended_by", "time") for c in mine],
            "next_start_c": starts,
            "next_start_spread_c": (max(starts) - min(starts)) if starts else None,
            "next_start_sd_c": statistics.stdev(starts) if len(starts) > 1 else None,
        }
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("config")
    p.add_argument("--model", default="llama3-8b")
    p.add_argument("--out", required=True, help="folder for engine.json and the compile cache")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--fixed-s", type=float, default=30.0,
                   help="the fixed cooldown it is compared with")
    p.add_argument("--max-adaptive-s", type=float, default=60.0,
                   help="caps thermal.adaptive.max_s, to fit the time")
    p.add_argument("--budget-s", type=float, default=450.0,
                   help="no run starts that would end after this many seconds")
    args = p.parse_args()
    campaign = config.load_file(args.config)
    out = Path(args.out)
    cache = (out / "compile-cache").resolve()
    cache.mkdir(parents=True, exist_ok=True)
    cache.chmod(0o777)
    sensor = thermal.NvmlSensor(campaign.thermal["device"])
    gpu = NvmlGpu(sensor.device, nvml=sensor.nvml)
    poll = campaign.thermal["poll_s"]
    adaptive = thermal.AdaptiveSettings.from_config(campaign.thermal)
    adaptive.max_s = min(adaptive.max_s, args.max_adaptive_s)
    t0 = time.monotonic()
    baseline = thermal.idle_baseline(sensor, min(adaptive.baseline_s, 15.0), poll)
    result: dict = {"config": args.config, "model": args.model, "gpu": gpu.identity(),
                    "baseline": {k: v for k, v in baseline.items() if k != "trace"},
                    "adaptive": vars(adaptive), "fixed_s": args.fixed_s,
                    "runs": [], "cooldowns": []}

    def save() -> None:
        result["summary"] = summarize(result["runs"], result["cooldowns"])
        records.write_json(out / "engine.json", result)

    spans: list[float] = []  # seconds of each run with its cooldown
    for k in range(args.runs):
        elapsed = time.monotonic() - t0
        if spans and elapsed + max(spans) > args.budget_s:
            result["stopped"] = f"another run would not end within {args.budget_s} s"
            break
        t_run = time.monotonic()
        start_c = sensor.temperature_c()
        if result["cooldowns"]:
            result["cooldowns"][-1]["next_start_c"] = start_c
        row = run_probe(campaign, args.model, cache, sensor, gpu,
                        campaign.workload.get("timeout_s", 400))
        row.update(index=k, start_c=start_c,
                   after=result["cooldowns"][-1]["mode"] if result["cooldowns"] else None)
        result["runs"].append(row)
        print(json.dumps({x: row.get(x) for x in ("index", "returncode", "wall_s",
                          "token_throughput", "decode_step_s", "hbm_roofline_pct", "start_c",
                          "after")}), flush=True)
        if k + 1 < args.runs:  # a cooldown is judged by the start of the run after it
            if k % 2 == 0:
                cool = thermal.cooldown(sensor, args.fixed_s, poll)
            else:
                cool = thermal.adaptive_cooldown(sensor, adaptive, baseline["baseline_c"], poll)
            result["cooldowns"].append(cool)
            print(json.dumps({x: cool.get(x) for x in ("mode", "waited_s", "start_c", "end_c",
                                                       "ended_by")}), flush=True)
        spans.append(time.monotonic() - t_run)
        save()
    if result["cooldowns"] and "next_start_c" not in result["cooldowns"][-1]:
        result["cooldowns"].pop()  # stopped early: no run followed the last cooldown
    save()
    s = result["summary"]
    print(json.dumps(s, indent=1))
    print(f"{args.model}: roofline {s['hbm_roofline_pct_mean']} % of peak HBM bandwidth per "
          f"decoding step, token throughput CV {s['token_throughput_cv']} over "
          f"{s['runs_ok']} runs; fixed {args.fixed_s:g} s cooldowns waited "
          f"{s['fixed']['total_wait_s']} s in all, adaptive {s['adaptive']['total_wait_s']} s; "
          f"start-temperature spread {s['fixed']['next_start_spread_c']} vs "
          f"{s['adaptive']['next_start_spread_c']} C")
    return 0 if s["runs_ok"] >= 3 else 1


if __name__ == "__main__":
    sys.exit(main())
