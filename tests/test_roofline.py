"""Numbers checked against physics (issue #40, statistics/roofline.py): a decode rate
above what memory bandwidth allows is impossible and an error of the quality section.
Planted: an import whose inter-token latency beats the bound."""

from __future__ import annotations

import pytest

from containertax.statistics import importer, quality, roofline
from containertax.workloads.metric_registry import registry

# a dense 72B model at 4 bits on GB10 (issue #40's example): 36 GB a token at 273 GB/s
DENSE_72B = {"active_params_b": 72.0, "bits": 4, "batch": 4}
SPEC = {"device": "gb10", "models": {"qwen-72b": DENSE_72B}}


def test_the_bound_is_bandwidth_over_the_bytes_of_a_step():
    size = roofline.ModelBytes(**DENSE_72B)
    assert size.sequence_bound(273e9) == pytest.approx(7.583, abs=1e-3)  # ~132 ms a token
    assert size.aggregate_bound(273e9) == pytest.approx(4 * 7.583, abs=1e-2)
    with_kv = roofline.ModelBytes(72.0, 4, kv_bytes_per_token=327680, context_tokens=4096)
    assert with_kv.sequence_bound(273e9) < size.sequence_bound(273e9)


def _import(tmp_path, itl_native: float, itl_docker: float):
    rows = ["model,environment,repetition,metric,value,unit"]
    for rep in range(1, 5):
        rows += [f"qwen-72b,native,{rep},itl_s,{itl_native + rep * 1e-4},s",
                 f"qwen-72b,docker,{rep},itl_s,{itl_docker + rep * 1e-4},s",
                 f"qwen-72b,native,{rep},token_throughput,{3.9 / itl_native},tok/s",
                 f"qwen-72b,docker,{rep},token_throughput,{3.9 / itl_docker},tok/s"]
    path = tmp_path / "runs.csv"
    path.write_text("\n".join(rows) + "\n")
    frame = importer.read_checked(path, registry(None), "native")
    return quality.annotate(frame)


def test_an_import_faster_than_bandwidth_allows_is_an_error(tmp_path):
    """Planted: Docker's runs report 50 ms between tokens (20 tok/s a sequence) for a
    dense 72B model at 4 bits on GB10, whose bound is 132 ms (7.6 tok/s); their aggregate
    (78 tok/s for a batch of 4) is above 4 x 7.6 too. Native's 200 ms runs are possible."""
    runs = _import(tmp_path, itl_native=0.200, itl_docker=0.050)
    found = quality.check(runs, registry(None), roofline=SPEC)
    errors = [f for f in found if f.check == "roofline"]
    assert [f.severity for f in errors] == ["error", "error"]
    assert errors[0].rows == 4  # docker's four runs, none of native's
    assert {r["environment"] for r in errors[0].details["rows"]} == {"docker"}
    assert "decode one sequence faster than memory bandwidth allows" in errors[0].message
    assert "7.6 tok/s (131.87 ms)" in errors[0].message
    assert "a batch of 4" in errors[1].message
    fraction = next(f for f in found if f.check == "roofline_fraction")
    assert fraction.severity == "info" and "GB10 (DGX Spark)'s 273 GB/s" in fraction.message


def test_possible_runs_raise_no_error_and_report_their_fraction(tmp_path):
    runs = _import(tmp_path, itl_native=0.200, itl_docker=0.210)
    found = roofline.findings(runs, SPEC)
    assert [f.check for f in found] == ["roofline_fraction"]
    # median rate 1 / 0.20525 s against 7.583 tok/s
    assert found[0].details["fraction"] == pytest.approx(1 / (0.20525 * 7.583), rel=1e-3)


def test_no_roofline_configured_no_findings(tmp_path):
    assert roofline.findings(_import(tmp_path, 0.05, 0.05), None) == []
