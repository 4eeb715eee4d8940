"""A metric is one registry line whose values are type- and sign-checked where a record is
read (pyperf's _metadata.py pattern), and a metric the config lists but the analysis leaves
out is said, never dropped in silence (issue 43)."""

from __future__ import annotations

import json
import logging
import math
import shutil

import pytest

from containertax.campaign import config
from containertax.core.rawrecord import RecordError
from containertax.statistics import aggregate, importer, steps
from containertax.workloads.base import MetricInfo
from containertax.workloads.metric_registry import REGISTRY, registry
from tests.conftest import REPO, demo_config


def test_a_registry_line_checks_type_and_sign():
    wall = REGISTRY["process_wall_s"]
    assert wall.value_problem(6.1) is None and wall.value_problem(0) is None
    assert wall.value_problem(math.nan) is None  # missing: the quality step flags it
    assert "never negative" in wall.value_problem(-0.5)
    assert "not a number" in wall.value_problem("6.1")
    assert "not a number" in wall.value_problem(True)
    assert REGISTRY["host_mem_rise_gib"].value_problem(-0.2) is None  # may fall
    assert registry({"x_s": {"unit": "s"}})["x_s"].value_problem(-1.0) is None
    positive = MetricInfo("rate", "1/s", "higher", "rate", "a rate", sign="positive")
    assert "is positive" in positive.value_problem(0.0) and positive.value_problem(2.0) is None


def test_a_misspelt_word_of_a_registry_line_does_not_load():
    """A sign the check does not know ('nonegative') would check nothing: the line is
    refused with the metric's name, as is an unknown direction or size trend."""
    for bad in ({"sign": "nonegative"}, {"direction": "up"}, {"size_trend": "growing"}):
        with pytest.raises(ValueError, match="metric 'x_s': " + next(iter(bad))):
            MetricInfo("x_s", "s", **{"direction": "lower", "label": "x", "description": "",
                                      **bad})


def _campaign_copy(tmp_path, value):
    """The committed h100-matmul records, one of them with a planted process wall time."""
    root = tmp_path / "h100-matmul"
    shutil.copytree(REPO / "results" / "h100-matmul" / "raw", root / "raw")
    path = root / "raw" / "mm-4096" / "docker" / "rep01.json"
    data = json.loads(path.read_text())
    for m in data["metrics"]:
        if m["name"] == "process_wall_s":
            m["value"] = value
    path.write_text(json.dumps(data))
    return root, path


def test_a_planted_negative_value_stops_the_aggregation_naming_record_and_metric(tmp_path):
    root, path = _campaign_copy(tmp_path, -6.1)
    with pytest.raises(aggregate.MetricValueError,
                       match=rf"{path}: metric process_wall_s is -6.1, but process_wall_s "
                             r"is never negative .*fix its metrics\(\)"):
        aggregate.tidy(root)


def test_a_planted_string_value_is_refused_when_the_record_is_read(tmp_path):
    root, path = _campaign_copy(tmp_path, "6.1")
    with pytest.raises(RecordError, match=r"metrics\[\d+\]\.value"):
        aggregate.tidy(root)


def test_a_planted_negative_import_value_names_its_row(tmp_path):
    csv = tmp_path / "import.csv"
    csv.write_text("# a study\nmodel,environment,repetition,metric,value,unit\n"
                   "m,native,1,time_s,10.0,s\nm,docker,1,time_s,-10.5,s\n")
    with pytest.raises(importer.ImportFailure,
                       match=r"row 4: column 'value' of metric time_s is -10.5, but time_s "
                             "is never negative"):
        importer.read_checked(csv, registry(), "native")
    # names only, no registry lines: the time unit's own check names the row (issue #44)
    with pytest.raises(importer.ImportFailure,
                       match=r"row 4: column 'value' = -10.5 s is a negative time"):
        importer.read_checked(csv, ["time_s"], "native")


def test_a_listed_metric_the_records_lack_is_said(tmp_path, caplog):
    """Planted: analysis.metrics lists GPU energy, which a CPU campaign never measures;
    the analysis left it out in silence. Now a note on stderr names the key, the config
    and the fix, and the quality report (the paper's quality section) lists it."""
    cfg = demo_config()
    cfg["results_dir"], cfg["results_dir_absolute"] = str(tmp_path), True
    cfg["analysis"]["metrics"] = ["compute_time_s", "gpu_energy_j"]
    campaign = config.load_campaign(cfg, "demo.yaml")
    runs = tmp_path / "runs.csv"
    lines = ["model,environment,repetition,block,position,metric,value,unit"]
    for rep in range(1, 4):
        for pos, env in enumerate(("native", "native-aa", "docker")):
            lines.append(f"n256,{env},{rep},{rep},{3 * rep + pos},compute_time_s,"
                         f"{1 + 0.01 * rep + 0.001 * pos},s")
    runs.write_text("\n".join(lines) + "\n")
    with caplog.at_level(logging.WARNING, logger="containertax"):
        steps.run_quality(campaign, runs, tmp_path / "stats", tmp_path / "order.csv")
    notes = [r.getMessage() for r in caplog.records]
    assert any("key 'analysis.metrics' of demo.yaml lists 'gpu_energy_j', which is not "
               "analysed: no run recorded it. Fix:" in n for n in notes), notes
    found = json.loads((tmp_path / "stats" / "quality.json").read_text())["findings"]
    said = [f for f in found if f["check"] == "metric_not_analysed"]
    assert [f["details"]["metric"] for f in said] == ["gpu_energy_j"]
    assert "analysis" not in said[0]["message"]  # the paper's words name no config key


def test_the_committed_variants_campaign_lists_a_metric_its_records_lack():
    """results/h100-variants lists max_rss_mib, but its records predate the VmHWM reading
    (their peak RSS is the legacy ru_maxrss, never compared): its paper left the metric
    out without a word; now it is said, with the reason."""
    from containertax.statistics import policy

    campaign = config.load_file(REPO / "config" / "h100-variants.yaml")
    runs = aggregate.tidy(REPO / "results" / "h100-variants")
    [(metric, why)] = policy.listed_unanalysed(campaign, runs)
    assert metric == "max_rss_mib" and "predate the probes' VmHWM reading" in why
