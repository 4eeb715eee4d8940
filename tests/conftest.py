"""Shared fixtures: repo paths, small configs, and whether a Docker Engine answers."""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DEMO_IMAGE = "containertax-demo:bookworm"


def demo_config() -> dict[str, Any]:
    return yaml.safe_load((REPO / "config" / "demo.yaml").read_text())


def docker_ready() -> bool:
    if shutil.which("docker") is None:
        return False
    out = subprocess.run(["docker", "image", "inspect", DEMO_IMAGE], capture_output=True)
    return out.returncode == 0


needs_docker = pytest.mark.skipif(
    not docker_ready(),
    reason=f"needs a running Docker Engine with {DEMO_IMAGE} (scripts/setup.sh builds it)",
)


@pytest.fixture(autouse=True)
def _status_page_only_where_tested(request: pytest.FixtureRequest,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The status page a cell step rewrites costs 1-2 s a cell (a child process): off in
    the tests that run campaigns for other reasons, on in those marked status_page."""
    if request.node.get_closest_marker("status_page") is None:
        monkeypatch.setenv("CONTAINERTAX_STATUS_PAGE", "0")


@pytest.fixture
def config_dict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The demo config, its results folder (results/demo, relative) in a folder of the
    test's own: a demo campaign run in the checkout (the README's first command) has a
    schedule there that a plan would otherwise extend."""
    monkeypatch.chdir(tmp_path)
    return copy.deepcopy(demo_config())
