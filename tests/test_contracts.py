"""The architecture's contracts (#10): the raw-record schema, the campaign paths, the
workload registry, and what planning imports and writes."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from containertax import workloads
from containertax.campaign import config
from containertax.campaign.paths import CampaignPaths
from containertax.core import rawrecord
from tests.conftest import REPO

COMMITTED = sorted(p.parent for p in (REPO / "results").glob("*/raw"))


def snakemake(workdir: Path, cfg: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args, "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(workdir), "--configfile", str(cfg)],
        capture_output=True, text=True, timeout=300)


def test_every_committed_record_loads_and_validates():
    records = [p for root in COMMITTED for p in CampaignPaths(root).raw_records()]
    every_json = [p for p in (REPO / "results").glob("*/raw/*/*/rep*.json")
                  if not p.name.endswith(".cooldown.json")]
    assert len(records) == len(every_json) >= 75  # h100 32, h100-matmul 32, h100-variants 11
    versions = {json.loads(p.read_text())["schema_version"] for p in records}
    # older versions are migrated on read, never rewritten (results/h100-stopping: version 3)
    assert 1 in versions and versions <= set(range(1, rawrecord.SCHEMA_VERSION + 1))
    for path in records:
        rec = rawrecord.read_record(path)
        assert rec.schema_version == rawrecord.SCHEMA_VERSION and rec.metrics


@pytest.mark.parametrize("damage,key", [
    (lambda r: r["metrics"][2].update(value="fast"), "metrics[2].value"),
    (lambda r: r["cell"].pop("repetition"), "cell"),
    (lambda r: r.update(schema_version=7), "schema_version"),
    (lambda r: r["workload"].update(argv="python probe.py"), "workload.argv"),
])
def test_malformed_record_names_file_and_key(tmp_path, damage, key):
    src = CampaignPaths(REPO / "results" / "h100").raw_records()[0]
    data = json.loads(src.read_text())
    damage(data)
    bad = tmp_path / "rep001.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(rawrecord.RecordError) as err:
        rawrecord.read_record(bad)
    assert str(bad) in str(err.value) and f"'{key}'" in str(err.value)


def test_a_record_that_breaks_the_schema_is_never_written(tmp_path):
    rec = rawrecord.read_record(CampaignPaths(REPO / "results" / "h100").raw_records()[0])
    broken = rawrecord.RawRecord(**{**rec.__dict__, "status": "failed"})
    with pytest.raises(rawrecord.RecordError, match="'status'"):
        rawrecord.write_record(tmp_path / "rep001.json", broken)
    assert not (tmp_path / "rep001.json").exists()
    rawrecord.write_record(tmp_path / "rep001.json", rec)  # the valid one round-trips
    assert rawrecord.read_record(tmp_path / "rep001.json") == rec


def test_fixed_width_names_and_older_names_still_found(tmp_path):
    paths = CampaignPaths(tmp_path)
    assert paths.cell("m", "docker", 7).raw.name == "rep007.json"
    old = paths.cell_labelled("m", "docker", "01").raw
    old.parent.mkdir(parents=True)
    old.write_text("{}")
    assert paths.cell("m", "docker", 1).label == "01"
    assert paths.cell("m", "docker", 2).label == "002"


def test_raising_repetitions_keeps_committed_records(tmp_path):
    """h100-matmul (8 repetitions, records named rep01..rep08) raised to 100: the plan
    runs only the 92 new repetitions of each model and environment, none of the 32 done."""
    shutil.copytree(REPO / "results" / "h100-matmul" / "raw",
                    tmp_path / "results" / "h100-matmul" / "raw")
    data = yaml.safe_load((REPO / "config" / "h100-matmul.yaml").read_text())
    data["repetitions"] = 100
    cfg = tmp_path / "more.yaml"
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    out = snakemake(tmp_path, cfg, "cells", "-n", "--quiet", "rules")
    assert out.returncode == 0, out.stderr[-3000:]
    counts = {line.split()[0]: int(line.split()[1]) for line in out.stdout.splitlines()
              if len(line.split()) == 2 and line.split()[1].isdigit()}
    assert counts["run"] == 2 * 2 * 92
    assert not (tmp_path / "results" / "h100-matmul" / "raw" / "mm-4096" / "docker" /
                "rep001.json").exists()


def test_config_kinds_are_the_workload_registry(config_dict):
    """The registry is the one list of kinds: the schema names none, and a kind it lacks
    is refused naming the key (planted: 'bogus', and a model-level 'matmull')."""
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    enums: list[list[str]] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            enums.extend(v["enum"] for v in node.values() if isinstance(v, dict)
                         and set(v.get("enum") or []) & set(workloads.KINDS))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    assert enums == []  # a second list of kinds would go stale with the next kind
    config_dict["workload"]["kind"] = "bogus"
    config_dict["models"][0]["kind"] = "matmull"
    with pytest.raises(config.ConfigError) as err:
        config.load_campaign(config_dict, "c.yaml")
    assert "key 'workload.kind': unknown workload kind 'bogus'" in str(err.value)
    assert "key 'models[0].kind': unknown workload kind 'matmull'" in str(err.value)


def probe_defaults(script: Path) -> dict[str, object]:
    """argparse defaults of a probe, read from its source (probes run elsewhere)."""
    found = {}
    for node in ast.walk(ast.parse(script.read_text())):
        if (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"
                and node.args and isinstance(node.args[0], ast.Constant)):
            for kw in node.keywords:
                if kw.arg == "default" and isinstance(kw.value, ast.Constant):
                    found[node.args[0].value.lstrip("-").replace("-", "_")] = kw.value.value
    return found


@pytest.mark.parametrize("kind", workloads.KINDS)
def test_probe_defaults_agree_with_the_workload_module(kind):
    w = workloads.get(kind)
    script = workloads.PROBE_DIR / w.probe
    assert script.exists()
    for key, value in probe_defaults(script).items():
        if key in w.defaults:
            assert w.defaults[key] == value, f"{w.probe} --{key} default differs from {kind}"


def test_every_metric_a_workload_can_report_is_in_the_registry():
    from containertax.workloads.metric_registry import REGISTRY

    declared = [m.name for m in workloads.metric_info()]
    assert len(declared) == len(set(declared))
    assert set(declared) <= set(REGISTRY)


def test_bad_kind_parameters_through_the_registry_name_the_key(config_dict):
    config_dict["models"] = [{"id": "m", "size": 0}]
    with pytest.raises(config.ConfigError, match=r"x.yaml: key 'models\[0\].size'"):
        config.load_campaign(config_dict, "x.yaml")


ANALYSIS_STACK = ("pandas", "scipy", "statsmodels", "matplotlib", "pingouin")
RUN_MACHINERY = ("containertax.execution.cells", "containertax.execution.environments",
                 "containertax.execution.probing", "containertax.execution.telemetry",
                 "containertax.execution.hostmemory", "docker")


def loaded_after(imports: str, watched: tuple[str, ...]) -> list[str]:
    """Which of `watched` a fresh interpreter has loaded after `imports` (Python lines)."""
    code = (f"import sys; sys.path.insert(0, 'src')\n{imports}\n"
            f"print(','.join(m for m in {watched!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


def test_planning_imports_no_analysis_stack():
    """What workflow/rules/common.smk imports, in a fresh interpreter."""
    assert loaded_after("from containertax.campaign import config, paths, schedule\n"
                        "from containertax.campaign.paths import image_slug",
                        ANALYSIS_STACK) == []


def test_cell_steps_import_no_analysis_stack():
    """`containertax gate|run|cooldown|preflight` on a GPU machine without pandas or TeX."""
    assert loaded_after("import containertax.cli, containertax.execution.cells\n"
                        "import containertax.execution.preflight", ANALYSIS_STACK) == []


def test_gate_and_cooldown_do_not_import_the_run_machinery():
    """A gate or cooldown step imports what it waits with, not the launchers, probes,
    telemetry and workload modules of a run (about 40 % of a step's start-up)."""
    assert loaded_after("import containertax.cli, containertax.execution.gating",
                        RUN_MACHINERY) == []
    # and the check can fail: the run step does load them
    assert "containertax.execution.environments" in loaded_after(
        "import containertax.execution.cells", RUN_MACHINERY)


def test_the_run_step_raises_the_cli_s_known_failure():
    """The CLI catches errors.ContainertaxError (tests/test_cli_errors.py lists every known
    failure): the run step's RunFailed, re-exported by cells, is that class."""
    from containertax.core.errors import ContainertaxError
    from containertax.execution import cells, gating

    assert cells.RunFailed is gating.RunFailed
    assert issubclass(gating.RunFailed, ContainertaxError)


def test_an_analysis_failure_is_still_one_clear_line(tmp_path, config_dict):
    config_dict["results_dir"] = str(tmp_path / "results")
    config_dict["results_dir_absolute"] = True
    campaign = config.load_campaign(config_dict, "demo.yaml")
    config.write_resolved(campaign, campaign.paths.resolved)
    campaign.paths.runs.write_text("")
    out = subprocess.run(
        [sys.executable, "-m", "containertax", "quality", "--config",
         str(campaign.paths.resolved), "--runs", str(campaign.paths.runs), "--out-dir",
         str(tmp_path / "stats")], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 1 and "holds no runs" in out.stderr
    assert "Traceback" not in out.stderr


def test_common_smk_imports_only_the_planning_modules():
    text = (REPO / "workflow" / "rules" / "common.smk").read_text()
    imported = {line.split()[1] for line in text.splitlines()
                if line.startswith(("from containertax", "import containertax"))}
    # core: the ground floor (packaged: where the workflow's files are; records: the
    # ledger); runtimes: each environment kind's declaration (standard library only, below
    # campaign). The fresh-interpreter test below holds what they import.
    assert imported <= {"containertax.campaign", "containertax.campaign.paths",
                        "containertax.core", "containertax.core.packaged",
                        "containertax.runtimes"}


@pytest.mark.parametrize("flag", ["-n", "--lint"])
def test_planning_writes_nothing(tmp_path, flag):
    cfg = tmp_path / "demo.yaml"
    cfg.write_text((REPO / "config" / "demo.yaml").read_text())
    work = tmp_path / "run"
    work.mkdir()
    out = snakemake(work, cfg, flag)
    assert out.returncode == 0, out.stderr[-3000:]
    written = [p for p in work.rglob("*") if ".snakemake" not in p.parts]
    assert written == []


def test_aggregate_stops_at_a_malformed_record_with_its_file_and_key(tmp_path, config_dict):
    """The step exits 1 with the file and key, no traceback, and writes no runs.csv."""
    config_dict["results_dir"] = str(tmp_path / "results")
    config_dict["results_dir_absolute"] = True
    campaign = config.load_campaign(config_dict, "demo.yaml")
    config.write_resolved(campaign, campaign.paths.resolved)
    data = json.loads(CampaignPaths(REPO / "results" / "h100").raw_records()[0].read_text())
    data["metrics"][0]["unit"] = 3
    # the record is this cell's (else the integrity check names a foreign record first)
    data["cell"].update(model="n256", environment="native", repetition=1)
    bad = campaign.paths.cell("n256", "native", 1).raw
    bad.parent.mkdir(parents=True)
    bad.write_text(json.dumps(data))
    out = subprocess.run(
        [sys.executable, "-m", "containertax", "aggregate", "--config",
         str(campaign.paths.resolved), "--out", str(campaign.paths.runs),
         "--requests-out", str(campaign.paths.requests_all)],
        cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 1
    assert str(bad) in out.stderr and "'metrics[0].unit'" in out.stderr
    assert "Traceback" not in out.stderr and not campaign.paths.runs.exists()
