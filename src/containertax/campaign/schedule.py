"""Counterbalanced execution order of a campaign's cells.

Slow drift (temperature, background load, page cache) confounds any comparison whose
environments always run in the same order. Each block (one repetition of one model)
runs every environment once, in an order taken from a counterbalancing design.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

from containertax.campaign import integrity, lanes, paths
from containertax.campaign.config import Campaign, ConfigError
from containertax.campaign.designs import block_order, period
from containertax.core.cell import Cell

FIELDS = ["position", "model", "environment", "repetition", "block", "sequence", "lane"]


def design_warnings(campaign: Campaign) -> list[str]:
    """What the configured design will not balance, with the fix: printed by `containertax
    check` and logged by the schedule step. Warnings, not errors: committed campaigns ran
    under these designs and must still load and be analysed, and a campaign may stop early;
    the paper states the balance of the order that ran (statistics/order.py), whatever the
    design's name."""
    design, n = campaign.schedule["design"], len(campaign.environments)
    out = []
    if design == "alternating" and n > 2:
        order = [e.id for e in campaign.environments]
        middle = order[1:-1]
        replicas = [e for e in middle if e in campaign.replicas]
        out.append(
            f"{campaign.source}: key 'schedule.design': 'alternating' is position-balanced "
            f"only for 2 environments; with {n} ({', '.join(order)}) "
            f"{', '.join(middle)} never {'runs' if len(middle) == 1 else 'run'} first or last, "
            "so the position within a block is confounded with the environment"
            f"{' (the A/A replica ' + ', '.join(replicas) + ' included)' if replicas else ''}"
            ". Set "
            "schedule.design: williams (every environment in every position and after every "
            "other equally often).")
    blocks = period(design, n)
    if blocks and campaign.repetitions % blocks:
        whole = -(-campaign.repetitions // blocks) * blocks
        out.append(
            f"{campaign.source}: key 'repetitions': {campaign.repetitions} is not a multiple "
            f"of the {design} design's period of {blocks} blocks for {n} environments, so "
            f"positions cannot be balanced; set repetitions to a multiple of {blocks} (e.g. "
            f"{whole}).")
    return out


POSITIONS = paths.POSITIONS  # every cell ever planned, with its position (paths.py)


def plan(campaign: Campaign) -> list[Cell]:
    """Every cell of the campaign, in execution order.

    Stable under config edits: cells planned before (schedule.positions.csv, else
    schedule.csv) keep their positions, blocks and sequences, as their records say; cells
    an edit adds (a repetition, a model, an environment) come after every one planned
    before, in the order a fresh plan gives them; cells an edit removes drop out (and get
    their old positions back if they return)."""
    fresh = fresh_plan(campaign)
    keys = {_key(c) for c in fresh}
    return [c for c in extend(_planned_before(campaign), fresh) if _key(c) in keys]


def known_cells(campaign: Campaign) -> list[Cell]:
    """Every cell planned before or now, each at its one position (schedule.positions.csv).
    Without a written schedule (a fresh clone holding committed records), the records'
    own cells are the cells planned before."""
    before = _planned_before(campaign) or _recorded_cells(campaign)
    return extend(before, fresh_plan(campaign))


def _recorded_cells(campaign: Campaign) -> list[Cell]:
    import json

    cells = {}
    for path in campaign.paths.raw_records():
        try:
            cell = Cell(**json.loads(path.read_text())["cell"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a record of this workflow; the analysis says so
        cells.setdefault(cell.position, cell)
    return sorted(cells.values(), key=lambda c: c.position)


def _key(c: Cell) -> tuple[str, str, int]:
    return (c.model, c.environment, c.repetition)


def _planned_before(campaign: Campaign) -> list[Cell]:
    for path in (campaign.paths.positions, campaign.paths.schedule):
        if path.exists():
            try:
                return read_csv(path)
            except (OSError, KeyError, ValueError) as exc:
                raise ConfigError(f"{path} is not a schedule this workflow wrote ({exc}); "
                                  f"move it aside to plan campaign {campaign.name} afresh."
                                  ) from None
    return []


def extend(kept: Sequence[Cell], fresh: Sequence[Cell]) -> list[Cell]:
    """The kept cells at their positions, then the fresh plan's other cells at positions
    after every kept one, in the fresh plan's order."""
    known = {_key(c) for c in kept}
    cells = list(kept)
    nxt = max((c.position for c in kept), default=-1) + 1
    for c in fresh:
        if _key(c) not in known:
            cells.append(replace(c, position=nxt))
            nxt += 1
    return sorted(cells, key=lambda c: c.position)


def fresh_plan(campaign: Campaign) -> list[Cell]:
    """Every cell of the campaign, in execution order, as if nothing had run yet."""
    opts = campaign.schedule
    rng = random.Random(opts["seed"])
    envs = [e.id for e in campaign.environments]
    models = [m.id for m in campaign.models]
    blocks: list[tuple[str, int]] = []
    if opts["models"] == "blocked":
        order = models[:]
        if opts["shuffle_models"]:
            rng.shuffle(order)
        blocks = [(m, r) for m in order for r in range(1, campaign.repetitions + 1)]
    else:
        for r in range(1, campaign.repetitions + 1):
            order = models[:]
            if opts["shuffle_models"]:
                rng.shuffle(order)
            blocks += [(m, r) for m in order]
    cells: list[Cell] = []
    per_model_index: dict[str, int] = {}
    for model, rep in blocks:
        index = per_model_index.get(model, 0)
        per_model_index[model] = index + 1
        seq, order = block_order(opts["design"], len(envs), index, rng)
        for e in order:
            cells.append(Cell(len(cells), model, envs[e], rep, rep, seq))
    return with_lanes(campaign, cells)


def with_lanes(campaign: Campaign, cells: list[Cell]) -> list[Cell]:
    """Each cell with the lane of its block: whole repetitions per lane (lanes.deal)."""
    all_lanes = lanes.lanes(campaign)
    sequence = {}
    for c in cells:  # a repetition's sequence is the same for every model (per-model index)
        sequence.setdefault(c.repetition, c.sequence)
    reps = sorted(sequence)
    dealt = dict(zip(reps, lanes.deal(len(all_lanes), [sequence[r] for r in reps]),
                     strict=True))
    return [replace(c, lane=all_lanes[dealt[c.repetition]].id) for c in cells]


def write_csv(cells: Sequence[Cell], path: Path) -> None:
    from containertax.core.records import atomic_write_text

    lines = [",".join(FIELDS)]
    lines += [",".join(str(asdict(c)[f]) for f in FIELDS) for c in cells]
    atomic_write_text(path, "\n".join(lines) + "\n")


def read_csv(path: Path) -> list[Cell]:
    with path.open() as fh:
        return [
            Cell(
                int(r["position"]),
                r["model"],
                r["environment"],
                int(r["repetition"]),
                int(r["block"]),
                int(r["sequence"]),
                r.get("lane") or "",
            )
            for r in csv.DictReader(fh)
        ]


def written_cell(campaign: Campaign, model: str, environment: str, repetition: int) -> Cell:
    """One cell of the schedule the schedule step wrote (paths.SCHEDULE): what a cell step
    (gate, run, cooldown) runs, at the position, block, sequence and lane planned there.
    A missing schedule, or one without the cell, is an error naming the file and the fix."""
    path = campaign.paths.schedule
    fix = (f"run the workflow with Snakemake (its schedule step writes {path} before any "
           f"cell, and again after a change of the config)")
    try:
        cells = read_csv(path)
    except FileNotFoundError:
        raise ConfigError(f"{path} does not exist: a cell step reads its cell from the "
                          f"campaign's schedule; {fix}.") from None
    except (OSError, KeyError, ValueError) as exc:
        raise ConfigError(f"{path} is not a schedule this workflow wrote ({exc}); move it "
                          f"aside and {fix}.") from None
    for cell in cells:
        if (cell.model, cell.environment, cell.repetition) == (model, environment, repetition):
            return cell
    raise ConfigError(f"{path} has no cell {model}/{environment}/rep{repetition} of campaign "
                      f"{campaign.name}: the schedule is older than the config, or the cell is "
                      f"not in it; {fix}.")


def block_targets(campaign: Campaign, reps: set[int]) -> list[str]:
    """The last file of a cell (its .done.json) of every cell of the given repetitions,
    in schedule order: as Snakemake targets they run whole blocks, so that a campaign spread
    over several visits to a machine never splits a block between two machines (a cell
    already finished in raw/ costs a step that only says so)."""
    unknown = sorted(r for r in reps if not 1 <= r <= campaign.repetitions)
    if unknown:
        raise ConfigError(f"repetitions {unknown} are not in 1..{campaign.repetitions} "
                         f"(repetitions in {campaign.source})")
    # under a stopping rule: no block beyond the looks decided so far; a model's blocks
    # after its stop are left out
    allowed = stopping_allowed(campaign)
    beyond = sorted({r for r in reps if allowed and r > max(allowed.values())})
    if beyond:
        raise ConfigError(
            f"repetitions {beyond} lie beyond a look of the stopping rule in "
            f"{campaign.source} that has not decided yet (blocks allowed per model: "
            f"{allowed}): run `snakemake --cores 1` (its interim checkpoints decide which "
            "blocks run), or request blocks up to the next look only.")
    return [str(campaign.paths.cell(c.model, c.environment, c.repetition).done)
            for c in plan(campaign) if c.repetition in reps
            and (not allowed or c.repetition <= allowed[c.model])]


def stopped_at(campaign: Campaign) -> dict[str, int]:
    """Under a stopping rule, the models whose runs have ended (stopped at a look or at the
    maximum), with the blocks they ran; a model still running is not named."""
    from containertax.campaign import looks, stopping

    if not campaign.raw.get("stopping"):
        return {}
    ended: dict[str, int] = {}
    for state in looks.read_looks(campaign.paths, stopping.Rule.from_campaign(campaign)):
        for model, decided in state["models"].items():
            if decided.get("decision") != "continue":
                ended.setdefault(model, int(decided["blocks_allowed"]))
    return ended


def unscheduled(campaign: Campaign, cells: Sequence[Cell] | None = None
                ) -> list[integrity.Unscheduled]:
    """The campaign's raw records that its schedule does not hold (cells a config edit
    removed, records added by hand), or that lie beyond the block at which the stopping
    rule ended their model: never analysed; the workflow moves them aside."""
    cells = plan(campaign) if cells is None else cells
    return integrity.unscheduled_records(campaign.paths.raw_records(),
                                         {_key(c) for c in cells}, stopped_at(campaign))


def stopping_allowed(campaign: Campaign) -> dict[str, int]:
    """Under a stopping rule, the blocks each model may run by the looks decided so far
    (results/<c>/interim/look<k>.json); empty without a rule."""
    from containertax.campaign import looks, stopping

    at = stopping.looks(campaign.raw)
    if not at:
        return {}
    allowed = {m.id: at[0] for m in campaign.models}
    for state in looks.read_looks(campaign.paths, stopping.Rule.from_campaign(campaign)):
        allowed = {m: int(v["blocks_allowed"]) for m, v in state["models"].items()}
    return allowed
