"""Progress of a campaign that lasts days: per model and environment, what is done,
failed and left, and when it should end, from cell times measured so far."""

from __future__ import annotations

import statistics
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from containertax.campaign import lanes, schedule
from containertax.campaign.config import Campaign
from containertax.core import records


def cell_durations(events: list[dict[str, Any]]) -> list[float]:
    """Seconds from each successful cell's gate start to its cooldown end."""
    starts: dict[tuple, str] = {}
    durations = []
    for e in events:
        key = (e.get("model"), e.get("environment"), e.get("repetition"))
        if e.get("step") == "gate" and e.get("event") == "start":
            starts[key] = e["utc"]
        elif (e.get("step") == "cooldown" and e.get("event") == "end"
              and e.get("status") == "ok" and key in starts):
            t0 = datetime.fromisoformat(starts.pop(key))
            durations.append((datetime.fromisoformat(e["utc"]) - t0).total_seconds())
    return durations


def unended(events: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """Cells whose last step started and never ended, but for each lane's newest start
    (running now, or interrupted): a killed step, or one whose failure the ledger could
    not take (a full disk): failed, as a step that says so."""
    last: dict[tuple, dict[str, Any]] = {}
    newest: dict[Any, dict[str, Any]] = {}
    for e in events:
        if e["step"] not in records.CELL_STEPS:
            continue
        last[(e["model"], e["environment"], e["repetition"])] = e
        if e["event"] == "start":
            newest[e.get("lane")] = e
    running = {id(e) for e in newest.values()}
    return {key: {**e, "status": "failed",
                  "error": "started and never ended: killed, or its end could not be "
                           "written (a full disk?); it runs again"}
            for key, e in last.items() if e["event"] == "start" and id(e) not in running}


def summarize(campaign: Campaign, estimate_lanes: list[int] | None = None) -> dict[str, Any]:
    """Progress per model/environment and per lane; a lane's ETA from its remaining cells
    (lanes run side by side: the campaign ends with its last lane), and the campaign's
    whole wall time on 1, the configured and any requested number of lanes."""
    root = campaign.root
    cells = schedule.plan(campaign)
    ended = schedule.stopped_at(campaign)  # a stopping rule ended these models' runs
    not_needed = [c for c in cells if c.repetition > ended.get(c.model, c.repetition)]
    cells = [c for c in cells if c.repetition <= ended.get(c.model, c.repetition)]
    events = [e for e in records.read_ledger(root) if records.event_problem(e) is None]
    last_run = {(e["model"], e["environment"], e["repetition"]): e  # latest start or end
                for e in events if e.get("step") == "run"}
    last_failure: dict[tuple, dict[str, Any]] = {}  # the latest failed step of each cell
    for e in events:
        if e.get("event") == "end" and e.get("status") == "failed":
            last_failure[(e.get("model"), e.get("environment"), e.get("repetition"))] = e
    last_failure.update(unended(events))
    running = None
    failed_cells: list[dict[str, Any]] = []
    table: dict[tuple, dict[str, int]] = defaultdict(
        lambda: {"done": 0, "failed": 0, "remaining": 0, "total": 0})
    per_lane: dict[str, dict[str, Any]] = {
        lane.id: {"done": 0, "failed": 0, "remaining": 0, "total": 0, "gpu": lane.gpu,
                  "host": lane.host} for lane in lanes.lanes(campaign)}
    for c in cells:
        key = (c.model, c.environment, c.repetition)
        cell_paths = campaign.paths.cell(c.model, c.environment, c.repetition)
        if key in last_failure and not cell_paths.raw.exists():
            e = last_failure[key]
            failed_cells.append({"cell": f"{c.model}/{c.environment}/rep{cell_paths.label}",
                                 "step": e.get("step"), "utc": e.get("utc"),
                                 "error": e.get("error", "")})
        for row in (table[(c.model, c.environment)], per_lane[c.lane]):
            row["total"] += 1
            if cell_paths.raw.exists():
                row["done"] += 1
            elif key in last_failure:
                row["failed"] += 1
                row["remaining"] += 1
            else:
                row["remaining"] += 1
                if last_run.get(key, {}).get("event") == "start":
                    running = key
    durations = cell_durations(events)
    remaining = sum(r["remaining"] for r in table.values())
    per_cell = statistics.median(durations) if durations else None
    eta = None
    for row in per_lane.values():
        row["eta_utc"] = None
        if per_cell is not None:
            row["eta_utc"] = (datetime.now(UTC) + timedelta(
                seconds=per_cell * row["remaining"])).isoformat(timespec="seconds")
    if per_cell is not None:
        eta = max(row["eta_utc"] for row in per_lane.values())
    counts = sorted({1, len(per_lane), *(estimate_lanes or [])})
    wall = {str(n): (None if per_cell is None else
                     round(lanes.estimated_wall_s(campaign, per_cell, n), 1)) for n in counts}
    return {
        "campaign": campaign.name,
        "table": {f"{m}/{e}": v for (m, e), v in table.items()},
        "done": sum(r["done"] for r in table.values()),
        "failed": sum(r["failed"] for r in table.values()),
        "remaining": remaining,
        "total": len(cells),
        "not_needed": len(not_needed),  # cells a stopping rule made unnecessary
        "median_cell_s": per_cell,
        "eta_utc": eta,
        "lanes": per_lane,
        "wall_estimate_s": wall,
        "last_started_unfinished": "/".join(map(str, running)) if running else None,
        "failed_cells": failed_cells,
        "failed_preflights": failed_preflights(campaign),
        "ledger_damage": records.ledger_damage(root),
        # lines that parse but are no usable event, and ledgers that are no file: skipped
        "ledger_problems": records.ledger_problems(root),
        # records the schedule does not hold: not counted above, never analysed
        "unscheduled": [{"record": str(u.path), "why": u.why}
                        for u in schedule.unscheduled(campaign)],
    }


def failed_preflights(campaign: Campaign) -> dict[str, str]:
    """Environments whose preflight ran and failed (no preflight/<env>.json, a log with an
    error): the reason is the log's error."""
    failed = {}
    for env in campaign.environments:
        done = campaign.paths.preflight(env.id)
        log = campaign.paths.preflight_log(env.id)
        if done.exists() or not log.exists():
            continue
        text = log.read_text(errors="replace")
        error = text.rsplit(" ERROR ", 1)[1].strip() if " ERROR " in text else text[-500:]
        failed[env.id] = error
    return failed


def render(summary: dict[str, Any]) -> str:
    lines = [f"campaign {summary['campaign']}: {summary['done']}/{summary['total']} cells done, "
             f"{summary['failed']} failed (will rerun), {summary['remaining']} remaining"
             + (f", {summary['not_needed']} not needed (the stopping rule ended their model)"
                if summary.get("not_needed") else "")]
    width = max([len(k) for k in summary["table"]] + [len("model/environment")])
    lines.append(f"{'model/environment':<{width}}  done  failed  remaining")
    for key, row in summary["table"].items():
        lines.append(f"{key:<{width}}  {row['done']:>4}  {row['failed']:>6}  {row['remaining']:>9}")
    if len(summary["lanes"]) > 1:
        names = {k: f"lane {k} (GPU {r['gpu']}{' on ' + r['host'] if r['host'] else ''})"
                 for k, r in summary["lanes"].items()}
        w = max(len(n) for n in names.values())
        lines.append(f"{'lane':<{w}}  done  failed  remaining  ETA")
        for lane_id, row in summary["lanes"].items():
            lines.append(f"{names[lane_id]:<{w}}  {row['done']:>4}  {row['failed']:>6}  "
                         f"{row['remaining']:>9}  {row['eta_utc'] or 'unknown'}")
    if summary["median_cell_s"] is None:
        lines.append("ETA: unknown until a cell has finished (gate, run and cooldown)")
    else:
        slowest = max(r["remaining"] for r in summary["lanes"].values())
        left = timedelta(seconds=round(summary["median_cell_s"] * slowest))
        lines.append(f"median cell {summary['median_cell_s']:.1f} s; about {left} left; "
                     f"ETA {summary['eta_utc']}")
        whole = ", ".join(f"{timedelta(seconds=round(s))} on {n} lane{'s' * (n != '1')}"
                          for n, s in summary["wall_estimate_s"].items())
        lines.append(f"whole campaign (whole repetitions per lane): {whole}")
    for name, bad in summary.get("ledger_damage", {}).items():
        lines.append(f"ledger damaged: {name} has {bad} unparseable line(s) (torn by a full "
                     "disk or a crash; skipped, the events on them are lost; the raw records "
                     "above are counted from raw/, not from the ledger)")
    for u in summary.get("unscheduled", []):
        lines.append(f"not counted, not analysed: {u['record']} ({u['why']}); the next "
                     "invocation that runs jobs moves it to raw/.superseded/")
    for problem in summary.get("ledger_problems", []):
        lines.append(f"ledger line skipped: {problem}")
    for env_id, why in summary.get("failed_preflights", {}).items():
        lines.append(f"preflight of {env_id} failed (its cells cannot run): "
                     f"{_first_lines(why)}")
    for f in summary.get("failed_cells", []):
        lines.append(f"failed {f['cell']} ({f['step']}, {f['utc']}): {_first_lines(f['error'])}")
    if summary["last_started_unfinished"]:
        lines.append(f"started, not finished: {summary['last_started_unfinished']} "
                     "(running now, or interrupted)")
    return "\n".join(lines)




def _first_lines(text: str, n: int = 3) -> str:
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    return " | ".join(lines[:n]) + (" ..." if len(lines) > n else "")
