"""Clock events inside a run's measured window, from the telemetry CSV beside its record.

The run-level throttled_s counts every sample of the run (build and warm-up included), so
it cannot say whether the measured requests ran at full clocks. Here each run's NVML
samples are cut to the probe's measured window (detail.measure_window_unix; the whole
probe process, launched to exited, for workloads without one) and summarised: the
fraction of the window's samples with each clock-lowering reason bit set, and the mean SM
clock. The CSV's t_s is seconds since the sampler started: telemetry.t0_unix in records
that hold it, else launched_unix (the sampler starts just before the launch; on the
committed GQA records the two agree within about 0.05 s, half a sample at 10 Hz, found by
matching the recorded window energy).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from containertax.core.rawrecord import RawRecord
from containertax.execution.gpu import THROTTLE_REASONS

# the reasons as the paper names them
WORDS = {"sw_power_cap": "software power cap", "hw_slowdown": "hardware slowdown",
         "sync_boost": "sync boost", "sw_thermal": "software thermal slowdown",
         "hw_thermal": "hardware thermal slowdown", "hw_power_brake": "hardware power brake"}
FRACTIONS = {bit: f"window_{name}_frac" for bit, name in THROTTLE_REASONS.items()}
COLUMNS = ["clock_window", "window_samples", "window_sm_clock_mhz",
           "window_throttled_frac", *FRACTIONS.values()]
THRESHOLD = 0.05  # a reason active in more than this fraction of any run's window is a threat


def window_of(rec: RawRecord) -> tuple[float, float, str]:
    """(start, end, which) in Unix seconds: the measured window, else the process."""
    window = (rec.detail or {}).get("measure_window_unix")
    if window and len(window) == 2:
        return float(window[0]), float(window[1]), "measured"
    return float(rec.launched_unix), float(rec.exited_unix), "process"


def summarise(telemetry: pd.DataFrame, t0_unix: float, start: float, end: float,
              which: str = "measured") -> dict[str, Any]:
    """The window's clock facts from telemetry rows (t_s, clock_event_reasons,
    sm_clock_mhz); NaN where the window holds no sample with a reason (no GPU, no NVML)."""
    out: dict[str, Any] = {c: math.nan for c in COLUMNS}
    out["clock_window"], out["window_samples"] = which, 0
    if "clock_event_reasons" not in telemetry or "t_s" not in telemetry:
        return out
    t = t0_unix + pd.to_numeric(telemetry["t_s"], errors="coerce")
    inside = telemetry[(t >= start) & (t <= end)]
    reasons = pd.to_numeric(inside["clock_event_reasons"], errors="coerce").dropna()
    out["window_samples"] = len(reasons)
    if reasons.empty:
        return out
    bits = reasons.astype("int64")
    for bit, column in FRACTIONS.items():
        out[column] = float((bits & bit).ne(0).mean())
    out["window_throttled_frac"] = float((bits & sum(THROTTLE_REASONS)).ne(0).mean())
    if "sm_clock_mhz" in inside:
        sm = pd.to_numeric(inside["sm_clock_mhz"], errors="coerce").dropna()
        out["window_sm_clock_mhz"] = float(sm.mean()) if len(sm) else math.nan
    return out


def of_record(path: Path, rec: RawRecord) -> dict[str, Any]:
    """One run's window clock facts; NaN where its telemetry CSV is missing or empty."""
    start, end, which = window_of(rec)
    csv = Path(path).with_name(rec.files["telemetry"])
    try:
        telemetry = pd.read_csv(csv)
    except (FileNotFoundError, pd.errors.EmptyDataError):
        telemetry = pd.DataFrame()
    t0 = rec.telemetry.get("t0_unix") or rec.launched_unix
    return summarise(telemetry, float(t0), start, end, which)


def _range_pct(values: pd.Series) -> str:
    lo, hi = 100 * values.min(), 100 * values.max()
    return f"{lo:.0f} %" if round(lo) == round(hi) else f"{lo:.0f} to {hi:.0f} %"


def findings(runs: pd.DataFrame) -> list[dict[str, Any]]:
    """Per clock-lowering reason active in more than THRESHOLD of any run's window: how
    much of the window, in how many runs and environments, with each environment's range
    and mean SM clock (a comparison across environments, descriptive)."""
    if "window_throttled_frac" not in runs:
        return []
    cells = runs.drop_duplicates(["model", "environment", "repetition"])
    cells = cells[pd.to_numeric(cells["window_throttled_frac"], errors="coerce").notna()]
    if cells.empty:
        return []
    window = ("measured window" if set(cells["clock_window"]) == {"measured"}
              else "measured window (the whole process where a workload has none)")
    envs = sorted(cells["environment"].unique())
    out = []
    for bit, column in FRACTIONS.items():
        frac = cells[column].astype(float)
        if not (frac > THRESHOLD).any():
            continue
        hit = cells[frac > THRESHOLD]
        name = THROTTLE_REASONS[bit]
        runs_words = ("in every run" if len(hit) == len(cells)
                      else f"in {len(hit)} of {len(cells)} runs")
        hit_envs = sorted(hit["environment"].unique())
        env_words = ("in every environment" if hit_envs == envs
                     else "in " + ", ".join(hit_envs))
        per_env = {e: {"range_pct": _range_pct(g[column].astype(float)),
                       "sm_clock_mhz": float(g["window_sm_clock_mhz"].astype(float).mean())}
                   for e, g in cells.groupby("environment")}
        clocks = "; ".join(f"{e} {v['range_pct']}, SM clock {v['sm_clock_mhz']:.0f} MHz"
                           for e, v in per_env.items())
        out.append({"reason": name, "words": WORDS[name],
                    "range_pct": _range_pct(hit[column].astype(float)),
                    "runs": len(hit), "of_runs": len(cells), "window": window,
                    "message": f"{WORDS[name]}: {_range_pct(hit[column].astype(float))} of "
                               f"the {window} {runs_words}, {env_words} (per environment: "
                               f"{clocks})",
                    "per_environment": per_env})
    return out
