"""The live status page (publishing/statuspage.py), opened as a person opens it: in headless
Chromium, from the file. Built from the committed H100 campaign's raw records, whole and
cut to a partial campaign with a failed cell; the screenshot must show the temperature
chart drawn and the rendered DOM the progress counts, the ETA, the failure's log tail and
the interim estimate (checked against scipy's paired t on the records). Planted pages (no
chart, a wrong count) must fail the same checks. scripts/test.sh installs chromium and sets
CONTAINERTAX_REQUIRE_CHROMIUM, so CI fails rather than skips without it."""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from scipy import stats as sps

from containertax import cli
from containertax.campaign import config, paths, schedule
from containertax.core import records
from containertax.publishing import statuspage
from tests.conftest import REPO

COMMITTED = REPO / "results" / "h100-engine-balanced"
CHROMIUM = shutil.which("chromium")
if CHROMIUM is None and os.environ.get("CONTAINERTAX_REQUIRE_CHROMIUM"):
    raise RuntimeError("CONTAINERTAX_REQUIRE_CHROMIUM is set but chromium is missing "
                       "(apt-get install chromium; scripts/test.sh installs it)")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="needs chromium")
LOG_LAST = "RuntimeError: CUDA error: out of memory (planted, last line)"
GATE_BLUE, COOL_RED, COOL_GREEN = (0x1F, 0x6F, 0xB4), (0xD6, 0x27, 0x28), (0x2C, 0xA0, 0x2C)


def committed_campaign(tmp_path: Path, keep_reps: int = 6) -> config.Campaign:
    """A copy of results/h100-engine-balanced with its visit's ledger at the root (as on
    the machine that ran it), repetitions after keep_reps removed from the copy."""
    data = yaml.safe_load((REPO / "config" / "h100-engine-balanced.yaml").read_text())
    data.update(results_dir=str(tmp_path / "results"), results_dir_absolute=True)
    campaign = config.load_campaign(data, "h100-engine-balanced.yaml")
    shutil.copytree(COMMITTED, campaign.root)
    (ledger,) = (campaign.root / "raw" / "visits").glob("*/ledger.jsonl")
    shutil.copyfile(ledger, campaign.paths.ledger)
    for f in campaign.paths.raw_dir.glob("*/*/rep*"):
        if int(re.match(r"rep(\d+)", f.name)[1]) > keep_reps:
            f.chmod(0o644)
            f.unlink()
    return campaign


def partial_campaign(tmp_path: Path) -> config.Campaign:
    """Blocks 1-4 done, docker's repetition 5 failed in its run (with a log), the rest
    pending: 12 done, 1 failed, 5 pending of 18."""
    campaign = committed_campaign(tmp_path, keep_reps=4)
    cell = {"model": "llama3-8b", "environment": "docker", "repetition": 5, "block": 5,
            "lane": "main"}
    records.append_ledger(campaign.root, {"step": "run", "event": "start", **cell})
    records.append_ledger(campaign.root, {
        "step": "run", "event": "end", "status": "failed", **cell,
        "error": "RunFailed: llama3-8b/docker/rep005 in environment docker exited with "
                 "status 1"})
    log = campaign.root / paths.LOG.format(step="run", model="llama3-8b",
                                           environment="docker", rep="005")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("".join(f"2026-12-01 10:00:{k:02d} INFO loading shard {k}\n"
                           for k in range(40)) + LOG_LAST + "\n")
    return campaign


def expected_interval(campaign: config.Campaign, env: str, blocks: int) -> str:
    """Docker (or the A/A replica) against native on token throughput, by scipy alone:
    the paired t interval of the per-block log ratios, as relative differences."""
    values: dict[tuple[str, int], float] = {}
    for path in campaign.paths.raw_records():
        rec = json.loads(path.read_text())
        tput = next(m["value"] for m in rec["metrics"] if m["name"] == "token_throughput")
        values[(rec["cell"]["environment"], rec["cell"]["block"])] = tput
    d = np.array([math.log(values[(env, b)] / values[("native", b)])
                  for b in range(1, blocks + 1)])
    low, high = sps.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=sps.sem(d))
    est, low, high = (100 * math.expm1(v) for v in (d.mean(), low, high))
    return f"{est:+.2f} % [{low:+.2f} %, {high:+.2f} %]"


def chromium(page: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    out = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--user-data-dir={tmp_path / 'chromium-profile'}", *args, page.resolve().as_uri()],
        capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    return out


def screenshot(page: Path, tmp_path: Path, name: str) -> Path:
    png = tmp_path / f"{name}.png"
    chromium(page, tmp_path, f"--screenshot={png}", "--window-size=1280,2000")
    return png


def dom_text(page: Path, tmp_path: Path) -> str:
    """The text of the DOM as Chromium rendered it."""
    return statuspage.text_of(chromium(page, tmp_path, "--dump-dom").stdout)


def pixels(png: Path, rgb: tuple[int, int, int]) -> np.ndarray:
    from PIL import Image

    img = np.asarray(Image.open(png).convert("RGB")).astype(int)
    return np.abs(img - np.array(rgb)).sum(axis=2) <= 30


def check_screenshot(png: Path, runs: int) -> dict[str, float]:
    """Not blank, and the temperature chart drawn: the gate series' blue dots (a colour
    nothing else on the page uses) about once per run, spread over the chart's width, the
    cooldowns' red and green dots too."""
    from PIL import Image

    img = np.asarray(Image.open(png).convert("RGB")).astype(int)
    inked = float((img.sum(axis=2) < 600).mean())
    blue = pixels(png, GATE_BLUE)
    xs = np.nonzero(blue)[1]
    stats = {"inked": inked, "blue_px": int(blue.sum()),
             "blue_spread_px": int(np.ptp(xs)) if len(xs) else 0,
             "red_px": int(pixels(png, COOL_RED).sum()),
             "green_px": int(pixels(png, COOL_GREEN).sum())}
    assert inked > 0.005, f"the screenshot is blank: {stats}"
    assert stats["blue_px"] >= 8 * runs, f"no gate dots drawn: {stats}"
    assert stats["blue_spread_px"] > 600, f"the gate dots are not spread over time: {stats}"
    assert stats["red_px"] >= 8 * runs and stats["green_px"] >= 8 * runs, stats
    return stats


def check_dom(text: str, expected: list[str]) -> None:
    missing = [e for e in expected if e not in text]
    assert not missing, f"not on the page: {missing}\npage text: {text[:3000]}"


@needs_chromium
def test_the_committed_campaign_page_in_chromium(tmp_path):
    campaign = committed_campaign(tmp_path)
    page = statuspage.write(campaign)
    assert page == campaign.root / "status.html"
    assert not re.search(r"<script|https?://|src=", page.read_text())  # self-contained
    stats = check_screenshot(screenshot(page, tmp_path, "committed"), runs=18)
    text = dom_text(page, tmp_path)
    check_dom(text, [
        "18/18 cells done , 0 failed (will rerun), 0 pending", "ETA: every cell is done.",
        "llama3-8b/docker 6 0 0 6", "llama3-8b/native-aa 6 0 0 6",
        "docker vs native primary 6 " + expected_interval(campaign, "docker", 6),
        "native-aa vs native calibration 6 " + expected_interval(campaign, "native-aa", 6),
        "Failures none"])
    assert "stopping" not in text  # no stopping rule's file: no column
    print(stats)


@needs_chromium
def test_a_partial_campaign_with_a_failed_cell_in_chromium(tmp_path):
    campaign = partial_campaign(tmp_path)
    page = statuspage.write(campaign)
    shutil.copyfile(screenshot(page, tmp_path, "partial"), tmp_path / "keep.png")
    check_screenshot(tmp_path / "keep.png", runs=12)
    data = statuspage.collect(campaign)
    s = data["summary"]
    left = s["median_cell_s"] * 6  # the lane's 6 cells left (the failed one reruns)
    text = dom_text(page, tmp_path)
    check_dom(text, [
        "12/18 cells done , 1 failed (will rerun), 5 pending",
        "llama3-8b/docker 4 1 1 6", "llama3-8b/native 4 0 2 6",
        f"ETA: {s['eta_utc'][:10]}", f"median cell of {s['median_cell_s']:.1f} s",
        f"about {str(__import__('datetime').timedelta(seconds=round(left)))} left",
        "llama3-8b/docker/rep005: run failed",
        "exited with status 1", "loading shard 39", LOG_LAST,
        "docker vs native primary 4 " + expected_interval(campaign, "docker", 4)])
    assert "loading shard 24" not in text  # the tail, not the whole log (15 lines)
    # planted: the chart missing, a wrong count: the same checks fail
    html = page.read_text()
    no_chart = tmp_path / "no-chart.html"
    no_chart.write_text(re.sub(r'<svg id="temperature-chart".*?</svg>', "", html, flags=re.S))
    with pytest.raises(AssertionError, match="no gate dots drawn"):
        check_screenshot(screenshot(no_chart, tmp_path, "no-chart"), runs=12)
    wrong = tmp_path / "wrong-count.html"
    wrong.write_text(html.replace("<b>12/18 cells done</b>", "<b>13/18 cells done</b>"))
    with pytest.raises(AssertionError, match="12/18 cells done"):
        check_dom(dom_text(wrong, tmp_path), ["12/18 cells done , 1 failed"])


def test_stopping_column_only_with_the_stopping_rules_decisions(tmp_path, monkeypatch):
    campaign = committed_campaign(tmp_path, keep_reps=3)
    text = statuspage.text_of(statuspage.write(campaign).read_text())
    assert "stopping" not in text  # no stopping rule in the config: no column

    def decided(_: config.Campaign) -> dict[str, Any]:
        return {**statuspage.STOPPING_SHAPE, "rows": [
            {"model": "llama3-8b", "metric": "token_throughput", "environment": "docker",
             "reference": "native", "decision": "stop: equivalent", "reason": "inside 5 %"}]}

    text = statuspage.text_of(statuspage.render(statuspage.collect(campaign, decided)))
    assert "paired t p (uncorrected) stopping" in text
    assert "stop: equivalent inside 5 %" in text and "not decided" in text  # A/A: no row
    assert "stopping rule: look 3" in text
    text = statuspage.text_of(statuspage.render(statuspage.collect(
        campaign, lambda _: [1, 2])))  # planted: not the documented shape
    assert "stopping rule: " in text and "expected an object with a list 'rows'" in text

    def broken(_: config.Campaign) -> dict[str, Any]:
        raise ValueError("interim() failed")

    text = statuspage.text_of(statuspage.render(statuspage.collect(campaign, broken)))
    assert "stopping rule: ValueError: interim() failed" in text

    # under a stopping rule the page reads the rule's own interim state (sequential.interim)
    import pandas as pd

    from containertax.statistics import sequential

    state = pd.DataFrame([
        dict(model="llama3-8b", look=1, blocks=2, alpha_look=0.01, metric="token_throughput",
             environment="docker", against="native", estimate=0.0, adj_low=-0.02,
             adj_high=0.03, p=0.5, answer="none", decision="continue"),
        dict(model="llama3-8b", look=2, blocks=3, alpha_look=0.04, metric="token_throughput",
             environment="docker", against="native", estimate=0.0, adj_low=-0.001,
             adj_high=0.002, p=0.5, answer="equivalent", decision="stop")],
        columns=sequential.INTERIM_COLUMNS)
    monkeypatch.setattr(sequential, "interim", lambda root: state)
    campaign.raw["stopping"] = {"min_blocks": 2}
    text = statuspage.text_of(statuspage.write(campaign).read_text())
    assert "look 2 (3 blocks): equivalent; adjusted interval [-0.10 %, +0.20 %]" in text
    assert "look 1 (2 blocks)" not in text  # the latest look only


def test_degenerate_campaigns_give_a_page(tmp_path):
    """No record yet; one block (an estimate without interval); an unreadable record."""
    campaign = committed_campaign(tmp_path, keep_reps=0)
    text = statuspage.text_of(statuspage.write(campaign).read_text())
    assert "0/18 cells done , 0 failed (will rerun), 18 pending" in text
    assert "no comparison has data yet" in text and "no readings in the records (yet)" in text
    campaign = committed_campaign(tmp_path / "one", keep_reps=1)
    bad = campaign.paths.raw_dir / "llama3-8b" / "native" / "rep002.json"
    bad.write_text("{not json")  # planted: a damaged record (the analysis rejects it)
    text = statuspage.text_of(statuspage.write(campaign).read_text())
    assert "docker vs native primary 1" in text and "n/a (one complete block)" in text
    assert f"unreadable record: {bad}" in text


def test_the_record_cache_is_used_and_follows_a_changed_record(tmp_path):
    campaign = committed_campaign(tmp_path, keep_reps=2)
    first = statuspage.read_runs(campaign)[0]
    cache = paths.status_cache(campaign.root)
    assert len(records.read_json(cache)["runs"]) == 6
    rec = campaign.paths.raw_dir / "llama3-8b" / "docker" / "rep001.json"
    data = json.loads(rec.read_text())
    next(m for m in data["metrics"] if m["name"] == "token_throughput")["value"] = 1.0
    rec.chmod(0o644)
    rec.write_text(json.dumps(data) + "\n" * 3)  # another size: read again
    again = {(r["environment"], r["repetition"]): r for r in statuspage.read_runs(campaign)[0]}
    assert again[("docker", 1)]["metrics"]["token_throughput"] == 1.0
    assert len(first) == len(again) == 6
    cache.write_text("garbage")  # a damaged cache is rebuilt, never fatal
    assert len(statuspage.read_runs(campaign)[0]) == 6


class ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.status_page
def test_cell_steps_rewrite_the_page_and_never_fail_for_it(config_dict, tmp_path):
    config_dict["thermal"].update(min_interval_s=0, cooldown_s=0, poll_s=0.05)
    campaign = config.load_campaign(config_dict, "page.yaml")
    resolved = tmp_path / "config.resolved.json"
    config.write_resolved(campaign, resolved)
    schedule.write_csv(schedule.plan(campaign), campaign.paths.schedule)  # the schedule step
    page = paths.status_page(campaign.root)
    cell = ["--config", str(resolved), "--model", "n256", "--environment", "native"]
    assert cli.main(["cooldown", *cell, "--rep", "01", "--out", str(tmp_path / "c.json")]) == 0
    assert page.exists() and "Campaign demo" in page.read_text()
    page.unlink()
    # a failed step fails (one line naming the missing cell, exit 1), and
    assert cli.main(["gate", *cell, "--rep", "99", "--out", str(tmp_path / "g.json")]) == 1
    assert page.exists()  # the page shows it at once
    handler = ListHandler()
    logging.getLogger("containertax").addHandler(handler)
    try:
        cli._refresh_status_page(str(tmp_path / "missing.yaml"))  # planted: the page fails
    finally:
        logging.getLogger("containertax").removeHandler(handler)
    (message,) = handler.messages
    assert "status page not written" in message and "no such config file" in message
