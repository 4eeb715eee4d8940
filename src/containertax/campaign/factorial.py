"""Two-level factorial designs over environment options (config key `factorial:`).

One-at-a-time variants estimate each option's effect from its own runs against the
baseline's and no interaction; a two-level (fractional) factorial estimates every main
effect from all runs, half at each level, and the two-option interactions as alias chains
(Box, Hunter & Hunter 2005, ch. 5-6; Montgomery 2017, ch. 8). Each design row becomes one
environment (the base environment with the options of its levels), so scheduling, cells
and records are those of any campaign: every block runs every row (and the declared
environments: the reference and its A/A replica) once, in a seeded random order recorded in
the schedule. The design matrix comes from pyDOE3 (`fracfact`), the generators from the
standard minimum-aberration tables (Montgomery Table 8.14) or the config; the alias
structure is the defining relation's, computed here from the generators.

Pure functions of the config: loaded by campaign/config.py, below statistics.
"""

from __future__ import annotations

import itertools
import string
from dataclasses import dataclass
from typing import Any

from containertax.campaign.configerror import ConfigError

LETTERS = string.ascii_uppercase.replace("I", "")  # I is the identity of the relation

# Minimum-aberration generators of 2^(k-p) designs (Montgomery, Design and Analysis of
# Experiments, Table 8.14; Box, Hunter & Hunter Table 6.22): (k, resolution) -> generators
# of the added factors, in letters of the k - p basic ones. The fewest runs at that
# resolution.
STANDARD: dict[tuple[int, int], tuple[str, ...]] = {
    (3, 3): ("C=AB",),
    (4, 4): ("D=ABC",),
    (5, 3): ("D=AB", "E=AC"),
    (5, 5): ("E=ABCD",),
    (6, 3): ("D=AB", "E=AC", "F=BC"),
    (6, 4): ("E=ABC", "F=BCD"),
    (6, 6): ("F=ABCDE",),
    (7, 3): ("D=AB", "E=AC", "F=BC", "G=ABC"),
    (7, 4): ("E=ABC", "F=BCD", "G=ACD"),
    (7, 5): ("F=ABCD", "G=ABDE"),
    (8, 4): ("F=ABC", "G=ABD", "H=BCDE"),
    (8, 5): ("G=ABCD", "H=ABEF"),
    (9, 4): ("F=BCDE", "G=ACDE", "H=ABDE", "J=ABCE"),
    (10, 4): ("G=BCDF", "H=ACDF", "J=ABDE", "K=ABCE"),
}


@dataclass(frozen=True)
class Factor:
    letter: str
    id: str
    low: dict[str, Any]   # options at the low level ({}: the base environment's own)
    high: dict[str, Any]
    description: str

    def level_text(self, sign: int) -> str:
        opts = self.high if sign > 0 else self.low
        return ", ".join(f"{k}={v}" for k, v in opts.items()) or "base"


@dataclass(frozen=True)
class Design:
    """A two-level design: factors, generators (empty: full), and its rows (+1/-1)."""

    factors: tuple[Factor, ...]
    generators: tuple[str, ...]
    rows: tuple[tuple[int, ...], ...]
    base: str
    prefix: str

    @property
    def k(self) -> int:
        return len(self.factors)

    @property
    def p(self) -> int:
        return len(self.generators)

    @property
    def name(self) -> str:
        return f"2^{self.k}" if not self.p else f"2^({self.k}-{self.p})"

    @property
    def resolution(self) -> int | None:
        """Length of the shortest word of the defining relation; None for a full design."""
        words = defining_relation(self.generators)
        return min(len(w) for w in words) if words else None

    def env_id(self, index: int) -> str:
        return f"{self.prefix}{index + 1:0{max(2, len(str(len(self.rows))))}d}"

    def env_ids(self) -> list[str]:
        return [self.env_id(i) for i in range(len(self.rows))]

    def row_of(self, env_id: str) -> dict[str, int] | None:
        ids = self.env_ids()
        if env_id not in ids:
            return None
        return {f.letter: s for f, s in zip(self.factors, self.rows[ids.index(env_id)],
                                             strict=True)}

    def aliases(self, max_order: int = 2) -> list[list[str]]:
        return alias_chains([f.letter for f in self.factors], self.generators, max_order)

    def estimable(self) -> list[str]:
        """The model's terms: each main effect, and one two-factor interaction per alias
        chain of two-factor interactions that holds no main effect (its first in order)."""
        terms = [f.letter for f in self.factors]
        for chain in self.aliases(2):
            if len(chain[0]) == 2:
                terms.append(chain[0])
        return terms


def _product(a: str, b: str) -> str:
    """Product of two effect words: letters that appear once (A*A = I)."""
    return "".join(sorted(set(a) ^ set(b)))


def defining_relation(generators: tuple[str, ...] | list[str]) -> list[str]:
    """Every word of the defining relation I = ... (the generators' words and their
    products), shortest first."""
    words = []
    for g in generators:
        left, right = g.split("=")
        words.append(_product(left.strip(), right.strip()))
    out = set()
    for r in range(1, len(words) + 1):
        for combo in itertools.combinations(words, r):
            w = ""
            for x in combo:
                w = _product(w, x)
            out.add(w)
    out.discard("")
    return sorted(out, key=lambda w: (len(w), w))


def alias_chains(letters: list[str], generators: tuple[str, ...] | list[str],
                 max_order: int = 2) -> list[list[str]]:
    """Alias chains of every effect of order <= max_order (main effects, two-factor
    interactions): each chain lists the effects of that order confounded with each other,
    shortest first; effects of higher order are left out (assumed negligible)."""
    words = defining_relation(generators)
    effects = ["".join(c) for r in range(1, max_order + 1)
               for c in itertools.combinations(letters, r)]
    seen: set[str] = set()
    chains = []
    for e in effects:
        if e in seen:
            continue
        chain = [e] + sorted({_product(e, w) for w in words
                              if 0 < len(_product(e, w)) <= max_order},
                             key=lambda x: (len(x), x))
        seen.update(chain)
        chains.append(chain)
    return chains


def matrix(k: int, generators: tuple[str, ...]) -> list[tuple[int, ...]]:
    """The design's rows in standard (Yates) order of the basic factors, +1/-1, from
    pyDOE3's fracfact (its first column varies slowest: reversed to Yates order)."""
    from pyDOE3 import fracfact

    basic = k - len(generators)
    added = {g.split("=")[0].strip(): g.split("=")[1].strip() for g in generators}
    columns = []
    for i in range(k):
        letter = LETTERS[i]
        columns.append(letter.lower() if i < basic else added[letter].lower())
    rows = fracfact(" ".join(columns))
    out = [tuple(int(v) for v in row) for row in rows]
    # Yates order: A fastest
    return sorted(out, key=lambda r: tuple(reversed(r[:basic])))


def generators_for(k: int, resolution: int | None, given: list[str] | None,
                   where: str) -> tuple[str, ...]:
    """The generators: given in the config, else the standard table's for (k, resolution),
    else pyDOE3's fracfact_by_res; none (full design) without a resolution."""
    letters = LETTERS[:k]
    if given:
        for g in given:
            left, sep, right = g.partition("=")
            left, right = left.strip(), right.strip()
            if (not sep or len(left) != 1 or left not in letters or not right
                    or set(right) - set(letters) or left in right):
                raise ConfigError(f"{where}.generators': {g!r} is not a generator of these "
                                  f"{k} factors; write e.g. 'E=ABC' (an added factor = a "
                                  f"product of others, letters {letters}).")
        basic = k - len(given)
        if sorted(g.split("=")[0].strip() for g in given) != list(letters[basic:]):
            raise ConfigError(f"{where}.generators': with {k} factors and {len(given)} "
                              f"generators they define {list(letters[basic:])}, in terms of "
                              f"{letters[:basic]}.")
        if any(set(g.split("=")[1].strip()) - set(letters[:basic]) for g in given):
            raise ConfigError(f"{where}.generators': each must be a product of the basic "
                              f"factors {letters[:basic]} only.")
        gens = tuple(g.replace(" ", "") for g in given)
        if resolution is not None:
            words = defining_relation(gens)
            got = min(len(w) for w in words)
            if got < resolution:
                raise ConfigError(f"{where}.generators': they give resolution {got}, below "
                                  f"the stated resolution {resolution}; choose others (e.g. "
                                  "leave generators out for the standard table's).")
        return gens
    if resolution is None or resolution > k:
        return ()
    if (k, resolution) in STANDARD:
        return STANDARD[(k, resolution)]
    from pyDOE3 import fracfact_by_res

    try:
        columns = fracfact_by_res(k, resolution)  # only to learn the run count
    except ValueError:
        raise ConfigError(f"{where}.resolution': no two-level design of {k} factors has "
                          f"resolution {resolution}; lower it.") from None
    basic = (len(columns) - 1).bit_length()
    combos = ("".join(c) for r in range(resolution - 1, basic + 1)
              for c in itertools.combinations(LETTERS[:basic], r))
    return tuple(f"{LETTERS[basic + i]}={w}"
                 for i, w in enumerate(itertools.islice(combos, k - basic)))


def design_of(raw: dict[str, Any], source: str) -> Design | None:
    """The campaign's design (None without a `factorial:` key)."""
    spec = raw.get("factorial")
    if not spec:
        return None
    where = f"{source}: key 'factorial"
    factors_spec = spec.get("factors") or {}
    if len(factors_spec) < 2 or len(factors_spec) > len(LETTERS):
        raise ConfigError(f"{where}.factors': give 2 to {len(LETTERS)} factors, each with "
                          "its low and high options.")
    factors = []
    owner: dict[str, str] = {}
    for i, (fid, f) in enumerate(factors_spec.items()):
        low, high = dict(f.get("low") or {}), dict(f.get("high") or {})
        if low == high:
            raise ConfigError(f"{where}.factors.{fid}': its low and high levels are the same "
                              "options; make them differ.")
        for key in set(low) | set(high):
            if key in owner:
                raise ConfigError(f"{where}.factors.{fid}': option {key!r} is set by factor "
                                  f"{owner[key]} too; one option belongs to one factor "
                                  "(merge them into one factor with two levels).")
            owner[key] = fid
        factors.append(Factor(LETTERS[i], fid, low, high, f.get("description", "")))
    gens = generators_for(len(factors), spec.get("resolution"), spec.get("generators"),
                          where)
    return Design(tuple(factors), gens, tuple(matrix(len(factors), gens)), spec["base"],
                  spec.get("prefix", "f"))


def expand(data: dict[str, Any], source: str) -> dict[str, Any]:
    """The config with one environment per design row added (after the declared ones):
    `extends: <base>` with the options of its levels, a description naming them, and
    `levels` (factor -> -1/+1); the declared environments stay (the reference, its A/A
    replica), so each block runs them too."""
    design = design_of(data, source)
    if design is None:
        return data
    envs = dict(data.get("environments") or {})
    if design.base not in envs:
        raise ConfigError(f"{source}: key 'factorial.base': '{design.base}' is not an "
                          f"environment; choose one of {sorted(envs)}.")
    for i, row in enumerate(design.rows):
        env_id = design.env_id(i)
        declared = envs.get(env_id)
        if declared is not None and not (isinstance(declared, dict)
                                         and declared.get("levels") is not None):
            raise ConfigError(f"{source}: key 'environments.{env_id}': the id of design row "
                              f"{i + 1}; rename the environment or set factorial.prefix.")
        options: dict[str, Any] = {}
        for f, s in zip(design.factors, row, strict=True):
            options.update(f.high if s > 0 else f.low)
        text = "; ".join(f"{f.id} {'+' if s > 0 else '-'}"
                         for f, s in zip(design.factors, row, strict=True))
        envs[env_id] = {"extends": design.base, "description": f"row {i + 1}: {text}",
                        "options": options,
                        "levels": {f.id: s for f, s in zip(design.factors, row, strict=True)}}
    return {**data, "environments": envs}


def render(design: Design, runs_per_block: int, blocks: int, models: int) -> str:
    """What `containertax check` prints: factors, rows, alias structure, runs."""
    res = design.resolution
    roman = {3: "III", 4: "IV", 5: "V", 6: "VI"}.get(res or 0, str(res))
    lines = [f"factorial design {design.name}"
             f"{'' if res is None else ' resolution ' + roman}, {len(design.rows)} rows "
             f"(environments {design.env_ids()[0]}..{design.env_ids()[-1]}, each "
             f"{design.base} with its levels); generators: "
             f"{', '.join(design.generators) or 'none (full factorial)'}",
             "  factor  id                    low (-)                       high (+)"]
    for f in design.factors:
        lines.append(f"  {f.letter:<6}  {f.id:<20}  {f.level_text(-1):<28}  "
                     f"{f.level_text(+1)}")
    words = defining_relation(design.generators)
    if words:
        lines.append(f"  defining relation: I = {' = '.join(words)}")
    lines.append("  alias structure (effects up to two-factor interactions):")
    for chain in design.aliases(2):
        lines.append(f"    {' = '.join(chain)}")
    lines.append("  rows:  " + "  ".join(f.letter for f in design.factors))
    for env_id, row in zip(design.env_ids(), design.rows, strict=True):
        lines.append(f"    {env_id}  " + "  ".join("+" if s > 0 else "-" for s in row))
    lines.append(f"  runs per block: {runs_per_block} ({len(design.rows)} design rows + "
                 f"{runs_per_block - len(design.rows)} declared environments), "
                 f"{blocks} blocks x {models} models = {runs_per_block * blocks * models} runs")
    return "\n".join(lines)
