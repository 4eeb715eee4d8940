"""Every registered workload kind declares everything the rest of the system reads of it
(workloads/base.py DECLARED): required keys, compile cache, primary metrics, words,
rehearsal scaling, host metrics, datasets. A kind that misses one used to fall through a
side table silently (an empty primary family, a raw id in the paper)."""

from __future__ import annotations

import dataclasses

import pytest

from containertax import workloads
from containertax.workloads import matmul
from containertax.workloads.base import DECLARED, contract_problems
from containertax.workloads.metric_registry import REGISTRY as METRICS


@pytest.mark.parametrize("kind", workloads.KINDS)
def test_every_kind_declares_every_field(kind):
    w = workloads.get(kind)
    assert contract_problems(w) == []
    for group in w.primary or ():
        assert group and all(name in METRICS for name in group), (kind, group)
    assert w.words and w.words != kind  # words, not the raw id
    assert w.rehearsal is not None and w.rehearsal.few >= 1
    assert isinstance(w.compiles(dict(w.defaults)), bool)  # type: ignore[misc]
    assert callable(w.datasets)


def test_a_kind_missing_a_field_is_caught():
    """Planted: a toy kind (matmul's declaration without one field, each in turn) fails
    the contract, naming the field."""
    for name in DECLARED:
        toy = dataclasses.replace(matmul.WORKLOAD, kind="toy", **{name: None})
        problems = contract_problems(toy)
        assert problems == [f"workload kind 'toy' does not declare {name!r} "
                            "(workloads/base.py Workload)"]


def test_a_host_metric_without_registration_is_caught():
    """Planted: a host metric whose name no metric_info of its kind registers."""
    toy = dataclasses.replace(matmul.WORKLOAD, kind="toy",
                              host_metrics={"unregistered_pct": lambda probe, host: 1.0})
    assert contract_problems(toy) == [
        "workload kind 'toy': host metric 'unregistered_pct' is not in its metric_info"]


def test_side_tables_read_the_declaration():
    """The tables that once listed kinds by name now derive from the declarations."""
    from containertax.workloads.metric_registry import PRIMARY_BY_KIND

    assert set(PRIMARY_BY_KIND) == set(workloads.KINDS)
    assert all(PRIMARY_BY_KIND[k] for k in workloads.KINDS)
    assert workloads.known_keys("matmul") >= {"size", "repeats", "kind"}
