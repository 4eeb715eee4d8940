"""The order in which the runs happened within their blocks, and how balanced it was.

The paper's design sentences are derived from this realised order, never from the name of
the configured design: a design balances positions only for some numbers of environments
(alternating: two), a campaign may stop early, and a cell may be re-run out of turn. The
order comes from the ledgers (the run step's successful end, by UTC; every lane's ledger
and the copy each visit keeps under raw/visits/), else from the records' start times, else
from the planned positions (schedule.csv, which each record's cell repeats); an imported
table has an order only where it has blocks and timestamps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from containertax.campaign.paths import CampaignPaths
from containertax.core import records

COLUMNS = ["model", "block", "environment", "repetition", "position", "predecessor",
           "planned", "source"]
FIRST = ""  # the predecessor of a block's first run


def ledger_runs(paths: CampaignPaths) -> pd.DataFrame:
    """The end of every successful run attempt in any ledger the campaign holds, one row
    per attempt (a visit's copy repeats the events of the ledger it copied)."""
    rows: dict[str, dict[str, Any]] = {}
    for path in paths.ledgers():
        for e in records.read_ledger(path.parent, path.name, step="run", event="end",
                                     status="ok"):
            if e.get("attempt") and e.get("utc"):
                rows.setdefault(str(e["attempt"]), {
                    "attempt": str(e["attempt"]), "model": str(e.get("model")),
                    "environment": str(e.get("environment")),
                    "repetition": e.get("repetition"), "utc": str(e["utc"])})
    return pd.DataFrame(list(rows.values()),
                        columns=["attempt", "model", "environment", "repetition", "utc"])


def realised(runs: pd.DataFrame, ledger: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per cell with a record: its place among its block's runs as they happened
    (position 1 = first), the environment that ran just before it in the block (FIRST for
    the first) and whether that place is the planned one. Empty where the order is
    unknown: no blocks, or neither times nor positions for every cell."""
    if runs is None or runs.empty or "block" not in runs or runs["block"].isna().any():
        return pd.DataFrame(columns=COLUMNS)
    cells = runs.drop_duplicates(["model", "environment", "repetition"]).copy()
    cells["model"] = cells["model"].astype(str)
    when = pd.Series(pd.NaT, index=cells.index, dtype="datetime64[ns, UTC]")
    source = pd.Series("", index=cells.index)
    if ledger is not None and not ledger.empty and "attempt" in cells:
        at = dict(zip(ledger["attempt"], pd.to_datetime(ledger["utc"], utc=True,
                                                        format="ISO8601"), strict=True))
        hit = cells["attempt"].astype(str).map(at)
        when = when.where(hit.isna(), hit)
        source[hit.notna()] = "ledger"
    if "started_utc" in cells:
        start = pd.to_datetime(cells["started_utc"], utc=True, errors="coerce",
                               format="ISO8601")
        fill = when.isna() & start.notna()
        when[fill] = start[fill]
        source[fill] = "records"
    has_position = "position" in cells and cells["position"].notna().all()
    if when.notna().all():
        cells["_when"] = when
    elif has_position:  # the planned (or, imported, the timestamps') order
        cells["_when"] = cells["position"].astype(float)
        source[:] = "positions"
    else:
        return pd.DataFrame(columns=COLUMNS)
    cells["source"] = source
    cells = cells.sort_values(["model", "block", "_when"], kind="stable")
    by_block = cells.groupby(["model", "block"], sort=False)
    cells["position_"] = by_block.cumcount() + 1
    cells["predecessor"] = by_block["environment"].shift(1).fillna(FIRST)
    if has_position:
        planned = cells.sort_values(["model", "block", "position"], kind="stable")
        rank = planned.groupby(["model", "block"], sort=False).cumcount() + 1
        cells["planned"] = rank.reindex(cells.index) == cells["position_"]
    else:
        cells["planned"] = True
    out = cells.drop(columns=["position"]).rename(columns={"position_": "position"})
    out["block"] = out["block"].astype(int)
    return out[COLUMNS].reset_index(drop=True)


def read(path: Path) -> pd.DataFrame:
    """stats/order.csv as the quality step wrote it (empty: the order is unknown)."""
    if not path.exists() or path.stat().st_size <= 1:
        return pd.DataFrame(columns=COLUMNS)
    frame = pd.read_csv(path, keep_default_na=False, dtype={"model": str})
    return frame if not frame.empty else pd.DataFrame(columns=COLUMNS)


def tables(order: pd.DataFrame, envs: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(position x environment, predecessor x environment) counts: rows positions 1..k
    (k environments) or predecessors in environment order, columns environments."""
    envs = [e for e in envs if e in set(order["environment"])] or sorted(
        set(order["environment"]))
    k = len(envs)
    pos = pd.crosstab(order["position"], order["environment"]).reindex(
        index=range(1, k + 1), columns=envs, fill_value=0)
    after = order[order["predecessor"] != FIRST]
    pred = pd.crosstab(after["predecessor"], after["environment"]).reindex(
        index=envs, columns=envs, fill_value=0)
    return pos.astype(int), pred.astype(int)


def balance(order: pd.DataFrame, envs: list[str]) -> dict[str, Any]:
    """Whether every environment ran in every position equally often (for every model and
    in all), whether every environment followed every other equally often, and the counts
    behind both."""
    if order.empty:
        return {"known": False}
    pos, pred = tables(order, envs)
    k = len(pos.columns)
    complete = order.groupby(["model", "block"])["environment"].nunique() == k
    per_model = [tables(g, list(pos.columns))[0] for _, g in order.groupby("model")]
    positions = bool(complete.all()) and all(
        t.to_numpy().min() == t.to_numpy().max() > 0 for t in per_model)
    off = pred.to_numpy()[~np.eye(k, dtype=bool)]
    carryover = bool(complete.all()) and k > 1 and bool(off.min() == off.max() > 0)
    return {"known": True, "positions": pos, "predecessors": pred,
            "positions_balanced": positions, "carryover_balanced": carryover,
            "blocks": int(len(complete)), "incomplete": int((~complete).sum()),
            "off_plan": int((~order["planned"].astype(bool)).sum()),
            "sources": sorted(set(order["source"]))}


ORDINALS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
            "ninth", "tenth"]


def ordinal(i: int) -> str:
    return ORDINALS[i - 1] if i <= len(ORDINALS) else f"{i}th"


def position_words(pos: pd.DataFrame) -> str:
    """Which environment ran in which position how often: 'native ran first 3 times and
    third 3 times; native-aa ran second 6 times; ...' (positions it never held left out)."""
    parts = []
    for env in pos.columns:
        held = [f"{ordinal(int(i))} {int(n)} time{'' if n == 1 else 's'}"
                for i, n in pos[env].items() if n]
        parts.append(f"{env} ran " + (" and ".join(held) if len(held) < 3 else
                                  ", ".join(held[:-1]) + " and " + held[-1]))
    return "; ".join(parts)


def design_table(bal: dict[str, Any]) -> str:
    """The realised counts as a booktabs table (label tab:design): environments by position
    within the block, then by the environment run just before; empty where the order is
    unknown."""
    from containertax.statistics.texts import tex

    if not bal.get("known"):
        return ""
    pos, pred = bal["positions"], bal["predecessors"]
    k = len(pos.columns)
    turn = k > 4  # long environment names as column heads: set upright

    def head(name: str) -> str:
        return f"\\rotatebox{{90}}{{{tex(name)}}}" if turn else tex(name)

    def rows(table: pd.DataFrame, diagonal: bool = False) -> list[str]:
        # rows: environments; columns: positions (or predecessors: '--' where an
        # environment would follow itself, which a block cannot hold)
        return [f"{tex(env)} & " + " & ".join(
            "--" if diagonal and at == env else str(int(n)) for at, n in table[env].items())
            + r" \\" for env in table.columns]

    lines = ["\\begin{table}[htbp]", "\\centering", "\\small",
             "\\caption{\\papercaption{tab:design}}", "\\label{tab:design}",
             f"\\begin{{tabular}}{{l{'r' * k}}}", "\\toprule",
             f" & \\multicolumn{{{k}}}{{c}}{{Position within the block}} \\\\",
             f"\\cmidrule(l){{2-{k + 1}}}",
             "Environment & " + " & ".join(str(i) for i in pos.index) + r" \\", "\\midrule",
             *rows(pos), "\\midrule",
             f" & \\multicolumn{{{k}}}{{c}}{{Run just after}} \\\\",
             f"\\cmidrule(l){{2-{k + 1}}}",
             "Environment & " + " & ".join(head(e) for e in pred.index) + r" \\",
             "\\midrule", *rows(pred, diagonal=True), "\\bottomrule", "\\end{tabular}",
             "\\end{table}"]
    return "\n".join(lines) + "\n"


SOURCE_WORDS = {"ledger": "the ledger's record of when each run ended",
                "records": "the records' start times",
                "positions": "the planned positions"}


def macros(bal: dict[str, Any], design: str) -> dict[str, Any]:
    """Conditions and values of the Design subsection, all from the realised counts: the
    configured design only names what was planned."""
    from containertax.statistics.texts import tex

    v: dict[str, Any] = {"order-known": bool(bal.get("known")),
                         "design-planned": tex(design),
                         "positions-balanced": False, "carryover-balanced": False,
                         "position-each": 0, "carryover-each": 0, "position-counts": "--",
                         "order-blocks": 0, "order-incomplete": 0, "order-off-plan": 0,
                         "order-source": "--"}
    if not bal.get("known"):
        return v
    pos, pred = bal["positions"], bal["predecessors"]
    k = len(pred.columns)
    off = pred.to_numpy()[~np.eye(k, dtype=bool)]
    v.update({
        "positions-balanced": bal["positions_balanced"],
        "carryover-balanced": bal["carryover_balanced"],
        "position-each": int(pos.to_numpy().min()) if bal["positions_balanced"] else 0,
        "carryover-each": int(off.min()) if bal["carryover_balanced"] else 0,
        "position-counts": tex(position_words(pos)),
        "order-blocks": bal["blocks"], "order-incomplete": bal["incomplete"],
        "order-off-plan": bal["off_plan"],
        "order-source": " and ".join(SOURCE_WORDS[s] for s in bal["sources"]),
    })
    return v
