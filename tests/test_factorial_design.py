"""The two-level factorial design kind (campaign/factorial.py): the published 2^(7-3)
resolution IV design, its alias structure, and the expansion of factors into environments."""

from __future__ import annotations

import itertools

import pytest

from containertax.campaign import factorial
from containertax.campaign.config import ConfigError, load_campaign

# Montgomery, Design and Analysis of Experiments (9th ed.), Table 8.14 / Box, Hunter &
# Hunter Table 6.22: the minimum-aberration 2^(7-3)_IV design, E = ABC, F = BCD, G = ACD,
# defining relation I = ABCE = BCDF = ACDG = ADEF = BDEG = ABFG = CEFG.
PUBLISHED_WORDS = {"ABCE", "BCDF", "ACDG", "ADEF", "BDEG", "ABFG", "CEFG"}


def test_the_seven_factor_resolution_iv_design_is_the_published_one() -> None:
    gens = factorial.generators_for(7, 4, None, "x")
    assert gens == ("E=ABC", "F=BCD", "G=ACD")
    assert set(factorial.defining_relation(gens)) == PUBLISHED_WORDS
    rows = factorial.matrix(7, gens)
    assert len(rows) == 16 and len(set(rows)) == 16
    # the basic factors form the full 2^4 in Yates order (A fastest); E, F, G are products
    assert [r[:4] for r in rows] == [tuple(reversed(c)) for c in
                                     itertools.product((-1, 1), repeat=4)]
    for a, b, c, d, e, f, g in rows:
        assert (e, f, g) == (a * b * c, b * c * d, a * c * d)
    # orthogonal, balanced columns
    for i, j in itertools.combinations(range(7), 2):
        assert sum(r[i] * r[j] for r in rows) == 0


def test_resolution_iv_alias_chains_keep_main_effects_clear() -> None:
    chains = factorial.alias_chains(list("ABCDEFG"), ("E=ABC", "F=BCD", "G=ACD"))
    mains = [c for c in chains if len(c[0]) == 1]
    assert all(c == [c[0]] for c in mains)  # no two-factor interaction in a main's chain
    two = [c for c in chains if len(c[0]) == 2]
    assert len(two) == 7 and all(len(c) == 3 for c in two)  # 21 interactions, 7 chains
    assert ["AB", "CE", "FG"] in two  # Montgomery's Table 8.14 alias list


def test_resolution_iii_aliases_a_main_effect_with_interactions() -> None:
    gens = factorial.generators_for(3, 3, None, "x")
    chains = factorial.alias_chains(list("ABC"), gens)
    assert ["A", "BC"] in chains


def test_generators_below_the_stated_resolution_are_refused() -> None:
    with pytest.raises(ConfigError, match="resolution 3, below the stated resolution 4"):
        factorial.generators_for(5, 4, ["D=AB", "E=AC"], "c.yaml: key 'factorial")


def test_full_factorial_without_a_resolution() -> None:
    assert factorial.generators_for(3, None, None, "x") == ()
    assert len(factorial.matrix(3, ())) == 8


def _config(**factorial_spec: object) -> dict:
    return {
        "campaign": "f", "repetitions": 2, "reference_environment": "base",
        "environments": {"base": {"kind": "docker", "image": "x", "options": {"ipc": "host"}},
                         "base-aa": {"replica_of": "base"}},
        "workload": {"kind": "matmul"}, "models": [{"id": "n64", "size": 64}],
        "schedule": {"design": "random"},
        "factorial": {"base": "base", **factorial_spec},
    }


def test_factors_become_environments_with_their_levels() -> None:
    campaign = load_campaign(_config(factors={
        "shm": {"high": {"ipc": "private", "shm_size": "1g"}},
        "net": {"low": {"network": "none"}, "high": {"network": "host"}},
        "sec": {"high": {"seccomp": "unconfined"}}}))
    ids = [e.id for e in campaign.environments]
    assert ids == ["base", "base-aa", *(f"f0{i}" for i in range(1, 9))]
    f08 = campaign.environment("f08")
    assert f08.spec["options"] == {"ipc": "private", "shm_size": "1g", "network": "host",
                                   "seccomp": "unconfined"}
    assert f08.spec["levels"] == {"shm": 1, "net": 1, "sec": 1}
    f01 = campaign.environment("f01").spec
    assert f01["options"] == {"ipc": "host", "network": "none"}  # the base's ipc kept


def test_one_option_in_two_factors_is_refused_naming_both() -> None:
    with pytest.raises(ConfigError, match=r"factors.b'.*'ipc'.*factor a too"):
        load_campaign(_config(factors={"a": {"high": {"ipc": "private"}},
                                       "b": {"high": {"ipc": "none"}}}))


def test_a_bad_option_value_in_a_level_is_refused_by_the_schema() -> None:
    with pytest.raises(ConfigError, match="network"):
        load_campaign(_config(factors={"a": {"high": {"network": "moon"}},
                                       "b": {"high": {"seccomp": "unconfined"}}}))


def test_check_prints_the_design_its_aliases_and_runs(capsys) -> None:
    from containertax import cli
    from tests.conftest import REPO

    assert cli.main(["check", str(REPO / "config" / "phase-2b.yaml")]) == 0
    out = capsys.readouterr().out
    assert "factorial design 2^(7-3) resolution IV, 16 rows" in out
    assert "generators: E=ABC, F=BCD, G=ACD" in out
    assert "    AB = CE = FG\n" in out and "    BD = CF = EG\n" in out
    assert "runs per block: 18 (16 design rows + 2 declared environments), 5 blocks x 3 " \
           "models = 270 runs" in out
    assert "containertax rehearse" in out  # no rehearsal yet: says how to project the time


def test_a_bad_generator_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"factorial.generators'.*'E=AXC'"):
        factorial.generators_for(5, None, ["D=AB", "E=AXC"], "c.yaml: key 'factorial")
