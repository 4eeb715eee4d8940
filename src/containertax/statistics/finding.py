"""One finding of the data-quality report (statistics/quality.py). Its own module so that
a check beside quality (statistics/roofline.py) makes one without importing quality, which
calls it: no import circle (tests/test_architecture.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Finding:
    check: str
    severity: str  # 'error' (analysis cannot be trusted), 'warning', 'info'
    message: str
    rows: int = 0
    details: dict[str, Any] = field(default_factory=dict)
