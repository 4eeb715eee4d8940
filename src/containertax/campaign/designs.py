"""The counterbalancing designs as pure functions of the number of environments: which
order each block runs in, and how many blocks make one whole period. Below config and
schedule (both read them: config to check a stopping rule's looks against the period)."""

from __future__ import annotations

import random


def williams_rows(n: int) -> list[list[int]]:
    """Williams design: every treatment precedes every other equally often (first-order
    carry-over balanced); odd n needs the mirrored square as well, 2n sequences."""
    first = [0]
    low, high = 1, n - 1
    take_low = True
    while len(first) < n:
        if take_low:
            first.append(low)
            low += 1
        else:
            first.append(high)
            high -= 1
        take_low = not take_low
    rows = [[(x + i) % n for x in first] for i in range(n)]
    if n % 2 == 1 and n > 1:
        rows += [list(reversed(r)) for r in rows]
    return rows


def block_order(design: str, n: int, index: int, rng: random.Random) -> tuple[int, list[int]]:
    """The environment order of the index-th block, and which sequence of the design it is."""
    if design == "williams":
        rows = williams_rows(n)
        seq = index % len(rows)
        return seq, rows[seq]
    if design == "alternating":
        seq = index % 2
        forward = list(range(n))
        return seq, forward if seq == 0 else forward[::-1]
    if design == "random":
        # every block is its own sequence (its index): a record's cell.sequence is >= 0
        # (record.schema.yaml), and -1 made the random design's first run fail its record
        order = list(range(n))
        rng.shuffle(order)
        return index, order
    raise ValueError(f"unknown schedule design {design!r}")


def period(design: str, n: int) -> int | None:
    """Blocks in one whole period of the design: after a whole number of periods every
    environment has run in every position equally often (williams: also after every other
    equally often); None for the random design, which balances only in expectation."""
    if design == "williams":
        return len(williams_rows(n))
    if design == "alternating":
        return 2 if n > 1 else 1
    return None
