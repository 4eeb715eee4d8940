"""Sequential stopping in the DAG (workflow/rules/sequential.smk), with real Snakemake:
a dry run plans the first look's cells only; `snakemake cells --cores 1` runs looks and
cells unattended and stops a model whose comparisons are answered; a rerun runs nothing;
a record deleted by hand is run again, once. Native environments only (no Docker).
The decision is made certain, whatever the machine's load, by deciding on peak resident memory
(a count of pages, not a time: with a 64 x 64 product's compute time, the kind's default, the
A/A comparison was left unanswered at the first look under CI's load, the run of 12ac700)
within a resolution of 1000 %, with no shape or drift check: the A/A comparison is
equivalent at the first look (a model that continues is tested without Snakemake in
tests/test_sequential.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import demo_config
from tests.test_rerun import ledger, snakemake

pytestmark = [pytest.mark.slow]


def campaign(tmp_path: Path) -> Path:
    cfg = demo_config()
    cfg["campaign"] = "seq"
    cfg["repetitions"] = 10
    cfg["environments"] = {"native": cfg["environments"]["native"],
                           "native-aa": {"replica_of": "native"}}
    cfg["models"] = [{"id": "n64", "size": 64, "repeats": 3}]
    cfg["thermal"].update(min_interval_s=0, cooldown_s=0.1, poll_s=0.1)
    cfg["analysis"]["equivalence_margin"] = 10.0
    cfg["analysis"]["resolution_pct"] = 1000.0  # the A/A replica's own band (issue #33)
    cfg["analysis"]["primary_metrics"] = ["max_rss_mib"]  # pages, not a time: load-free
    # no shape or drift check: this shared machine's runs may hold a block far from the
    # others or drift with its load, which would keep the model running
    # (tests/test_sequential.py and tests/test_sequential_robust.py test the checks)
    cfg["stopping"] = {"min_blocks": 6, "every": 2, "shape_check": False,
                       "drift_check": False}
    path = tmp_path / "seq.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def records(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root / "raw")) for p in (root / "raw").glob("*/*/rep*.json")
                  if not p.name.endswith(".cooldown.json"))


def test_stopping_dag(tmp_path):
    cfg = campaign(tmp_path)
    root = tmp_path / "results" / "seq"
    dry = snakemake(tmp_path, cfg, "-n", "cells")
    assert dry.returncode == 0, dry.stderr
    counts = dict(re.findall(r"^(gate|interim)\s+(\d+)$", dry.stdout + dry.stderr, re.M))
    assert counts == {"gate": "12", "interim": "1"}  # 6 blocks x 2 environments, 1 look

    out = snakemake(tmp_path, cfg, "cells", "--cores", "1")
    assert out.returncode == 0, out.stderr[-3000:]
    state = json.loads((root / "interim" / "look1.json").read_text())
    assert state["models"]["n64"]["decision"] == "stop"
    assert state["models"]["n64"]["blocks_run"] == 6
    assert state["models"]["n64"]["blocks_possible"] == 10
    assert not (root / "interim" / "look2.json").exists()
    got = records(root)
    assert len(got) == 12 and all(int(re.search(r"rep(\d+)", r)[1]) <= 6 for r in got)
    # the plan still lists every possible cell
    assert len((root / "schedule.csv").read_text().splitlines()) == 1 + 20

    def measured() -> int:
        return len([e for e in ledger(root)
                    if e.get("step") == "run" and e.get("event") == "start"])

    runs = measured()
    assert runs == 12
    again = snakemake(tmp_path, cfg, "cells", "--cores", "1")
    assert again.returncode == 0, again.stderr[-3000:]
    assert records(root) == got
    assert measured() == runs

    # a record lost by hand: its cell runs again, once, and nothing else
    lost = root / "raw" / "n64" / "native" / "rep003.json"
    lost.rename(tmp_path / "lost.json")
    (root / "raw" / "n64" / "native" / "rep003.cooldown.json").unlink()
    fix = snakemake(tmp_path, cfg, "cells", "--cores", "1")
    assert fix.returncode == 0, fix.stderr[-3000:]
    assert records(root) == got
    assert measured() == runs + 1

    from containertax.statistics.sequential import interim

    table = interim(root)
    assert set(table["decision"]) == {"stop"} and set(table["look"]) == {1}
    assert (table["adj_low"] <= table["estimate"]).all()


def test_killed_mid_look_then_rerun_measures_each_cell_once_and_decides_once(tmp_path):
    """Snakemake killed (SIGKILL, its step orphaned) in the middle of the first look's
    cells, then `--unlock` and a rerun as docs/running.md says: the checkpoint's DAG is
    planned again from what is on disk, every cell of the look is measured exactly once
    (the orphan's included), the look is decided once, and no cell beyond it runs."""
    from collections import Counter

    from tests.test_rerun import kill_snakemake_only, started, unlock_and_rerun, wait_for, why

    cfg = campaign(tmp_path)
    root = tmp_path / "results" / "seq"
    proc = snakemake(tmp_path, cfg, "cells", "--cores", "1", popen=True)
    wait_for(lambda: started(root, "run", 5), "the sixth cell's run")
    kill_snakemake_only(proc)
    assert not (root / "interim" / "look1.json").exists()
    out = unlock_and_rerun(tmp_path, cfg)
    assert out.returncode == 0, why(out)
    ok = Counter(e["position"] for e in ledger(root)
                 if e["step"] == "run" and e["event"] == "end" and e.get("status") == "ok")
    state = json.loads((root / "interim" / "look1.json").read_text())
    assert state["models"]["n64"]["blocks_run"] == 6
    # the look decides on measured values: it stops (usually) or, on a noisy machine (a
    # loaded one, pytest-xdist), asks for the last look's blocks; either way each cell of
    # the blocks the looks allowed ran once, and none beyond them
    looks = sorted((root / "interim").glob("look*.json"))
    last = json.loads(looks[-1].read_text())["models"]["n64"]
    assert last["decision"] != "continue" and len(looks) == (1 if last["blocks_run"] == 6
                                                             else 2)
    cells = 2 * last["blocks_allowed"]
    assert len(ok) == cells and set(ok.values()) == {1}, ok  # each cell measured once
    assert len(records(root)) == cells
    decided = [p.read_bytes() for p in looks]
    again = snakemake(tmp_path, cfg, "cells", "--cores", "1")
    assert again.returncode == 0 and [p.read_bytes() for p in looks] == decided
