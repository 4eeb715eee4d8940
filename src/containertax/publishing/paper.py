"""Compile the paper: the hand-written sources of paper/ next to the generated parts, with
latexmk from Debian's TeX Live, into one PDF."""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path

from containertax.core import records
from containertax.core.errors import ContainertaxError
from containertax.publishing import review

log_ = logging.getLogger(__name__)


class PaperError(ContainertaxError, RuntimeError):
    """LaTeX failed; the message holds the end of its log."""


RERUNS = 3
# LaTeX's and latexmk's state between passes: after a failed pass (a full disk, a killed
# job) a cut main.aux made every later build fail ("File ended while scanning definition
# of \LT@i") until it was moved by hand. Derived files only: cleared after a failure.
LATEX_STATE = (".aux", ".fdb_latexmk", ".fls", ".toc", ".out", ".lof", ".lot", ".bbl",
               ".blg", ".log")


def clear_state(build_dir: Path, stem: str) -> list[str]:
    """Remove the LaTeX state of `stem` in build_dir (after a failed build, so that the
    next one starts clean); returns the names removed."""
    removed = []
    for suffix in LATEX_STATE:
        path = build_dir / f"{stem}{suffix}"
        if path.exists():
            path.unlink()
            removed.append(path.name)
    return removed


def failed(build_dir: Path, stem: str, returncode: int, stdout: str) -> PaperError:
    """The error of a failed build (the log's tail), its LaTeX state cleared: the next
    build recovers by itself once the cause is gone."""
    log = build_dir / f"{stem}.log"
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else stdout[-3000:]
    cleared = clear_state(build_dir, stem)
    note = (f"\n(LaTeX's intermediate files {', '.join(cleared)} were removed, so the next "
            "build starts clean once the cause above is fixed.)") if cleared else ""
    return PaperError(f"latexmk failed in {build_dir} (status {returncode}):\n{tail}{note}")


def build(source: Path, build_dir: Path, out: Path, names: list[str] | None = None,
          campaign_root: Path | None = None) -> None:
    """Copy paper/*.tex (and .bib) into the build folder, where figures/, tables/,
    numbers.tex, quality.tex and figures.tex were generated, and run latexmk there (bibtex
    included); then review the result as a reviewer would (review.json beside the PDF;
    with the campaign's folder, against its schedule.csv or runs.csv too)."""
    if shutil.which("latexmk") is None:
        raise PaperError("latexmk is missing: apt-get install latexmk texlive-latex-recommended "
                         "texlive-fonts-recommended (scripts/setup.sh does).")
    for f in list(source.glob("*.tex")) + list(source.glob("*.bib")):
        shutil.copyfile(f, build_dir / f.name)
    proc = subprocess.run(
        ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", "main.tex"],
        cwd=build_dir, capture_output=True, text=True, timeout=600)
    log = build_dir / "main.log"
    # latexmk 4.79 (Debian 12) may stop while LaTeX's last pass still says "Label(s) may
    # have changed" (measured: 2 of 3 clean builds of the h100-matmul paper): run pdflatex
    # again while the log asks, a few times at most; labels that still move are the
    # review's 'rerun' problem
    for _ in range(RERUNS):
        if proc.returncode != 0 or not review.RERUN.search(log.read_text(errors="replace")):
            break
        proc = subprocess.run(
            ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "main.tex"],
            cwd=build_dir, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise failed(build_dir, "main", proc.returncode, proc.stdout)
    problems = review.review(build_dir, build_dir / "main.pdf", names or [],
                             campaign_root=campaign_root)
    for p in problems:
        log_.warning("paper review: %s at %s: %s", p.check, p.where, p.message)
    records.write_json(build_dir / "review.json", review.as_dicts(problems))
    tmp = out.with_name(out.name + ".partial")
    shutil.copyfile(build_dir / "main.pdf", tmp)
    tmp.replace(out)
