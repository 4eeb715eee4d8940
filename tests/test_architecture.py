"""The package's shape, from its imports (module-level and inside functions, read with ast):
no import circles between modules, and no import from a lower layer into a higher one
(core < workloads < runtimes < campaign < execution < statistics < publishing < cli).
docs/architecture.md describes the layers; a late import inside a function is an import all
the same.

What the tests hold of the seam between statistics (what is true of the data) and
publishing (what is said, and how it looks): no statistics module imports a publishing
module (the layer order); within statistics, the findings module (stats/findings.csv) is
imported only by statistics.steps, the rule steps that write it, so no statistics result is
computed from the findings; statistics.texts, the printing that both sides share, imports
nothing of the package. Publishing may import statistics (its report reads findings.csv;
the status page computes interim comparisons of a running campaign); that direction is not
restricted further here."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = "containertax"
LAYERS = ("core", "workloads", "runtimes", "campaign", "execution", "statistics", "publishing",
          "cli", "__main__")
SRC = REPO / "src"


def modules(src: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py of the package under src."""
    out = {}
    for path in sorted((src / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The package module an imported name lives in (the longest known prefix)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(src: Path) -> dict[str, set[str]]:
    """Module -> the package modules it imports anywhere in its file."""
    known = modules(src)
    graph: dict[str, set[str]] = {m: set() for m in known}
    for mod, path in known.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's own package
                    pkg = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = ".".join(pkg[: len(pkg) - node.level + 1] + ([base] if base else []))
                # `from pkg import sub` imports the submodule where one exists
                names = [f"{base}.{a.name}" for a in node.names]
            for name in names:
                if name.split(".")[0] != PACKAGE:
                    continue
                target = _resolve(name, known)
                if target and target != mod:
                    graph[mod].add(target)
    return graph


def layer(module: str) -> int:
    """The layer's rank; the package's own __init__ (its version) counts as ground."""
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 else 0


def circles(graph: dict[str, set[str]]) -> list[str]:
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return [" -> ".join(exc.args[1])]
    return []


def upward(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} imports {b}: {a.split('.')[1] if '.' in a else a} is below "
                  f"{b.split('.')[1]}" for a, targets in graph.items() for b in targets
                  if layer(b) > layer(a))


def test_every_module_has_a_layer():
    unknown = [m for m in modules(SRC) if "." in m and m.split(".")[1] not in LAYERS]
    assert unknown == [], f"modules outside the layers {LAYERS}: {unknown}"


def test_no_import_circles():
    assert circles(imports(SRC)) == []


def test_no_import_from_a_lower_layer_into_a_higher_one():
    assert upward(imports(SRC)) == []


STATS, PUB = f"{PACKAGE}.statistics", f"{PACKAGE}.publishing"
FINDINGS, STEPS, TEXTS = f"{STATS}.findings", f"{STATS}.steps", f"{STATS}.texts"


def seam(graph: dict[str, set[str]]) -> list[str]:
    """What breaks the seam: a statistics module importing findings other than its writer
    (steps), and texts importing anything of the package."""
    out = [f"{a} imports {FINDINGS}: the findings are statistics' last result"
           for a, targets in graph.items()
           if a.startswith(STATS) and a not in (FINDINGS, STEPS) and FINDINGS in targets]
    out += [f"{TEXTS} imports {b}: texts is shared by both sides and imports nothing"
            for b in graph.get(TEXTS, ())]
    return sorted(out)


def test_statistics_never_imports_publishing():
    graph = imports(SRC)
    assert sorted(f"{a} imports {b}" for a, t in graph.items() if a.startswith(STATS)
                  for b in t if b.startswith(PUB)) == []


def test_the_findings_are_the_seam():
    graph = imports(SRC)
    assert FINDINGS in graph and STEPS in graph and TEXTS in graph
    assert FINDINGS in graph[STEPS]
    assert seam(graph) == []


def test_core_imports_nothing_else_of_the_package():
    graph = imports(SRC)
    assert {b for a, t in graph.items() if a.startswith(f"{PACKAGE}.core") for b in t
            if not b.startswith(f"{PACKAGE}.core")} == set()


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / PACKAGE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@pytest.mark.parametrize("late", [False, True])
def test_planted_upward_import_is_caught(tmp_path, late):
    """Planted: core imports the campaign layer (at module level, or late inside a
    function, as config.py once imported analysis.metrics)."""
    line = "from containertax.campaign.paths import LEDGER\n"
    body = f"def f():\n    {line}" if late else line
    src = _tree(tmp_path, {"__init__.py": "", "core/__init__.py": "",
                           "core/records.py": body, "campaign/__init__.py": "",
                           "campaign/paths.py": "LEDGER = 'x'\n"})
    assert upward(imports(src)) == [
        "containertax.core.records imports containertax.campaign.paths: core is below campaign"]


def test_planted_circle_is_caught(tmp_path):
    """Planted: config <-> lanes, one of them through `from package import module`."""
    src = _tree(tmp_path, {"__init__.py": "", "campaign/__init__.py": "",
                           "campaign/config.py": "from containertax.campaign import lanes\n",
                           "campaign/lanes.py": "import containertax.campaign.config\n"})
    found = circles(imports(src))
    assert len(found) == 1 and "containertax.campaign.config" in found[0] \
        and "containertax.campaign.lanes" in found[0]


@pytest.mark.parametrize("late", [False, True])
def test_planted_statistics_import_of_publishing_is_caught(tmp_path, late):
    """Planted: statistics.order imports publishing.tables for its LaTeX escaping (as
    order, sequential and hostmarkers did before statistics.texts)."""
    line = "from containertax.publishing.tables import booktabs\n"
    body = f"def f():\n    {line}" if late else line
    src = _tree(tmp_path, {"__init__.py": "", "statistics/__init__.py": "",
                           "statistics/order.py": body, "publishing/__init__.py": "",
                           "publishing/tables.py": "def booktabs(): ...\n"})
    assert upward(imports(src)) == [
        "containertax.statistics.order imports containertax.publishing.tables: "
        "statistics is below publishing"]


def test_planted_statistics_reading_the_findings_is_caught(tmp_path):
    """Planted: statistics.policy reads the findings module, and texts imports policy."""
    src = _tree(tmp_path, {"__init__.py": "", "statistics/__init__.py": "",
                           "statistics/findings.py": "", "statistics/steps.py":
                           "from containertax.statistics import findings\n",
                           "statistics/policy.py": "from containertax.statistics import findings\n",
                           "statistics/texts.py": "import containertax.statistics.policy\n"})
    assert seam(imports(src)) == [
        "containertax.statistics.policy imports containertax.statistics.findings: the "
        "findings are statistics' last result",
        "containertax.statistics.texts imports containertax.statistics.policy: texts is "
        "shared by both sides and imports nothing"]
