"""The live status page of a campaign that runs for weeks: results/<campaign>/status.html,
rewritten after every cell (cli: the cooldown step, and a failed gate or run, start
`containertax status --html` in a child process) and on demand.

One self-contained file, opened from disk: inline CSS and inline SVG, no script, nothing
fetched. It shows progress per model and environment and the ETA (campaign/status.py, as
`containertax status`), the gate and cooldown temperatures of every run (from the raw
records and their .cooldown.json), the interim paired estimate of every primary and A/A
comparison on the complete blocks so far (statistics/comparisons.py, the paper's own
estimator), the stopping rule's decisions where the config has one (statistics/sequential.py's
interim state, shape in STOPPING_SHAPE), and every failed cell with the last lines of its log.

A monitor, not the analysis: a record that cannot be read is listed, never fatal, and the
page is never an input of any rule.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from containertax.campaign import paths as P
from containertax.campaign import status
from containertax.campaign.config import Campaign
from containertax.core import records

LOG_TAIL = 15  # lines of a failed step's log shown on the page

# What the stopping rule hands the page (sequential_stopping's return, or a callable's):
# rows are joined to the estimates on (model, metric, environment, reference).
STOPPING_SHAPE = {
    "computed_utc": "2026-12-01T10:00:00+00:00",
    "look": 3,
    "rows": [{"model": "llama3-8b", "metric": "token_throughput", "environment": "docker",
              "reference": "native", "decision": "continue",
              "reason": "interval [-0.4 %, +0.9 %] not yet inside the margin"}],
}

Stopping = Callable[[Campaign], dict[str, Any] | None]


# ---------------------------------------------------------------- data


CACHE_VERSION = 1


def _stat_key(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def _read_run(path: Path, cooldown_path: Path) -> dict[str, Any]:
    from containertax.core.rawrecord import RawRecord, migrate
    from containertax.statistics.aggregate import metric_name

    rec = RawRecord.from_dict(migrate(json.loads(path.read_text()), str(path)))
    cooldown = records.read_json(cooldown_path) if cooldown_path.exists() else {}
    return {
        "model": str(rec.cell.model), "environment": rec.cell.environment,
        "repetition": rec.cell.repetition, "block": rec.cell.block,
        "started_utc": rec.started_utc, "ended_utc": rec.ended_utc,
        "gate_c": rec.gate.get("temperature_c"),
        "gate_utc": rec.gate.get("passed_utc") or rec.started_utc,
        "cool_start_c": cooldown.get("start_c"), "cool_end_c": cooldown.get("end_c"),
        "cool_utc": cooldown.get("ended_utc"), "baseline_c": cooldown.get("baseline_c"),
        "metrics": {metric_name(rec, m.name): m.value for m in rec.metrics},
    }


def read_runs(campaign: Campaign) -> tuple[list[dict[str, Any]], list[str]]:
    """One dict per raw record present (cell, gate, cooldown, metrics), and the records
    that could not be read (named, with why). Parsed without schema validation (the
    analysis validates), and each only once: what was read is cached by the record's and
    its .cooldown.json's (size, mtime_ns, inode) (paths.STATUS_CACHE), so the rebuild
    after a cell parses that cell's record alone."""
    cache_path = P.status_cache(campaign.root)
    try:
        cache = records.read_json(cache_path)
        cached = cache["runs"] if cache.get("version") == CACHE_VERSION else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        cached = {}
    runs, unreadable, fresh = [], [], {}
    for path in campaign.paths.raw_records():
        cooldown_path = path.with_name(path.stem + ".cooldown.json")
        name = str(path.relative_to(campaign.root))
        key = [_stat_key(path), _stat_key(cooldown_path)]
        hit = cached.get(name)
        if isinstance(hit, dict) and hit.get("key") == key:
            run = hit["run"]
        else:
            try:
                run = _read_run(path, cooldown_path)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                unreadable.append(f"{path}: {type(exc).__name__}: {exc}")
                continue
        fresh[name] = {"key": key, "run": run}
        runs.append(run)
    if fresh != cached:
        try:
            records.write_json(cache_path, {"version": CACHE_VERSION, "runs": fresh})
        except OSError as exc:  # a cache: the page is built without it
            unreadable.append(f"{cache_path}: not written ({exc})")
    return runs, unreadable


def interim_estimates(campaign: Campaign, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The paired estimate (statistics/comparisons.paired_estimate, on the metric's scale as
    the paper decides it) of every planned comparison of the primary and calibration
    families, on the complete blocks so far: relative difference, its t interval and the
    paired t test's p, uncorrected (interim looks are not the paper's family-wise tests;
    the sign-flip p and the power calculation are left to the analysis)."""
    import numpy as np
    import pandas as pd

    from containertax.statistics import comparisons as st
    from containertax.statistics import policy

    present = {(r["model"], k) for r in runs for k, v in r["metrics"].items()
               if v is not None and math.isfinite(float(v))}
    if not present:
        return []
    # the plan reads which metrics each model has: one row per (model, metric) will do
    plan = policy.comparison_plan(campaign, pd.DataFrame(
        sorted(present), columns=["model", "metric"]).assign(value=1.0))
    settings = st.Settings.from_config(campaign.analysis, campaign.reference)
    wanted = {(m, k) for m, ks in plan.primary_metrics.items() for k in ks}
    frame = pd.DataFrame([{"model": r["model"], "environment": r["environment"],
                           "block": r["block"], "metric": k, "value": float(v)}
                          for r in runs for k, v in r["metrics"].items()
                          if (r["model"], k) in wanted])
    if frame.empty:
        return []
    frame = frame[np.isfinite(frame["value"])]
    scales = st.metric_scales(frame)
    out = []
    for (model, metric), g in frame.groupby(["model", "metric"], sort=False):
        if (model, metric) not in wanted:
            continue
        for env, ref, aa in plan.pairs(list(dict.fromkeys(g.environment))):
            found = st.blocks(g, env, ref)
            a, b = (found[:2] if found is not None else (np.array([]), np.array([])))
            log = scales[metric] == "log"
            d = (np.log(a) - np.log(b)) if log else (a - b)
            e = st.paired_estimate(d, settings.alpha)
            rel = st._relative(e, "log" if log else "raw",
                               float(np.mean(b)) if len(b) else math.nan)
            why = ("no complete block" if len(d) == 0 else "one complete block"
                   if len(d) == 1 else "" if math.isfinite(rel["low"]) else
                   "no interval (no variation between blocks?)")
            out.append({"model": model, "metric": metric, "environment": env,
                        "reference": ref, "family": "calibration" if aa else "primary",
                        "blocks": len(d), "est": rel["est"], "low": rel["low"],
                        "high": rel["high"], "p": e["p"], "why": why,
                        "margin": settings.equivalence_margin})
    return out


def failure_logs(campaign: Campaign, failed: list[dict[str, Any]]) -> dict[str, str]:
    """The last lines of each failed cell's log (logs/<step>/<model>/<env>/rep<n>.log)."""
    tails = {}
    for f in failed:
        model, env, rep = f["cell"].split("/")
        log = campaign.root / P.LOG.format(step=f["step"], model=model, environment=env,
                                           rep=rep.removeprefix("rep"))
        if log.exists():
            lines = log.read_text(errors="replace").rstrip().splitlines()
            tails[f["cell"]] = "\n".join(lines[-LOG_TAIL:])
    return tails


def sequential_stopping(campaign: Campaign) -> dict[str, Any] | None:
    """The stopping rule's decisions at each model's latest look (statistics.sequential's
    interim state, read from the campaign's records), in STOPPING_SHAPE; None without a
    stopping rule or before any look has data."""
    from containertax.statistics import sequential

    state = sequential.interim(campaign.root)
    if state.empty:
        return None
    latest = state[state["look"] == state.groupby("model")["look"].transform("max")]
    rows = [{"model": str(r.model), "metric": str(r.metric), "environment": str(r.environment),
             "reference": str(r.against), "decision": str(r.decision),
             "reason": (f"look {int(r.look)} ({int(r.blocks)} blocks): {r.answer}; adjusted "
                        f"interval [{100 * float(r.adj_low):+.2f} %, "
                        f"{100 * float(r.adj_high):+.2f} %]")}
            for r in latest.itertuples()]
    return {"computed_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            "look": int(latest["look"].max()), "rows": rows}


def read_stopping(campaign: Campaign, stopping: Stopping | None) -> dict[str, Any] | None:
    """The stopping rule's decisions: the callable's where given, else the rule's own
    interim state where the config has a stopping rule, else None (no stopping column).
    A malformed one is shown as such ({'error': ...}), never fatal."""
    if stopping is None and campaign.raw.get("stopping"):
        stopping = sequential_stopping
    try:
        data = stopping(campaign) if stopping is not None else None
    except Exception as exc:  # noqa: BLE001 - the page shows what went wrong
        return {"error": f"{type(exc).__name__}: {exc}", "rows": []}
    if data is None:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        return {"error": "expected an object with a list 'rows' (statuspage.STOPPING_SHAPE)",
                "rows": []}
    return data


def collect(campaign: Campaign, stopping: Stopping | None = None) -> dict[str, Any]:
    """Everything the page shows, as plain data (also what a test or a script may read)."""
    summary = status.summarize(campaign)
    runs, unreadable = read_runs(campaign)
    try:
        estimates, estimate_error = interim_estimates(campaign, runs), ""
    except Exception as exc:  # noqa: BLE001 - degenerate data: said on the page
        estimates, estimate_error = [], f"{type(exc).__name__}: {exc}"
    return {"summary": summary, "runs": runs, "unreadable": unreadable,
            "estimates": estimates, "estimate_error": estimate_error,
            "failure_logs": failure_logs(campaign, summary["failed_cells"]),
            "stopping": read_stopping(campaign, stopping),
            "threshold_c": campaign.thermal.get("threshold_c"),
            "generated_utc": records.utc_now()}


def write(campaign: Campaign, stopping: Stopping | None = None) -> Path:
    """Build the page and replace the old one atomically (a reader never sees half)."""
    path = P.status_page(campaign.root)
    records.atomic_write_text(path, render(collect(campaign, stopping)))
    return path


# ---------------------------------------------------------------- HTML

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1220px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:22px 0 6px}
table{border-collapse:collapse;margin:4px 0} td,th{padding:3px 9px;border-bottom:1px solid #ddd}
th{text-align:left;background:#f3f3f3} td.n{text-align:right;font-variant-numeric:tabular-nums}
.bar{display:inline-block;height:10px;background:#eee;width:160px;position:relative}
.bar span{position:absolute;top:0;height:10px} .ok{background:#3a7} .bad{background:#d44}
pre{background:#f7f7f7;border:1px solid #ddd;padding:6px;font-size:12px;white-space:pre-wrap}
.muted{color:#666} .warn{color:#b00}
"""


def _e(value: Any) -> str:
    return html.escape(str(value))


def _pct(v: Any) -> str:
    return "n/a" if v is None or not math.isfinite(float(v)) else f"{100 * float(v):+.2f} %"


def _utc(text: str | None) -> float | None:
    try:
        return datetime.fromisoformat(str(text)).timestamp() if text else None
    except ValueError:
        return None


def _svg_frame(chart_id: str, label: str, size: tuple[int, int],
               frame: tuple[float, float, float, float]) -> list[str]:
    """The opening of an inline SVG chart (id, size, accessible label) and its plot area
    (x, y, width, height) as a white box with a grey border: shared by both charts."""
    (width, height), (x, y, w, h) = size, frame
    return [f'<svg id="{chart_id}" width="{width}" '
            f'height="{height}" role="img" aria-label="{_e(label)}">',
            f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="#fff" stroke="#999"/>']


def _svg_scale(d0: float, d1: float, p0: float, span: float) -> Callable[[float], float]:
    """A linear axis: data d0 .. d1 onto pixels p0 .. p0 + span (d1 < d0 runs upward)."""
    return lambda v: p0 + (v - d0) / (d1 - d0) * span


def _svg_none(chart_id: str, words: str) -> str:
    """What stands in for a chart with nothing to draw."""
    return f'<p id="{chart_id}" class="muted">{words}</p>'


def svg_chart(chart_id: str, series: list[tuple[str, str, list[tuple[float, float]]]],
              y_label: str, hlines: list[tuple[str, str, float]] | None = None,
              x_format: Callable[[float], str] = str, width: int = 1100,
              height: int = 300) -> str:
    """A scatter chart as inline SVG: series (name, colour, points), dashed horizontal
    lines (name, colour, y). Drawn by hand: a few hundred points need no plotting stack,
    and the page is rebuilt after every cell."""
    pts = [p for _, _, s in series for p in s]
    if not pts:
        return _svg_none(chart_id, "no readings in the records (yet)")
    ys = [y for _, y in pts] + [y for _, _, y in hlines or []]
    x0, x1 = min(x for x, _ in pts), max(x for x, _ in pts)
    y0, y1 = math.floor(min(ys)) - 1, math.ceil(max(ys)) + 1
    x1 = x1 if x1 > x0 else x0 + 1
    left, right, top, bottom = 60, 60, 24, 40
    w, h = width - left - right, height - top - bottom
    sx, sy = _svg_scale(x0, x1, left, w), _svg_scale(y1, y0, top, h)
    parts = _svg_frame(chart_id, y_label, (width, height), (left, top, w, h))
    step = max(1, math.ceil((y1 - y0) / 8))
    for y in range(int(y0), int(y1) + 1, step):
        parts.append(f'<line x1="{left}" x2="{left + w}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" '
                     f'stroke="#eee"/><text x="{left - 6}" y="{sy(y) + 4:.1f}" '
                     f'text-anchor="end" font-size="11">{y}</text>')
    for i in range(5):
        x = x0 + (x1 - x0) * i / 4
        parts.append(f'<text x="{sx(x):.1f}" y="{top + h + 16}" text-anchor="middle" '
                     f'font-size="11">{_e(x_format(x))}</text>')
    parts.append(f'<text x="14" y="{top + h / 2}" font-size="12" transform="rotate(-90 14 '
                 f'{top + h / 2})" text-anchor="middle">{_e(y_label)}</text>')
    for name, colour, y in hlines or []:
        parts.append(f'<line x1="{left}" x2="{left + w}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" '
                     f'stroke="{colour}" stroke-dasharray="6 4" stroke-width="1.5">'
                     f'<title>{_e(name)}</title></line>')
    legend = [(n, c, "dash") for n, c, _ in hlines or []] + [(n, c, "dot") for n, c, _ in series]
    for k, (name, colour, kind) in enumerate(legend):
        lx = left + 8 + 190 * k
        mark = (f'<circle cx="{lx + 6}" cy="13" r="4" fill="{colour}"/>' if kind == "dot" else
                f'<line x1="{lx}" x2="{lx + 14}" y1="13" y2="13" stroke="{colour}" '
                'stroke-dasharray="4 3" stroke-width="2"/>')
        parts.append(f'{mark}<text x="{lx + 18}" y="17" font-size="12">{_e(name)}</text>')
    for name, colour, points in series:
        parts.append(f'<g fill="{colour}" class="series"><title>{_e(name)}</title>')
        parts += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3"/>' for x, y in points]
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def svg_intervals(chart_id: str, rows: list[dict[str, Any]], width: int = 1100) -> str:
    """The interim estimates as a forest plot: each comparison's relative difference and
    interval, zero and the equivalence margin dashed."""
    shown = [r for r in rows if r["est"] is not None and math.isfinite(r["est"])]
    if not shown:
        return _svg_none(chart_id, "no estimate yet (no complete block)")
    ends = [v for r in shown for v in (r["est"], r["low"], r["high"]) if math.isfinite(v)]
    margin = shown[0]["margin"]
    lo, hi = min(ends + [-margin]) * 1.15, max(ends + [margin]) * 1.15
    left, right, row_h = 330, 30, 26
    height, w = 40 + row_h * len(shown), width - left - right
    sx = _svg_scale(lo, hi, left, w)
    parts = _svg_frame(chart_id, "interim estimates", (width, height),
                       (left, 4, w, height - 30))
    for v, colour in ((0.0, "#555"), (-margin, "#c80"), (margin, "#c80")):
        parts.append(f'<line x1="{sx(v):.1f}" x2="{sx(v):.1f}" y1="4" y2="{height - 26}" '
                     f'stroke="{colour}" stroke-dasharray="5 4"/><text x="{sx(v):.1f}" '
                     f'y="{height - 10}" text-anchor="middle" font-size="11">'
                     f'{_e(_pct(v))}</text>')
    for i, r in enumerate(shown):
        y = 24 + row_h * i
        label = f"{r['model']} {r['metric']}: {r['environment']} vs {r['reference']}"
        parts.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end" font-size="12">'
                     f'{_e(label)}</text>')
        if math.isfinite(r["low"]) and math.isfinite(r["high"]):
            parts.append(f'<line x1="{sx(r["low"]):.1f}" x2="{sx(r["high"]):.1f}" y1="{y}" '
                         f'y2="{y}" stroke="#246" stroke-width="3"/>')
        parts.append(f'<circle cx="{sx(r["est"]):.1f}" cy="{y}" r="5" fill="#246"/>')
    parts.append("</svg>")
    return "".join(parts)


def _progress(summary: dict[str, Any]) -> str:
    rows = []
    for key, r in summary["table"].items():
        pending = r["remaining"] - r["failed"]
        done_w, bad_w = (160 * r[k] / max(r["total"], 1) for k in ("done", "failed"))
        bar = (f'<span class="bar"><span class="ok" style="left:0;width:{done_w:.0f}px">'
               f'</span><span class="bad" style="left:{done_w:.0f}px;width:{bad_w:.0f}px">'
               "</span></span>")
        rows.append(f"<tr><td>{_e(key)}</td><td class=n>{r['done']}</td><td class=n>"
                    f"{r['failed']}</td><td class=n>{pending}</td><td class=n>{r['total']}"
                    f"</td><td>{bar}</td></tr>")
    return ('<table id="progress"><tr><th>model/environment</th><th>done</th><th>failed</th>'
            "<th>pending</th><th>total</th><th></th></tr>" + "".join(rows) + "</table>")


def _eta(summary: dict[str, Any]) -> str:
    if summary["remaining"] == 0:
        return '<p id="eta">ETA: every cell is done.</p>'
    if summary["median_cell_s"] is None:
        return ('<p id="eta">ETA: unknown until a cell has finished (gate, run and '
                "cooldown).</p>")
    slowest = max(r["remaining"] for r in summary["lanes"].values())
    left = timedelta(seconds=round(summary["median_cell_s"] * slowest))
    return (f'<p id="eta">ETA: {_e(summary["eta_utc"])} (about {left} left at the median '
            f'cell of {summary["median_cell_s"]:.1f} s)</p>')


def _lanes(summary: dict[str, Any]) -> str:
    if len(summary["lanes"]) < 2:
        return ""
    rows = "".join(
        f"<tr><td>{_e(k)} (GPU {_e(r['gpu'])}{' on ' + _e(r['host']) if r['host'] else ''})"
        f"</td><td class=n>{r['done']}</td><td class=n>{r['failed']}</td><td class=n>"
        f"{r['remaining'] - r['failed']}</td><td>{_e(r['eta_utc'] or 'unknown')}</td></tr>"
        for k, r in summary["lanes"].items())
    return ('<h2>Lanes</h2><table id="lanes"><tr><th>lane</th><th>done</th><th>failed</th>'
            f"<th>pending</th><th>ETA</th></tr>{rows}</table>")


def _temperatures(page: dict[str, Any]) -> str:
    runs = page["runs"]

    def points(x_key: str, y_key: str) -> list[tuple[float, float]]:
        return [(x, float(r[y_key])) for r in runs
                if r[y_key] is not None and (x := _utc(r[x_key])) is not None]

    series = [("cooldown start", "#d62728", points("ended_utc", "cool_start_c")),
              ("cooldown end", "#2ca02c", points("cool_utc", "cool_end_c")),
              ("gate (at the run's start)", "#1f6fb4", points("gate_utc", "gate_c"))]
    hlines = []
    if page["threshold_c"] is not None:
        hlines.append(("gate threshold", "#d62728", float(page["threshold_c"])))
    baselines = [r["baseline_c"] for r in runs if r["baseline_c"] is not None]
    if baselines:
        hlines.append(("idle baseline (latest)", "#777", float(baselines[-1])))
    chart = svg_chart("temperature-chart", series, "temperature (C)", hlines,
                      lambda x: datetime.fromtimestamp(x, UTC).strftime("%m-%d %H:%M"))
    return ("<h2>Gate and cooldown temperatures</h2><p class=muted>each run's gate reading "
            "as it opened, and its cooldown's first and last reading, by time (UTC)</p>"
            + chart)


def _estimates(page: dict[str, Any]) -> str:
    rows, stop = page["estimates"], page["stopping"]
    head = "<h2>Interim estimates (complete blocks so far)</h2>"
    if page["estimate_error"]:
        head += f'<p class="warn">no estimate: {_e(page["estimate_error"])}</p>'
    if not rows:
        return head + '<p id="estimates" class="muted">no comparison has data yet</p>'
    decisions = {}
    if stop is not None:
        for d in stop.get("rows", []):
            if isinstance(d, dict):
                key = tuple(str(d.get(k)) for k in ("model", "metric", "environment",
                                                     "reference"))
                decisions[key] = d
    cols = ["model", "metric", "comparison", "family", "blocks", "estimate", "interval",
            "paired t p (uncorrected)"] + (["stopping"] if stop is not None else [])
    body = []
    for r in rows:
        interval = ("n/a" + (f" ({_e(r['why'])})" if r["why"] else "")
                    if not (math.isfinite(r["low"]) and math.isfinite(r["high"]))
                    else f"[{_pct(r['low'])}, {_pct(r['high'])}]")
        p = "n/a" if not math.isfinite(r["p"]) else f"{r['p']:.3g}"
        cells = [_e(r["model"]), _e(r["metric"]),
                 f"{_e(r['environment'])} vs {_e(r['reference'])}", _e(r["family"]),
                 f"<td class=n>{r['blocks']}", f"<td class=n>{_pct(r['est'])}", interval,
                 f"<td class=n>{p}"]
        if stop is not None:
            d = decisions.get((str(r["model"]), r["metric"], r["environment"], r["reference"]))
            cells.append("not decided" if d is None else
                         f'<b>{_e(d.get("decision", "?"))}</b> {_e(d.get("reason", ""))}')
        body.append("<tr>" + "".join(c if c.startswith("<td") else f"<td>{c}" for c in cells)
                    + "</tr>")
    note = ""
    if stop is not None:
        note = (f'<p id="stopping">stopping rule: {_e(stop["error"])}</p>'
                if stop.get("error") else
                f'<p id="stopping">stopping rule: look {_e(stop.get("look", "?"))}, computed '
                f'{_e(stop.get("computed_utc", "?"))}</p>')
    table = ('<table id="estimates"><tr>' + "".join(f"<th>{c}</th>" for c in cols) + "</tr>"
             + "".join(body) + "</table>")
    return head + table + note + svg_intervals("interim-chart", rows)


def _failures(page: dict[str, Any]) -> str:
    s = page["summary"]
    items = []
    for env, why in s.get("failed_preflights", {}).items():
        items.append(f"<h3>preflight of {_e(env)} failed</h3><pre>{_e(why)}</pre>")
    for f in s["failed_cells"]:
        tail = page["failure_logs"].get(f["cell"])
        items.append(f'<h3>{_e(f["cell"])}: {_e(f["step"])} failed at {_e(f["utc"])}</h3>'
                     f'<pre>{_e(f["error"])}</pre>'
                     + (f"<p class=muted>last {LOG_TAIL} lines of its log:</p>"
                        f'<pre class="log-tail">{_e(tail)}</pre>' if tail else
                        "<p class=muted>(no log)</p>"))
    for bad in page["unreadable"]:
        items.append(f'<p class="warn">unreadable record: {_e(bad)}</p>')
    for name, n in s.get("ledger_damage", {}).items():
        items.append(f'<p class="warn">ledger {_e(name)}: {n} unparseable line(s)</p>')
    return ('<h2>Failures</h2><div id="failures">'
            + ("".join(items) or "<p class=muted>none</p>") + "</div>")


def render(page: dict[str, Any]) -> str:
    """The page as one HTML string (no script, no external resource)."""
    s = page["summary"]
    running = (f"<p>started, not finished: {_e(s['last_started_unfinished'])}</p>"
               if s["last_started_unfinished"] else "")
    pending = s["remaining"] - s["failed"]
    return (
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\">"
        f"<title>{_e(s['campaign'])}: status</title><style>{CSS}</style></head><body>"
        f"<h1>Campaign {_e(s['campaign'])}</h1>"
        f'<p class=muted>page written {_e(page["generated_utc"])}; rewritten after every '
        "cell</p>"
        f'<p id="totals"><b>{s["done"]}/{s["total"]} cells done</b>, {s["failed"]} failed '
        f"(will rerun), {pending} pending"
        + (f", {s['not_needed']} not needed (the stopping rule ended their model)"
           if s.get("not_needed") else "") + "</p>"
        + _eta(s) + running + "<h2>Progress</h2>" + _progress(s) + _lanes(s)
        + _temperatures(page) + _estimates(page) + _failures(page)
        + "</body></html>\n")


def text_of(page_html: str) -> str:
    """The page's visible text, whitespace collapsed (what a test compares with)."""
    body = re.sub(r"<(style|title)>.*?</\1>", " ", page_html, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body))).strip()
