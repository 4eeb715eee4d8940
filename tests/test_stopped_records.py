"""Issue #35: only scheduled records count. The fault, planted in a copy of the committed
campaign results/h100-stopping (its stopping rule stops matmul-10k after 6 blocks): two
records added by hand as block 7 of that model. Before, runs.csv and the comparisons
used them and `status` counted nothing amiss; now `check`, a dry run and `status` name
them, the aggregate leaves them out, and the next invocation that runs jobs moves them
to raw/.superseded/ with a ledger event each."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from containertax import cli
from containertax.campaign import config, schedule
from tests.conftest import REPO

CAMPAIGN = "h100-stopping"
MODEL = "matmul-10k"


def _snakemake(work: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(work), "--configfile", str(work / "config" / f"{CAMPAIGN}.yaml"),
         *args], capture_output=True, text=True, timeout=300, cwd=work)


def _plant(raw: Path, env: str) -> Path:
    """Block 7 of a model the rule stopped at 6: block 6's record, renamed by hand."""
    src = raw / MODEL / env / "rep006.json"
    data = json.loads(src.read_text())
    data["cell"].update(repetition=7, block=7, position=data["cell"]["position"] + 100)
    out = src.with_name("rep007.json")
    out.write_text(json.dumps(data))
    return out


@pytest.fixture(scope="module")
def decided(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkout-like folder with the committed campaign, its first look decided by the
    workflow (once per module; each test works on a copy)."""
    work = tmp_path_factory.mktemp("decided")
    (work / "config").mkdir()
    shutil.copy(REPO / "config" / f"{CAMPAIGN}.yaml", work / "config")
    shutil.copytree(REPO / "results" / CAMPAIGN, work / "results" / CAMPAIGN)
    for p in (work / "results" / CAMPAIGN / "raw").rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    out = _snakemake(work, "--cores", "1", f"results/{CAMPAIGN}/interim/look1.json")
    assert out.returncode == 0, out.stderr[-3000:]
    look = json.loads((work / "results" / CAMPAIGN / "interim" / "look1.json").read_text())
    assert look["models"][MODEL]["decision"] == "stop"
    assert look["models"][MODEL]["blocks_allowed"] == 6
    return work


@pytest.fixture
def stopped(decided: Path, tmp_path: Path) -> Path:
    """The decided campaign, copied for one test (Snakemake's metadata left behind)."""
    work = tmp_path / "work"
    shutil.copytree(decided, work, ignore=shutil.ignore_patterns(".snakemake"))
    return work


def test_records_beyond_a_stop_are_named_left_out_and_moved_aside(stopped, monkeypatch,
                                                                   capsys):
    monkeypatch.chdir(stopped)
    root = stopped / "results" / CAMPAIGN
    planted = [_plant(root / "raw", env) for env in ("native", "docker")]
    cfg = f"config/{CAMPAIGN}.yaml"

    assert cli.main(["check", cfg]) == 0
    out = capsys.readouterr().out
    assert all(str(p.relative_to(stopped)) in out for p in planted), out
    assert "beyond the stopping rule's stop of model matmul-10k after 6 blocks" in out

    assert cli.main(["status", cfg]) == 0
    out = capsys.readouterr().out
    assert out.count("not counted, not analysed") == 2, out

    campaign = config.load_file(cfg, stopped)
    assert {u.path for u in schedule.unscheduled(campaign)} == set(planted)

    dry = _snakemake(stopped, "-n", f"results/{CAMPAIGN}/runs.csv")
    assert dry.returncode == 0 and "outside the campaign's schedule" in dry.stdout + dry.stderr
    assert all(p.exists() for p in planted)  # a plan moves nothing

    run = _snakemake(stopped, "--cores", "1", f"results/{CAMPAIGN}/runs.csv")
    assert run.returncode == 0, run.stderr[-3000:]
    assert not any(p.exists() for p in planted)
    moved = list((root / "raw" / ".superseded").glob(f"*/{MODEL}/*/rep007.json"))
    assert len(moved) == 2
    events = [json.loads(line) for line in (root / "ledger.jsonl").read_text().splitlines()]
    assert sum(e.get("step") == "supersede" and "unscheduled" in e for e in events) == 2
    runs = (root / "runs.csv").read_text().splitlines()
    header = runs[0].split(",")
    model, rep = header.index("model"), header.index("repetition")
    assert max(int(r.split(",")[rep]) for r in runs[1:] if r.split(",")[model] == MODEL) == 6


def test_the_aggregate_leaves_them_out_even_before_they_are_moved(stopped, monkeypatch):
    """The aggregate step run alone (as a rule would) never reads an unscheduled record."""
    monkeypatch.chdir(stopped)
    root = stopped / "results" / CAMPAIGN
    _plant(root / "raw", "native")
    out = root / "runs-direct.csv"
    assert cli.main(["aggregate", "--config", f"config/{CAMPAIGN}.yaml",
                     "--out", str(out)]) == 0
    import pandas as pd

    runs = pd.read_csv(out)
    assert runs[runs.model == MODEL].repetition.max() == 6


def test_a_cell_a_config_edit_removed_is_named(tmp_path, monkeypatch):
    """Not only stops: a record of an environment no longer in the config."""
    monkeypatch.chdir(tmp_path)
    campaign = config.load_file(REPO / "config" / "demo.yaml", tmp_path)
    raw = campaign.paths.raw_dir / "n256" / "gone" / "rep001.json"
    raw.parent.mkdir(parents=True)
    raw.write_text(json.dumps({"cell": {"model": "n256", "environment": "gone",
                                        "repetition": 1}, "metrics": []}))
    found = schedule.unscheduled(campaign)
    assert [u.path for u in found] == [raw] and "not in the campaign's schedule" in found[0].why


# --- looks pinned to their rule ---------------------------------------------------------


def _set_spending(work: Path, spending: str) -> None:
    path = work / "config" / f"{CAMPAIGN}.yaml"
    text = path.read_text()
    assert "spending: obrien-fleming" in text
    path.write_text(text.replace("spending: obrien-fleming", f"spending: {spending}"))


def test_a_look_records_its_rule(stopped):
    look = json.loads((stopped / "results" / CAMPAIGN / "interim" / "look1.json").read_text())
    fp = look["rule_fingerprint"]
    assert fp["spending"] == "obrien-fleming" and fp["looks"] == [6, 8] and fp["sha256"]


def test_a_changed_rule_is_named_and_refused_until_the_looks_are_redecided(
        stopped, monkeypatch, capsys):
    """Before: obrien-fleming -> pocock after the looks gave no warning, and the paper
    printed 'Pocock-type' beside the old decisions."""
    monkeypatch.chdir(stopped)
    _set_spending(stopped, "pocock")
    cfg = f"config/{CAMPAIGN}.yaml"
    look = f"results/{CAMPAIGN}/interim/look1.json"
    for argv in (["check", cfg], ["status", cfg]):
        assert cli.main(argv) == 1
        err = capsys.readouterr().err
        assert look in err and "'obrien-fleming' then, 'pocock' now" in err, err
        assert "mv results/h100-stopping/interim" in err and "Traceback" not in err
    dry = _snakemake(stopped, "-n")
    text = dry.stdout + dry.stderr
    assert dry.returncode != 0 and "'obrien-fleming' then, 'pocock' now" in text, text[-2000:]
    assert "Traceback" not in text
    # the user says so: the looks moved aside are decided again, under the new rule
    interim = stopped / "results" / CAMPAIGN / "interim"
    interim.rename(interim.with_name("interim.old"))
    out = _snakemake(stopped, "--cores", "1", look)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads((stopped / look).read_text())["rule_fingerprint"]["spending"] == "pocock"
    assert cli.main(["check", cfg]) == 0


@pytest.mark.parametrize("damage", ["half", "list", "binary"])
def test_a_damaged_look_file_is_named_with_its_fix(stopped, monkeypatch, capsys, damage):
    """Before: `check` said ok, then `snakemake -n`, `paper` and `status` stopped on a
    JSONDecodeError traceback naming no file."""
    monkeypatch.chdir(stopped)
    path = stopped / "results" / CAMPAIGN / "interim" / "look1.json"
    text = path.read_bytes()
    path.write_bytes({"half": text[: len(text) // 2], "list": b"[1, 2]",
                      "binary": b"\x00\xff\xfe"}[damage])
    cfg = f"config/{CAMPAIGN}.yaml"
    for argv in (["check", cfg], ["status", cfg]):
        assert cli.main(argv) == 1
        err = capsys.readouterr().err
        assert f"results/{CAMPAIGN}/interim/look1.json" in err and "mv " in err, err
        assert "Traceback" not in err
    dry = _snakemake(stopped, "-n")
    text = dry.stdout + dry.stderr
    assert dry.returncode != 0 and "look1.json" in text and "Traceback" not in text, text[-2000:]


def test_a_look_written_before_fingerprints_is_held_to_the_rule_it_names():
    """The committed looks of h100-stopping (raw/visits/...) name rule and looks only:
    accepted under that rule, refused under Pocock-type spending."""
    from containertax.campaign import looks
    from containertax.campaign.stopping import Rule

    path = REPO / "results" / CAMPAIGN / "raw" / "visits" / "20261124T140600Z" / "interim" \
        / "look1.json"
    rule = Rule.from_config(config.load_file(REPO / "config" / f"{CAMPAIGN}.yaml").raw)
    assert looks.read_look(path, rule)["models"][MODEL]["decision"] == "stop"
    with pytest.raises(looks.LookError, match="'obrien-fleming' then, 'pocock' now"):
        looks.read_look(path, Rule(**{**rule.__dict__, "spending": "pocock"}))


def test_the_exact_rule_campaign_rebuilds_the_looks_its_gpu_machine_decided(committed_paper):
    """results/h100-stopping-exact (issue #33's rule, 4 visits on lent H100s): the look files
    written by the interim checkpoint on the GPU machine are accepted under the config's
    rule, and the analysis rebuilt here from the raw records alone stops every model where
    they did (matmul-10k at look 1, the other two at the maximum). Fails if the rule, the
    boundaries or the stop logic drift from what decided the campaign."""
    from containertax.campaign import looks
    from containertax.campaign.stopping import Rule

    campaign = "h100-stopping-exact"
    rule = Rule.from_config(config.load_file(REPO / "config" / f"{campaign}.yaml").raw)
    visit = REPO / "results" / campaign / "raw" / "visits" / "20261126T222553Z" / "interim"
    final = {}
    for n in (1, 2):
        for model, d in looks.read_look(visit / f"look{n}.json", rule)["models"].items():
            final[model] = d
    assert {m: d["blocks_run"] for m, d in final.items()} == {
        "matmul-10k": 6, "qwen2-0.5b": 8, "mm-4096": 8}
    work = committed_paper(campaign, f"results/{campaign}/paper/numbers.tex")
    numbers = (work / "results" / campaign / "paper" / "numbers.tex").read_text()
    stops = re.search(r"\\ctxdef\{seq/stops\}\{(.*)\}", numbers).group(1)
    for model, d in final.items():
        assert f"{model} after {d['blocks_run']} blocks (look {d['looks_made']}," in stops, stops
    # the answer of every primary comparison at each model's last look is the one its look
    # file holds (before, the rebuild applied a drift check those looks never ran and
    # answered 'not stationary' where the GPU machine had answered 'none')
    last_rows = {}
    for n in (1, 2):
        for row in json.loads((visit / f"look{n}.json").read_text())["rows"]:
            if row["look"] == final[row["model"]]["looks_made"]:
                last_rows[(row["model"], row["environment"], row["metric"])] = row["answer"]
    assert last_rows[("qwen2-0.5b", "docker", "token_throughput")] == "none"
    found = pd.read_csv(work / "results" / campaign / "stats" / "findings.csv")
    found = found[found.family == "primary"]
    rebuilt = {(r.model, r.environment, r.metric): r.answer for r in found.itertuples()}
    assert {k: rebuilt.get(k) for k in last_rows} == last_rows


@pytest.mark.parametrize("campaign", ["h100-stopping-exact", "h100-stopping"])
def test_a_look_from_before_the_drift_check_is_refused_under_a_rule_with_one(campaign):
    """Their look files record no drift_check (the check came later, issue #41): decided
    without it. Under the config's rule (drift_check: false, the rule they ran under) they
    are accepted; with the check they are refused by name, never re-described as if the
    check had run at them (the paper had said so, and answered 'not stationary' for a look
    whose file says 'none')."""
    import dataclasses

    from containertax.campaign import looks
    from containertax.campaign.stopping import Rule

    rule = Rule.from_config(config.load_file(REPO / "config" / f"{campaign}.yaml").raw)
    files = sorted((REPO / "results" / campaign / "raw" / "visits").glob("*/interim/look*.json"))
    assert files and not rule.drift_check
    for path in files:
        assert "drift_check" not in json.loads(path.read_text())["rule"]
        looks.read_look(path, rule)
        with pytest.raises(looks.LookError, match="drift_check: False then, True now"):
            looks.read_look(path, dataclasses.replace(rule, drift_check=True))
