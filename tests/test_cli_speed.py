"""What makes a cell step start fast, kept honest: it imports neither the analysis stack
nor jsonschema, and it trusts the resolved config only while its digest matches (a
hand-edited one is validated again and its error names the key)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from containertax import cli
from containertax.campaign import config, schedule


@pytest.fixture
def resolved(config_dict, tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    config_dict["thermal"].update(min_interval_s=0, cooldown_s=0, poll_s=0.05)
    campaign = config.load_campaign(config_dict, "speed.yaml")
    path = tmp_path / "config.resolved.json"
    config.write_resolved(campaign, path)
    # a cell step reads its cell from the written schedule (the schedule step's output)
    campaign.root.mkdir(parents=True, exist_ok=True)
    schedule.write_csv(schedule.plan(campaign), campaign.paths.schedule)
    return path


def test_a_cell_step_imports_no_analysis_stack_and_no_jsonschema(resolved, tmp_path):
    code = (
        "import sys\n"
        "from containertax import cli\n"
        f"rc = cli.main(['cooldown', '--config', {str(resolved)!r}, '--model', 'n256',"
        f" '--environment', 'native', '--rep', '01', '--out', {str(tmp_path / 'c.json')!r}])\n"
        "heavy = [m for m in ('pandas', 'scipy', 'matplotlib', 'statsmodels', 'numpy',"
        " 'jsonschema') if m in sys.modules]\n"
        "print(rc, heavy)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.stdout.strip() == "0 []", out.stdout + out.stderr


def test_the_resolved_config_is_trusted_only_while_its_digest_matches(resolved):
    assert cli.load(str(resolved)) == config.load_campaign(
        json.loads(resolved.read_text())["config"], "speed.yaml")
    data = json.loads(resolved.read_text())
    data["config"]["repetitions"] = 0  # edited by hand: the digest no longer matches
    resolved.write_text(json.dumps(data))
    with pytest.raises(config.ConfigError, match="repetitions"):
        cli.load(str(resolved))


# the modules a publishing step (tables, numbers) or the paper step imports: in the
# committed h100-matmul paper build these steps spent 1-2 s each loading scipy.stats and
# statsmodels (about 1 s a process) that they never call
PUBLISHING_STEPS = ("containertax.publishing.report", "containertax.publishing.paper",
                    "containertax.statistics.policy", "containertax.statistics.steps")


def test_the_publishing_and_paper_steps_import_neither_scipy_stats_nor_statsmodels():
    # the paired estimate too (the findings step and the status page): scipy.special's t
    code = ("import sys\n"
            f"for m in {PUBLISHING_STEPS!r}: __import__(m)\n"
            "from containertax.statistics.comparisons import paired_estimate\n"
            "assert paired_estimate([0.03, 0.05, 0.02, 0.04], 0.05)['p'] > 0\n"
            "print([m for m in ('scipy.stats', 'statsmodels', 'seaborn', 'matplotlib')"
            " if m in sys.modules])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr

