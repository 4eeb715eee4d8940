"""Real Snakemake, as a subprocess, on tiny campaigns with the real Docker Engine:
order, failure and rerun, a broken environment, kill and resume, analysis edits."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import docker
import pytest
import yaml

from containertax.campaign.paths import CampaignPaths
from containertax.core import rawrecord, records
from containertax.runtimes import launch
from tests.conftest import DEMO_IMAGE, REPO, demo_config, held_python, needs_docker, processes

pytestmark = [needs_docker, pytest.mark.docker, pytest.mark.slow]


def make_campaign(tmp_path: Path, name: str, envs: list[str], reps: int = 2,
                  size: int = 128, repeats: int = 5, **overrides) -> Path:
    cfg = demo_config()
    cfg["campaign"] = name
    cfg["repetitions"] = reps
    cfg["environments"] = {k: v for k, v in cfg["environments"].items() if k in envs}
    cfg["reference_environment"] = envs[0]
    cfg["models"] = [{"id": f"n{size}", "size": size, "repeats": repeats}]
    cfg["thermal"].update(min_interval_s=0, cooldown_s=0.2, poll_s=0.1)
    for key, value in overrides.items():
        cfg[key] = value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def snakemake(tmp_path: Path, cfg: Path, *args: str, timeout: float = 1800,
              popen: bool = False):
    # timeout: a hang guard only, never a speed bound (a whole known-effect campaign took
    # 285 s idle and over 600 s on the same 2 cores under a load of 8-10)
    # targets and flags first: --configfile takes every word after it
    argv = [sys.executable, "-m", "snakemake", *args, "--snakefile", str(REPO / "Snakefile"),
            "--directory", str(tmp_path), "--configfile", str(cfg)]
    if popen:
        # output to a file, never an unread pipe: Snakemake's job lines (each lists its
        # inputs, ~70 source files) filled the 64 KiB pipe buffer and blocked it mid-write,
        # so that it never ended and the test waited forever (the run of 070c9f8)
        log = open(tmp_path / "snakemake.popen.log", "wb")  # noqa: SIM115 (the child's)
        # Ctrl-C as a user's terminal delivers it: a test command started as a background
        # job (bash: asynchronous commands ignore SIGINT) passed its ignored SIGINT on, so
        # the SIGINT test's kill reached nothing and its held run ended by its 300 s
        # timeout instead (two whole runs of 2026-12-05, 324 s each, passing)
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=_default_sigint)
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def ledger(root: Path) -> list[dict]:
    """The cells' events (gate, run, cooldown), every line parsed: a torn one fails the test;
    another step's event (a record moved aside) is no cell's and is left out."""
    path = CampaignPaths(root).ledger
    events = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() \
        else []
    return records.cell_events(events)


def steps(events: list[dict], step: str, event: str = "start") -> list[tuple]:
    return [(e["model"], e["environment"], e["repetition"]) for e in events
            if e["step"] == step and e["event"] == event]


def schedule_order(root: Path) -> list[tuple]:
    with CampaignPaths(root).schedule.open() as fh:
        return [(r["model"], r["environment"], int(r["repetition"])) for r in csv.DictReader(fh)]


def raw_records(root: Path) -> list[Path]:
    return CampaignPaths(root).raw_records()


def assert_nothing_left_behind(root: Path, campaign: str) -> None:
    assert not list(CampaignPaths(root).raw_dir.rglob("*.tmp")), "temporary files left in raw/"
    assert not list(CampaignPaths(root).raw_dir.rglob("*.partial"))
    left = docker.from_env().containers.list(all=True, filters={"label": [  # this test's own
        f"{launch.LABEL}={campaign}", f"containertax.root={root.resolve()}"]})
    assert left == [], f"containers left behind: {left}"
    mounts = Path("/proc/mounts").read_text()
    assert str(root.resolve()) not in mounts, "chroot mounts leaked into the host"


def test_campaign_runs_in_schedule_order_and_records_everything(tmp_path):
    cfg = make_campaign(tmp_path, "order", ["native", "chroot", "docker"], reps=2)
    out = snakemake(tmp_path, cfg)
    assert out.returncode == 0, out.stderr[-3000:]
    root = tmp_path / "results" / "order"
    events = ledger(root)
    assert [(m, e, r) for m, e, r in steps(events, "run")] == schedule_order(root)
    # gate, run and cooldown of a cell run back to back, in that order
    seq = [(e["step"], e["position"]) for e in events if e["event"] == "start"]
    assert seq == [(s, p) for p in range(6) for s in ("gate", "run", "cooldown")]

    recs = [json.loads(p.read_text()) for p in raw_records(root)]
    assert len(recs) == 6
    for path, rec in zip(raw_records(root), recs, strict=True):
        assert rawrecord.read_record(path).schema_version == rawrecord.SCHEMA_VERSION
        assert rec["schema_version"] == rawrecord.SCHEMA_VERSION and rec["status"] == "ok"
        names = {m["name"]: m["unit"] for m in rec["metrics"]}
        assert names["compute_time_s"] == "s" and names["process_wall_s"] == "s"
        assert rec["gate"]["passed"] and rec["telemetry"]["samples"] >= 1
        assert rec["provenance"]["config_hash"] and rec["inside"]["software"]["numpy"]
        assert rec["memory"]["before_kib"]["MemAvailable"] > 0 and "dropped" in rec["memory"][
            "drop"]
        cell = CampaignPaths(root).cell(rec["cell"]["model"], rec["cell"]["environment"],
                                        rec["cell"]["repetition"])
        assert cell.label == f"{rec['cell']['repetition']:03d}"  # fixed width: rep001
        for path in (cell.telemetry, cell.requests, cell.run_log, cell.cooldown):
            assert path.exists()
    kinds = {r["environment"]["kind"] for r in recs}
    assert kinds == {"native", "chroot", "docker"}
    docker_rec = next(r for r in recs if r["environment"]["kind"] == "docker")
    chroot_rec = next(r for r in recs if r["environment"]["kind"] == "chroot")
    # each environment's own markers, read from inside it: native sees this machine's
    native_rec = next(r for r in recs if r["environment"]["kind"] == "native")
    here = "hypervisor" in Path("/proc/cpuinfo").read_text()
    assert native_rec["inside"]["environment"]["markers"]["dockerenv"] == \
        Path("/.dockerenv").exists()
    assert native_rec["inside"]["environment"]["markers"]["hypervisor_flag"] is here
    assert docker_rec["inside"]["environment"]["markers"]["dockerenv"] is True
    assert docker_rec["inside"]["environment"]["markers"]["hypervisor_flag"] is here
    # chroot and docker run the very same image
    assert docker_rec["environment"]["resolved"]["image"]["id"] == \
        chroot_rec["environment"]["resolved"]["image"]["id"]

    with CampaignPaths(root).runs.open() as fh:
        rows = list(csv.DictReader(fh))
    # 9 matmul metrics and 4 of host memory (MemAvailable before/after, peak, rise)
    # 13 metrics of the run and the 8 phases of its timeline (numpy: no device, no compile)
    assert len(rows) == 6 * (13 + 8) and {r["unit"] for r in rows} >= {"s", "GFLOP/s", "MiB", "GiB"}
    assert {r["page_cache"] for r in rows} <= {"dropped", "kept"}
    system = json.loads(CampaignPaths(root).system.read_text())
    assert system["docker"]["present"] and system["git"]["commit"]
    assert_nothing_left_behind(root, "order")
    # two headline rows of one metric: the abstract names the metric once (#39: the demo's
    # four rows repeated it, 282 words against 250); of one model, not "of each model"
    text = subprocess.run(["pdftotext", str(root / "paper" / "paper.pdf"), "-"],
                          capture_output=True, text=True).stdout
    abstract = " ".join(text.split("Abstract", 1)[1].split("Introduction", 1)[0].split())
    assert re.search(r"The headline comparison \(compute time per product\), "
                     r"with its 95 % interval: n128 in (chroot|docker): [+\u2212]", abstract), \
        abstract
    assert "n128 in docker (compute" not in abstract and "n128 in chroot (compute" not in abstract

    # nothing left to do; editing analysis code re-runs the analysis, never a cell
    again = snakemake(tmp_path, cfg)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    # an edit of the analysis code (in a copy of the workflow) plans the analysis only
    copy = tmp_path / "workflow-copy"
    shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns(
        ".venv", "results", ".git", ".snakemake", "__pycache__", "*.egg-info"))
    with (copy / "src" / "containertax" / "statistics" / "aggregate.py").open("a") as fh:
        fh.write("# an edit\n")
    planned = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(copy / "Snakefile"),
         "--directory", str(tmp_path), "--configfile", str(cfg), "-n", "--quiet", "rules"],
        capture_output=True, text=True)
    jobs = {line.split()[0] for line in (planned.stdout + planned.stderr).splitlines()
            if len(line.split()) == 2 and line.split()[1].isdigit()}
    assert jobs and not jobs & {"gate", "run", "cooldown"}, planned.stdout + planned.stderr
    assert {"aggregate", "quality", "pdf"} <= jobs

    # the paper: built from the records, every number generated
    pdf = root / "paper" / "paper.pdf"
    assert pdf.exists() and pdf.read_bytes()[:5] == b"%PDF-"
    text = " ".join(subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True,
                                   text=True).stdout.split())
    assert "in six runs" in text and "planned as a Williams design" in text
    # two blocks of a 3-environment Williams design (period 6): the realised order is not
    # position-balanced, and the paper says so from the counts, not from the design's name
    assert "positions within the blocks are not balanced" in text
    assert "Position within the block" in text
    assert "without a GPU" in text and "one GPU" not in text
    assert "docker ran inside a container (/.dockerenv present" in text
    assert_reviewed(root)
    # `snakemake paper` with a record missing rebuilds the paper and runs no cell
    moved = raw_records(root)[0]
    aside = tmp_path / "aside"
    aside.mkdir()
    for f in moved.parent.glob(moved.name.split(".")[0] + ".*"):
        f.chmod(0o644)
        f.rename(aside / f.name)
    before = len(ledger(root))
    rebuilt = snakemake(tmp_path, cfg, "paper")
    assert rebuilt.returncode == 0, rebuilt.stdout[-3000:]
    assert len(ledger(root)) == before, "snakemake paper ran a benchmark cell"
    quality_report = json.loads((root / "stats" / "quality.json").read_text())
    assert any(f["check"] == "missing_repetitions" for f in quality_report["findings"])

    status = subprocess.run([sys.executable, "-m", "containertax", "status", str(cfg),
                             "--json"], capture_output=True, text=True, cwd=tmp_path)
    summary = json.loads(status.stdout)
    assert summary["done"] == 5 and summary["remaining"] == 1  # one record moved aside
    assert summary["median_cell_s"] > 0


@pytest.mark.status_page
def test_failed_cell_does_not_block_others_and_reruns_alone(tmp_path):
    flag = tmp_path / "fail-once"
    flag.write_text("")
    wrapper = tmp_path / "flaky-python"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ -e {flag} ] && echo "$*" | grep -q -- --size; then\n'
        f"  rm {flag}; echo 'injected failure' >&2; exit 3\nfi\n"
        'exec /usr/bin/python3 "$@"\n')
    wrapper.chmod(0o755)
    cfg = make_campaign(tmp_path, "flaky", ["native", "docker"], reps=3)
    data = yaml.safe_load(cfg.read_text())
    data["environments"]["native"]["python"] = str(wrapper)
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))

    first = snakemake(tmp_path, cfg, "cells")  # cells only: no paper to test here
    assert first.returncode != 0
    root = tmp_path / "results" / "flaky"
    events = ledger(root)
    failed = [(e["model"], e["environment"], e["repetition"]) for e in events
              if e["step"] == "run" and e["event"] == "end" and e["status"] == "failed"]
    assert len(failed) == 1
    fail_event = next(e for e in events if e.get("status") == "failed")
    assert "injected failure" in fail_event["error"]
    # every other cell ran, in schedule order
    assert steps(events, "run") == schedule_order(root)
    assert len(raw_records(root)) == 5
    page = root / "status.html"  # rewritten after every cell by the real workflow
    assert "5/6 cells done" in page.read_text() and "injected failure" in page.read_text()
    assert not list((root / "cells").rglob("*.gate.json")) or all(
        p.exists() for p in (root / "cells").rglob("*.gate.json"))

    second = snakemake(tmp_path, cfg, "cells")
    assert second.returncode == 0, second.stderr[-3000:]
    new = ledger(root)[len(events):]
    assert {(e["step"], e["model"], e["environment"], e["repetition"])
            for e in new} == {(s, *failed[0]) for s in ("gate", "run", "cooldown")}
    assert len(raw_records(root)) == 6
    assert "6/6 cells done" in page.read_text()
    assert_nothing_left_behind(root, "flaky")


def test_broken_environment_blocks_only_its_cells(tmp_path):
    cfg = make_campaign(tmp_path, "broken", ["native", "docker"], reps=2)
    data = yaml.safe_load(cfg.read_text())
    data["environments"]["docker"]["image"] = "containertax-missing:none"
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    out = snakemake(tmp_path, cfg)
    assert out.returncode != 0
    root = tmp_path / "results" / "broken"
    log = (root / "logs" / "preflight" / "docker.log").read_text()
    assert "containertax-missing:none" in log and "environments.docker.image" in log
    assert {p.parent.name for p in raw_records(root)} == {"native"}
    assert len(raw_records(root)) == 2


def test_one_environment_runs_its_cells_and_refuses_its_paper_by_name(tmp_path):
    """A campaign of one environment: its cells and statistics are made; the paper, which
    compares environments, is refused naming the file, the key and the fix (it was a
    KeyError 'reference' in the tables and numbers steps, and a LaTeX error after)."""
    cfg = make_campaign(tmp_path, "one", ["native"], reps=2)
    out = snakemake(tmp_path, cfg, "--cores", "1")
    assert out.returncode != 0
    text = out.stdout + out.stderr
    assert f"{cfg}: key 'environments': campaign 'one' has one environment (native)" in text
    assert "add a second environment (e.g. a replica: 'native-aa: {replica_of: native}')" \
        in text and "snakemake cells" in text
    assert "KeyError" not in text and "Traceback" not in text
    root = tmp_path / "results" / "one"
    assert len(raw_records(root)) == 2 and CampaignPaths(root).findings.exists()
    assert not (root / "paper" / "paper.pdf").exists()


def test_pending_cells_still_run_after_a_config_edit(tmp_path):
    """Editing the config rewrites schedule and system; the pending cells of one visit
    (`containertax targets`) must still run in that same invocation (regression: with
    ancient() inputs Snakemake silently dropped them, seen on the H100)."""
    cfg = make_campaign(tmp_path, "edit", ["native"], reps=2)
    root = tmp_path / "results" / "edit"
    first = snakemake(tmp_path, cfg, "results/edit/schedule.csv", "results/edit/system.json")
    assert first.returncode == 0, first.stderr[-2000:]
    data = yaml.safe_load(cfg.read_text())
    data["thermal"]["cooldown_s"] = 0.3
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    targets = subprocess.run([sys.executable, "-m", "containertax", "targets", str(cfg),
                              "--reps", "1"], capture_output=True, text=True, cwd=tmp_path,
                             check=True).stdout.split()
    out = snakemake(tmp_path, cfg, *targets)
    assert out.returncode == 0, out.stderr[-2000:]
    assert len(raw_records(root)) == 1 and CampaignPaths(root).cell("n128", "native",
                                                                    1).cooldown.exists()


def test_bad_config_fails_before_anything_runs(tmp_path):
    cfg = make_campaign(tmp_path, "bad", ["native", "docker"], reps=2)
    data = yaml.safe_load(cfg.read_text())
    data["repetitions"] = 1
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    out = snakemake(tmp_path, cfg, "-n")
    assert out.returncode != 0
    text = out.stdout + out.stderr
    assert str(cfg) in text and "key 'repetitions'" in text and "minimum of 2" in text
    assert not CampaignPaths(tmp_path / "results" / "bad").ledger.exists()


# A hang, not a speed: the whole test took 50 s idle, and Snakemake had not ended 120 s after
# SIGINT under a load of 8-10 (issue #43); the guard only turns a deadlock into a failure, at
# any load seen.
HANG_GUARD_S = 1800


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_killed_campaign_resumes_with_every_cell_done_once(tmp_path, sig):
    name = f"kill{sig.name.lower()}"
    cfg = make_campaign(tmp_path, name, ["native", "chroot", "docker"], reps=2)
    # the native environment's second measured run is held: it is in the second block, so
    # two to five runs have finished before it (the order is counterbalanced)
    wrapper, hold, held = held_python(tmp_path, hold_at=2)
    data = yaml.safe_load(cfg.read_text())
    data["environments"]["native"]["python"] = str(wrapper)
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    root = tmp_path / "results" / name
    proc = snakemake(tmp_path, cfg, "cells", popen=True)
    # Events, not clocks (issue #43): a 120 s bound failed under load, and a kill timed from
    # the ledger could land between two runs; the held run waits for the kill
    while proc.poll() is None and not held.exists():
        time.sleep(0.05)
    if not held.exists():
        pytest.fail(f"the campaign ended (status {proc.returncode}) before its held run")
    os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout=HANG_GUARD_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"Snakemake had not ended {HANG_GUARD_S} s after {sig.name} (a hang)")
    # the held workload died with its run (launch.run_process: its own group, killed on
    # Ctrl-C, and SIGKILL when its launcher dies), though its hold was never lifted
    assert not processes(lambda argv: str(wrapper) in argv), "the held workload outlived the kill"
    hold.unlink()  # the resumed campaign's runs go through
    interrupted = ledger(root)
    assert len(raw_records(root)) < 6

    if sig == signal.SIGKILL:  # Snakemake's lock survives a SIGKILL; its message says --unlock
        unlock = snakemake(tmp_path, cfg, "--unlock")
        assert unlock.returncode == 0
    resumed = snakemake(tmp_path, cfg, "cells")
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    events = ledger(root)
    ok = Counter((e["model"], e["environment"], e["repetition"]) for e in events
                 if e["step"] == "run" and e["event"] == "end" and e["status"] == "ok")
    assert len(ok) == 6 and set(ok.values()) == {1}, ok
    assert len(raw_records(root)) == 6
    # the interrupted attempt is in the ledger: a start without an ok end (SIGINT: an end
    # marked failed with KeyboardInterrupt; SIGKILL: no end at all)
    ok_before = {e["attempt"] for e in interrupted
                 if e["step"] == "run" and e["event"] == "end" and e["status"] == "ok"}
    cut = [e for e in interrupted if e["step"] == "run" and e["event"] == "start"
           and e["attempt"] not in ok_before]
    assert len(cut) == 1 and cut[0]["environment"] == "native", cut  # the held run
    ends = [e for e in interrupted if e["step"] == "run" and e["event"] == "end"
            and e["attempt"] == cut[0]["attempt"]]
    # by the signal, not by its timeout or anything else
    assert [e.get("error") for e in ends] == (
        ["KeyboardInterrupt"] if sig == signal.SIGINT else []), ends
    assert 2 <= len(ok_before) <= 5
    for rec in raw_records(root):
        json.loads(rec.read_text())  # whole, parseable
    assert_nothing_left_behind(root, name)


def assert_reviewed(root: Path) -> None:
    """Nothing a reviewer would reject (publishing/review.py, run by the paper rule)."""
    problems = json.loads((root / "paper" / "review.json").read_text())
    assert problems == [], problems


def test_imported_study_goes_to_a_paper(tmp_path):
    """Sani et al. (2025): the shipped tidy CSV through quality, statistics and the PDF."""
    cfg = tmp_path / "sani.yaml"
    data = yaml.safe_load((REPO / "config" / "sani2025.yaml").read_text())
    data["analysis"]["import_csv"] = str(REPO / "resources" / "sani2025" / "runs.csv")
    cfg.write_text(yaml.safe_dump(data))
    out = snakemake(tmp_path, cfg)
    assert out.returncode == 0, out.stdout[-3000:]
    root = tmp_path / "results" / "sani2025"
    comp = {r["metric"]: r for r in csv.DictReader(CampaignPaths(root).comparisons.open())}
    assert round(float(comp["time_s"]["mean_ref"]), 2) == 1.52
    assert round(float(comp["time_s"]["mean_env"]), 2) == 2.55
    assert 0.66 < float(comp["time_s"]["rel_ci_low"]) < 0.68 < float(
        comp["time_s"]["rel_ci_high"]) < 0.70
    text = " ".join(subprocess.run(["pdftotext", str(root / "paper" / "paper.pdf"), "-"],
                                   capture_output=True, text=True).stdout.split())
    assert "+68.0" in text and "imported results" in text and "Sani et al." in text
    assert "ran each environment in one session" in text and "Williams" not in text
    assert "Pseudo-replication." in text  # config: import_study.order sequential
    assert_reviewed(root)


@pytest.mark.parametrize("campaign,models,metric,gpu", [
    ("h100-matmul", {"mm-4096", "mm-8192"}, "compute_time_median_s",
     "GPU-5c467cca-87f4-4241-d9a8-2425727f43f4"),
    ("h100", {"qwen2-0.5b", "llama3-8b", "matmul-10k", "microbench"}, "token_throughput",
     "GPU-7f8d3bcf-2187-1e66-114d-610ac5560733"),
])
def test_committed_h100_campaign_rebuilds_its_paper_without_a_gpu(committed_paper, campaign,
                                                                  models, metric, gpu):
    """Raw records measured on the H100 (results/<campaign>/raw, committed) -> the paper,
    here, with no GPU, and without pulling a single cell into the DAG (built once per run:
    conftest.committed_paper)."""
    root = committed_paper(campaign) / "results" / campaign
    assert not CampaignPaths(root).ledger.exists(), "a benchmark cell was started"
    # what the build derived is held apart from the cells' ledger: runs.csv's sha256
    assert '"file": "runs.csv"' in CampaignPaths(root).hashes.read_text()
    assert (root / "paper" / "paper.pdf").exists()
    comp = list(csv.DictReader(CampaignPaths(root).comparisons.open()))
    assert {r["model"] for r in comp} == models
    assert metric in {r["metric"] for r in comp}
    runs = list(csv.DictReader(CampaignPaths(root).runs.open()))
    assert {r["machine"] for r in runs} == {gpu}  # the GPU's UUID, from the records
    text = " ".join(subprocess.run(["pdftotext", str(root / "paper" / "paper.pdf"), "-"],
                                   capture_output=True, text=True).stdout.split())
    assert "NVIDIA H100" in text and "in 32 runs" in text
    assert "All runs were made on one machine" in text
    assert "planned to alternate between the forward and the reversed order" in text
    # two environments alternating: balanced, as the realised counts say
    assert "Every environment ran in every position within the block equally often" in text
    assert "Threats to validity" in text and "Welch" in text and "References" in text
    assert_reviewed(root)


def test_two_gpus_under_one_host_name_are_not_called_one_host(committed_paper):
    """results/h100-engine-gqa ran on two lent machines, both named `vm`: the paper must not
    say "one host", and must name the two machines and the machine-adjusted estimate."""
    root = committed_paper("h100-engine-gqa") / "results" / "h100-engine-gqa"
    text = " ".join(subprocess.run(["pdftotext", str(root / "paper" / "paper.pdf"), "-"],
                                   capture_output=True, text=True).stdout.split())
    assert "made on one host" not in text
    assert "hosts named vm (one host with several GPUs, or several hosts of that name" in text
    # a page may end inside the sentence: its number then stands between two words
    assert re.search(r"The (\d+ )?runs measured 2 machines", text) and "Few machines." in text
    assert "GPU-0fc80ab7-4a71-f29f-7fcd-d7aa26705482 (3 runs)" in text
    # alternating with 3 environments (#23): native-aa ran second in every block; the
    # paper counts it and never claims first-and-last balance
    assert "runs first and last equally often" not in text
    assert "positions within the blocks are not balanced" in text
    assert "native-aa ran second 6 times" in text
    assert "np.int64" not in text
    assert_reviewed(root)


def test_dgx_campaign_plans_900_runs_in_a_dry_run(tmp_path):
    # docker_optimised's options are derived from phase 2B (config/README.md): planned
    # once that file exists (tests/test_study.py checks the cells wait for it)
    derived = tmp_path / "results" / "dgx-spark-2b" / "derived" / "docker_optimised.yaml"
    derived.parent.mkdir(parents=True)
    derived.write_text("options: {network: host}\n")
    t0 = time.monotonic()
    out = snakemake(tmp_path, REPO / "config" / "config.yaml", "-n", "--quiet", "rules")
    elapsed = time.monotonic() - t0
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout + out.stderr
    counts = {line.split()[0]: int(line.split()[1]) for line in text.splitlines()
              if len(line.split()) == 2 and line.split()[1].isdigit()}
    assert counts["gate"] == counts["run"] == counts["cooldown"] == 900
    print(f"dry run of 900 cells: {elapsed:.2f} s")  # reported, not asserted


def test_demo_image_is_the_one_the_demo_uses():
    assert demo_config()["environments"]["docker"]["image"] == DEMO_IMAGE
