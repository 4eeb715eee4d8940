"""How a value is printed, in one place below both sides of the seam: LaTeX escaping of a
name or a message (a negative number's sign set as a minus), and the one printing of a
relative difference with its interval. Statistics writes these texts into the findings
table (and into the design and stopping sentences it derives); publishing prints them
unchanged (publishing/tables.py builds its cells on them)."""

from __future__ import annotations

import math
import re
from typing import Any

# an underscore may break the line after it: ids such as docker_shm_8g are long words
_TEX = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_\allowbreak{}", "{": r"\{",
        "}": r"\}",
        "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}",
        # OT1 text fonts have no < or > (they print as inverted marks): use the math ones
        "<": r"\ensuremath{<}", ">": r"\ensuremath{>}"}


# a hyphen that starts a number ('-197', '[-4.5', '(-.5'), not one inside a word, a name
# or a date ('qwen2-0.5b', 'itl_-1', '2026-11-27', 'n-1') nor part of a dash ('1--2')
_SIGN = re.compile(r"(?<![\w.\-])-(?=\.?\d)")
# the minus sign, in text or in math: an ASCII hyphen in text is a hyphen (shorter than a
# minus), and TeX may break a line after it ('[-' / '197', which pdftotext then reads as
# '[197'); a formula of a lone minus is never broken and sets no space after it
MINUS = r"\ensuremath{-}"
_MARK = "\ue000"  # a private-use character marks a sign until the text is escaped


NUMBER_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def number_word(n: int) -> str:
    """A count as the text writes it: a word up to nine ('no' for zero), digits beyond."""
    return NUMBER_WORDS[n] if 0 <= n < len(NUMBER_WORDS) else str(n)


def tex(text: Any) -> str:
    """Text escaped for TeX, with a negative number's sign as a true minus (MINUS): the
    one printing of generated text, names and signed numbers alike."""
    marked = _SIGN.sub(_MARK, str(text))
    return re.sub(r"[&%$#_{}~^\\<>]", lambda m: _TEX[m.group()], marked).replace(_MARK, MINUS)


PCT_CAP = 1e4  # 1,000,000 %: beyond it a ratio is printed as a bound, never as 'inf'
# decimals of a per cent at most: a ratio to 1e-11, far below any measured spread (a
# narrower interval comes from identical differences, which have none: no interval)
MAX_DECIMALS = 9


def missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _fmt_pct(x: float, digits: int) -> str:
    text = f"{100 * x:+.{digits}f}"
    return text[1:] if float(text) == 0 else text  # no signed zero


def interval_texts(est: float, low: float, high: float, max_digits: int = MAX_DECIMALS
                   ) -> tuple[str, str, str]:
    """Estimate, lower and upper end in per cent (no $), with as many decimals (1 to
    max_digits) as it takes to print the three values apart, no non-zero value as zero
    and no ratio above zero as -100 %: '+0.05 [-0.03, +0.12]', never '0.0 [0.0, +0.1]';
    near -100 % (a container a million times faster) '-99.9999003 [-99.9999008,
    -99.9998999]', never '-100.000 [-100.000, -100.000]'. '--' for a missing value; a
    ratio beyond PCT_CAP as a bound. The one formatting of every printed relative
    difference (statistics/findings.py stores its result per finding). A lower end below
    -100 % (a raw-scale interval of a metric that cannot be negative) is printed as -100 %,
    as the findings table truncates it: the A/A texts print the finding's own interval."""
    if not missing(low) and float(low) < -1:
        low = -1.0
    vals = [est, low, high]
    present = [v for v in vals if not missing(v) and abs(v) < PCT_CAP]
    digits = 1
    while digits < max_digits:
        shown = [_fmt_pct(v, digits) for v in present]
        if (len(set(shown)) == len(set(present))
                and not any(float(t) in (0, -100) and v not in (0, -1)
                            for t, v in zip(shown, present, strict=True))):
            break
        digits += 1

    def one(v: float) -> str:
        if missing(v):
            return "--"
        if abs(v) >= PCT_CAP:
            return ">{+}10^{6}" if v > 0 else "<{-}10^{6}"
        return _fmt_pct(v, digits)
    return one(est), one(low), one(high)
