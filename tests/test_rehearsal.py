"""`containertax rehearse`: a derived one-repetition campaign with few requests, run by the
real workflow, then the go/no-go table. Planted: a model whose full run would time out, and
an environment that cannot start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from containertax.campaign import config, rehearsal
from tests.conftest import REPO


def test_derived_rehearsal_is_its_own_small_campaign():
    study = config.load_file(REPO / "config" / "config.yaml")
    derived = rehearsal.derive(study)
    r = config.load_campaign(derived, "rehearsal.yaml")
    assert r.name == "dgx-spark-rehearsal" and r.root != study.root and r.repetitions == 2
    assert {r.workload_params(m.id)["num_requests"] for m in r.models} == {32}
    assert [m.id for m in r.models] == [m.id for m in study.models]
    assert [e.id for e in r.environments] == [e.id for e in study.environments]
    assert r.workload_params("qwen2.5-72b")["timeout_s"] == 14400  # the model's own
    demo = config.load_file(REPO / "config" / "demo.yaml")
    d = config.load_campaign(rehearsal.derive(demo, requests=5), "r.yaml")
    assert d.workload_params("n256")["repeats"] == 5 and d.workload_params("n512")["repeats"] == 5


@pytest.mark.slow
def test_rehearsal_go_no_go_with_real_snakemake(tmp_path):
    cfg = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    cfg.update(campaign="tiny", results_dir=str(tmp_path / "results"), results_dir_absolute=True,
               repetitions=30,
               reference_environment="native")
    cfg["environments"] = {
        "native": {"kind": "native", "python": sys.executable},
        "broken": {"kind": "native", "python": "/bin/false"},  # cannot start the probe
    }
    cfg["models"] = [{"id": "small", "size": 64, "repeats": 20},
                     # 2000 repeats of 512^2: far beyond its 2 s timeout; 3 repeats are not
                     {"id": "slow", "size": 512, "repeats": 2000, "timeout_s": 2}]
    cfg["thermal"].update(sensor="none", cooldown_s=30, min_interval_s=60)
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    out = subprocess.run([sys.executable, "-m", "containertax", "rehearse", str(path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert out.returncode == 2, out.stderr[-3000:]  # NO-GO
    root = tmp_path / "results" / "tiny-rehearsal"
    result = json.loads((root / "rehearsal.json").read_text())
    rows = {(r["model"], r["environment"]): r for r in result["rows"]}
    assert rows[("small", "native")]["go"] and rows[("small", "native")]["requests"] == "3/20"
    slow = rows[("slow", "native")]
    assert slow["ran"] and not slow["go"] and "would time out" in slow["why"]
    assert slow["projected_s"] > 2 > slow["duration_s"]
    broken = rows[("small", "broken")]
    assert not broken["preflight"] and not broken["go"]
    assert broken["why"].startswith("preflight failed: environment broken")
    # a cell that did not run is projected from the same model's run in another environment
    assert broken["projected_from"] == "the run in native"
    assert broken["projected_s"] == rows[("small", "native")]["projected_s"]
    assert "would time out too" in rows[("slow", "broken")]["why"]
    e = result["estimate"]
    assert e["cells"] == 30 * 4 and e["projected_from_other_environment"] == 2
    assert e["counted_at_timeout"] == 0
    # without and with a stopping rule: the config has none, so the one it could add
    stop = result["stopping"]
    assert stop["rule"]["from_config"] is False and stop["rule"]["looks"][0] == 6
    assert stop["without_s"] == pytest.approx(30 * stop["block_s"], rel=1e-3)
    assert stop["min_s"] == pytest.approx(6 * stop["block_s"], rel=1e-3)
    assert all(stop["min_s"] <= sc["wall_s"] <= stop["without_s"] for sc in stop["scenarios"])
    assert e["gate_s_per_cell"] == 30  # min_interval 60 s after a 30 s cooldown
    assert e["wall_s"] >= 30 * 4 * 60
    table = (root / "rehearsal.md").read_text()
    assert "| slow | native |" in table and "NO-GO" in table and "Verdict: NO-GO" in table
    assert "Verdict: NO-GO" in out.stdout
    assert "Without a stopping rule" in table and "min_blocks: 6" in table
    assert "(the run in native)" in table
    assert not (tmp_path / "results" / "tiny").exists()  # the study's folder is untouched


def _step(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "containertax", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.docker
def test_rehearsal_names_each_missing_piece_with_its_fix(tmp_path):
    """Issue #26: every row said "preflight failed: no preflight record". Planted, each
    produced by the workflow's own step: a checkpoint without config.json (the dataset
    step), an image the engine does not have (the rootfs step: the engine's 404 used to
    leave a traceback), a quantisation GB10 does not run (the preflight check with the
    stand-in TensorRT-LLM at compute capability 12.1)."""
    from containertax.campaign.config import load_file
    from containertax.campaign.paths import image_slug
    from tests.conftest import docker_ready
    from tests.test_trtllm import standin_env, tiny_checkpoint

    if not docker_ready():
        pytest.skip("needs the Docker Engine")
    good = tiny_checkpoint(tmp_path / "models", "good", "FP8")
    awq = tiny_checkpoint(tmp_path / "models", "awq", "W4A16_AWQ")
    cfg = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    cfg.update(campaign="spark", results_dir=str(tmp_path / "results"),
               results_dir_absolute=True, reference_environment="native")
    cfg["environments"] = {
        "native": {"kind": "native", "env": standin_env(tmp_path, "1.2.0rc6")},
        "chroot": {"kind": "chroot", "image": "containertax-absent:none", "python": "python3"}}
    cfg["workload"] = {"kind": "trtllm", "dataset_dir": str(tmp_path / "datasets"),
                       "num_requests": 20, "timeout_s": 120}
    cfg["models"] = [
        {"id": "good", "model": "Qwen/Qwen2-1.5B", "model_path": str(good),
         "quantization": "fp8"},
        {"id": "awq", "model": "Qwen/Qwen2-1.5B", "model_path": str(awq),
         "quantization": "W4A16_AWQ"},
        {"id": "absent", "model": "Qwen/Qwen2-1.5B",
         "model_path": str(tmp_path / "models" / "absent")}]
    path = tmp_path / "spark.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    study = load_file(path)
    rehearsal_cfg = rehearsal.derive(study)
    reh = rehearsal.load_campaign(rehearsal_cfg, str(path))
    root = reh.root
    logs = root / "logs"
    resolved = tmp_path / "reh.yaml"
    resolved.write_text(yaml.safe_dump(rehearsal_cfg, sort_keys=False))
    # the steps, as the workflow runs them
    ds = _step(["dataset", "--config", str(resolved), "--model", "absent", "--out",
                str(tmp_path / "datasets" / "absent.jsonl"), "--log",
                str(logs / "dataset" / "absent.log")], tmp_path)
    assert ds.returncode == 1 and "Traceback" not in ds.stderr
    slug = image_slug("containertax-absent:none")
    rf = _step(["rootfs", "--image", "containertax-absent:none", "--out",
                str(root / "rootfs" / slug), "--log", str(logs / "rootfs" / f"{slug}.log")],
               tmp_path)
    assert rf.returncode == 1 and "Traceback" not in rf.stderr + (
        logs / "rootfs" / f"{slug}.log").read_text()  # before: docker.errors.ImageNotFound
    result = rehearsal.judge(study, reh, root)
    rows = {(r["model"], r["environment"]): r["why"] for r in result["rows"]}
    assert "no preflight record" not in " ".join(rows.values())
    absent = rows[("absent", "native")]
    assert f"no checkpoint at {tmp_path / 'models' / 'absent'}" in absent
    assert "models[2].model_path" in absent and "docs/dgx-spark.md" in absent
    assert "dataset step" not in absent  # the same missing checkpoint, said once
    # nothing ran: every cell is counted at its model's timeout, and said so
    assert result["estimate"]["counted_at_timeout"] == len(result["rows"]) == 6
    assert all(r["projected_s"] == 120 for r in result["rows"])
    assert "at most 120.0 (timeout, not measured)" in rehearsal.render(result)
    image = rows[("good", "chroot")]
    assert "containertax-absent:none" in image and "docker pull" in image
    assert "the dataset step failed" in rows[("good", "native")]  # it blocks every preflight
    # the unsupported quantisation: the dataset is there, preflight runs and refuses it
    (tmp_path / "datasets").mkdir(exist_ok=True)
    (logs / "dataset" / "absent.log").unlink()
    cfg["models"] = cfg["models"][:2]
    cfg["environments"].pop("chroot")
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    study = load_file(path)
    reh = rehearsal.load_campaign(rehearsal.derive(study), str(path))
    resolved.write_text(yaml.safe_dump(rehearsal.derive(study), sort_keys=False))
    pf = _step(["preflight", "--config", str(resolved), "--environment", "native", "--out",
                str(root / "preflight" / "native.json"), "--log",
                str(logs / "preflight" / "native.log")], tmp_path)
    assert pf.returncode == 1
    rows = {(r["model"], r["environment"]): r["why"]
            for r in rehearsal.judge(study, reh, root)["rows"]}
    assert rows[("awq", "native")].startswith("preflight failed: model awq: quantisation")
    assert "compute capability 12.1" in rows[("awq", "native")]
    assert rows[("good", "native")].startswith("preflight failed: blocked by another model")


def test_the_study_is_timed_from_one_rehearsal():
    """Every campaign of the Spark study from a rehearsal's per-model runs and per-cell
    waits: 2A's 60 runs of three models, each 100 s at most, plus per cell the 300 s
    cooldown and minimum interval, 20 s gate and 5 s workflow; a model the rehearsal did
    not time counts at its timeout, and says so."""
    from containertax.campaign import configfile

    paths = configfile.study_campaigns(REPO / "config" / "study-spark.yaml")
    campaigns = [config.load_file(p) for p in paths]
    rows = [{"model": m, "environment": e, "projected_s": s, "model_path": path}
            for m, e, s, path in [
                ("qwen2-1.5b", "chroot", 90.0, "/models/Qwen2-1.5B-Instruct"),
                ("qwen2-1.5b", "docker_baseline", 100.0, "/models/Qwen2-1.5B-Instruct"),
                ("llama-3-8b", "chroot", 100.0, "/models/Meta-Llama-3-8B-Instruct"),
                ("llama-3.3-70b-nvfp4", "chroot", 100.0, "/models/Llama-3.3-70B-Instruct-FP4")]]
    result = {"rows": rows, "estimate": {"cooldown_s_per_cell": 300, "gate_s_per_cell": 20,
                                         "harness_s_per_cell": 5}}
    est = {r["campaign"]: r for r in rehearsal.study_estimate(result, campaigns)
           if not r.get("alternative_of")}
    assert {k: v for k, v in est["dgx-spark-2a"].items() if k != "stopping"} == {
        "campaign": "dgx-spark-2a", "cells": 60, "run_s": 6000.0, "wait_s": 60 * 325.0,
        "wall_s": 6000.0 + 60 * 325.0, "from_timeout": [], "from_checkpoint": []}
    assert est["dgx-spark-2b"]["cells"] == 270 and est["dgx-spark"]["cells"] == 900
    assert est["dgx-spark-2f"]["cells"] == 160  # issue #40's falsifiers: 2 x 4 arms x 2 x 10
    # its arms are the rehearsed checkpoints under other ids: timed from them (issue #45:
    # they were counted at their 8000 s timeouts), 160 runs of 100 s
    assert est["dgx-spark-2f"]["from_timeout"] == []
    assert len(est["dgx-spark-2f"]["from_checkpoint"]) == 8
    assert est["dgx-spark-2f"]["run_s"] == 160 * 100.0
    assert "mixtral-8x7b" in est["dgx-spark"]["from_timeout"]
    text = rehearsal.render_study(rows_out := rehearsal.study_estimate(result, campaigns))
    assert "Study: 1480 runs" in text and "at timeout: " in text
    # phase 2B's declared alternative (factorial.alternative) on the line after its row:
    # 10 environments x 10 blocks x 3 models, timed the same way, not counted in the study
    i = [r["campaign"] for r in rows_out].index("dgx-spark-2b")
    alt = rows_out[i + 1]
    assert alt["alternative_of"] == "dgx-spark-2b" and alt["cells"] == 300
    assert alt["config"] == "phase-2b-one-at-a-time.yaml"
    assert alt["run_s"] == 300 * 100.0 and alt["wall_s"] == 300 * 100.0 + 300 * 325.0
    assert ("| dgx-spark-2b (one at a time, the declared alternative, not run: "
            "phase-2b-one-at-a-time.yaml) | 300 | 8.3 h |") in text
    fixed = sum(r["wall_s"] for r in est.values())
    alt_total = fixed - est["dgx-spark-2b"]["wall_s"] + alt["wall_s"]
    assert (f"With dgx-spark-2b's declared alternative (phase-2b-one-at-a-time.yaml, 300 "
            f"runs) instead of its factorial (270 runs): 1510 runs, "
            f"{alt_total / 3600:.1f} h") in text
    assert f"Study: 1480 runs, {fixed / 3600:.1f} h" in text
    # phase 2B alone (rehearse config/phase-2b.yaml): both designs and both totals
    phase_2b = next(c for c in campaigns if c.name == "dgx-spark-2b")
    alone = rehearsal.render_study(rehearsal.study_estimate(result, [phase_2b]))
    assert "Campaign: 270 runs" in alone and "300 runs, " in alone


def test_the_study_shows_each_campaign_under_a_stopping_rule():
    """No Spark phase has its own rule: beside each fixed plan, the default rule's range,
    from every model stopping at the first look (block 6 of 2A's 10: 60 % of its wall
    time) to the full plan; where the default rule has no look before the last (2B's 5
    blocks; the alternative's 10 environments make its design period 10), it says so."""
    from containertax.campaign import configfile

    paths = configfile.study_campaigns(REPO / "config" / "study-spark.yaml")
    campaigns = [config.load_file(p) for p in paths]
    assert not any(c.raw.get("stopping") for c in campaigns)
    result = {"rows": [{"model": m, "environment": "chroot", "projected_s": 100.0}
                       for m in ("qwen2-1.5b", "llama-3-8b", "llama-3.3-70b-nvfp4")],
              "estimate": {"cooldown_s_per_cell": 300, "gate_s_per_cell": 20,
                           "harness_s_per_cell": 5}}
    rows = rehearsal.study_estimate(result, campaigns)
    est = {(r["campaign"], r.get("alternative_of")): r for r in rows}
    a = est[("dgx-spark-2a", None)]
    assert a["stopping"] == {"rule": "default", "min_blocks": 6, "max_blocks": 10,
                             "min_s": round(a["wall_s"] * 0.6, 1), "max_s": a["wall_s"]}
    assert est[("dgx-spark", None)]["stopping"]["max_blocks"] == 30
    assert est[("dgx-spark-2b", None)]["stopping"]["rule"] is None
    assert est[("dgx-spark-2b", "dgx-spark-2b")]["stopping"]["rule"] is None
    text = rehearsal.render_study(rows)
    assert (f"| the default rule: {a['wall_s'] * 0.6 / 3600:.1f} h to "
            f"{a['wall_s'] / 3600:.1f} h (blocks 6 to 10) |") in text
    assert "the default rule's first look, block 6" in text and ", 5 |" in text
    assert "the default rule's first look, block 10 " in text
    low = sum(r["stopping"]["min_s"] if r["stopping"]["rule"] else r["wall_s"]
              for r in rows if not r.get("alternative_of"))
    assert f"(its own, else the default): {low / 3600:.1f} h to " in text


def test_a_campaigns_own_stopping_rule_is_timed_from_its_looks(tmp_path):
    """A campaign with `stopping:` is timed by its own first look, not the default's: a
    first look at block 8 of 10 is 80 % of the fixed plan."""
    cfg = yaml.safe_load((REPO / "config" / "phase-2a.yaml").read_text())
    cfg["base"] = str(REPO / "config" / "config.yaml")
    cfg["stopping"] = {"min_blocks": 8}
    path = tmp_path / "own.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    c = config.load_file(path)
    result = {"rows": [{"model": m.id, "environment": "chroot", "projected_s": 100.0}
                       for m in c.models],
              "estimate": {"cooldown_s_per_cell": 300, "gate_s_per_cell": 20,
                           "harness_s_per_cell": 5}}
    [row] = rehearsal.study_estimate(result, [c])
    assert row["stopping"]["rule"] == "own" and row["stopping"]["min_blocks"] == 8
    assert row["stopping"]["min_s"] == round(row["wall_s"] * 0.8, 1)
    assert "| its rule: " in rehearsal.render_study([row])


def test_a_missing_alternative_is_refused(tmp_path):
    """factorial.alternative names a file that must exist: check says which key and how."""
    cfg = yaml.safe_load((REPO / "config" / "phase-2b.yaml").read_text())
    cfg["base"] = str(REPO / "config" / "config.yaml")
    cfg["factorial"]["alternative"] = "nowhere.yaml"
    path = tmp_path / "fact.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    with pytest.raises(config.ConfigError, match="factorial.alternative.*does not exist"):
        config.load_file(path)
    # a pointer, not what is measured: phase-2b's hash is the one without the key
    del cfg["factorial"]["alternative"]
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    assert (config.load_file(path).config_hash()
            == config.load_file(REPO / "config" / "phase-2b.yaml").config_hash())
