"""Counterbalancing: Williams squares balance position and carry-over; plans are
deterministic; the full DGX plan has 900 cells."""

from __future__ import annotations

import copy
import itertools
import random
from collections import Counter

import pytest

from containertax.campaign import config, designs, schedule
from tests.conftest import REPO, demo_config


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8])
def test_williams_balances_positions_and_carryover(n):
    rows = designs.williams_rows(n)
    assert len(rows) == (2 * n if n % 2 else n) == designs.period("williams", n)
    for row in rows:
        assert sorted(row) == list(range(n))
    # position x environment: every cell of the table holds the same count
    table = Counter((pos, r[pos]) for r in rows for pos in range(n))
    assert len(table) == n * n and set(table.values()) == {len(rows) // n}
    pairs = Counter((r[i], r[i + 1]) for r in rows for i in range(n - 1))
    assert len(pairs) == n * (n - 1)  # every ordered pair of neighbours occurs ...
    assert len(set(pairs.values())) == 1  # ... equally often
    assert all(a != b for a, b in pairs)


def test_alternating_warns_beyond_two_environments(config_dict):
    """Planted: the demo's 4 environments under 'alternating' (native-aa and chroot always
    in the middle); williams and 2 environments pass without a warning."""
    warned = schedule.design_warnings(_campaign(copy.deepcopy(config_dict),
                                                design="alternating"))
    assert len(warned) == 1 and "schedule.design" in warned[0] and "williams" in warned[0]
    assert "native-aa" in warned[0] and "A/A replica" in warned[0]
    assert schedule.design_warnings(_campaign(copy.deepcopy(config_dict))) == []
    two = copy.deepcopy(config_dict)
    two["environments"] = {k: v for k, v in two["environments"].items()
                           if k in ("native", "docker")}
    assert schedule.design_warnings(_campaign(two, design="alternating")) == []


@pytest.mark.parametrize("design,reps,warns", [("williams", 4, False), ("williams", 6, True),
                                               ("alternating", 3, True), ("alternating", 2, False),
                                               ("random", 5, False)])
def test_repetitions_not_whole_periods_warn(config_dict, design, reps, warns):
    """4 environments: the williams period is 4 blocks, alternating's 2; random has no
    period."""
    config_dict["repetitions"] = reps
    warned = [w for w in schedule.design_warnings(_campaign(config_dict, design=design))
              if "'repetitions'" in w]
    assert bool(warned) == warns
    if warns and design == "williams":
        assert "multiple of 4" in warned[0] and "(e.g. 8)" in warned[0]


def test_check_prints_the_design_warnings(config_dict, tmp_path, capsys):
    import yaml

    from containertax import cli

    config_dict["schedule"]["design"] = "alternating"
    path = tmp_path / "alt.yaml"
    path.write_text(yaml.safe_dump(config_dict, sort_keys=False))
    assert cli.main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "warning:" in out and "'alternating' is position-balanced only" in out


def test_alternating_is_abba():
    rng = random.Random(0)
    orders = [designs.block_order("alternating", 2, i, rng)[1] for i in range(4)]
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
    # each block its own sequence, never negative: the record schema's cell.sequence >= 0
    assert min(c.sequence for c in a) == 0 and all(c.sequence >= 0 for c in a)


def test_csv_round_trip(tmp_path, config_dict):
    cells = schedule.plan(_campaign(config_dict))
    schedule.write_csv(cells, tmp_path / "s.csv")
    assert schedule.read_csv(tmp_path / "s.csv") == cells


def test_dgx_plan_has_900_cells():
    cells = schedule.plan(config.load_file(REPO / "config" / "config.yaml"))
    assert len(cells) == 900
    first_block = [c.environment for c in cells[:3]]
    assert sorted(first_block) == ["chroot", "docker_baseline", "docker_optimised"]


def test_config_edits_keep_every_written_position(config_dict, tmp_path):
    """Issue #16, failure 4: adding a model or a repetition renumbered the schedule. The
    written schedule's cells keep position, block and sequence; new cells come after."""
    config_dict["results_dir"] = str(tmp_path)
    config_dict["results_dir_absolute"] = True
    before = schedule.plan(config.load_campaign(copy.deepcopy(config_dict), "x.yaml"))
    root = tmp_path / config_dict["campaign"]
    schedule.write_csv(before, root / "schedule.csv")
    config_dict["models"].insert(0, {"id": "n64", "size": 64})
    config_dict["repetitions"] += 1
    edited = config.load_campaign(copy.deepcopy(config_dict), "x.yaml")
    schedule.write_csv(schedule.known_cells(edited), root / schedule.POSITIONS)
    (root / "schedule.csv").unlink()  # as Snakemake does before the schedule step runs
    after = schedule.plan(edited)
    assert after[:len(before)] == before
    n_env = len(config_dict["environments"])  # the demo's A/A replica included
    assert len(after) == 3 * n_env * 5 and len({c.position for c in after}) == len(after)
    added = after[len(before):]
    assert min(c.position for c in added) == len(before)
    assert {c.model for c in added if c.repetition <= 4} == {"n64"}
    # a fresh plan would have moved the old cells: the test plants what it must catch
    assert schedule.fresh_plan(config.load_campaign(config_dict, "x.yaml"))[:len(before)] \
        != before


def test_a_removed_model_gets_its_positions_back(config_dict, tmp_path):
    config_dict["results_dir"] = str(tmp_path)
    config_dict["results_dir_absolute"] = True
    full = config.load_campaign(copy.deepcopy(config_dict), "x.yaml")
    root = tmp_path / config_dict["campaign"]
    schedule.write_csv(schedule.known_cells(full), root / schedule.POSITIONS)
    config_dict["models"] = config_dict["models"][:1]
    fewer = config.load_campaign(copy.deepcopy(config_dict), "x.yaml")
    assert schedule.plan(fewer) == [c for c in schedule.plan(full) if c.model == "n256"]
    schedule.write_csv(schedule.known_cells(fewer), root / schedule.POSITIONS)
    assert schedule.plan(full) == schedule.plan(config.load_campaign(
        demo_config() | {"results_dir": str(tmp_path), "results_dir_absolute": True}, "x.yaml"))


def test_a_fresh_clone_takes_positions_from_the_records(config_dict, tmp_path):
    """No schedule written (a fresh clone of committed raw/), a config edited since: the
    cells with records keep the positions their records hold."""
    import json

    config_dict["results_dir"] = str(tmp_path)
    config_dict["results_dir_absolute"] = True
    old = schedule.plan(config.load_campaign(copy.deepcopy(config_dict), "x.yaml"))
    root = tmp_path / config_dict["campaign"]
    for c in old[:5]:
        rec = root / "raw" / c.model / c.environment / f"rep{c.repetition:02d}.json"
        rec.parent.mkdir(parents=True, exist_ok=True)
        rec.write_text(json.dumps({"cell": {k: getattr(c, k) for k in schedule.FIELDS}}))
    config_dict["models"].insert(0, {"id": "n64", "size": 64})
    cells = schedule.known_cells(config.load_campaign(config_dict, "x.yaml"))
    assert cells[:5] == old[:5]
    n_env = len(config_dict["environments"])
    assert len({c.position for c in cells}) == len(cells) == 3 * n_env * 4
