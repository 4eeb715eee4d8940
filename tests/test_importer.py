"""Tidy CSV import: the shipped Sani et al. (2025) table reproduces the paper's means;
malformed files fail with file, row and column named."""

from __future__ import annotations

import pytest

from containertax.analysis import importer
from tests.conftest import REPO


def test_sani_2025_means_are_reproduced():
    runs = importer.read_tidy(REPO / "resources" / "sani2025" / "runs.csv")
    means = runs.groupby(["metric", "environment"])["value"].mean()
    assert round(means[("time_s", "native")], 2) == 1.52
    assert round(means[("time_s", "docker")], 2) == 2.55
    assert round(means[("gpu_util_pct", "native")], 1) == 45.6
    assert round(means[("gpu_util_pct", "docker")], 1) == 86.2
    assert len(runs) == 40


def test_source_is_cited_in_the_file():
    text = (REPO / "resources" / "sani2025" / "runs.csv").read_text()
    assert "Sani et al." in text and "Table 2" in text


@pytest.mark.parametrize(("body", "fragment"), [
    ("model,environment,metric,value,unit\nm,e,t,1,s\n", "missing column(s) ['repetition']"),
    ("model,environment,repetition,metric,value,unit\nm,e,1,t,fast,s\n",
     "row 2: column 'value' = 'fast' is not a number"),
    ("model,environment,repetition,metric,value,unit\nm,,1,t,1,s\n",
     "row 2: column 'environment' is empty"),
    ("model,environment,repetition,metric,value,unit,timestamp\nm,e,1,t,1,s,yesterday\n",
     "'timestamp' is not ISO 8601"),
])
def test_errors_name_row_and_column(tmp_path, body, fragment):
    path = tmp_path / "x.csv"
    path.write_text(body)
    with pytest.raises(importer.ImportError_) as err:
        importer.read_tidy(path)
    assert fragment in str(err.value) and str(path) in str(err.value)


def test_optional_columns_are_kept(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("model,environment,repetition,metric,value,unit,block,timestamp,gpu\n"
                    "m,e,1,t,1.5,s,1,2025-01-01T00:00:02Z,rtx\n"
                    "m,f,1,t,1.7,s,1,2025-01-01T00:00:01Z,rtx\n")
    runs = importer.read_tidy(path)
    assert runs["gpu"].tolist() == ["rtx", "rtx"]
    assert runs["position"].tolist() == [1, 0]


def _campaign(tmp_path, body, reference="native", **analysis):
    from containertax.campaign import config

    path = tmp_path / "x.csv"
    path.write_text(body)
    return config.load_campaign({"campaign": "x", "reference_environment": reference,
                                 "analysis": {"import_csv": str(path), **analysis}}, "x.yaml")


@pytest.mark.parametrize(("body", "reference", "fragment"), [
    ("model,environment,repetition,metric,value,unit\nm,native,1,tme_s,1,s\n", "native",
     "column 'metric' holds ['tme_s'], not in the metric registry"),
    ("model,environment,repetition,metric,value,unit\nm,docker,1,time_s,1,s\n", "native",
     "reference_environment 'native' is not an environment of the import (['docker'])"),
])
def test_unknown_metric_or_reference_is_an_error(tmp_path, body, reference, fragment):
    from containertax.analysis import report

    with pytest.raises(importer.ImportError_) as err:
        report.read_import(_campaign(tmp_path, body, reference))
    assert fragment in str(err.value)


def test_defined_metric_and_model_size_are_honoured(tmp_path):
    from containertax.analysis import report

    body = ("model,environment,repetition,metric,value,unit,model_size\n"
            "a,native,1,tps,1,tok/s,7\nb,native,1,tps,1,tok/s,70\n")
    c = _campaign(tmp_path, body, define_metrics={"tps": {"unit": "tok/s"}})
    frame = report.read_import(c)
    assert report.model_sizes(c, frame) == {"a": 7.0, "b": 70.0}
