"""What a reviewer would reject in a built paper, found in the LaTeX log, the PDF and the
figure files: undefined references or citations, '??' in the text, overfull boxes beyond a
tolerance, text set below 8 pt (a shrunken table, a tiny figure label), a figure whose
labels are raw column names instead of the metric registry's words, text cut at a figure's
edge, a raw metric or column name in the text (a quality finding, a table's note) and a
count that reads wrong ('Of the 1 comparison', '0 remain significant').

Reads what LaTeX and matplotlib produced, not what the generator meant to produce.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

MIN_FONT_PT = 8.0
OVERFULL_PT = 1.0  # TeX's own \hfuzz is 0.1 pt; a reader sees a box 1 pt into the margin


@dataclass(frozen=True)
class Problem:
    check: str
    where: str
    message: str


def check_log(log: str, overfull_pt: float = OVERFULL_PT) -> list[Problem]:
    out = []
    for kind, pattern in (("undefined-reference", r"Reference `([^']+)' on page (\d+) undefined"),
                          ("undefined-citation", r"Citation `([^']+)' on page (\d+) undefined")):
        for key, page in sorted(set(re.findall(pattern, log))):
            out.append(Problem(kind, f"page {page}", f"{key} is undefined"))
    if "There were undefined references" in log and not out:
        out.append(Problem("undefined-reference", "log", "LaTeX reports undefined references"))
    if re.search(r"Label\(s\) may have changed|Rerun to get", log):
        out.append(Problem("rerun", "log", "LaTeX asks for another run (cross-references "
                                           "unresolved)"))
    for m in re.finditer(
            r"Overfull \\([hv]box) \((\d+(?:\.\d+)?)pt too (?:wide|high)\) (.*)", log):
        box, amount, where = m.groups()
        if float(amount) > overfull_pt:
            files = re.findall(r"\(\./([^\s()]+\.tex)", log[:m.start()])
            place = f"{files[-1] if files else 'main.tex'} {where.strip()}"
            out.append(Problem("overfull", place[:100],
                               f"{box} {amount} pt too large (tolerance {overfull_pt} pt)"))
    return out


def pdf_text(pdf: Path) -> str:
    proc = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True,
                          text=True, check=True)
    return proc.stdout


def check_question_marks(pdf: Path) -> list[Problem]:
    out = []
    for page, text in enumerate(pdf_text(pdf).split("\f"), 1):
        for m in re.finditer(r"\?\?", text):
            context = text[max(0, m.start() - 30):m.end() + 10].replace("\n", " ")
            out.append(Problem("unresolved-??", f"page {page}", f"'??' in '{context.strip()}'"))
        for m in re.finditer(r"[¡¿]", text):  # '<' or '>' typeset in OT1 text
            context = text[max(0, m.start() - 30):m.end() + 10].replace("\n", " ")
            out.append(Problem("ot1-glyph", f"page {page}",
                               f"'{m.group()}' for '<' or '>' in '{context.strip()}'"))
    return out


# Counts a sentence must word differently: 'Of the 1 comparison' ('The one comparison'),
# '0 remain' ('none remains'), '1 comparisons', a sentence opening with a numeral.
_COUNT_PHRASES = [
    (r"\b[Oo]f the [01]\s+[a-z]", "a count of one or zero after 'of the'"),
    (r"\b1\s+(?:[a-z]+-)?[a-z]+s\s+(?:remain|are|were)\b", "one with a plural"),
    (r"\b0\s+(?:remains?|is|are|was|were)\b", "zero in digits as the subject"),
    (r"(?:^|[.!?]\s+)[0-9]+\s+[a-z][a-z\s-]{0,40}?\s(?:remain|remains|are|is|were|was)\b",
     "a sentence opening with a numeral"),
]


def prose_text(pdf: Path) -> str:
    """The PDF's text in reading order, one line per paragraph line: a name that TeX broke
    after its underscore ('token_' / 'throughput') is joined again."""
    proc = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True,
                          check=True)
    return re.sub(r"_\s*\n\s*", "_", proc.stdout)


def check_text(pdf: Path, names: list[str]) -> list[Problem]:
    """Raw metric or column names in the running text and tables (a quality message, a
    note of the tests table), and counts that read wrong. The OT1 fonts draw an escaped
    underscore as a rule, which the PDF's text shows as a space: a name is looked for with
    its underscores and, where it has two or more (distinctive enough not to be prose:
    'itl p99 s', not 'page cache'), with spaces; check_sources finds every escaped name."""
    out = []
    forms = [f for f in raw_names(names) if "_" in f or f.count(" ") >= 2]
    for page, text in enumerate(prose_text(pdf).split("\f"), 1):
        flat = " ".join(text.split())
        hits = sorted({f for f in forms
                       if re.search(rf"(?<![\w.]){re.escape(f)}(?![\w])", flat)})
        if hits:
            out.append(Problem("raw-name-in-text", f"page {page}",
                               f"raw metric or column name(s) in the text: {', '.join(hits)} "
                               "(use the metric registry's label)"))
        for pattern, what in _COUNT_PHRASES:
            for m in re.finditer(pattern, flat):
                context = flat[max(0, m.start() - 20):m.end() + 20].strip()
                out.append(Problem("count-phrasing", f"page {page}",
                                   f"{what}: '{context}'"))
    return out


def check_sources(build_dir: Path, names: list[str]) -> list[Problem]:
    """A metric or column name typeset as it is spelled in the data (escaped for TeX by
    tables.tex: 'token\\_\\allowbreak{}throughput'), in any TeX file of the build
    (generated or not; comments left out): the reader should see its label."""
    from containertax.analysis.tables import tex

    escaped = {n: tex(n) for n in names if "_" in n}
    out = []
    for path in sorted(build_dir.rglob("*.tex")):
        text = re.sub(r"(?<!\\)%.*", "", path.read_text(errors="replace"))
        hits = sorted(n for n, form in escaped.items()
                      if re.search(rf"(?<![\w]){re.escape(form)}(?![\w\\])", text))
        if hits:
            out.append(Problem("raw-name-in-text", str(path.relative_to(build_dir)),
                               f"raw metric or column name(s) typeset: {', '.join(hits)} "
                               "(use the metric registry's label)"))
    return out


def _size(c: dict) -> float:
    """The printed size of a glyph: pdfminer's size is the box height, which for rotated
    text (a figure's y label) is the advance, not the size."""
    return c["size"] if c.get("upright", True) else c["x1"] - c["x0"]


def _is_script(c: dict, big: list[dict], gap: float = 4.0) -> bool:
    """A small glyph right next to normal-size text on the same line: an exponent or
    index, which LaTeX sets smaller by design."""
    for b in big:
        if b["top"] < c["bottom"] and b["bottom"] > c["top"] and (
                -gap <= c["x0"] - b["x1"] <= gap or -gap <= b["x0"] - c["x1"] <= gap):
            return True
    return False


def _clusters(chars: list[dict], gap: float = 1.5) -> list[list[dict]]:
    """Runs of adjacent glyphs on one line."""
    runs: list[list[dict]] = []
    for c in sorted(chars, key=lambda c: (round(c["bottom"]), c["x0"])):
        last = runs[-1][-1] if runs else None
        if last and abs(last["bottom"] - c["bottom"]) < 1 and -0.5 <= c["x0"] - last["x1"] <= gap:
            runs[-1].append(c)
        else:
            runs.append([c])
    return runs


def check_fonts(pdf: Path, min_pt: float = MIN_FONT_PT) -> list[Problem]:
    """Glyphs printed below min_pt (after every scaling: a \\resizebox or a figure scaled
    down shows here), except short exponents and indices attached to normal text."""
    import pdfplumber

    out = []
    with pdfplumber.open(pdf) as doc:
        for number, page in enumerate(doc.pages, 1):
            chars = [dict(c, size=_size(c)) for c in page.chars if c["text"].strip()]
            small = [c for c in chars if c["size"] < min_pt - 0.05]
            if not small:
                continue
            big = [c for c in chars if c["size"] >= min_pt - 0.05]
            bad = [run for run in _clusters(small)
                   if not (len(run) <= 4 and (_is_script(run[0], big) or
                                              _is_script(run[-1], big)))]
            if bad:
                sizes = sorted({round(c["size"], 1) for run in bad for c in run})
                sample = " ".join("".join(c["text"] for c in run) for run in bad[:6])
                out.append(Problem("font-below-min", f"page {number}",
                                   f"{sum(map(len, bad))} glyphs at {sizes} pt (< {min_pt} pt), "
                                   f"e.g. '{sample[:80]}'"))
    return out


def raw_names(names: list[str]) -> list[str]:
    """Column names as a careless label shows them: 'cpu_util_pct' and 'cpu util pct'
    (the spaced form only where it is not also the registry's own label, e.g. 'token
    throughput')."""
    from containertax.analysis.metrics import REGISTRY, TELEMETRY

    labels = {m.label.lower() for m in [*REGISTRY.values(), *TELEMETRY.values()]}
    forms = set()
    for n in names:
        if "_" in n:
            forms.add(n)
            if n.replace("_", " ").lower() not in labels:
                forms.add(n.replace("_", " "))
    return sorted(forms, key=len, reverse=True)


def check_figure_labels(figures: list[Path], names: list[str]) -> list[Problem]:
    """A figure whose text holds a raw column name (with underscores, or with them turned
    into spaces) instead of its label and unit."""
    out = []
    forms = raw_names(names)
    for fig in figures:
        text = " ".join(pdf_text(fig).split())
        hits = [f for f in forms if re.search(rf"(?<![\w]){re.escape(f)}(?![\w])", text)]
        hits += re.findall(r"\b[a-z]+(?:_[a-z0-9]+)*_(?:s|pct|mib|gib|w|mhz|c|j|us|gbps)\b",
                           text)
        if hits:
            out.append(Problem("raw-label", fig.name,
                               f"raw column name(s) as labels: {', '.join(sorted(set(hits)))}"))
    return out


def check_figure_edges(figures: list[Path], slack: float = 0.5) -> list[Problem]:
    """Text cut at a figure's edge: a label longer than its panel, a legend outside the
    figure (the PDF keeps the glyphs, the page box hides them)."""
    import pdfplumber

    out = []
    for fig in figures:
        with pdfplumber.open(fig) as doc:
            for page in doc.pages:
                cut = [c for c in page.chars if c["text"].strip() and (
                    c["x0"] < -slack or c["x1"] > page.width + slack
                    or c["top"] < -slack or c["bottom"] > page.height + slack)]
                if cut:
                    out.append(Problem("cut-label", fig.name,
                                       f"{len(cut)} glyphs outside the figure, e.g. "
                                       f"'{''.join(c['text'] for c in cut[:30])}'"))
    return out


def review(build_dir: Path, pdf: Path, names: list[str],
           overfull_pt: float = OVERFULL_PT, min_pt: float = MIN_FONT_PT) -> list[Problem]:
    """Every problem of a built paper (main.log and figures/ beside the PDF)."""
    log = build_dir / "main.log"
    problems = check_log(log.read_text(errors="replace"), overfull_pt) if log.exists() else [
        Problem("no-log", str(log), "no LaTeX log to check")]
    problems += check_question_marks(pdf)
    problems += check_text(pdf, names)
    problems += check_sources(build_dir, names)
    problems += check_fonts(pdf, min_pt)
    figs = sorted((build_dir / "figures").glob("*.pdf"))
    problems += check_figure_labels(figs, names)
    problems += check_figure_edges(figs)
    return problems


def as_dicts(problems: list[Problem]) -> list[dict[str, str]]:
    return [asdict(p) for p in problems]
