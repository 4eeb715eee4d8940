"""`containertax status` shows what failed and why: failed preflights (from their logs)
and failed cells (the latest failed step, with its error), issue #16."""

from __future__ import annotations

from containertax.campaign import config, schedule, status
from containertax.core import records


def test_failed_preflight_and_failed_cells_with_their_reasons(config_dict, tmp_path):
    config_dict["results_dir"] = str(tmp_path)
    config_dict["results_dir_absolute"] = True
    campaign = config.load_campaign(config_dict, "demo.yaml")
    root = campaign.root
    cells = schedule.plan(campaign)
    log = root / "logs" / "preflight" / "docker.log"
    log.parent.mkdir(parents=True)
    log.write_text("2026-11-22 10:00:00,000 INFO starting\n2026-11-22 10:00:01,000 ERROR "
                   "environment docker: image 'x:y' is not in the local Docker Engine.\n")
    records.write_json(root / "preflight" / "native.json", {"ok": True})
    (root / "logs" / "preflight" / "native.log").write_text("fine\n")
    gate_cell, run_cell, healed = cells[0], cells[1], cells[2]
    for cell, step, error in ((gate_cell, "gate", "GateTimeout: still 91 C after 3600 s"),
                              (run_cell, "run", "cannot write x: No space left on device"),
                              (healed, "run", "RunFailed: once")):
        base = {"step": step, **vars(cell)}
        records.append_ledger(root, {**base, "event": "start"})
        records.append_ledger(root, {**base, "event": "end", "status": "failed",
                                     "error": error})
    raw = campaign.paths.cell(healed.model, healed.environment, healed.repetition).raw
    records.write_json(raw, {"cell": vars(healed)}, overwrite=False)

    summary = status.summarize(campaign)
    assert summary["failed_preflights"] == {
        "docker": "environment docker: image 'x:y' is not in the local Docker Engine."}
    failed = {f["cell"]: (f["step"], f["error"]) for f in summary["failed_cells"]}
    label = (f"{gate_cell.model}/{gate_cell.environment}/"
             f"rep{campaign.paths.cell(gate_cell.model, gate_cell.environment, 1).label}")
    assert failed[label] == ("gate", "GateTimeout: still 91 C after 3600 s")
    assert len(failed) == 2 and summary["failed"] == 2 and summary["done"] == 1
    text = status.render(summary)
    assert "preflight of docker failed (its cells cannot run): environment docker" in text
    assert f"failed {label} (gate," in text and "No space left on device" in text


def test_status_says_when_the_ledger_is_damaged(config_dict, tmp_path):
    config_dict["results_dir"] = str(tmp_path)
    config_dict["results_dir_absolute"] = True
    campaign = config.load_campaign(config_dict, "demo.yaml")
    root = campaign.root
    records.append_ledger(root, {"step": "gate", "event": "start"})
    assert "ledger damaged" not in status.render(status.summarize(campaign))
    with (root / records.LEDGER).open("a") as fh:  # planted: a line torn by a full disk
        fh.write('{"step": "gate", "ev')
    records.append_ledger(root, {"step": "gate", "event": "end", "status": "ok"})
    summary = status.summarize(campaign)
    assert summary["ledger_damage"] == {"ledger.jsonl": 1}
    assert "ledger damaged: ledger.jsonl has 1 unparseable line(s)" in status.render(summary)


def test_a_model_the_stopping_rule_ended_has_no_pending_cells(tmp_path, monkeypatch):
    """results/h100-stopping (GPU, 2026-11-24): matmul-10k stopped at look 1 (6 of 8
    blocks), mm-4096 ran to 8; its 4 unneeded cells are not 'pending'."""
    import shutil

    import yaml

    from tests.conftest import REPO

    data = yaml.safe_load((REPO / "config" / "h100-stopping.yaml").read_text())
    monkeypatch.chdir(tmp_path)  # results/ relative to the working directory, as Snakemake
    campaign = config.load_campaign(data, "h100-stopping.yaml")
    shutil.copytree(REPO / "results" / "h100-stopping" / "raw", campaign.root / "raw")
    visit = campaign.root / "raw" / "visits" / "20261124T140600Z"
    before = status.summarize(campaign)  # no interim decision yet: all 32 cells count
    assert (before["done"], before["total"], before["remaining"]) == (28, 32, 4)
    shutil.copytree(visit / "interim", campaign.root / "interim")
    after = status.summarize(campaign)
    assert (after["done"], after["total"], after["remaining"], after["not_needed"]) == (
        28, 28, 0, 4)
    assert "4 not needed (the stopping rule ended their model)" in status.render(after)
    assert schedule.stopped_at(campaign) == {"matmul-10k": 6, "mm-4096": 8}
