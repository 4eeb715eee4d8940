"""The paper never runs into its margin, whatever the values and words the records put in
it: a committed campaign's paper is built once, then its generated values (numbers.tex)
and data-quality findings (quality.tex) are replaced by adversarial ones (long signed
numbers, long identifiers joined by '/' and '-', long lists) and the paper is compiled
again; the LaTeX log must hold no overfull box beyond the review's tolerance. The
replacements are drawn from fixed seeds, so the outcome depends on the code alone.

Planted case: one value with an unbreakable 60-letter word must be reported (the check can
fail). A second committed paper, h100-sani-cold's (built in seconds), holds no overfull box
as built, nor with its environment's id replaced by a one-word id as long as a real kind's
(charliecloud, which ran 5.4 pt into the margin of demo-runtimes' tables before the L
column allowed its first word to break; the one-line heading of its headline table put
h100-sani-cold's 2.5 pt into the margin).

The sweep covers a stopping paper (h100-stopping-exact: the looks' section) and the H100
study's paper (#39). The study's first sweep found two overflows a long value makes: the
title block's author table, which never breaks a line (137 pt; now a paragraph of the
text's width), and the configuration's name set in typewriter type, whose spaces do not
stretch (125 pt; now the macro ctxcode, with stretchable spaces)."""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from containertax.publishing import review
from tests.conftest import REPO

pytestmark = pytest.mark.slow

CAMPAIGN = "h100-engine-gqa"
SMALL = "h100-sani-cold"  # one model, native and docker
# the sweep: an LLM campaign, and a stopping campaign, whose paper adds the looks' section
# (sequential.tex) and its values (#39: the sweep covers stopping papers too)
SWEPT = [CAMPAIGN, "h100-stopping-exact"]
IDS = ["qwen2.5-72b-instruct-fp8", "llama-3.1-nemotron-70b-instruct-hf",
       "docker-optimised-shm60g-cpuset", "native-aa", "mixtral-8x7b-instruct-v0.1-fp8"]


@pytest.fixture(scope="module")
def built(committed_paper) -> Path:
    """The paper folder of a committed campaign, built from its raw records (once per
    test run: conftest.committed_paper)."""
    return committed_paper(CAMPAIGN) / "results" / CAMPAIGN / "paper"


@pytest.fixture(scope="module", params=SWEPT)
def swept(request, committed_paper) -> Path:
    """Each swept campaign's paper folder (conftest.committed_paper: built once per run)."""
    return committed_paper(request.param) / "results" / request.param / "paper"


def adversarial(value: str, rng: random.Random) -> str:
    """A value of the same kind, as long and awkward as real records could make it."""
    if value.isdigit() or "\\" in value and not re.fullmatch(r"[-+$\\,.\d%{}]+", value):
        return value  # conditions and counts (the text compares them), LaTeX constructs
    if re.fullmatch(r"[-+$\\,.\d%{}]+", value):
        return rng.choice(["$-$123\\,456.789", "+99.999\\,\\%", "1.23e-12", "987\\,654\\,321"])
    words = [rng.choice(IDS) for _ in range(rng.randrange(1, 6))]
    return ", ".join(words[:-1]) + (" and " if len(words) > 1 else "") + words[-1]


def adversarial_numbers(text: str, rng: random.Random) -> str:
    """numbers.tex with every generated value replaced by an adversarial one."""
    return re.sub(r"\\ctxdef\{([^}]*)\}\{(.*)\}$",
                  lambda m: f"\\ctxdef{{{m.group(1)}}}{{{adversarial(m.group(2), rng)}}}",
                  text, flags=re.M)


def compile_with(paper: Path, work: Path, numbers: str, quality: str | None = None,
                 main: str = "main.tex") -> str:
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(paper, work)
    (work / "numbers.tex").write_text(numbers)
    if quality is not None:
        (work / "quality.tex").write_text(quality)
    for f in list((REPO / "paper").glob("*.tex")) + list((REPO / "paper").glob("*.bib")):
        shutil.copyfile(f, work / f.name)
    proc = subprocess.run(["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error",
                           main], cwd=work, capture_output=True, text=True, timeout=300)
    log = (work / main.replace(".tex", ".log")).read_text(errors="replace")
    assert proc.returncode == 0, "\n".join(
        log[m.start():m.start() + 400] for m in re.finditer(r"^! ", log, re.M))
    return log


def overfull(log: str) -> list[review.Problem]:
    return [p for p in review.check_log(log) if p.check == "overfull"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_paper_never_overflows_whatever_the_values(swept, tmp_path, seed):
    rng = random.Random(seed)
    numbers = adversarial_numbers((swept / "numbers.tex").read_text(), rng)
    # six findings and six excluded values, listed in quality.tex below
    numbers = re.sub(r"\\ctxdef\{(findings|excluded)\}\{\d+\}$", r"\\ctxdef{\1}{6}", numbers,
                     flags=re.M)
    lines = ["\\ctxdef{quality-values}{987654}", "\\ctxdef{has-exclude-rules}{1}",
             "\\ctxdef{exclude-rules}{" + ", ".join(IDS) + "}",
             "\\newcommand{\\qualityfindings}{%"] + [
        "\\qualityfinding{Check}{warning}{" + " ".join(
            rng.choice([f"{rng.choice(IDS)}/{rng.choice(IDS)}/rep{rng.randrange(99):03d}",
                        f"{rng.uniform(-99, 99):+.2f}\\,\\% [{rng.uniform(-99, 0):+.2f}, "
                        f"{rng.uniform(0, 99):+.2f}]", "Bonferroni $p$ 0.000123;",
                        "identical environments measured as different:"])
            for _ in range(rng.randrange(5, 40))) + "}"
        for _ in range(6)] + ["}", "\\newcommand{\\qualityexcluded}{%"] + [
        f"\\excludedvalue{{{rng.choice(IDS)}}}{{{rng.choice(IDS)}}}{{{rng.randrange(999)}}}"
        f"{{{rng.choice(IDS)}}}{{$-$123\\,456.789}}{{outliers, duplicate}}"
        for _ in range(6)] + ["}"]
    log = compile_with(swept, tmp_path / "paper", numbers, "\n".join(lines) + "\n")
    assert not overfull(log), overfull(log)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_study_paper_never_overflows_whatever_the_values(committed_study, tmp_path, seed):
    """The H100 study's paper (#39: the sweep covers study papers too), its numbers.tex
    replaced as above; the authors' files and the generated tables stay as built."""
    paper = committed_study("h100") / "results" / "study-h100" / "paper"
    numbers = adversarial_numbers((paper / "numbers.tex").read_text(), random.Random(seed))
    assert numbers != (paper / "numbers.tex").read_text()
    log = compile_with(paper, tmp_path / "paper", numbers, main="study.tex")
    assert not overfull(log), overfull(log)


def test_an_unbreakable_word_is_reported_as_overfull(built, tmp_path):
    text = (built / "numbers.tex").read_text()
    numbers = re.sub(r"\\ctxdef\{reference\}\{.*\}$", r"\\ctxdef{reference}{" + "x" * 60 + "}",
                     text, count=1, flags=re.M)
    assert numbers != text
    found = overfull(compile_with(built, tmp_path / "paper", numbers))
    assert found, "a 60-letter word in the text was not reported"


@pytest.fixture(scope="module")
def small(committed_paper) -> Path:
    return committed_paper(SMALL) / "results" / SMALL / "paper"


def test_a_committed_paper_as_built_has_no_overfull_box(small):
    log = (small / "main.log").read_text(errors="replace")
    assert not overfull(log), overfull(log)


def test_a_one_word_environment_id_fits_its_column(small, tmp_path):
    """Every generated table with the environment 'docker' called 'charliecloud' (a real
    kind's name, one word), compiled again: the id breaks in its column."""
    work = tmp_path / "tables"
    shutil.copytree(small / "tables", work)
    for table in work.glob("*.tex"):
        table.write_text(re.sub(r"\bdocker\b", "charliecloud", table.read_text()))
    assert "charliecloud" in (work / "headline.tex").read_text()
    paper = tmp_path / "built"
    shutil.copytree(small, paper)
    shutil.rmtree(paper / "tables")
    shutil.copytree(work, paper / "tables")
    log = compile_with(paper, tmp_path / "paper", (small / "numbers.tex").read_text())
    assert not overfull(log), overfull(log)
