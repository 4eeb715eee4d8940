"""With mtime rerun triggers, an edit of any analysis code must rebuild the paper: each
module is edited in turn (a comment appended, in a copy of the source tree) and a dry run of
`paper` on a built copy of the small committed campaign h100-matmul must plan the paper.
(A bare touch is not an edit: Snakemake compares the checksums it stored of small inputs.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow


def run(tree: Path, work: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "paper", *args, "--cores", "1",
         "--snakefile", str(tree / "Snakefile"), "--directory", str(work),
         "--configfile", str(tree / "config" / "h100-matmul.yaml")],
        capture_output=True, text=True, timeout=600)


def test_editing_any_analysis_module_rebuilds_the_paper(tmp_path):
    tree = tmp_path / "repo"
    tree.mkdir()
    for part in ("Snakefile", "workflow", "src", "paper", "config", "profiles", "envs",
                 "resources"):
        src = REPO / part
        if src.is_dir():
            shutil.copytree(src, tree / part, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, tree / part)
    work = tmp_path / "work"
    shutil.copytree(REPO / "results" / "h100-matmul" / "raw",
                    work / "results" / "h100-matmul" / "raw")
    built = run(tree, work)
    assert built.returncode == 0, built.stderr[-3000:]
    assert "Nothing to be done" in run(tree, work, "-n").stdout
    pkg = tree / "src" / "containertax"
    code = sorted(pkg.glob("statistics/*.py")) + sorted(pkg.glob("publishing/*.py")) + [
        pkg / "core" / "rawrecord.py", pkg / "campaign" / "paths.py",
        pkg / "workloads" / "matmul.py", tree / "workflow" / "schemas" / "record.schema.yaml",
        # a kind's module: the paper prints its words, flags and isolation (issue 43: an
        # edited kind left the paper stale, `snakemake -n` said nothing to do)
        pkg / "runtimes" / "docker.py", pkg / "runtimes" / "base.py"]
    for path in code:
        text = path.read_text()
        path.write_text(text + "\n# an edit\n")
        plan = run(tree, work, "-n", "--quiet", "rules")
        path.write_text(text)
        assert plan.returncode == 0, plan.stderr[-2000:]
        rules = {line.split()[0] for line in plan.stdout.splitlines()
                 if len(line.split()) == 2 and line.split()[1].isdigit()}
        assert "pdf" in rules, f"editing {path.relative_to(tree)} leaves the paper stale"
