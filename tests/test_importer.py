"""Tidy CSV import: the shipped Sani et al. (2025) table reproduces the paper's means;
malformed files fail with file, row and column named."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import yaml

from containertax.statistics import importer
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
    with pytest.raises(importer.ImportFailure) as err:
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
    from containertax.statistics import steps

    with pytest.raises(importer.ImportFailure) as err:
        steps.read_import(_campaign(tmp_path, body, reference))
    assert fragment in str(err.value)


def test_defined_metric_and_model_size_are_honoured(tmp_path):
    from containertax.statistics import policy, steps

    body = ("model,environment,repetition,metric,value,unit,model_size\n"
            "a,native,1,tps,1,tok/s,7\nb,native,1,tps,1,tok/s,70\n"
            "a,docker,1,tps,1,tok/s,7\nb,docker,1,tps,1,tok/s,70\n")  # not the reference alone
    c = _campaign(tmp_path, body, define_metrics={"tps": {"unit": "tok/s"}})
    frame = steps.read_import(c)
    assert policy.model_sizes(c, frame) == {"a": 7.0, "b": 70.0}


SANI = (REPO / "resources" / "sani2025" / "runs.csv").read_text()


def _checkout_with_import(tmp_path, csv_text, reference="native"):
    """A checkout (its Snakefile marks the root) whose config imports a CSV by a path
    relative to the checkout, as config/sani2025.yaml does; check runs from elsewhere."""
    root = tmp_path / "checkout"
    (root / "config").mkdir(parents=True)
    (root / "Snakefile").write_text("# the checkout's root\n")
    (root / "resources").mkdir()
    (root / "resources" / "runs.csv").write_text(csv_text)
    path = root / "config" / "imp.yaml"
    path.write_text(f"campaign: imp\nreference_environment: {reference}\n"
                    "analysis:\n  import_csv: resources/runs.csv\n  headline_metric: time_s\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    return path, elsewhere


# rows are numbered as lines of the file, its comment lines counted (issue #35)
@pytest.mark.parametrize(("csv_text", "reference", "fragments"), [
    (SANI, "native", None),  # the shipped table passes
    (SANI.replace("matmul-10k,docker,3,time_s", "matmul-10k,docker,3,tme_s"), "native",
     ["key 'analysis.import_csv'", "runs.csv: row 29: column 'metric' holds ['tme_s']",
      "analysis.define_metrics"]),
    (SANI, "podman", ["key 'analysis.import_csv'", "reference_environment 'podman' is not an "
                      "environment of the import (['docker', 'native'])"]),
    (SANI.replace("matmul-10k,native,2,time_s,1.5059", "matmul-10k,native,2,time_s,fast"),
     "native", ["row 8: column 'value' = 'fast' is not a number"]),
    ("model,environment,metric\nm,native,time_s\n", "native", ["missing column(s)"]),
], ids=["sani-ok", "unknown-metric", "unknown-reference", "not-a-number", "missing-column"])
def test_check_reads_the_import_as_the_import_rule_does(tmp_path, monkeypatch, capsys,
                                                        csv_text, reference, fragments):
    """Issue #21: an unknown metric or reference passed `check` (rc 0) and failed only in
    the import rule; check now runs the rule's own reading (importer.read_checked) on the
    CSV the config names, resolved against the checkout, from any directory."""
    from containertax import cli

    path, elsewhere = _checkout_with_import(tmp_path, csv_text, reference)
    monkeypatch.chdir(elsewhere)
    code = cli.main(["check", str(path)])
    text = "".join(capsys.readouterr())
    assert "Traceback" not in text
    if fragments is None:
        assert code == 0 and str(path.parents[1] / "resources" / "runs.csv") in text, text
        return
    assert code == 1, text
    for fragment in [str(path), *fragments]:
        assert fragment in text, text


def test_import_study_needs_an_import_and_a_known_citation(tmp_path):
    """analysis.import_study without a table, or citing a key paper/references.bib lacks
    (the PDF would print '(?)'), is refused with the key and the fix named."""
    from containertax.campaign import config

    with pytest.raises(config.ConfigError, match="set analysis.import_csv too"):
        config.load_campaign({"campaign": "x", "reference_environment": "native",
                              "environments": {"native": {"kind": "native"}},
                              "workload": {"kind": "matmul"},
                              "models": [{"id": "m", "size": 64}],
                              "analysis": {"import_study": {"title": "A study"}}}, "x.yaml")
    body = "model,environment,repetition,metric,value,unit\nm,native,1,time_s,1,s\n"
    with pytest.raises(config.ConfigError,
                       match="'nobody1999' is not an entry of references.bib"):
        _campaign(tmp_path, body, import_study={"citation": "nobody1999"})
    assert _campaign(tmp_path, body, import_study={"citation": "sani2025"}).is_import


def test_an_import_names_its_own_study_and_order(tmp_path):
    """The paper's words for an import come from its config: no study is assumed, and the
    order of runs is unknown unless the config says otherwise."""
    from containertax.publishing import design_values

    body = "model,environment,repetition,metric,value,unit\nm,native,1,time_s,1,s\n"
    plain = design_values.import_study_values(_campaign(tmp_path, body))
    assert plain["order-unknown"] and not plain["order-interleaved"]
    assert plain["import-citep"] == "" and plain["description"] == "x.csv"
    cited = design_values.import_study_values(_campaign(
        tmp_path, body, import_study={"title": "A_study", "citation": "sani2025",
                                      "order": "interleaved"}))
    assert cited["order-interleaved"] and not cited["order-unknown"]
    assert cited["import-citep"] == r" \citep{sani2025}" and cited["description"].startswith(r"A\_")


def _synthetic_import(path, order: str) -> None:
    """A SYNTHETIC study (made-up values, no real measurement): one model, two runtimes,
    eight runs each, with token throughput, peak memory and time to first token."""
    rows = ["# Synthetic values written by tests/test_importer.py; not a real study.",
            "model,environment,repetition,metric,value,unit"]
    for env, factor in (("bare", 1.0), ("sandbox", 0.97)):
        for rep in range(1, 9):
            jitter = 1 + 0.01 * ((rep * 7) % 5 - 2)
            rows += [f"llm-7b,{env},{rep},token_throughput,{1000 * factor * jitter:.3f},tok/s",
                     f"llm-7b,{env},{rep},peak_memory_gib,{14.2 + 0.001 * rep:.4f},GiB",
                     f"llm-7b,{env},{rep},ttft_s,{0.05 / factor * jitter:.5f},s"]
    (path / "runs.csv").write_text("\n".join(rows) + "\n")
    (path / "study.yaml").write_text(yaml.safe_dump({
        "campaign": "synth", "reference_environment": "bare",
        "analysis": {"import_csv": str(path / "runs.csv"),
                     "headline_metric": "token_throughput",
                     "import_study": {"title": "the Quokka Runtime Study",
                                      "source": "a table written by the test suite",
                                      "order": order}}}))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("latexmk") is None, reason="needs TeX Live")
@pytest.mark.parametrize("order", ["sequential", "interleaved"])
def test_a_third_party_import_builds_its_own_paper(tmp_path, order):
    """A study that is not Sani et al., with a memory metric (whose caption once stopped
    LaTeX: the peak-memory source was never defined for an import), through a real
    Snakemake run to a PDF that names the study, never Sani, warns of pseudo-replication
    unless the runs were interleaved, and prints its factors and its headline's n."""
    _synthetic_import(tmp_path, order)
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--snakefile",
         str(REPO / "Snakefile"), "--directory", str(tmp_path), "--configfile",
         str(tmp_path / "study.yaml")], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    paper = tmp_path / "results" / "synth" / "paper"
    text = " ".join(subprocess.run(["pdftotext", str(paper / "paper.pdf"), "-"],
                                   capture_output=True, text=True).stdout.split())
    assert "the Quokka Runtime Study" in text and "a table written by the test suite" in text
    assert "Sani" not in text
    assert "Memory per model" in text and "Time to first token" in text
    assert ("Pseudo-replication." in text) == (order != "interleaved")
    # its factors table (the checklist's rule 9 refers to it) and its headline's n, the
    # reference's 8 runs (an independent design's n_blocks is 0: 'n = 0 runs' once)
    assert "Factors and levels" in text and "n = 8 runs" in text
    assert json.loads((paper / "review.json").read_text()) == []


@pytest.mark.parametrize("order", ["sequential", "unknown", "interleaved"])
def test_runs_not_interleaved_qualify_every_verdict(tmp_path, order):
    """An import whose environments each ran in one session (or whose order is unknown)
    compares sessions: an error-severity finding on every metric, so the decision table
    adds its caveat to an 'overhead'; interleaved runs carry none."""
    import pandas as pd

    from containertax.statistics import decisions, policy

    body = "model,environment,repetition,metric,value,unit\nm,native,1,time_s,1,s\n"
    found = policy.session_findings(_campaign(tmp_path, body,
                                              import_study={"order": order}))
    assert [f.severity for f in found] == ([] if order == "interleaved" else ["error"])
    errors = decisions.error_metrics([vars(f) for f in found], ["time_s"])
    row = pd.Series({"rel_overhead": 0.68, "rel_ci_low": 0.66, "p_bh": 1e-9, "tost_p": 1.0})
    verdict = decisions.verdict(row, "lower", 0.05, quality_error="time_s" in errors)
    assert verdict.word == "overhead"
    assert verdict.caveats == (() if order == "interleaved" else ("quality-error",))
