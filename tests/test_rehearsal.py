"""`containertax rehearse`: a derived one-repetition campaign with few requests, run by the
real workflow, then the go/no-go table. Planted: a model whose full run would time out, and
an environment that cannot start."""

from __future__ import annotations

import json
import subprocess
import sys

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
    e = result["estimate"]
    assert e["cells"] == 30 * 4 and e["lower_bound"]
    assert e["gate_s_per_cell"] == 30  # min_interval 60 s after a 30 s cooldown
    assert e["wall_s"] >= 30 * 4 * 60
    table = (root / "rehearsal.md").read_text()
    assert "| slow | native |" in table and "NO-GO" in table and "Verdict: NO-GO" in table
    assert "Verdict: NO-GO" in out.stdout
    assert not (tmp_path / "results" / "tiny").exists()  # the study's folder is untouched
