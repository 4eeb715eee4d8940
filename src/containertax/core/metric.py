"""One measured value with its unit, as a raw record keeps it (the workloads make them,
the analysis reads them; their labels and directions: workloads.base.MetricInfo)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    value: float
    unit: str
