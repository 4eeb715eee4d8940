"""Results the workflow did not produce, as a tidy CSV, into the same analysis.

Required columns: model, environment, repetition, metric, value, unit.
Optional: block (paired designs), timestamp (ISO 8601; sets the run order for the drift
check), model_size (for the plausibility check), throttled_s; other columns are kept.
Lines starting with '#' are comments (cite the source there).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from containertax.core.errors import ContainertaxError

REQUIRED = ["model", "environment", "repetition", "metric", "value", "unit"]


class ImportFailure(ContainertaxError, ValueError):
    """A tidy CSV that cannot be analysed; the message names file, row, column and fix."""


def read_tidy(path: Path) -> pd.DataFrame:
    path = Path(path)
    try:
        frame = pd.read_csv(path, comment="#", skipinitialspace=True)
    except FileNotFoundError:
        raise ImportFailure(f"{path}: no such file (analysis.import_csv).") from None
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
            row = int(blank.idxmax()) + 2
            raise ImportFailure(f"{path}: row {row}: column '{col}' is empty; fill it in.")
    for col in ("repetition", "value"):
        num = pd.to_numeric(frame[col], errors="coerce")
        bad = num.isna() & frame[col].notna() & ~frame[col].astype(str).str.lower().isin(
            ["nan", "inf", "-inf"])
        if bad.any():
            row = int(bad.idxmax()) + 2
            raise ImportFailure(
                f"{path}: row {row}: column '{col}' = {frame.loc[bad.idxmax(), col]!r} is not a "
                "number; write a plain number (NaN for a missing value).")
        frame[col] = num
    frame["repetition"] = frame["repetition"].astype(int)
    frame["value"] = frame["value"].astype(float)
    if "timestamp" in frame:
        ts = pd.to_datetime(frame["timestamp"], utc=True, errors="coerce")
        if ts.isna().any():
            row = int(ts.isna().idxmax()) + 2
            raise ImportFailure(f"{path}: row {row}: 'timestamp' is not ISO 8601.")
        order = ts.rank(method="dense").astype(int) - 1
        frame["position"] = order
    if "model_size" in frame:
        size = pd.to_numeric(frame["model_size"], errors="coerce")
        bad = size.isna() & frame["model_size"].notna()
        if bad.any():
            row = int(bad.idxmax()) + 2
            raise ImportFailure(f"{path}: row {row}: 'model_size' = "
                               f"{frame.loc[bad.idxmax(), 'model_size']!r} is not a number; "
                               "write the size as a plain number (parameters, matrix side).")
        frame["model_size"] = size
    if "block" not in frame:
        frame["block"] = np.nan
    for col in ("model", "environment", "metric", "unit"):
        frame[col] = frame[col].astype(str).str.strip()
    return frame


def check_against(frame: pd.DataFrame, path: Path, metrics: Iterable[str],
                  reference: str) -> None:
    """An import the analysis can use: every metric known (else nothing of it would be
    analysed, silently) and the reference among the environments."""
    known = set(metrics)
    unknown = sorted(set(frame["metric"]) - known)
    if unknown:
        row = int(frame.index[frame["metric"].isin(unknown)][0]) + 2
        raise ImportFailure(
            f"{path}: row {row}: column 'metric' holds {unknown}, not in the metric registry; "
            "correct the names or define them under analysis.define_metrics "
            "(name -> {unit, direction, label}) in the campaign config.")
    envs = sorted(set(frame["environment"]))
    if reference not in envs:
        raise ImportFailure(
            f"{path}: reference_environment '{reference}' is not an environment of the "
            f"import ({envs}); set reference_environment in the config to one of them.")


def read_checked(path: Path, metrics: Iterable[str], reference: str) -> pd.DataFrame:
    """The import rule's whole check (read_tidy, then check_against), in one place for the
    rule and for `containertax check`."""
    frame = read_tidy(path)
    check_against(frame, Path(path), metrics, reference)
    return frame
