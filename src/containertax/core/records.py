"""How a campaign's files are written without ever losing one (where they live:
containertax.campaign.paths; this module needs no other part of containertax).

Raw records are the campaign's only irreplaceable output: they are written to a
temporary name, read-only, and linked into place (which fails rather than overwrite), so
a killed run leaves either a whole record or none. No Snakemake rule declares them as
output, so Snakemake never deletes one. Every attempt is appended to the ledger.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from containertax.core.errors import ContainertaxError

# the ledger's file name below a campaign root (the implicit lane's; campaign.paths names
# the full path, campaign.lanes each lane's own)
LEDGER = "ledger.jsonl"
# the sha256 of each file a step derives (a look, derived options, runs.csv) below a campaign
# root: not the ledger, whose events are the cells' steps (a paper built from committed
# records starts no cell and writes no ledger, but does write runs.csv)
HASHES = "hashes.jsonl"


class RecordExistsError(ContainertaxError, FileExistsError):
    """Refusal to overwrite a raw record."""


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def new_attempt_id() -> str:
    return uuid.uuid4().hex[:12]


def _tmp_beside(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    return Path(name)


def atomic_write_text(path: Path, text: str, *, overwrite: bool = True) -> None:
    """Write text so that readers see the old file or the whole new one, never a part.

    With overwrite=False an existing file is an error (RecordExistsError)."""
    path = Path(path)
    tmp = _tmp_beside(path)
    try:
        with tmp.open("w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            tmp.chmod(0o444)  # born read-only: a record is never edited in place
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise RecordExistsError(
                    f"{path} already exists; raw records are never overwritten. Move it "
                    "aside (and its .telemetry.csv, .requests.csv, .log) to run that cell again."
                ) from None
    finally:
        tmp.unlink(missing_ok=True)


def move_aside(files: list[Path], raw_dir: Path, folder: Path) -> list[Path]:
    """Move the existing ones of `files` (under raw_dir) to `folder`, keeping their path
    below raw_dir: never deleted, never overwriting (the folder is new per call)."""
    moved = []
    for path in files:
        if not path.exists():
            continue
        target = folder / path.relative_to(raw_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            raise RecordExistsError(f"{target} already exists; {path} is left in place")
        os.rename(path, target)
        moved.append(target)
    return moved


def aside_stamp() -> str:
    """A folder name for one move aside: its time, and a suffix that makes it unique."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + new_attempt_id()[:6]


def write_json(path: Path, data: Any, *, overwrite: bool = True) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, default=str) + "\n",
                      overwrite=overwrite)


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock; the kernel drops it when the holder dies, even by SIGKILL."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def append_ledger(root: Path, event: dict[str, Any], ledger: str = LEDGER) -> None:
    """One JSON line per event, whole or not at all: written under a lock, and on a failed
    or short write (a full disk) the file is cut back to its length before, so no torn line
    is left to swallow the next event. A torn tail left anyway (a crash of the machine) is
    ended with a newline first, so this event starts its own line and the reader skips and
    counts only the torn one (ledger_damage). Each lane has its own ledger file
    (campaign.lanes), so lanes on several hosts never share a file or a lock."""
    path = Path(root) / ledger
    line = json.dumps({"utc": utc_now(), **event}, sort_keys=True, default=str) + "\n"
    data = line.encode()
    with locked(path.with_suffix(".lock")):
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # end the torn tail; the event gets a line of its own
            try:
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    if written <= 0:
                        raise OSError(f"{path}: short write while appending to the ledger")
                    view = view[written:]
                os.fsync(fd)
            except BaseException:
                # none of this event stays, not half a line (should that fail too, the
                # next append ends the torn tail with a newline)
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)


def read_ledger(root: Path, ledger: str | None = None, **match: str) -> list[dict[str, Any]]:
    """The events of one ledger file, or (ledger None) of every lane's, in time order;
    only those whose fields equal `match` (step="run", ...): lines are written with sorted
    keys and default separators, so a line that lacks the text '"step": "run"' is skipped
    without parsing it (a gate reads a 900-run ledger)."""
    if ledger is not None:
        return _read_ledger_file(Path(root) / ledger, match)
    paths = sorted(Path(root).glob("ledger*.jsonl"))
    if len(paths) == 1:
        return _read_ledger_file(paths[0], match)
    events = [e for p in paths for e in _read_ledger_file(p, match)]
    return sorted(events, key=lambda e: str(e.get("utc", "")))


# --- files a step derives, verified like the raw records: the step that writes one (a
# look's decision interim/lookK.json, derived options derived/ENV.yaml, runs.csv) puts its
# sha256 in the campaign's HASHES file (one whole JSON line per write, appended as the
# ledger is), and every reader compares ---------------------------------------------------

def _written_name(root: Path, path: Path) -> str | None:
    """A derived file's name in its campaign (interim/look1.json), as HASHES says it;
    None for a file outside the campaign's folder (a step's output written elsewhere)."""
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return None


def hash_written(root: Path, path: Path, step: str, text: str) -> None:
    """Put the sha256 of the text `step` just wrote to `path` in the campaign's HASHES."""
    name = _written_name(root, path)
    if name is not None:
        append_ledger(root, {"step": step, "event": "written", "file": name,
                             "sha256": hashlib.sha256(text.encode()).hexdigest()}, HASHES)


def written_mismatch(root: Path, path: Path, content: bytes) -> tuple[str, str] | None:
    """(sha256 of `content`, sha256 HASHES holds) when a derived file's content is not
    what its step last wrote, i.e. edited since; None when it is, or when HASHES holds
    no hash for it (a file written before hashes were kept, or by hand in a test)."""
    name = _written_name(root, path)
    if name is None:
        return None
    want = None
    for event in read_ledger(root, HASHES, event="written"):
        if event.get("file") == name and isinstance(event.get("sha256"), str):
            want = event["sha256"]  # the latest write wins (a look decided again)
    if want is None:
        return None
    have = hashlib.sha256(content).hexdigest()
    return None if have == want else (have, want)


CELL_STEPS = ("gate", "run", "cooldown")  # events of one cell: model, environment, repetition


def event_problem(event: Any) -> str | None:
    """Why a parsed ledger line is not an event `status` can use (None: it is): every
    event has a step, an event and a timezone-aware ISO time `utc` (read_ledger skips a
    line without that time); a cell step's names its model, environment (text) and
    repetition (a whole number). Named by ledger_problems, never a KeyError."""
    why = _time_problem(event)
    if why is not None:
        return why
    if not isinstance(event.get("step"), str) or not isinstance(event.get("event"), str):
        return "no 'step' or 'event'"
    if event["step"] in CELL_STEPS:
        for key in ("model", "environment"):
            if not isinstance(event.get(key), str):
                return f"no '{key}'"
        rep = event.get("repetition")
        if not isinstance(rep, int) or isinstance(rep, bool):
            return f"'repetition' is not a whole number ({rep!r})"
    return None


def cell_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of cells' steps (gate, run, cooldown) that name their cell, in order:
    what a reader that counts or pairs cells reads. The ledger holds other steps' events
    too (a record moved aside: `supersede`), and a line may lack what a cell's needs."""
    return [e for e in events
            if isinstance(e, dict) and e.get("step") in CELL_STEPS and event_problem(e) is None]


def _time_problem(event: Any) -> str | None:
    """What every reader needs of an event: a JSON object with a timezone-aware time."""
    if not isinstance(event, dict):
        return "not a JSON object"
    try:
        when = datetime.fromisoformat(str(event.get("utc")))
    except ValueError:
        return f"'utc' is not a time ({str(event.get('utc'))[:40]!r})"
    if when.tzinfo is None:
        return f"'utc' has no time zone ({event.get('utc')!r})"
    return None


def _ledger_lines(path: Path) -> list[str] | None:
    """A ledger file's lines; None where it is no readable file (a folder, unreadable)."""
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return None


def _read_ledger_file(path: Path, match: dict[str, str]) -> list[dict[str, Any]]:
    lines = _ledger_lines(path) if path.exists() else []
    needles = [json.dumps({k: v})[1:-1] for k, v in match.items()]
    events = []
    for line in lines or []:
        line = line.strip()
        if line and all(n in line for n in needles):
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn line (counted by ledger_damage); the rest stays usable
            if _time_problem(event) is None and all(event.get(k) == v
                                                    for k, v in match.items()):
                events.append(event)
    return events


def ledger_damage(root: Path) -> dict[str, int]:
    """Ledger file name -> how many of its lines are not a JSON event (torn by a full disk
    or a crash; skipped by read_ledger), for the files that have any."""
    damage = {}
    for path in sorted(Path(root).glob("ledger*.jsonl")):
        bad = 0
        for line in _ledger_lines(path) or []:
            if not line.strip():
                continue
            try:
                ok = isinstance(json.loads(line), dict)
            except json.JSONDecodeError:
                ok = False
            bad += not ok
        if bad:
            damage[path.name] = bad
    return damage


def ledger_problems(root: Path, most: int = 5) -> list[str]:
    """Each ledger that is no readable file, and the first `most` lines per file that
    parse but are no usable event (event_problem), named by file and line number."""
    out = []
    for path in sorted(Path(root).glob("ledger*.jsonl")):
        lines = _ledger_lines(path)
        if lines is None:
            what = "a folder" if path.is_dir() else "unreadable"
            out.append(f"{path} is {what}, not a ledger file: its events are not read; move "
                       f"it aside (mv {path} {path}.bad) and the next step starts a new one")
            continue
        found = []
        for n, line in enumerate(lines, 1):
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue  # torn: counted by ledger_damage
            why = event_problem(event) if isinstance(event, dict) else None
            if why is not None:
                found.append(f"{path} line {n}: {why}")
        out += found[:most]
        if len(found) > most:
            out.append(f"{path}: {len(found) - most} more such line(s)")
    return out
