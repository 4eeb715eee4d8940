"""With mtime rerun triggers, an edit of any analysis code must rebuild the paper. A built
copy of the small committed campaign h100-matmul is asked once for every job's recorded
inputs (`--detailed-summary`); every analysis module must be among the inputs of the paper
or of a job upstream of it. That is what makes an edit rebuild the paper, and one real edit
(a comment appended to a module, in a copy of the source tree) shows Snakemake replanning the
paper for it. (One dry run per module did the same in 36 Snakemake invocations, 214 s of the
test command; issue #43. A bare touch is not an edit: Snakemake compares the checksums it
stored of small inputs.)"""

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
        *sorted(pkg.glob("runtimes/*.py"))]
    upstream = paper_inputs(run(tree, work, "--detailed-summary").stdout, work)
    stale = [str(p.relative_to(tree)) for p in code if str(p) not in upstream]
    assert not stale, f"editing these leaves the paper stale: {stale}"
    # the rerun trigger itself, for one module: an edit plans the paper again
    path = pkg / "statistics" / "comparisons.py"
    text = path.read_text()
    path.write_text(text + "\n# an edit\n")
    plan = run(tree, work, "-n", "--quiet", "rules")
    path.write_text(text)
    assert plan.returncode == 0, plan.stderr[-2000:]
    rules = {line.split()[0] for line in plan.stdout.splitlines()
             if len(line.split()) == 2 and line.split()[1].isdigit()}
    assert "pdf" in rules, "editing statistics/comparisons.py leaves the paper stale"


def paper_inputs(summary: str, work: Path) -> set[str]:
    """Every file the paper depends on, through the jobs that made its inputs: the closure of
    `--detailed-summary`'s recorded inputs from paper.pdf (paths as the summary prints them,
    relative ones made absolute under the working folder)."""
    inputs: dict[str, list[str]] = {}
    for line in summary.splitlines()[1:]:
        fields = line.split("\t")
        if len(fields) >= 5:
            inputs[fields[0]] = [] if fields[4] == "-" else fields[4].split(",")
    pdf = [out for out in inputs if out.endswith("paper.pdf")]
    assert pdf, "no paper.pdf in the summary"
    seen: set[str] = set()
    todo = list(pdf)
    while todo:
        for dep in inputs.get(todo.pop(), []):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return {str(work / d) if not Path(d).is_absolute() else d for d in seen}
