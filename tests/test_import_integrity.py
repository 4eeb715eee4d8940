"""Issue #44: imports that never need the raw file edited. Before: mixed CR/LF/CRLF line
endings and an import with only the reference environment ended in tracebacks
(`_csv.Error`, `KeyError: 'reference'`); ids 007, 1e5, TRUE were renamed 7.0, 100000.0,
True and NA called empty; a BOM passed check and failed the workflow ("no 'model'
column"); a quoted field holding a line that starts with '#' was cut; negative times went
unflagged ("-19.3 %, better"); a right-to-left override or TeX specials in a unit broke
the PDF; and a source whose measuring periods each restarted their count at 1 could not be
imported without editing the file. Each is planted below and shown caught or read."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from containertax import cli
from containertax.statistics import importer
from tests.conftest import REPO

HEADER = "model,environment,repetition,metric,value,unit"


def _rows(model: str = "m1", reps: int = 3, unit: str = "s") -> list[str]:
    return [f"{model},{env},{r},time_s,{1.0 + 0.01 * r + (0.1 if env == 'docker' else 0)},"
            f"{unit}" for r in range(1, reps + 1) for env in ("native", "docker")]


def _check(tmp_path: Path, data: bytes, capsys, extra: str = "") -> tuple[int, str]:
    (tmp_path / "runs.csv").write_bytes(data)
    cfg = tmp_path / "imp.yaml"
    cfg.write_text("campaign: imp\nreference_environment: native\nanalysis:\n"
                   "  import_csv: runs.csv\n  headline_metric: time_s\n" + extra)
    code = cli.main(["check", str(cfg), "-d", str(tmp_path)])
    out = capsys.readouterr()
    return code, out.out + out.err


def _read(tmp_path: Path, data: bytes, **options):
    (tmp_path / "runs.csv").write_bytes(data)
    return importer.read_checked(tmp_path / "runs.csv", {"time_s", "tokens_per_s"}, "native",
                                 **options)


def test_mixed_line_endings_and_a_bom_are_read(tmp_path, capsys):
    lines = [HEADER, *_rows()]
    endings = ["\r\n", "\n", "\r"]
    text = "".join(line + endings[i % 3] for i, line in enumerate(lines))
    data = b"\xef\xbb\xbf" + text.encode()
    code, out = _check(tmp_path, data, capsys)
    assert code == 0 and "(6 rows)" in out, out
    frame = _read(tmp_path, data)
    assert list(frame.columns[:6]) == HEADER.split(",") and len(frame) == 6


@pytest.mark.parametrize("model", ["007", "1e5", "TRUE", "NA", "nan"])
def test_ids_stay_strings(tmp_path, model):
    frame = _read(tmp_path, "\n".join([HEADER, *_rows(model)]).encode() + b"\n")
    assert set(frame["model"]) == {model}


def test_a_quoted_line_starting_with_a_hash_is_data(tmp_path):
    text = "\n".join(["# the source: a comment", HEADER + ",note",
                      *[row + (',"two\n# lines"' if i == 0 else ",x")
                        for i, row in enumerate(_rows())]]) + "\n"
    frame = _read(tmp_path, text.encode())
    assert frame.loc[0, "note"] == "two\n# lines" and len(frame) == 6


def test_only_the_reference_environment_is_a_clear_error(tmp_path, capsys):
    rows = [r for r in _rows() if ",native," in r]
    code, out = _check(tmp_path, "\n".join([HEADER, *rows]).encode(), capsys)
    assert code == 1 and "only the reference environment 'native'" in out, out
    assert "Traceback" not in out and "KeyError" not in out


def test_a_negative_time_is_flagged(tmp_path, capsys):
    rows = _rows()
    rows[3] = "m1,docker,2,time_s,-0.2,s"
    code, out = _check(tmp_path, "\n".join([HEADER, *rows]).encode(), capsys)
    # the metric's registry line says it first (time_s is never negative); without a
    # registry line the unit's own check does (test_metric_values)
    assert code == 1 and "row 5: column 'value'" in out and "-0.2" in out, out
    assert "never negative" in out or "is a negative time" in out, out


@pytest.mark.parametrize("unit", ["m\u202es", "ms\\relax", "$s$", "s_1", "{s}"])
def test_a_unit_the_paper_cannot_print_is_refused(tmp_path, capsys, unit):
    code, out = _check(tmp_path, "\n".join([HEADER, *_rows(unit=unit)]).encode(), capsys)
    assert code == 1 and "column 'unit'" in out and "cannot print" in out, out


def _logged(capsys) -> str:
    """The containertax logger's lines (it writes to stderr; cli.main set it up)."""
    return capsys.readouterr().err


def _restarted() -> bytes:
    """Two measuring periods, each counting its runs from 1 (a real third-party export)."""
    rows = []
    for day, start in (("2024-01-01", 1), ("2024-01-02", 1)):
        for r in range(start, start + 2):
            for env in ("native", "docker"):
                value = 1.0 + 0.01 * r + (0.1 if env == "docker" else 0) + \
                    (0.001 if day.endswith("2") else 0)
                rows.append(f"m1,{env},{r},time_s,{value},s,{day}T0{r}:00:00Z")
    return ("\n".join([HEADER + ",timestamp", *rows]) + "\n").encode()


def test_restarted_counts_are_named_and_numbered_by_a_declared_option(tmp_path, capsys):
    code, out = _check(tmp_path, _restarted(), capsys)
    assert code == 1 and "analysis.import_repeats: number_by_start" in out, out
    frame = _read(tmp_path, _restarted(), repeats="number_by_start")
    assert sorted(frame[frame["environment"] == "native"]["repetition"]) == [1, 2, 3, 4]
    assert "4 run(s) repeated" in _logged(capsys)  # the second period's 2 runs, 2 envs
    code, out = _check(tmp_path, _restarted(), capsys,
                       "  import_repeats: number_by_start\n")
    assert code == 0, out


def test_true_duplicates_are_named_and_dropped_by_a_declared_option(tmp_path, capsys):
    rows = _rows()
    data = "\n".join([HEADER, *rows, rows[0], rows[2]]).encode()
    code, out = _check(tmp_path, data, capsys)
    assert code == 1 and "analysis.import_duplicates: drop" in out, out
    frame = _read(tmp_path, data, duplicates="drop")
    assert len(frame) == 6 and "2 row(s) repeat another row exactly" in _logged(capsys)
    assert _check(tmp_path, data, capsys, "  import_duplicates: drop\n")[0] == 0


def _copied_and_restarted() -> bytes:
    """Two measuring periods that each restarted their count, plus two exact copies."""
    lines = _restarted().decode().splitlines()
    return ("\n".join([*lines, lines[1], lines[3]]) + "\n").encode()


def test_dropped_and_renumbered_counts_reach_the_paper_values(tmp_path, capsys,
                                                               monkeypatch):
    """Before: the counts were only logged; the paper said nothing of rows dropped or
    runs renumbered. Now the import step writes them (paths.IMPORT_REPORT) and the data
    section's values come from that file."""
    from containertax.campaign import config
    from containertax.publishing import design_values

    code, out = _check(tmp_path, _copied_and_restarted(), capsys,
                       "  import_repeats: number_by_start\n  import_duplicates: drop\n")
    assert code == 0, out
    monkeypatch.chdir(tmp_path)  # where import_csv and results_dir are relative to
    campaign = config.load_file(tmp_path / "imp.yaml")
    report = campaign.paths.import_report
    report.parent.mkdir(parents=True)
    assert cli.main(["import", "--config", str(tmp_path / "imp.yaml"), "--out",
                     str(tmp_path / "out.csv"), "--report-out", str(report)]) == 0
    values = design_values.import_count_values(campaign)
    assert values == {"import-rows-read": 10, "import-dropped": 2,
                      "has-import-dropped": True, "import-renumbered": 4,
                      "has-import-renumbered": True}
    report.unlink()  # no report (an import analysed before it was written): nothing said
    assert not design_values.import_count_values(campaign)["has-import-dropped"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("latexmk") is None, reason="needs TeX Live")
def test_the_data_section_prints_the_dropped_and_renumbered_counts(tmp_path):
    """Through a real Snakemake run to the PDF: the data section says how many rows were
    dropped as copies and how many runs were numbered by start time, with the run's
    counts (8 of 16 runs renumbered, 2 copies among 18 rows read)."""
    rows = [HEADER + ",timestamp"]
    for day in ("2024-01-01", "2024-01-02"):
        for r in range(1, 5):
            for env, factor in (("bare", 1.0), ("sandbox", 1.03)):
                jitter = 1 + 0.01 * ((r * 7 + int(day[-1])) % 5 - 2)
                rows.append(f"m1,{env},{r},time_s,{factor * jitter:.4f},s,{day}T0{r}:00:00Z")
    rows += [rows[1], rows[4]]
    (tmp_path / "runs.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "study.yaml").write_text(yaml.safe_dump({
        "campaign": "copies", "reference_environment": "bare",
        "analysis": {"import_csv": str(tmp_path / "runs.csv"), "headline_metric": "time_s",
                     "import_repeats": "number_by_start", "import_duplicates": "drop",
                     "import_study": {"title": "a planted export", "order": "interleaved"}}}))
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--snakefile",
         str(REPO / "Snakefile"), "--directory", str(tmp_path), "--configfile",
         str(tmp_path / "study.yaml")], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    pdf = tmp_path / "results" / "copies" / "paper" / "paper.pdf"
    text = " ".join(subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True,
                                   text=True).stdout.split())
    assert "Of the 18 rows read, 2 were exact copies of another row" in text, text[:3000]
    assert "In 8 runs the source" in text and "repetition number repeated" in text
