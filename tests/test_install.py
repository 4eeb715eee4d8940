"""A plain (non-editable) install works outside the source tree: the schemas, the Snakefile
and its rules, the paper's sources are package data found through importlib.resources
(containertax/packaged.py), not through the checkout's folders."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import REPO


def _site(venv: Path) -> Path:
    rel = Path(sysconfig.get_path("purelib")).relative_to(sysconfig.get_path("data"))
    return venv / rel


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """A fresh venv holding containertax installed from a copy of the checkout, with the
    shared venv's packages on its path (no network); returns (its python, its site)."""
    tmp = tmp_path_factory.mktemp("install")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = _site(venv)
    # the shared venv's packages, as a plain path (its own .pth files, the editable
    # install of the checkout among them, are not read)
    (site / "shared.pth").write_text(sysconfig.get_path("purelib") + "\n")
    python = venv / "bin" / "python"
    source = tmp / "source"  # a copy: the install must not depend on the checkout's place
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "results", ".snakemake", "__pycache__", "*.egg-info", "build"))
    env = {**os.environ, "PYTHONPATH": ""}
    if importlib.util.find_spec("wheel") is not None:
        subprocess.run([str(python), "-m", "pip", "install", "--no-deps",
                        "--no-build-isolation", "--no-index", "--target", str(site),
                        str(source)], check=True, env=env, cwd=tmp, capture_output=True)
    else:  # no `wheel` to build one with: setuptools' own build, package data included
        subprocess.run([str(python), "-c", "import setuptools; setuptools.setup()", "-q",
                        "build", "--build-base", str(tmp / "build")], check=True, env=env,
                       cwd=source, capture_output=True)
        shutil.copytree(tmp / "build" / "lib" / "containertax", site / "containertax")
    shutil.rmtree(source)  # nothing may be read from the checkout's copy any more
    return python, site


def _run(python: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(python), *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def test_the_installed_package_holds_its_data(installed, tmp_path):
    python, site = installed
    out = _run(python, ["-c", "import containertax, containertax.core.packaged as p; "
                        "print(containertax.__file__); print(p.schema('config.schema.yaml'));"
                        "print(p.snakefile())"], tmp_path)
    lines = out.stdout.split()
    assert out.returncode == 0, out.stderr
    assert all(line.startswith(str(site)) for line in lines), lines
    assert all(Path(line).is_file() for line in lines), lines
    for rel in ("workflow/rules/cells.smk", "workflow/schemas/record.schema.yaml",
                "paper/main.tex", "paper/references.bib", "envs/workflow.yaml",
                "profiles/default/config.yaml", "workflow/report/workflow.rst"):
        assert (site / "containertax" / "share" / rel).is_file(), rel


def test_demo_checks_and_plans_outside_the_source_tree(installed, tmp_path):
    """`containertax check` and a dry run of the demo campaign, in a folder that holds
    only the demo's config."""
    python, site = installed
    (tmp_path / "config").mkdir()
    shutil.copy(REPO / "config" / "demo.yaml", tmp_path / "config" / "demo.yaml")
    check = _run(python, ["-m", "containertax", "check", "config/demo.yaml"], tmp_path)
    assert check.returncode == 0 and ": ok: campaign demo" in check.stdout, check.stderr
    snakefile = _run(python, ["-m", "containertax", "snakefile"], tmp_path).stdout.strip()
    assert snakefile.startswith(str(site)), snakefile
    plan = _run(python, ["-m", "snakemake", "-n", "--snakefile", snakefile,
                         "--configfile", "config/demo.yaml"], tmp_path)
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    text = plan.stdout + plan.stderr
    for rule in ("gate", "run", "cooldown", "pdf"):
        assert f"rule {rule}:" in text or f"\n{rule} " in text, rule
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob(
        "raw/*/*/*.json"))
