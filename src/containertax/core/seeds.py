"""Seeds that are the same in every process: a simulation cell seeds its generator from
its own parameters, so a table regenerates exactly (Python's hash() of a str is salted per
process, PYTHONHASHSEED, and cannot do this)."""

from __future__ import annotations

import zlib


def stable_seed(*parts: object) -> int:
    """A 32-bit seed from the parameters of a cell (their repr, joined): CRC-32, the same
    on every machine, in every process and Python version."""
    text = "|".join(repr(p) for p in parts)
    return zlib.crc32(text.encode("utf-8"))
