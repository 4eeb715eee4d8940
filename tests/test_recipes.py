"""The recipes of docs/architecture.md ("Where to add") stay true: every file, folder and
test they name exists, and every contract test they promise names what is missing."""

from __future__ import annotations

import re

from tests.conftest import REPO

SECTION = "## Where to add"


def recipe_paths(text: str) -> list[str]:
    """Paths a recipe names: `src/...`, `workflow/...`, `config/...`, tests/test_x.py."""
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"`((?:src|workflow|config|docs)/[^`<>*\s]+)`", section)
    named += re.findall(r"\b(tests/test_[a-z_]+\.py)\b", section)
    return sorted(set(named))


def test_every_path_a_recipe_names_exists():
    text = (REPO / "docs" / "architecture.md").read_text()
    paths = recipe_paths(text)
    assert len(paths) >= 10  # the three recipes name their files
    for needed in ("src/containertax/runtimes/__init__.py", "tests/test_runtime_contract.py",
                   "tests/test_workload_contract.py", "src/containertax/workloads/__init__.py",
                   "src/containertax/workloads/metric_registry.py"):
        assert needed in paths, needed
    missing = [p for p in paths if not (REPO / p).exists()]
    assert missing == []


def test_a_recipe_naming_a_missing_file_is_caught():
    """Planted: a recipe that names a file the checkout lacks."""
    text = f"{SECTION}\n\n* **A kind**: `src/containertax/runtimes/nowhere.py`, " \
           "tests/test_nowhere.py\n## Next"
    paths = recipe_paths(text)
    assert paths == ["src/containertax/runtimes/nowhere.py", "tests/test_nowhere.py"]
    assert not any((REPO / p).exists() for p in paths)


def test_the_recipes_name_each_kind_of_addition():
    section = (REPO / "docs" / "architecture.md").read_text().split(SECTION, 1)[1]
    for title in ("An environment kind", "A workload kind", "A metric"):
        assert f"**{title}" in section, title
