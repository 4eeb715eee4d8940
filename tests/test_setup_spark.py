"""The DGX OS set-up (scripts/setup-spark.sh) and docs/dgx-spark.md, checked where they can
be here (no DGX OS, no Spark): the script parses (bash -n, and shellcheck where installed)
and installs nothing the Spark study does not need; every command, script, config and tool
the guide names exists; every glob it passes to `hf` is quoted. Each check is shown to catch
its planted case."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from containertax import cli
from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "setup-spark.sh"
GUIDE = REPO / "docs" / "dgx-spark.md"


def test_setup_script_parses():
    out = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    if shutil.which("shellcheck"):
        out = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True)
        assert out.returncode == 0, out.stdout


def test_bash_n_catches_a_broken_script(tmp_path):
    broken = tmp_path / "b.sh"
    broken.write_text(SCRIPT.read_text().replace("fi\n", "", 1))
    assert subprocess.run(["bash", "-n", str(broken)], capture_output=True).returncode != 0


NOT_FOR_SPARK = ("slurm", "munge", "chromium", "podman", "charliecloud", "uidmap", "useradd")


def installs(script: str) -> list[str]:
    """What a set-up script installs or creates that the Spark study does not need."""
    code = "\n".join(ln for ln in script.splitlines() if not ln.lstrip().startswith("#"))
    return [w for w in NOT_FOR_SPARK if re.search(rf"\b{w}", code, re.I)]


def test_setup_installs_only_what_the_spark_study_needs():
    text = SCRIPT.read_text()
    assert installs(text) == []
    assert "huggingface_hub" in text and ".venv/bin/python -m pip install" in text
    assert "pip install -U" not in text.replace(".venv/bin/python -m pip install", "")
    assert installs((REPO / "scripts" / "setup.sh").read_text())  # the dev machine's does


def guide_problems(text: str) -> list[str]:
    """Commands, files and patterns the guide names that do not exist or would misfire."""
    problems = []
    for sub in re.findall(r"\.venv/bin/containertax ([a-z-]+)", text):
        if sub not in cli.COMMANDS:
            problems.append(f"containertax {sub}: no such command")
    for path in re.findall(r"(?<![\w/.-])((?:scripts|tools|config)/[\w./-]+\.(?:sh|py|yaml))",
                           text):
        if not (REPO / path).exists():
            problems.append(f"{path}: no such file")
    for line in re.findall(r"^.*(?:--include|--exclude) .*$", text, re.M):
        for pattern in re.findall(r"--(?:include|exclude) (\S+)", line):
            if any(c in pattern for c in "*?[") and pattern[0] not in "'\"":
                problems.append(f"unquoted pattern {pattern}: {line.strip()}")
    return problems


def test_every_command_file_and_pattern_of_the_guide_exists():
    assert guide_problems(GUIDE.read_text()) == []


@pytest.mark.parametrize(("planted", "named"), [
    (".venv/bin/containertax preflight-all x.yaml", "containertax preflight-all"),
    ("sudo scripts/setup-dgx.sh", "scripts/setup-dgx.sh: no such file"),
    ("hf download a/b --include *.json --local-dir /m", "unquoted pattern *.json"),
])
def test_the_guide_check_catches_what_is_planted(planted, named):
    assert any(named in p for p in guide_problems(planted))


def test_the_guide_says_what_has_not_run_and_its_steps_are_in_order():
    text = GUIDE.read_text()
    assert "not run on DGX OS" in text
    order = [text.index(h) for h in ("## 1. Set up", "## 2. The readiness check",
                                     "## 3. The image", "## 4. Models", "## 5. The config",
                                     "## 6. Rehearse")]
    assert order == sorted(order)
    assert "scripts/test.sh          # sets up" not in text  # the dev machine's, not a Spark's
