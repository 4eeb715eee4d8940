"""Shared fixtures: repo paths, small configs, and whether a Docker Engine answers."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
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


# Seconds each of the 60 slowest tests took (setup, call and teardown) in one whole run on
# a fresh clone of the 2-core machine, idle (2026-12-05, the long tests already dealt across
# the workers; 725 s of pytest), except the SIGINT test, timed by its own run after its fix
# (in that whole run its kill reached nothing and it waited out its run's 300 s timeout):
# the order below starts them longest first.
DURATIONS = Path(__file__).with_name("durations.json")
SLOW_S = 7  # a slow-marked test not in the file: about the 60th slowest's time


def worksteal_chunks(n_items: int, workers: int) -> list[int]:
    """The sizes of the contiguous chunks pytest-xdist's worksteal scheduler first hands
    its workers (WorkStealingScheduling.check_schedule: each idle worker in turn gets
    len(pending) // workers-left from the front of the collection)."""
    sizes, left = [], n_items
    for i in range(workers):
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    return sizes


def dealt(ranked: list, workers: int) -> list:
    """`ranked` (longest first) dealt round-robin into the worksteal chunks, each chunk
    longest first: a worker's chunk begins with its share of the long tests. A worker
    that runs out steals from the end of another's queue, never its head, so the
    collection's longest-first order alone gave the first worker every long test: in a
    whole run on a fresh clone (2026-12-05) it ran the seven longest one after another
    (758 s) while the other three ran the other 1,323 tests."""
    sizes = worksteal_chunks(len(ranked), workers)
    chunks: list[list] = [[] for _ in sizes]
    k = 0
    for item in ranked:
        while len(chunks[k % workers]) >= sizes[k % workers]:
            k += 1
        chunks[k % workers].append(item)
        k += 1
    return [item for chunk in chunks for item in chunk]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest measured tests first, then the other tests that run real campaigns
    (marked slow), then the rest, dealt across pytest-xdist's workers (`dealt`): a long
    test started last keeps one worker busy after the others are done (longest first is
    the classic makespan heuristic).
    The order is the same on every worker, as xdist requires; tests of equal estimate
    keep their collection order (a stable sort)."""
    took = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    items.sort(key=lambda item: -float(took.get(item.nodeid) or (
        SLOW_S if item.get_closest_marker("slow") else 0)))
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    if workers > 1:
        items[:] = dealt(list(items), workers)


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


def run_shared(factory: pytest.TempPathFactory) -> Path:
    """A folder every pytest-xdist worker of this run shares (the parent of the workers'
    own temporary folders; without xdist the run's own)."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def run_exclusive(factory: pytest.TempPathFactory, name: str) -> Iterator[None]:
    """One holder at a time across the run's workers (e.g. the SLURM cluster test, whose
    daemons take the default munge socket)."""
    from containertax.core.records import locked

    with locked(run_shared(factory) / f"{name}.lock"):
        yield


@pytest.fixture(scope="session")
def committed_paper(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """A committed campaign's analysis (up to a target: the paper, or its numbers.tex),
    built from its raw records once per test run, whichever pytest-xdist worker asks
    first (the others wait on a lock and read it): (campaign, target) -> the working
    directory holding results/<campaign>/. Read it, never change it (copy what a test
    edits). A later, larger target builds on the same folder."""

    def build(campaign: str, target: str = "paper") -> Path:
        work = run_shared(tmp_path_factory) / "committed" / campaign
        done = work / f".built-{target.replace('/', '_')}"
        with run_exclusive(tmp_path_factory, f"committed-{campaign}"):
            if not done.exists():
                if not (work / "results" / campaign / "raw").is_dir():
                    shutil.copytree(REPO / "results" / campaign / "raw",
                                    work / "results" / campaign / "raw")
                out = subprocess.run(
                    [sys.executable, "-m", "snakemake", target, "--cores", "1",
                     "--snakefile", str(REPO / "Snakefile"), "--directory", str(work),
                     "--configfile", str(REPO / "config" / f"{campaign}.yaml")],
                    capture_output=True, text=True, timeout=900)
                assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
                done.write_text("")
        return work

    return build


@pytest.fixture(scope="session")
def committed_study(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """A committed study's paper (config/study-NAME.yaml through workflow/study.smk), built
    from its campaigns' raw records once per test run, whichever xdist worker asks first:
    name -> the working directory holding config/ and results/. Read it, never change it."""

    def build(name: str) -> Path:
        work = run_shared(tmp_path_factory) / "studies" / name
        done = work / ".built"
        with run_exclusive(tmp_path_factory, f"study-{name}"):
            if not done.exists():
                if work.exists():  # a build that failed before: start again
                    shutil.rmtree(work)
                shutil.copytree(REPO / "config", work / "config",
                                ignore=shutil.ignore_patterns("README.md"))
                study = work / "config" / f"study-{name}.yaml"
                for entry in yaml.safe_load(study.read_text())["study"]["campaigns"]:
                    shutil.copytree(REPO / "results" / entry["name"] / "raw",
                                    work / "results" / entry["name"] / "raw")
                out = subprocess.run(
                    [sys.executable, "-m", "snakemake", "--cores", "2", "--snakefile",
                     str(REPO / "workflow" / "study.smk"), "--directory", str(work),
                     "--configfile", str(study)],
                    capture_output=True, text=True, timeout=1800)
                assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
                done.write_text("")
        return work

    return build


def processes(match: Callable[[list[str]], bool], cwd: Path | None = None) -> set[int]:
    """The pids of this machine's processes whose argv `match` accepts (from /proc), and,
    with `cwd`, that work in that folder (another test's processes are not this one's)."""
    found = set()
    where = None if cwd is None else str(Path(cwd).resolve())  # /proc gives the real path
    for path in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = path.read_bytes().decode(errors="replace").split("\0")
            if match(argv) and (where is None or os.readlink(path.parent / "cwd") == where):
                found.add(int(path.parent.name))
        except OSError:  # a process that ended meanwhile
            continue
    return found


def held_python(tmp_path: Path, hold_at: int) -> tuple[Path, Path, Path]:
    """A native environment's python that, at its `hold_at`-th measured run (the calls with
    --size), says so in a file and waits while a hold file exists: a kill sent once the
    first file appears lands inside a run's measuring, whatever the machine's load.
    Returns the wrapper, the hold file and the file that says a run is held."""
    hold, held, count = tmp_path / "hold", tmp_path / "held", tmp_path / "measured-runs"
    wrapper = tmp_path / "held-python"
    wrapper.write_text(
        "#!/bin/sh\n"
        'if echo "$*" | grep -q -- --size; then\n'
        f"  echo run >> {count}\n"
        f'  if [ -e {hold} ] && [ "$(wc -l < {count})" -eq {hold_at} ]; then\n'
        f"    touch {held}\n"
        f"    while [ -e {hold} ]; do sleep 0.05; done\n"
        "  fi\nfi\n"
        'exec /usr/bin/python3 "$@"\n')
    wrapper.chmod(0o755)
    hold.write_text("")
    return wrapper, hold, held
