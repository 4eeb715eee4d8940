"""Shared fixtures: repo paths, small configs, and whether a Docker Engine answers."""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
from collections.abc import Callable
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


@pytest.fixture(scope="session")
def committed_paper(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """A committed campaign's analysis (up to a target: the paper, or its numbers.tex),
    built from its raw records once per test session (per pytest-xdist worker; tests
    sharing one carry its xdist_group, so one worker builds it): (campaign, target) -> the
    working directory holding results/<campaign>/. Read it, never change it (copy what a
    test edits). A later, larger target builds on the same folder."""
    work: dict[str, Path] = {}
    done: set[tuple[str, str]] = set()

    def build(campaign: str, target: str = "paper") -> Path:
        if campaign not in work:
            work[campaign] = tmp_path_factory.mktemp(f"committed-{campaign}")
            shutil.copytree(REPO / "results" / campaign / "raw",
                            work[campaign] / "results" / campaign / "raw")
        if (campaign, target) not in done:
            out = subprocess.run(
                [sys.executable, "-m", "snakemake", target, "--cores", "1", "--snakefile",
                 str(REPO / "Snakefile"), "--directory", str(work[campaign]),
                 "--configfile", str(REPO / "config" / f"{campaign}.yaml")],
                capture_output=True, text=True, timeout=900)
            assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
            done.add((campaign, target))
        return work[campaign]

    return build


def paper_group(campaign: str) -> pytest.MarkDecorator:
    """The xdist group of the tests reading one committed_paper: one worker builds it."""
    return pytest.mark.xdist_group(f"paper-{campaign}")
