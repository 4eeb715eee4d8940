"""The suite's own order (tests/conftest.py): the long tests spread over pytest-xdist's
workers. Checked against the installed xdist's worksteal scheduler itself, so an xdist that
hands out its first chunks differently fails here instead of silently putting every long
test on one worker again."""

from __future__ import annotations

import types

import pytest
from xdist.scheduler.worksteal import WorkStealingScheduling

from tests.conftest import dealt, worksteal_chunks


class _Node:
    """What the scheduler calls on a worker: its test indices arrive by send_runtest_some."""

    def __init__(self, name: str) -> None:
        self.gateway = types.SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent += indices


@pytest.mark.parametrize("n_items,workers", [(1337, 4), (1337, 6), (10, 4), (5, 2)])
def test_the_first_chunks_are_what_xdist_worksteal_hands_out(n_items, workers):
    # the config of `pytest -n workers`: xdist reads its nodes from --tx
    config = types.SimpleNamespace(getvalue=lambda name: [f"{workers}*popen"])
    sched = WorkStealingScheduling(config, log=types.SimpleNamespace(
        workstealsched=lambda *a: None))
    nodes = [_Node(f"gw{i}") for i in range(workers)]
    names = [f"t{i}" for i in range(n_items)]
    for node in nodes:
        sched.add_node(node)
    for node in nodes:
        sched.add_node_collection(node, names)
    sched.schedule()
    assert [len(node.sent) for node in nodes] == worksteal_chunks(n_items, workers)
    # the order dealt: each worker's first test is one of the `workers` longest, and its
    # chunk is longest first
    order = dealt(list(range(n_items)), workers)
    for node in nodes:
        mine = [order[i] for i in node.sent]
        assert mine == sorted(mine)
        assert mine[0] < workers
