"""Results the workflow did not produce, as a tidy CSV, into the same analysis.

Required columns: model, environment, repetition, metric, value, unit.
Optional: block (paired designs), timestamp (ISO 8601; sets the run order for the drift
check), model_size (for the plausibility check), throttled_s; other columns are kept.
Lines starting with '#' are comments (cite the source there); a '#' inside a row is
data, never the start of a comment. Model and environment ids name files and Snakemake
wildcards: letters, digits, '_', '.', '-', starting with a letter or digit (ID_RULE);
repetitions are whole numbers; finite values lie below 1e150 in magnitude (NaN: a
missing one; the quality step flags NaN and inf).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from containertax.core.cell import ID_RULE, ID_WORDS
from containertax.core.errors import ContainertaxError

REQUIRED = ["model", "environment", "repetition", "metric", "value", "unit"]
# |value| above this: a sum of squares of a few thousand such values overflows a double
MAX_ABS_VALUE = 1e150


class ImportFailure(ContainertaxError, ValueError):
    """A tidy CSV that cannot be analysed; the message names file, row, column and fix."""


def _without_comments(path: Path) -> tuple[str, list[int]]:
    """The file's text without its comment lines (first non-blank character '#'), and
    the file line number of each line kept."""
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ImportFailure(f"{path}: no such file (analysis.import_csv).") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportFailure(f"{path}: cannot be read as UTF-8 text ({exc}).") from None
    lines = text.splitlines(keepends=True)
    kept = [i for i, line in enumerate(lines) if not line.lstrip().startswith("#")]
    return "".join(lines[i] for i in kept), [i + 1 for i in kept]


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
    try:
        frame = pd.read_csv(io.StringIO(text), skipinitialspace=True, index_col=False)
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
    for col in ("model", "environment"):
        bad = ~frame[col].map(lambda v: ID_RULE.fullmatch(v) is not None)
        if bad.any():
            row = bad.idxmax()
            raise ImportFailure(
                f"{path}: row {row_of(frame, row)}: column '{col}' = "
                f"{frame.loc[row, col]!r} is not an id: use {ID_WORDS}; rename it in the "
                "CSV (the paper's words for it go in the config's paper section).")
    return frame, lines


def check_against(frame: pd.DataFrame, path: Path, metrics: Iterable[str],
                  reference: str, lines: list[int] | None = None) -> None:
    """An import the analysis can use: every metric known (else nothing of it would be
    analysed, silently), each value of the sign its registry line allows (metrics given as
    the registry: MetricInfo.value_problem), no run's metric twice (the quality step's
    duplicate check) and the reference among the environments. lines: the file line of
    each row (read_tidy's)."""

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

    dup = duplicate_mask(frame)
    if dup.any():
        first = frame[dup].iloc[0]
        same = frame.index[dup & (frame["model"] == first["model"])
                           & (frame["environment"] == first["environment"])
                           & (frame["repetition"] == first["repetition"])
                           & (frame["metric"] == first["metric"])]
        rows = ", ".join(str(row_of(frame, i)) for i in same[:5])
        raise ImportFailure(
            f"{path}: rows {rows} repeat (model, environment, repetition, metric) = "
            f"({first['model']}, {first['environment']}, {first['repetition']}, "
            f"{first['metric']}), {int(dup.sum())} such rows in all (the quality step's "
            "duplicate check): each run's metric appears once; remove the copies, or "
            "number the repetitions of each model and environment apart.")
    envs = sorted(set(frame["environment"]))
    if reference not in envs:
        raise ImportFailure(
            f"{path}: reference_environment '{reference}' is not an environment of the "
            f"import ({envs}); set reference_environment in the config to one of them.")


def read_checked(path: Path, metrics: Iterable[str], reference: str) -> pd.DataFrame:
    """The import rule's whole check (read_tidy, then check_against), in one place for the
    rule and for `containertax check`."""
    frame, lines = _read_tidy(Path(path))
    check_against(frame, Path(path), metrics, reference, lines)
    return frame
