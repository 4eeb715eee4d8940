"""The timeline of a run: where its wall time goes, phase by phase, on one clock.

Marks are read on the kernel's CLOCK_MONOTONIC (Python's time.monotonic() on Linux), which
a container shares with its host (Docker starts no time namespace): the launcher's marks
(launch, container created, process started, exit seen) and the probe's marks taken
inside the environment (first statement, imports done, device ready, model or operands
ready, first compiled step done, warm-up done, measured window end, teardown) lie on one
axis. A phase is named by the mark that ends it and lasts from the latest earlier mark
present; a mark a run does not take (no container to create, nothing compiled) merges its
phase into the next one, so the phases of every run add up to its wall time, launch to
exit seen by the launcher (the `process_wall_s` metric, read separately: the sum is a
check, tests/test_timeline.py).

Lives with the workloads (its metrics are registered in metric_registry); the run step
(execution/cells.py) builds the record's `timeline` here and the analysis reads PHASES for
its family and figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from containertax.core.metric import Metric

CLOCK = "CLOCK_MONOTONIC"
PREFIX = "phase_"  # every phase metric's name, of any definition
FIRST = "launch"  # the launcher's mark before it creates or spawns anything


@dataclass(frozen=True)
class Phase:
    """One phase: the mark that ends it, its metric, its label and what it holds."""

    mark: str
    metric: str
    label: str
    description: str
    side: str  # who takes the end mark: 'launcher' or 'probe'


PHASES: tuple[Phase, ...] = (
    Phase("started", "phase_start_s", "Process or container start",
          "launch until the launcher's start call returned (or the probe's first statement, "
          "where a loaded machine ran that first): fork and exec natively and in the "
          "chroot's wrapper, the container's create and start (runtime, namespaces, "
          "cgroup) in Docker (the record's marks keep create and start apart)", "launcher"),
    Phase("enter", "phase_interpreter_s", "Interpreter start-up",
          "until the probe's first statement: interpreter initialisation (the chroot's "
          "unshare, mounts and chroot before it)", "probe"),
    Phase("imports", "phase_imports_s", "Imports", "the framework's imports", "probe"),
    Phase("device", "phase_device_s", "Device initialisation",
          "until the device answers (CUDA context)", "probe"),
    Phase("model", "phase_model_s", "Model or operands ready",
          "the model built on the device, or the operands allocated", "probe"),
    Phase("compiled", "phase_compile_s", "First compiled step",
          "the first call of the compiled step: tracing, compiling or loading from the "
          "compile cache", "probe"),
    Phase("warm", "phase_warmup_s", "Warm-up",
          "the rest of the warm-up requests or products (CUDA graph capture)", "probe"),
    Phase("window_end", "phase_measure_s", "Measured window",
          "the measured requests or products", "probe"),
    Phase("teardown", "phase_teardown_s", "Teardown",
          "after the window until the probe's output is ready (checksum, peak memory)",
          "probe"),
    Phase("exited", "phase_exit_s", "Exit",
          "writing the output, interpreter shutdown and the process's exit until the "
          "launcher sees it (natively waitid; Docker: the container's wait returned)",
          "launcher"),
)
# every mark a run may take, in order; 'created' (Docker) is kept in the record but ends
# no phase, so that every environment has the same phases (a comparison needs both sides)
MARKS = (FIRST, "created", *(p.mark for p in PHASES))
METRICS = tuple(p.metric for p in PHASES)
# after the process's exit, outside its wall time (recorded, not a phase)
AFTER_EXIT = ("output_closed", "removed")


class TimelineError(ValueError):
    """Marks that cannot form a timeline (none from the launcher)."""


def phases(marks: dict[str, float]) -> dict[str, float]:
    """Phase metric -> seconds, for the phases whose end mark was taken; each lasts from
    the latest earlier mark present (in MARKS order), so they sum to exited - launch.

    Marks of two processes can cross: the launcher reads 'started' once its start call
    has returned, and a loaded machine may run the child's first statement ('enter')
    before the launcher is scheduled again. Where a phase's end mark comes after the next
    mark present, and that next mark still lies within the phase, the phase ends at the
    next mark (the child had started by the time it took its first mark) and the next
    phase is zero. A mark outside the phase (a probe on another clock) is left as taken,
    so its negative phase shows (problems()). The record keeps the marks as taken."""
    if FIRST not in marks or "exited" not in marks:
        raise TimelineError(f"a timeline needs the launcher's marks {FIRST!r} and 'exited' "
                            f"(got {sorted(marks)})")
    ends = [(p.metric, marks[p.mark]) for p in PHASES if p.mark in marks]
    out = {}
    last = marks[FIRST]
    for i, (metric, end) in enumerate(ends):
        later = ends[i + 1][1] if i + 1 < len(ends) else end
        if last <= later < end:  # the next mark fell inside this phase
            end = later
        out[metric] = end - last
        last = end
    return out


def build(launcher_marks: dict[str, float], probe: dict[str, Any] | None,
          wall_s: float) -> dict[str, Any] | None:
    """The record's `timeline`: every mark (seconds on CLOCK_MONOTONIC), the phases, the
    launcher's own wall time and what followed the exit. None where the launcher took no
    marks (a launcher of an older containertax)."""
    if FIRST not in launcher_marks or "exited" not in launcher_marks:
        return None
    inside = ((probe or {}).get("timeline") or {}).get("marks") or {}
    marks = {**{k: v for k, v in inside.items() if k in MARKS},
             **{k: v for k, v in launcher_marks.items() if k in MARKS}}
    ordered = dict(sorted(marks.items(), key=lambda kv: MARKS.index(kv[0])))
    found = phases(ordered)
    return {"clock": CLOCK, "marks": ordered, "phases_s": found,
            "sum_s": sum(found.values()), "wall_s": wall_s,
            "after_exit_s": {k: launcher_marks[k] - launcher_marks["exited"]
                             for k in AFTER_EXIT if k in launcher_marks},
            "probe_clock": ((probe or {}).get("timeline") or {}).get("clock")}


def problems(timeline: dict[str, Any], tolerance_s: float) -> list[str]:
    """What makes a timeline wrong, in words: a phase shorter than -tolerance_s (marks out
    of order: a probe on another clock, or a mark taken in the wrong place), or phases that
    do not add up to the launcher's own wall time within tolerance_s."""
    out = [f"{name} = {value:.6f} s < 0" for name, value in timeline["phases_s"].items()
           if value < -tolerance_s]
    gap = timeline["sum_s"] - timeline["wall_s"]
    if abs(gap) > tolerance_s:
        out.append(f"the phases add up to {timeline['sum_s']:.6f} s, the wall time is "
                   f"{timeline['wall_s']:.6f} s")
    return out


def metrics(timeline: dict[str, Any] | None) -> list[Metric]:
    """The phases as metrics (registered in metric_registry), from the marks under the
    current phase definitions (the analysis reads a record's phases this way, so a record
    written under an earlier definition is read alike)."""
    if not timeline:
        return []
    return [Metric(name, float(value), "s") for name, value in phases(timeline["marks"]).items()]
