"""Compile the paper: the hand-written sources of paper/ next to the generated parts, with
latexmk from Debian's TeX Live, into one PDF."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


class PaperError(RuntimeError):
    """LaTeX failed; the message holds the end of its log."""


def build(source: Path, build_dir: Path, out: Path) -> None:
    """Copy paper/*.tex (and .bib) into the build folder, where figures/, tables/,
    numbers.tex, quality.tex and figures.tex were generated, and run latexmk there."""
    if shutil.which("latexmk") is None:
        raise PaperError("latexmk is missing: apt-get install latexmk texlive-latex-recommended "
                         "texlive-fonts-recommended (scripts/setup.sh does).")
    for f in list(source.glob("*.tex")) + list(source.glob("*.bib")):
        shutil.copyfile(f, build_dir / f.name)
    proc = subprocess.run(
        ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", "main.tex"],
        cwd=build_dir, capture_output=True, text=True, timeout=600)
    log = build_dir / "main.log"
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else proc.stdout[-3000:]
        raise PaperError(f"latexmk failed in {build_dir} (status {proc.returncode}):\n{tail}")
    tmp = out.with_name(out.name + ".partial")
    shutil.copyfile(build_dir / "main.pdf", tmp)
    tmp.replace(out)
