"""Every registered environment kind declares everything the rest of the system reads of it
(runtimes/base.py DECLARED), the schemas' lists of kinds agree with the registry, and no
module outside a kind's own names it to decide something (the ~15 places that once did)."""

from __future__ import annotations

import dataclasses
import re

import pytest
import yaml

from containertax import runtimes
from containertax.campaign import config, validation
from containertax.runtimes import podman
from containertax.runtimes.base import DECLARED, contract_problems
from tests.conftest import REPO


@pytest.mark.parametrize("kind", runtimes.KINDS)
def test_every_kind_declares_every_field(kind):
    r = runtimes.get(kind)
    assert contract_problems(r) == []
    assert r.label({}) and r.label({}) != kind  # words, not the raw id
    if r.options_schema:
        assert r.options_schema in validation.schema()["$defs"]


def test_a_toy_kind_without_words_is_caught():
    """Planted: a toy kind (Podman's declaration without its words) fails the contract,
    naming the missing field; so does one without each other declared field in turn."""
    toy = dataclasses.replace(podman.RUNTIME, kind="toy", words=None)
    assert contract_problems(toy) == [
        "environment kind 'toy' does not declare 'words' (runtimes/base.py Runtime)"]
    for name in DECLARED:
        toy = dataclasses.replace(podman.RUNTIME, kind="toy", **{name: None})
        assert f"does not declare {name!r}" in " ".join(contract_problems(toy)), name


def test_a_toy_kind_without_a_launcher_is_caught():
    """Planted: a toy kind that declares no launcher class, or one that is not a Launcher
    (execution/environments.py would fail only at its first cell); the registered kinds
    each start their own class."""
    toy = dataclasses.replace(podman.RUNTIME, kind="toy", launcher_class=None)
    assert contract_problems(toy) == [
        "environment kind 'toy' does not declare 'launcher_class' (runtimes/base.py Runtime)"]
    toy = dataclasses.replace(podman.RUNTIME, kind="toy", launcher_class=dict)
    assert contract_problems(toy) == [
        "environment kind 'toy': launcher_class <class 'dict'> is not a "
        "runtimes.launch.Launcher"]
    assert {k: runtimes.get(k).launcher_class.__name__ for k in ("native", "chroot",
            "docker", "podman")} == {"native": "NativeLauncher", "chroot": "ChrootLauncher",
                                     "docker": "DockerLauncher", "podman": "CommandLauncher"}


def test_inconsistent_declarations_are_caught():
    """Planted: a command launcher without its command; options without their schema."""
    toy = dataclasses.replace(podman.RUNTIME, kind="toy", command=None)
    assert any("declares 'command'" in p for p in contract_problems(toy))
    toy = dataclasses.replace(podman.RUNTIME, kind="toy", options_schema=None)
    assert any("options_schema" in p for p in contract_problems(toy))
    toy = dataclasses.replace(podman.RUNTIME, kind="toy", image_step="none")
    assert any("disagree" in p for p in contract_problems(toy))


def test_schemas_take_the_registry_kinds():
    """The config schema names no kind (validation asks the registry); the record schema's
    closed list is the registry's (a record of a new kind must validate)."""
    cfg = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    assert "enum" not in cfg["$defs"]["environment"]["properties"]["kind"]
    rec = yaml.safe_load((REPO / "workflow/schemas/record.schema.yaml").read_text())
    assert rec["properties"]["environment"]["properties"]["kind"]["enum"] == list(runtimes.KINDS)


def test_an_unknown_kind_is_refused_naming_the_key(config_dict):
    config_dict["environments"]["docker"]["kind"] = "lxc"
    with pytest.raises(config.ConfigError, match=r"environments\.docker\.kind.*unknown "
                                                  r"environment kind 'lxc'.*runtimes"):
        config.load_campaign(config_dict, "x.yaml")


def test_kind_options_are_checked_by_the_kinds_schema(config_dict):
    """Podman's options against $defs/podman_options; a Docker-only flag is refused."""
    config_dict["environments"]["docker"].update(kind="podman", options={"privileged": True})
    with pytest.raises(config.ConfigError, match=r"environments\.docker\.options': "
                                                  r".*privileged.*podman_options"):
        config.load_campaign(config_dict, "x.yaml")


# a kind's name compared with a kind, anywhere but its own module: `kind == "docker"`,
# `e.kind in ("chroot", "docker")`, `env["kind"] != "native"`
def _decides(names: str) -> re.Pattern[str]:
    return re.compile(r"kind\"?\]?\)?\s*(?:==|!=|in|not in)\s*[(\[]?\s*[\"'](?:"
                      + names + r")[\"']")


def test_no_module_decides_by_a_kind_name():
    names = "|".join(map(re.escape, runtimes.KINDS))
    pattern = _decides(names)
    found = []
    files = [*(REPO / "src/containertax").rglob("*.py"), *(REPO / "workflow").rglob("*.smk")]
    for path in files:
        if path.parent.name == "runtimes":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert found == []


def test_the_decision_pattern_catches_a_planted_comparison():
    """Planted: the comparisons the test above must find."""
    pattern = _decides("docker|chroot|native")
    for line in ('if env.kind == "docker":', 'if env["kind"] in ("chroot", "docker")',
                 "x = e.kind != 'native'"):
        assert pattern.search(line), line
    assert not pattern.search('kind = "docker"')
