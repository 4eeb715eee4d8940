"""Raw records checked every time the workflow is planned, by content, not by file times:
a record cut in half (a disk fault) or edited by hand stops the invocation, named with its
cell and the fix, instead of hiding behind "Nothing to be done". Cheap: a record is parsed
only when its (size, mtime_ns, inode) differs from the last check, kept in a small file
in the campaign folder (paths.VERIFIED). Also finds file times in the future (clock skew),
which make Snakemake's output-time guard fail analysis jobs.

Also finds records measured under derived options (phase 2B -> docker_optimised of 2C and
2D) that have changed since: they measured another variant, so when jobs run they are moved
aside (never deleted) and their cells measured again (superseded_records).

Standard library only: the Snakefile runs this when it plans the workflow.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from containertax.campaign.paths import DAMAGED, SUPERSEDED, SUPERSEDED_NOTE, CampaignPaths
from containertax.core.errors import ContainertaxError

FUTURE_S = 60.0  # a file time further ahead of this machine's clock is clock skew


@dataclass(frozen=True)
class Damaged:
    """A raw record that is not a whole record of its cell."""

    path: Path
    why: str


CANONICAL = re.compile(r"rep([0-9]+)\.json", re.ASCII)


def canonical_repetition(raw: Path) -> int | None:
    """The repetition a record's file name gives, None where the name is not a cell's
    canonical one (repNNN.json in ASCII digits, of any width: rep01 and rep1 are older
    records' names; int() would read rep٠٠١.json as repetition 1 and fail on rep².json)."""
    match = CANONICAL.fullmatch(raw.name)
    return int(match.group(1)) if match else None


def reach_problem(raw: Path, raw_dir: Path) -> str | None:
    """Why a record is not the campaign's own file (None: it is): reached through a
    symbolic link (a raw/ folder linked to another campaign's records) or lying outside
    the campaign's folder once links are followed."""
    for path in (raw, raw.parent, raw.parent.parent, raw_dir):
        if path.is_symlink():
            return (f"reached through the symbolic link {path} -> {os.readlink(path)}: "
                    "another campaign's records are never analysed as this one's; remove "
                    "the link and run the cells here")
    try:
        raw.resolve().relative_to(raw_dir.resolve())
    except ValueError:
        return f"lies outside the campaign's folder ({raw.resolve()})"
    return None


def ledger_hashes(root: Path) -> dict[tuple[str, str, int], str]:
    """(model, environment, repetition) -> the sha256 of the record its latest run wrote,
    as the run step put it in the ledger (records written before it did have none). The
    ledgers kept with the raw records by each GPU visit (raw/visits/*/, committed) count
    too: on a fresh clone they are the only ledgers, and a committed record edited by hand
    would otherwise pass (issue #44)."""
    from containertax.campaign.paths import VISITS
    from containertax.core import records

    events = [e for visit in sorted((root / VISITS).glob("*/"))
              for e in records.read_ledger(visit, step="run", event="end")]
    events = sorted(events, key=lambda e: str(e.get("utc", "")))
    out = {}
    for event in events + records.read_ledger(root, step="run", event="end"):
        sha = event.get("record_sha256")
        if isinstance(sha, str) and event.get("status") == "ok":
            out[(str(event.get("model")), str(event.get("environment")),
                 event.get("repetition"))] = sha
    return out


def _problem(raw: Path, raw_dir: Path | None = None,
             hashes: dict[tuple[str, str, int], str] | None = None) -> str | None:
    """Why this file is not a whole raw record of the cell its path names, as its run
    wrote it (None: it is). The full schema check stays with the analysis
    (rawrecord.read_record)."""
    rep = canonical_repetition(raw)
    if rep is None:
        return (f"'{raw.name}' is not a record's canonical name (repNNN.json, ASCII "
                "digits): not a file this workflow wrote")
    if raw_dir is not None:
        why = reach_problem(raw, raw_dir)
        if why is not None:
            return why
    try:
        content = raw.read_bytes()
        data = json.loads(content)
    except (ValueError, UnicodeDecodeError) as exc:
        return f"not JSON ({exc})"
    if not isinstance(data, dict):
        return "not a JSON object"
    cell = data.get("cell")
    if not isinstance(cell, dict) or not isinstance(data.get("metrics"), list):
        return "no 'cell' object or no 'metrics' list"
    expected = {"model": raw.parent.parent.name, "environment": raw.parent.name,
                "repetition": rep}
    found = {k: cell.get(k) for k in expected}
    if found != expected:
        return f"key 'cell' is {found}, but its path is the cell {expected}"
    want = (hashes or {}).get((expected["model"], expected["environment"], rep))
    if want is not None:
        have = hashlib.sha256(content).hexdigest()
        if have != want:
            return (f"its content (sha256 {have[:12]}) is not what its run wrote (sha256 "
                    f"{want[:12]} in the ledger): edited after the run")
    return None


def _load_cache(path: Path) -> dict[str, list[int]]:
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return cache if isinstance(cache, dict) else {}


def check_records(paths: CampaignPaths, present: list[str],
                  write_cache: bool) -> tuple[list[Damaged], list[Path]]:
    """The damaged ones among the present records, and the records and folders whose times
    are in the future. With write_cache (jobs run; not while only planning) the records
    found whole are remembered."""
    cache = _load_cache(paths.verified)
    hashes = ledger_hashes(paths.root)
    limit = time.time() + FUTURE_S
    damaged, future, whole = [], [], {}
    for name in present:
        raw = Path(name)
        try:
            st = raw.stat()
        except OSError as exc:
            damaged.append(Damaged(raw, f"cannot be read ({exc})"))
            continue
        if st.st_mtime > limit:
            future.append(raw)
        # ctime too: a record made writable (chmod) and edited, its mtime set back, moves it
        key = [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]
        if cache.get(name) != key or raw.is_symlink():
            why = _problem(raw, paths.raw_dir, hashes)
            if why is not None:
                damaged.append(Damaged(raw, why))
                continue
        whole[name] = key
    future += [d for d in sorted({Path(p).parent for p in present})
               if d.stat().st_mtime > limit]
    if write_cache and whole != cache:
        _write_cache(paths.verified, whole)
    return damaged, future


def _write_cache(path: Path, cache: dict[str, list[int]]) -> None:
    """Atomic; a cache that cannot be written (a full disk) only costs the next check."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(cache, fh)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)


def damaged_message(paths: CampaignPaths, damaged: list[Damaged]) -> str:
    """The error for damaged records: each file, its cell and what is wrong, and the
    commands that move each record and its side files aside so that its cell runs again
    (nothing is moved automatically: an intact copy may exist, in git or a backup)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    aside = paths.aside(DAMAGED, stamp)
    lines = [f"{len(damaged)} raw record(s) damaged, edited, misnamed or foreign (raw records "
             "are written whole under their cell's name and never edited, so each was "
             "changed after its run, by a disk fault or by hand, or is not this campaign's "
             "own):"]
    commands = []
    for d in damaged:
        cell = f"{d.path.parent.parent.name}/{d.path.parent.name}/{d.path.stem}"
        lines.append(f"  {d.path} (cell {cell}): {d.why}")
        files = _record_files(d.path)
        target = aside / d.path.parent.relative_to(paths.raw_dir)
        commands.append(f"  mkdir -p {shlex.quote(str(target))} && mv "
                        + " ".join(shlex.quote(str(f)) for f in files)
                        + f" {shlex.quote(str(target))}/")
    lines.append("Restore an intact copy if you have one (git checkout -- FILE, a backup); "
                 "else move the record and its side files aside, so that its cell runs "
                 "again with the next invocation (nothing is deleted):")
    return "\n".join(lines + commands)


def future_message(future: list[Path]) -> str:
    """The warning for file times ahead of this machine's clock."""
    shown = ", ".join(str(p) for p in future[:5]) + (" ..." if len(future) > 5 else "")
    return (f"{len(future)} raw record(s) or folder(s) have file times in the future "
            f"(clock skew, more than {FUTURE_S:.0f} s ahead of this machine): {shown}. "
            "Snakemake's guard fails any analysis job whose output is older than an input: "
            "set this machine's clock right, or reset those times with "
            "touch -c -d now FILE ... (the records' contents are not changed).")


@dataclass(frozen=True)
class Superseded:
    """A raw record measured under other options than its environment's derived ones."""

    path: Path
    recorded: str | None  # sha256 of the derived file it was measured under (None: none)
    current: str


def superseded_records(present: list[str], current: dict[str, str]) -> list[Superseded]:
    """The present records of each environment in `current` (environment -> sha256 of the
    derived options file it now takes) whose provenance names another file content, or
    none (measured before the options were derived). Only those environments' records are
    read."""
    out = []
    for name in present:
        raw = Path(name)
        want = current.get(raw.parent.name)
        if want is None:
            continue
        try:
            data = json.loads(raw.read_bytes())
        except (OSError, ValueError):
            continue  # a damaged record: check_records names it
        src = ((data.get("provenance") or {}).get("options_source") or {}) \
            if isinstance(data, dict) else {}
        if src.get("sha256") != want:
            out.append(Superseded(raw, src.get("sha256"), want))
    return out


def _record_files(raw: Path) -> list[Path]:
    """The record and its side files (.telemetry.csv, .requests.csv, .log, .cooldown.json)."""
    stem = raw.name.removesuffix(".json")
    return sorted(raw.parent.glob(f"{stem}.*"))


def move_superseded(paths: CampaignPaths, found: list[Superseded]) -> Path:
    """Move each superseded record with its side files to raw/.superseded/<when>/ (four
    levels deep, where no reader of raw/*/*/ sees them), so that its cell runs again; a
    note there says what each was measured under. Returns the folder."""
    return _move_aside(paths, [(s.path, {"options_sha256": s.recorded, "now": s.current})
                               for s in found])


def _move_aside(paths: CampaignPaths, found: list[tuple[Path, dict[str, Any]]]) -> Path:
    """Records (with their side files) to raw/.superseded/<when>/, a ledger event each
    and a note naming each with why (`about`)."""
    from containertax.core import records

    folder = paths.aside(SUPERSEDED, records.aside_stamp())
    for path, about in found:
        moved = records.move_aside(_record_files(path), paths.raw_dir, folder)
        cell = path.relative_to(paths.raw_dir)
        records.append_ledger(paths.root, {
            "step": "supersede", "event": "moved_aside", "model": cell.parts[0],
            "environment": cell.parts[1], "record": str(cell), **about,
            "moved": [str(p) for p in moved]})
    records.atomic_write_text(folder / SUPERSEDED_NOTE, json.dumps(
        [{"record": str(path.relative_to(paths.raw_dir)), **about} for path, about in found],
        indent=1) + "\n")
    return folder


@dataclass(frozen=True)
class Unscheduled:
    """A raw record whose cell the campaign's written schedule does not hold (a cell a
    config edit removed, a record added by hand), or that lies beyond the block at which
    the stopping rule ended its model: never analysed."""

    path: Path
    why: str


def cell_of(raw: Path) -> tuple[str, str, int]:
    """(model, environment, repetition) of a record, from its path (a canonical name:
    canonical_repetition; -1 for any other, which no schedule holds)."""
    rep = canonical_repetition(raw)
    return raw.parent.parent.name, raw.parent.name, -1 if rep is None else rep


def unscheduled_records(present: list[Path], scheduled: set[tuple[str, str, int]],
                        stopped: dict[str, int]) -> list[Unscheduled]:
    """The present records whose cell is not scheduled, or beyond its model's stop
    (stopped: model -> the blocks it ran under the stopping rule)."""
    out = []
    for raw in present:
        model, env, rep = cell_of(raw)
        if canonical_repetition(raw) is None:
            out.append(Unscheduled(raw, f"'{raw.name}' is not a record's canonical name "
                                        "(repNNN.json, ASCII digits)"))
        elif (model, env, rep) not in scheduled:
            out.append(Unscheduled(raw, f"cell {model}/{env}/rep{rep} is not in the "
                                        "campaign's schedule"))
        elif rep > stopped.get(model, rep):
            out.append(Unscheduled(raw, f"block {rep} lies beyond the stopping rule's "
                                        f"stop of model {model} after {stopped[model]} "
                                        "blocks"))
    return out


def move_unscheduled(paths: CampaignPaths, found: list[Unscheduled]) -> Path:
    """Move records outside the schedule aside like superseded ones (kept, ledgered)."""
    return _move_aside(paths, [(u.path, {"unscheduled": u.why}) for u in found])


def unscheduled_message(found: list[Unscheduled], moved_to: Path | None,
                        kept: bool = False) -> str:
    """What is (or, while only planning, will be) moved aside, and why; kept: left in
    place (a config with extends_campaign: true shares the campaign with another)."""
    shown = "; ".join(f"{u.path} ({u.why})" for u in found[:5]) \
        + (f"; and {len(found) - 5} more" if len(found) > 5 else "")
    head = (f"{len(found)} raw record(s) outside the campaign's schedule are not "
            f"analysed: {shown}. ")
    if kept:
        return head + ("Left in place: this config says extends_campaign: true (they may "
                       "be another config's cells).")
    if moved_to is None:
        return head + ("The next invocation that runs jobs moves them aside to "
                       f"raw/.{SUPERSEDED}/ (nothing is deleted; a ledger event each).")
    return head + f"Moved aside to {moved_to} (with {SUPERSEDED_NOTE} naming each)."


def superseded_message(found: list[Superseded], moved_to: Path | None) -> str:
    """What was (or, while only planning, will be) moved aside, and why."""
    envs = sorted({s.path.parent.name for s in found})
    old = sorted({(s.recorded or "none")[:12] for s in found})
    head = (f"{len(found)} raw record(s) of {', '.join(envs)} were measured under derived "
            f"options (sha256 {', '.join(old)}) other than the current ones "
            f"({found[0].current[:12]}): they measured another variant. ")
    if moved_to is None:
        return head + ("The next invocation that runs jobs moves them aside to "
                       f"raw/.{SUPERSEDED}/ (nothing is deleted) and measures those cells "
                       "again. E.g. " + ", ".join(str(s.path) for s in found[:3]))
    return head + (f"Moved aside to {moved_to} (with {SUPERSEDED_NOTE} naming each); "
                   "their cells are measured again.")


class ForeignRecords(ContainertaxError, ValueError):
    """Records the analysis must not read: edited, foreign or misnamed (the message names
    each with the fix)."""


def verify_for_analysis(paths: CampaignPaths, present: list[Path]) -> None:
    """What is analysed is what was measured: every record has a canonical name, is the
    campaign's own file (no symbolic link, inside its folder) and, where its run put the
    record's sha256 in the ledger, still has that content. Raises ForeignRecords naming
    each, with the fix (the workflow's plan names them the same way)."""
    hashes = ledger_hashes(paths.root)
    bad = [Damaged(raw, why) for raw in present
           if (why := _problem(raw, paths.raw_dir, hashes)) is not None]
    if bad:
        raise ForeignRecords(damaged_message(paths, bad))
