"""The interface every workload kind implements, and what all of them share.

A workload builds the probe command (identical in every environment, only the paths of the
probe and work folders are the environment's) and turns the probe's JSON into metrics,
per-request rows and the detail kept in the raw record. One module per kind declares a
Workload; the package's registry (containertax.workloads) lists them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from containertax.core.errors import ContainertaxError
from containertax.core.metric import Metric

Probe = dict[str, Any]


class WorkloadError(ContainertaxError, ValueError):
    """A workload that cannot be built from the config, or output that cannot be read."""


# the words a registry line may use (MetricInfo checks each)
SIGNS = ("nonnegative", "positive", "any")
DIRECTIONS = ("lower", "higher", "none")
SIZE_TRENDS = (None, "increasing", "decreasing")


@dataclass(frozen=True)
class MetricInfo:
    """A metric's registry entry: every table and figure takes its label, unit and
    direction here. direction says which way is better ('lower', 'higher', or 'none' for
    descriptive metrics such as utilisation); size_trend says how a physically plausible
    metric moves as the model (problem) grows, which the data-quality report checks."""

    name: str
    unit: str
    direction: str
    label: str
    description: str
    size_trend: str | None = None  # 'increasing', 'decreasing' or None
    # the relative spread of the means below which models of very different sizes count
    # as 'the same' (implausible): memory must move more than a noisy timing
    size_tolerance: float = 0.02
    # a metric that is another one rescaled by a constant of the run (tested once, there)
    restates: str | None = None
    # False: measured differently across environments or records; never compared
    comparable: bool = True
    # the values it may take (pyperf's _metadata.py: each value type- and sign-checked
    # where a record is read): "nonnegative" (a time, a size, a rate), "positive", "any"
    sign: str = "nonnegative"

    def __post_init__(self) -> None:
        """A misspelt word would switch its check off silently ('nonegative' checks no
        sign): each is one of its few words, or the registry line does not load."""
        for key, allowed in (("sign", SIGNS), ("direction", DIRECTIONS),
                             ("size_trend", SIZE_TRENDS)):
            if getattr(self, key) not in allowed:
                raise ValueError(f"metric {self.name!r}: {key} {getattr(self, key)!r} is not "
                                 f"one of {', '.join(map(repr, allowed))}")

    def value_problem(self, value: object) -> str | None:
        """Why a value cannot be this metric's (None where it can): not a real number, or
        of a sign it never takes. NaN passes: a missing value, which the quality step
        flags and always excludes."""
        import math
        import numbers

        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return f"is {type(value).__name__} {value!r}, not a number"
        if math.isnan(value) or self.sign == "any":
            return None
        if self.sign == "positive" and not value > 0:
            return f"is {value!r}, but {self.name} is positive ({self.description})"
        if self.sign == "nonnegative" and value < 0:
            return f"is {value!r}, but {self.name} is never negative ({self.description})"
        return None


MEMORY_TOLERANCE = 0.10
# torch devices a probe may name: each environment sees only its lane's GPU, as cuda
TORCH_DEVICES = ("cuda", "cpu")


@dataclass(frozen=True)
class Where:
    """Where a model's parameters come from, for error messages that name the key."""

    source: str
    index: int
    model: str


@dataclass(frozen=True)
class Rehearsal:
    """How the rehearsal (campaign.rehearsal) shrinks a run of this kind: the parameter
    that sets how much work a run does, its value in the rehearsal, and the part of a run's
    time (from its metrics and that count) that grows with it, to project the full run."""

    key: str
    few: int
    measured_s: Callable[[dict[str, float], int], float]


@dataclass(frozen=True)
class HostFacts:
    """What the host knows of a run that the probe cannot (execution.cells fills it)."""

    peak_memory_bytes_per_s: float | None = None


# A metric computed on the host from the probe's output and HostFacts; None: not defined
# for this run. Its name must be registered in the same kind's metric_info.
HostMetric = Callable[[Probe, HostFacts], "float | None"]


def never(params: dict[str, Any]) -> bool:
    """For kinds that never compile with torch.compile."""
    return False


def no_datasets(params: dict[str, Any]) -> list[str]:
    """For kinds whose runs read no file written before them."""
    return []


def _no_rows(probe: Probe) -> list[dict[str, Any]]:
    return []


def _no_detail(probe: Probe) -> dict[str, Any]:
    return {}


def _no_problems(params: dict[str, Any], where: Where) -> list[str]:
    return []


@dataclass(frozen=True)
class Workload:
    """One workload kind: everything the rest of the project needs to know about it."""

    kind: str
    probe: str  # the script under workloads/probe/ that runs inside the environment
    defaults: dict[str, Any]
    integers: dict[str, int]  # integer parameters and their minimum
    argv: Callable[[dict[str, Any], str, Path, Path, bool], list[str]]
    metrics: Callable[[Probe, float, float], list[Metric]]
    metric_info: tuple[MetricInfo, ...] = ()
    requests_rows: Callable[[Probe], list[dict[str, Any]]] = _no_rows
    detail: Callable[[Probe], dict[str, Any]] = _no_detail
    problems: Callable[[dict[str, Any], Where], list[str]] = _no_problems
    # tokens generated inside the probe's measure_window_unix (energy per token), if any
    window_tokens: Callable[[Probe], int] | None = None
    # extra argv of the preflight check, from every model of this kind (id, parameters)
    check_argv: Callable[[list[tuple[str, dict[str, Any]]]], list[str]] | None = None
    # extra argv of a run, from what this environment's preflight check of the kind found
    # (trtllm: the optional flags its release lacks, left out of the command)
    run_argv: Callable[[dict[str, Any]], list[str]] | None = None
    # parameters with a closed set of values, and that set: a value outside it is a config
    # error naming the key, not a traceback inside the probe on day two
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # --- what the rest of the system reads of a kind; every kind must declare each one
    # (None = not declared; tests/test_workload_contract.py fails on any) ---------------
    # parameters without a default that a model may (or must) set
    required: frozenset[str] | None = None
    # whether a run (all parameters, defaults filled in) compiles with torch.compile, so
    # that the campaign's compile cache is bound into its environment
    compiles: Callable[[dict[str, Any]], bool] | None = None
    # the primary family's default metrics: per group, the first one present wins
    # (analysis.primary_metrics overrides them)
    primary: tuple[tuple[str, ...], ...] | None = None
    # the kind in words, as the paper's workloads table names it
    words: str | None = None
    rehearsal: Rehearsal | None = None
    # metric name -> how the host computes it (registered in metric_info)
    host_metrics: dict[str, HostMetric] | None = None
    # the files written before any run that a run with these parameters (defaults filled
    # in) reads (campaign.datasets collects them for the workflow's dataset rule)
    datasets: Callable[[dict[str, Any]], list[str]] | None = None


# The declarations above that every kind must make (tests/test_workload_contract.py).
DECLARED = ("required", "compiles", "primary", "words", "rehearsal", "host_metrics",
            "datasets")


def contract_problems(w: Workload) -> list[str]:
    """What a kind fails to declare, or declares inconsistently, each in words."""
    out = [f"workload kind {w.kind!r} does not declare {name!r} (workloads/base.py "
           "Workload)" for name in DECLARED if getattr(w, name) is None]
    registered = {m.name for m in w.metric_info}
    for name in w.host_metrics or {}:
        if name not in registered:
            out.append(f"workload kind {w.kind!r}: host metric {name!r} is not in its "
                       "metric_info")
    if w.rehearsal is not None and w.rehearsal.key not in w.defaults:
        out.append(f"workload kind {w.kind!r}: rehearsal key {w.rehearsal.key!r} has no "
                   "default")
    return out


def flags(p: dict[str, Any], keys: tuple[str, ...] | list[str]) -> list[str]:
    out: list[str] = []
    for key in keys:
        out += [f"--{key.replace('_', '-')}", str(p[key])]
    return out


def argv_value(argv: list[str], key: str) -> Any:
    """A parameter as a probe was launched with it, the inverse of `flags`: '--key value',
    '--key' or '--key true' (on), '--no-key' or '--key false' (off); None where the argv
    does not name it (publishing/facts.py prints what a record holds, never a default)."""
    flag = f"--{key.replace('_', '-')}"
    for i, word in enumerate(argv):
        if word == flag:
            value = argv[i + 1] if i + 1 < len(argv) else None
            if value is None or value.startswith("--"):
                return True
            return {"true": True, "false": False}.get(value.lower(), value)
        if word == f"--no-{flag[2:]}":
            return False
    return None


def thread_env(params: dict[str, Any]) -> dict[str, str]:
    """The same CPU thread count everywhere; without it each library picks its own."""
    n = str(params["threads"])
    return {k: n for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


# Peak-RSS sources measured the same way in every environment (probe_common.max_rss_kib);
# a probe output without one predates them (ru_maxrss, inherited across fork+exec).
RSS_SOURCES = ("VmHWM", "ru_maxrss_children")


def process_metrics(probe: Probe, launched_unix: float, wall_s: float) -> list[Metric]:
    """What every probe measures about its own process."""
    out = [
        Metric("process_wall_s", wall_s, "s"),
        Metric("startup_s", probe["t_enter_unix"] - launched_unix, "s"),
        Metric("import_s", probe["import_s"], "s"),
    ]
    if probe.get("max_rss_source") in RSS_SOURCES and probe["max_rss_kib"] >= 0:
        out.append(Metric("max_rss_mib", probe["max_rss_kib"] / 1024.0, "MiB"))
    return out


def device_memory(probe: Probe) -> list[Metric]:
    out = []
    if probe.get("peak_device_bytes"):
        out.append(Metric("peak_memory_gib", probe["peak_device_bytes"] / 2**30, "GiB"))
    if probe.get("peak_reserved_bytes"):
        out.append(Metric("peak_reserved_gib", probe["peak_reserved_bytes"] / 2**30, "GiB"))
    return out
