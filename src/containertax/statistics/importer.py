"""Results the workflow did not produce, as a tidy CSV, into the same analysis.

Required columns: model, environment, repetition, metric, value, unit.
Optional: block (paired designs), timestamp (ISO 8601; sets the run order for the drift
check), model_size (for the plausibility check), throttled_s; other columns are kept.
Lines starting with '#' outside a quoted field are comments (cite the source there); a
'#' inside a row or a quoted field is data. A BOM is dropped, every line ending read, and
ids kept as written (007, 1e5, TRUE, NA are ids). Repeated rows are refused unless the
config says what they are (analysis.import_repeats, import_duplicates): the raw file is
never edited. Model and environment ids name files and Snakemake
wildcards: letters, digits, '_', '.', '-', starting with a letter or digit (ID_RULE);
repetitions are whole numbers; finite values lie below 1e150 in magnitude (NaN: a
missing one; the quality step flags NaN and inf).
"""

from __future__ import annotations

import csv
import io
import logging
import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from containertax.core.cell import ID_RULE, ID_WORDS
from containertax.core.errors import ContainertaxError

REQUIRED = ["model", "environment", "repetition", "metric", "value", "unit"]
# fields that mean "no value" in the numeric columns (never in an id column: NA is an id)
MISSING = ("", "NA", "N/A", "null", "NULL", "None")
# units the analysis and the paper print: TeX's specials and invisible characters refused
UNIT_FORBIDDEN = set("\\{}$&#~_^")
# time units: a negative value of one is impossible (a clock or a subtraction gone wrong)
TIME_UNITS = {"s", "ms", "us", "µs", "ns", "min", "h"}
# |value| above this: a sum of squares of a few thousand such values overflows a double
MAX_ABS_VALUE = 1e150
log = logging.getLogger("containertax")


class ImportFailure(ContainertaxError, ValueError):
    """A tidy CSV that cannot be analysed; the message names file, row, column and fix."""


def _without_comments(path: Path) -> tuple[str, list[int]]:
    """The file's text without its comment lines (first non-blank character '#' at the
    start of a line outside a quoted field), and the file line number of each line kept.
    A byte-order mark is dropped and every line ending (LF, CRLF, CR, mixed) read as one;
    a line inside a quoted field is data, whatever it starts with."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise ImportFailure(f"{path}: no such file (analysis.import_csv).") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportFailure(f"{path}: cannot be read as UTF-8 text ({exc}).") from None
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    kept, quoted = [], False
    for i, line in enumerate(lines):
        if quoted or not line.lstrip().startswith("#"):
            kept.append(i)
            quoted ^= line.count('"') % 2 == 1  # a field's quote left open goes on
    return "".join(lines[i] + "\n" for i in kept if lines[i] or i + 1 < len(lines)), \
        [i + 1 for i in kept]


def _unit_safe(unit: str) -> bool:
    """A unit the paper can print: no TeX special, control or formatting character (a
    right-to-left override would turn the printed text around)."""
    return not any(c in UNIT_FORBIDDEN or unicodedata.category(c) in ("Cc", "Cf")
                   for c in unit)


def _row(lines: list[int], index: object) -> int:
    """The file line of a frame row (comment lines counted)."""
    pos = int(index) + 1  # type: ignore[call-overload]
    return lines[pos] if pos < len(lines) else pos + 1


def read_tidy(path: Path) -> pd.DataFrame:
    return _read_tidy(Path(path))[0]


def _read_tidy(path: Path) -> tuple[pd.DataFrame, list[int]]:
    """The checked frame, and the file line of each of its rows' lines (header first).
    (Not frame.attrs: pandas deep-copies attrs at every operation, 5 M copies here.)"""
    text, lines = _without_comments(path)

    def row_of(_frame: pd.DataFrame, index: object) -> int:
        return _row(lines, index)

    width = None  # every row as wide as the header (pandas would take a wider first row's
    for n, fields in enumerate(csv.reader(io.StringIO(text))):  # first field as an index)
        if not fields:
            continue
        if width is None:
            width = len(fields)
        elif len(fields) != width:
            raise ImportFailure(
                f"{path}: row {_row(lines, n - 1)}: {len(fields)} fields, but the header has "
                f"{width}; quote a value holding a comma (\"a,b\") or remove the extra "
                "field.")
    try:  # every field as written: ids stay text (007, 1e5, TRUE, NA are ids, not 7.0,
        # 100000.0, True, missing); the numbers are converted below, column by column
        frame = pd.read_csv(io.StringIO(text), skipinitialspace=True, index_col=False,
                            dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise ImportFailure(f"{path}: no rows (analysis.import_csv).") from None
    except pd.errors.ParserError as exc:
        raise ImportFailure(f"{path}: not a valid CSV: {exc}") from None
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise ImportFailure(
            f"{path}: missing column(s) {missing}; a tidy import needs {REQUIRED} "
            "(optional: block, timestamp, model_size, throttled_s).")
    for col in ("model", "environment", "metric", "unit"):
        blank = frame[col].isna() | (frame[col].astype(str).str.strip() == "")
        if blank.any():
            row = row_of(frame, blank.idxmax())
            raise ImportFailure(f"{path}: row {row}: column '{col}' is empty; fill it in.")
    for col in frame.columns:  # an empty or NA field of the other columns: missing
        if col not in ("model", "environment", "metric", "unit"):
            frame[col] = frame[col].where(~frame[col].str.strip().isin(MISSING))
    for col in ("repetition", "value"):
        num = pd.to_numeric(frame[col], errors="coerce")
        bad = num.isna() & frame[col].notna() & ~frame[col].astype(str).str.lower().isin(
            ["nan", "inf", "-inf"])
        if bad.any():
            row = row_of(frame, bad.idxmax())
            raise ImportFailure(
                f"{path}: row {row}: column '{col}' = {frame.loc[bad.idxmax(), col]!r} is not a "
                "number; write a plain number (NaN for a missing value).")
        frame[col] = num
    rep = frame["repetition"]
    whole = np.isfinite(rep) & (rep == np.floor(rep)) & (rep.abs() < 2**53)
    if not whole.all():
        bad = whole.idxmin()
        raise ImportFailure(
            f"{path}: row {row_of(frame, bad)}: column 'repetition' = "
            f"{float(frame.loc[bad, 'repetition']):g} is not a whole number; number each "
            "run of a "
            "model and environment 1, 2, 3, ... (a missing run has no row).")
    frame["repetition"] = rep.astype(np.int64)
    frame["value"] = frame["value"].astype(float)
    huge = np.isfinite(frame["value"]) & (frame["value"].abs() > MAX_ABS_VALUE)
    if huge.any():
        bad = huge.idxmax()
        raise ImportFailure(
            f"{path}: row {row_of(frame, bad)}: column 'value' = "
            f"{float(frame.loc[bad, 'value']):g} "
            f"exceeds {MAX_ABS_VALUE:g} in magnitude: its squares and sums overflow; write "
            "the value in a larger unit, or NaN for a missing one.")
    if "timestamp" in frame:
        ts = pd.to_datetime(frame["timestamp"], utc=True, errors="coerce")
        if ts.isna().any():
            row = row_of(frame, ts.isna().idxmax())
            raise ImportFailure(f"{path}: row {row}: 'timestamp' is not ISO 8601.")
        order = ts.rank(method="dense").astype(int) - 1
        frame["position"] = order
    for col in frame.columns:  # the other columns as pandas would infer them: numbers
        # where every given value is one (block, throttled_s, a source's own columns)
        if col in ("model", "environment", "metric", "unit", "timestamp", "repetition",
                   "value", "model_size") or frame[col].dtype != object:
            continue
        num = pd.to_numeric(frame[col], errors="coerce")
        if (num.notna() | frame[col].isna()).all():
            frame[col] = num
    if "model_size" in frame:
        size = pd.to_numeric(frame["model_size"], errors="coerce")
        bad = size.isna() & frame["model_size"].notna()
        if bad.any():
            row = row_of(frame, bad.idxmax())
            raise ImportFailure(f"{path}: row {row}: 'model_size' = "
                               f"{frame.loc[bad.idxmax(), 'model_size']!r} is not a number; "
                               "write the size as a plain number (parameters, matrix side).")
        frame["model_size"] = size
    if "block" not in frame:
        frame["block"] = np.nan
    for col in ("model", "environment", "metric", "unit"):
        frame[col] = frame[col].astype(str).str.strip()
    unsafe = ~frame["unit"].map(_unit_safe)
    if unsafe.any():
        row = unsafe.idxmax()
        raise ImportFailure(
            f"{path}: row {row_of(frame, row)}: column 'unit' = {frame.loc[row, 'unit']!r} "
            "holds a character the paper cannot print (a control or direction character, "
            "or one of \\ { } $ & # ~ _ ^); write the unit in plain letters, digits, "
            "spaces and / % . - ( ) (e.g. ms, tokens/s, GiB).")
    for col in ("model", "environment"):
        bad = ~frame[col].map(lambda v: ID_RULE.fullmatch(v) is not None)
        if bad.any():
            row = bad.idxmax()
            raise ImportFailure(
                f"{path}: row {row_of(frame, row)}: column '{col}' = "
                f"{frame.loc[row, col]!r} is not an id: use {ID_WORDS}; rename it in the "
                "CSV (the paper's words for it go in the config's paper section).")
    return frame, lines


# frame.attrs key of check_against's counts (rows read, copies dropped, runs renumbered)
COUNTS = "import_counts"


def number_repeats(frame: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """analysis.import_repeats: number_by_start. A source whose separate measuring periods
    each restarted their count at 1 repeats (model, environment, repetition, metric) with
    distinct start times: distinct runs. Each run of a model and environment is numbered
    1, 2, ... by its start time (then its given repetition). Returns the frame and how many
    runs were renumbered."""
    if "timestamp" not in frame:
        return frame, 0
    out = frame.copy()
    start = pd.to_datetime(out["timestamp"], utc=True)
    out["_start"] = start
    keys = out[["model", "environment", "_start", "repetition"]].drop_duplicates()
    keys = keys.sort_values(["model", "environment", "_start", "repetition"], kind="stable")
    keys["_new"] = keys.groupby(["model", "environment"]).cumcount() + 1
    out = out.merge(keys, on=["model", "environment", "_start", "repetition"], how="left",
                    sort=False).set_axis(out.index)
    changed = int((keys["_new"] != keys["repetition"]).sum())
    out["repetition"] = out["_new"].astype(np.int64)
    return out.drop(columns=["_start", "_new"]), changed


def true_duplicates(frame: pd.DataFrame) -> pd.Series:
    """Rows that repeat another row in every column that says what was measured (model,
    environment, repetition, metric, value, unit, and the start time where given): a copy,
    never a second measurement. The first of each is not marked."""
    cols = [c for c in ("model", "environment", "repetition", "metric", "value", "unit",
                        "timestamp") if c in frame]
    return frame.duplicated(cols, keep="first")


def check_against(frame: pd.DataFrame, path: Path, metrics: Iterable[str],
                  reference: str, lines: list[int] | None = None,
                  repeats: str = "error", duplicates: str = "error") -> pd.DataFrame:
    """An import the analysis can use: every metric known (else nothing of it would be
    analysed, silently), each value of the sign its registry line allows (metrics given as
    the registry: MetricInfo.value_problem), no run's metric twice (the quality step's
    duplicate check), the reference and at least one other environment, and no negative
    time. lines: the file
    line of each row (read_tidy's). repeats, duplicates: analysis.import_repeats and
    analysis.import_duplicates (a true copy dropped; runs that restarted their count
    numbered by start time), each count logged and kept in the frame's attrs[COUNTS] (the
    paper's data section prints them). Returns the frame to analyse."""

    def row_of(_frame: pd.DataFrame, index: object) -> int:
        return _row(lines or [], index)

    known = set(metrics)
    unknown = sorted(set(frame["metric"]) - known)
    if unknown:
        row = row_of(frame, frame.index[frame["metric"].isin(unknown)][0])
        raise ImportFailure(
            f"{path}: row {row}: column 'metric' holds {unknown}, not in the metric registry; "
            "correct the names or define them under analysis.define_metrics "
            "(name -> {unit, direction, label}) in the campaign config.")
    for metric, values in frame.groupby("metric")["value"]:
        info = metrics.get(metric) if isinstance(metrics, Mapping) else None
        # the values its sign excludes, found at once (an import may hold millions of rows),
        # then worded by the registry line itself
        low = {"nonnegative": values < 0, "positive": values <= 0}.get(
            getattr(info, "sign", "any"))
        if info is not None and low is not None and low.any():
            first = low.idxmax()
            raise ImportFailure(
                f"{path}: row {row_of(frame, first)}: column 'value' of metric {metric} "
                f"{info.value_problem(float(values[first]))}; correct the value (NaN for a "
                "missing one), or define the metric under analysis.define_metrics if it is "
                "another quantity.")
    from containertax.statistics.quality import duplicate_mask

    counts = {"rows_read": len(frame), "copies_dropped": 0, "runs_renumbered": 0,
              "import_duplicates": duplicates, "import_repeats": repeats}
    copies = true_duplicates(frame)
    if copies.any() and duplicates == "drop":
        counts["copies_dropped"] = int(copies.sum())
        log.warning("%s: %d row(s) repeat another row exactly (same run, metric, value%s): "
                    "dropped (analysis.import_duplicates: drop)", path, int(copies.sum()),
                    ", start time" if "timestamp" in frame else "")
        frame = frame[~copies]
    if duplicate_mask(frame).any() and repeats == "number_by_start" \
            and not true_duplicates(frame).any():
        frame, changed = number_repeats(frame)
        counts["runs_renumbered"] = changed
        log.warning("%s: %d run(s) repeated a (model, environment, repetition) with another "
                    "start time: numbered by start time (analysis.import_repeats: "
                    "number_by_start)", path, changed)
    dup = duplicate_mask(frame)
    if dup.any():
        first = frame[dup].iloc[0]
        same = frame.index[dup & (frame["model"] == first["model"])
                           & (frame["environment"] == first["environment"])
                           & (frame["repetition"] == first["repetition"])
                           & (frame["metric"] == first["metric"])]
        rows = ", ".join(str(row_of(frame, i)) for i in same[:5])
        copies = true_duplicates(frame)
        starts = "timestamp" in frame and frame.loc[same, "timestamp"].nunique() > 1
        if copies.loc[same].any():
            fix = ("they are copies of one row (same value"
                   + (" and start time" if "timestamp" in frame else "") + "): set "
                   "analysis.import_duplicates: drop in the config to drop the copies "
                   "(their count is printed), or remove them")
        elif starts:
            fix = ("they have distinct start times, so they are distinct runs whose count "
                   "restarted: set analysis.import_repeats: number_by_start in the config to "
                   "number each model and environment's runs by start time")
        else:
            fix = ("remove the copies, or number the repetitions of each model and "
                   "environment apart (with a timestamp column, analysis.import_repeats: "
                   "number_by_start does it)")
        raise ImportFailure(
            f"{path}: rows {rows} repeat (model, environment, repetition, metric) = "
            f"({first['model']}, {first['environment']}, {first['repetition']}, "
            f"{first['metric']}), {int(dup.sum())} such rows in all (the quality step's "
            f"duplicate check): each run's metric appears once; {fix}.")
    envs = sorted(set(frame["environment"]))
    if reference not in envs:
        raise ImportFailure(
            f"{path}: reference_environment '{reference}' is not an environment of the "
            f"import ({envs}); set reference_environment in the config to one of them.")
    if len(envs) < 2:
        raise ImportFailure(
            f"{path}: only the reference environment '{reference}' is in the import: there "
            "is nothing to compare it with; add the rows of at least one other environment "
            "(column 'environment').")
    negative = frame["unit"].isin(TIME_UNITS) & (frame["value"] < 0)
    if negative.any():
        row = negative.idxmax()
        raise ImportFailure(
            f"{path}: row {row_of(frame, row)}: column 'value' = "
            f"{float(frame.loc[row, 'value']):g} {frame.loc[row, 'unit']} is a negative "
            f"time ({int(negative.sum())} such row(s)), which no run can take: correct the "
            "source (a swapped subtraction, a clock set back) or write NaN for a value "
            "that is missing.")
    frame.attrs[COUNTS] = counts  # the import step writes them for the data section
    return frame


def read_checked(path: Path, metrics: Iterable[str], reference: str,
                 repeats: str = "error", duplicates: str = "error") -> pd.DataFrame:
    """The import rule's whole check (read_tidy, then check_against), in one place for the
    rule and for `containertax check`."""
    frame, lines = _read_tidy(Path(path))
    return check_against(frame, Path(path), metrics, reference, lines, repeats, duplicates)
