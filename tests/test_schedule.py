"""Counterbalancing: Williams squares balance position and carry-over; plans are
deterministic; the full DGX plan has 900 cells."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from containertax.campaign import config, schedule
from tests.conftest import REPO


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_williams_balances_positions_and_carryover(n):
    rows = schedule.williams_rows(n)
    assert len(rows) == (2 * n if n % 2 else n)
    for row in rows:
        assert sorted(row) == list(range(n))
    for pos in range(n):  # each treatment equally often in each position
        counts = Counter(r[pos] for r in rows)
        assert len(set(counts.values())) == 1 and len(counts) == n
    pairs = Counter((r[i], r[i + 1]) for r in rows for i in range(n - 1))
    assert len(pairs) == n * (n - 1)  # every ordered pair of neighbours occurs ...
    assert len(set(pairs.values())) == 1  # ... equally often


def test_alternating_is_abba():
    rng = random.Random(0)
    orders = [schedule.block_order("alternating", 2, i, rng)[1] for i in range(4)]
    assert orders == [[0, 1], [1, 0], [0, 1], [1, 0]]


def _campaign(config_dict, **sched):
    config_dict["schedule"].update(sched)
    return config.load_campaign(config_dict, "x.yaml")


def test_interleaved_plan_covers_every_cell_once(config_dict):
    cells = schedule.plan(_campaign(config_dict))
    keys = [(c.model, c.environment, c.repetition) for c in cells]
    assert len(keys) == len(set(keys)) == 2 * 4 * 4
    assert [c.position for c in cells] == list(range(len(cells)))
    # interleaved: repetition 1 of every model comes before any repetition 2
    reps = [c.repetition for c in cells]
    assert reps == sorted(reps)
    # each block holds every environment once
    for (_m, _r), group in itertools.groupby(cells, key=lambda c: (c.model, c.repetition)):
        assert sorted(c.environment for c in group) == ["chroot", "docker", "native",
                                                        "native-aa"]


def test_blocked_plan_runs_one_model_after_the_other(config_dict):
    cells = schedule.plan(_campaign(config_dict, models="blocked"))
    models = [c.model for c in cells]
    assert models == ["n256"] * 16 + ["n512"] * 16


def test_random_design_is_seeded(config_dict):
    a = schedule.plan(_campaign(dict(config_dict), design="random", seed=7))
    b = schedule.plan(_campaign(dict(config_dict), design="random", seed=7))
    assert a == b
    orders = {tuple(c.environment for c in a[i : i + 4]) for i in range(0, len(a), 4)}
    assert len(orders) > 1


def test_csv_round_trip(tmp_path, config_dict):
    cells = schedule.plan(_campaign(config_dict))
    schedule.write_csv(cells, tmp_path / "s.csv")
    assert schedule.read_csv(tmp_path / "s.csv") == cells


def test_dgx_plan_has_900_cells():
    cells = schedule.plan(config.load_file(REPO / "config" / "config.yaml"))
    assert len(cells) == 900
    first_block = [c.environment for c in cells[:3]]
    assert sorted(first_block) == ["chroot", "docker_baseline", "docker_optimised"]
