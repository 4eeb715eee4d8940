"""GPU microbenchmarks: pinned host-device copies and DeepBench convolutions."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from containertax.core.metric import Metric
from containertax.workloads.base import (
    MetricInfo,
    Probe,
    Rehearsal,
    Workload,
    device_memory,
    flags,
    never,
    no_datasets,
    process_metrics,
)

CONVOLUTIONS = [("conv_341x79x32_n4_k32_5x10_s2", "341x79x32 N4 K32 5x10 s2"),
                ("conv_224x224x3_n1_k64_7x7_s2", "224x224x3 N1 K64 7x7 s2"),
                ("conv_56x56x256_n1_k128_1x1_s2", "56x56x256 N1 K128 1x1 s2"),
                ("conv_7x7x512_n2_k2048_1x1_s1", "7x7x512 N2 K2048 1x1 s1")]


def argv(p: dict[str, Any], python: str, probe: Path, out: Path, check: bool) -> list[str]:
    cmd = [python, str(probe / "microbench.py"), "--out", str(out)]
    if check:
        return [*cmd, "--check"]
    return [*cmd, *flags(p, ["copy_mib", "dtype", "warmup", "repeats"])]


def metrics(probe: Probe, launched_unix: float, wall_s: float) -> list[Metric]:
    nbytes = probe["copy_bytes"]
    out = [Metric(f"{d}_gbps", nbytes / statistics.median(probe["copy_s"][d]) / 1e9, "GB/s")
           for d in ("h2d", "d2h")]
    out += [Metric(f"{name}_us", statistics.median(times) * 1e6, "us")
            for name, times in probe["conv_s"].items()]
    return out + process_metrics(probe, launched_unix, wall_s) + device_memory(probe)


def detail(probe: Probe) -> dict[str, Any]:
    return {k: probe.get(k) for k in ("copy_bytes", "copy_s", "conv_s", "conv_dtype",
                                      "warmup", "repeats")}


WORKLOAD = Workload(
    kind="microbench",
    probe="microbench.py",
    defaults={"copy_mib": 256, "dtype": "float32", "warmup": 10, "repeats": 100,
              "threads": 1},
    integers={"copy_mib": 1, "warmup": 0, "repeats": 2, "threads": 1},
    argv=argv,
    metrics=metrics,
    detail=detail,
    choices={"dtype": ("float32", "float16", "bfloat16", "float64")},  # the convolutions'
    required=frozenset(),
    compiles=never,
    primary=(("h2d_gbps",), ("d2h_gbps",)),
    words="GPU microbenchmarks (copies, convolutions)",
    # no metric gives the timed part's duration: the projection scales nothing
    rehearsal=Rehearsal("repeats", 10, lambda m, n: 0.0),
    host_metrics={},
    datasets=no_datasets,
    metric_info=(
        MetricInfo("h2d_gbps", "GB/s", "higher", "Host-to-device bandwidth",
                   "pinned copy, median of the timed copies"),
        MetricInfo("d2h_gbps", "GB/s", "higher", "Device-to-host bandwidth",
                   "pinned copy, median of the timed copies"),
        *[MetricInfo(f"{name}_us", "us", "lower", f"Convolution {label}",
                     "DeepBench forward convolution, median of the timed calls")
          for name, label in CONVOLUTIONS],
    ),
)
