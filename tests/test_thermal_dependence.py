"""quality.thermal_dependence: does a metric depend on the chip's state when its run
began? Planted cases: a throughput that falls with the start temperature is caught with
its size; an environment that runs hotter AND slower (a between-environment difference, no
temperature effect within it) is not mistaken for one; independent data gives no warning."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from containertax.statistics import quality


def runs(n=20, per_degree=0.0, hotter_env_slower=False, seed=1):
    """Token throughput of one model in two environments; start temperature 39-47 C and
    the time since the last run 20-120 s, independent of each other."""
    rng = np.random.default_rng(seed)
    rows = []
    for rep in range(1, n + 1):
        for env in ("native", "docker"):
            temp = float(rng.integers(39, 48))
            if hotter_env_slower and env == "docker":
                temp += 6.0
            base = 1000.0 * (0.95 if hotter_env_slower and env == "docker" else 1.0)
            value = base * (1 - per_degree * (temp - 39)) * (1 + rng.normal(0, 0.005))
            rows.append({"model": "llama", "environment": env, "repetition": rep,
                         "metric": "token_throughput", "unit": "tok/s", "value": value,
                         "start_temperature_c": temp,
                         "since_last_run_s": float(rng.uniform(20, 120))})
    return quality.annotate(pd.DataFrame(rows))


def by_covariate(findings, severity):
    return {f.details["covariate"]: f for f in findings
            if f.severity == severity and f.check == "thermal_dependence"}


def test_planted_temperature_effect_is_found_with_its_size():
    # 0.5 % less throughput per degree: across 39-47 C that is about -4 %
    found = quality.thermal_dependence(runs(per_degree=0.005))
    warnings = by_covariate(found, "warning")
    assert set(warnings) == {"start_temperature_c"}
    t = warnings["start_temperature_c"].details
    assert t["effect_pct"] == pytest.approx(-0.5 * t["range"], rel=0.15)
    assert t["r"] < -0.8 and t["q"] < 0.05


def test_no_effect_gives_only_the_summary():
    found = quality.thermal_dependence(runs())
    assert [f.severity for f in found] == ["info"]
    tests = found[0].details["tests"]
    assert {t["covariate"] for t in tests} == {"start_temperature_c", "since_last_run_s"}
    assert all(abs(t["effect_pct"]) < 1.0 for t in tests)


def test_a_hotter_slower_environment_is_not_a_temperature_effect():
    # pooled, temperature and throughput correlate strongly; within each environment not
    data = runs(hotter_env_slower=True)
    pooled = np.corrcoef(data["start_temperature_c"], data["value"])[0, 1]
    assert pooled < -0.7
    assert by_covariate(quality.thermal_dependence(data), "warning") == {}


def test_check_reports_it_and_older_tables_without_the_columns_are_fine():
    from containertax.workloads.metric_registry import REGISTRY

    found = quality.check(runs(per_degree=0.005), REGISTRY)
    assert any(f.check == "thermal_dependence" and f.severity == "warning" for f in found)
    old = runs().drop(columns=["start_temperature_c", "since_last_run_s"])
    assert quality.thermal_dependence(old) == []
