"""What runs in an environment and how its output becomes metrics with units.

One module per workload kind (matmul, transformers, microbench, trtllm) declares a
Workload (base.py): defaults, parameter checks, the probe's argv, metrics with their
registry entries, per-request rows and the detail kept in the raw record, and what the
rest of the project reads of the kind (base.DECLARED: required keys, compile cache,
primary metrics, words, rehearsal scaling, host metrics, datasets), which
tests/test_workload_contract.py requires of every kind. REGISTRY lists them; the functions
below are what the rest of the project calls. Adding a kind: a module here, its probe
under probe/, one line in REGISTRY (the config schema names no kind: validation asks the
registry); docs/architecture.md, Where to add.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from containertax.core.metric import Metric
from containertax.workloads import matmul, microbench, transformers, trtllm
from containertax.workloads.base import (
    MetricInfo,
    Where,
    Workload,
    WorkloadError,
    thread_env,
)

__all__ = ["KINDS", "PROBE_DIR", "REGISTRY", "MetricInfo", "Where", "Workload",
           "WorkloadError", "build", "detail", "get", "metrics", "problems", "requests_rows"]

PROBE_DIR = Path(__file__).resolve().parent / "probe"
REGISTRY: dict[str, Workload] = {w.kind: w for w in (
    matmul.WORKLOAD, transformers.WORKLOAD, microbench.WORKLOAD, trtllm.WORKLOAD)}
KINDS = tuple(REGISTRY)


def get(kind: str) -> Workload:
    if kind not in REGISTRY:
        raise WorkloadError(f"unknown workload kind {kind!r} (known: {', '.join(KINDS)})")
    return REGISTRY[kind]


def _int_problem(where: Where, key: str, value: Any, minimum: int) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
        return None
    return (f"{where.source}: key 'workload.{key}' (or 'models[{where.index}].{key}') (model "
            f"{where.model}) must be an integer >= {minimum}, got {value!r}.")


# Keys a model entry may set beyond its kind's defaults: what it says of itself, and the
# parameters without a default (each kind's `required`). Any other key was silently ignored
# (a model-level typo, a setting of another kind): now it is an error naming the key.
ANY_KIND = frozenset({"kind", "timeout_s", "description", "page_cache", "compile_cache"})


def known_keys(kind: str) -> set[str]:
    w = get(kind)
    return set(w.defaults) | set(w.required or ()) | ANY_KIND


def problems(kind: str, params: dict[str, Any], where: Where) -> list[str]:
    """Semantic checks of one model's workload parameters, each naming its config key."""
    w = get(kind)
    p = {**w.defaults, **params}
    found = w.problems(p, where)
    for key, allowed in w.choices.items():
        if key in p and not (isinstance(p[key], str) and p[key] in allowed):
            found.append(
                f"{where.source}: key 'workload.{key}' (or 'models[{where.index}].{key}') "
                f"(model {where.model}) must be one of {list(allowed)}, got {p[key]!r}.")
    for key, minimum in w.integers.items():
        problem = _int_problem(where, key, p.get(key), minimum)
        if problem:
            found.append(problem)
    return found


def build(kind: str, params: dict[str, Any], python: str, probe: Path, out: Path,
          check: bool = False, cache: Path | None = None) -> tuple[list[str], dict[str, str]]:
    """argv and environment variables of the probe for one run (or a preflight check).
    `cache` is where the campaign's compile cache appears in the environment."""
    w = get(kind)
    p = {**w.defaults, **params}
    env = thread_env(p)
    if cache is not None and uses_compile_cache(kind, params):
        env.update(compile_cache_env(cache))
    return w.argv(p, python, probe, out, check), env


def uses_compile_cache(kind: str, params: dict[str, Any]) -> bool:
    """Whether a run compiles with torch.compile (the kind's `compiles`, e.g. transformers'
    engine and compiled decoding), so that the campaign's compile cache is bound into its
    environment."""
    w = get(kind)
    return bool(w.compiles and w.compiles({**w.defaults, **params}))


def compile_cache_env(cache: Path) -> dict[str, str]:
    """torch.compile's persistent caches (Inductor's compiled graphs, Triton's kernels) in
    one folder per campaign, bound at the same place in every environment: the first run
    compiles, every later one (in any environment) loads."""
    return {"TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
            "TRITON_CACHE_DIR": str(cache / "triton"),
            "TORCHINDUCTOR_FX_GRAPH_CACHE": "1", "TORCHINDUCTOR_AUTOGRAD_CACHE": "1"}


def metrics(kind: str, probe: dict[str, Any], launched_unix: float, wall_s: float) -> list[Metric]:
    w = get(kind)
    try:
        return w.metrics(probe, launched_unix, wall_s)
    except WorkloadError:
        raise
    except (KeyError, TypeError, IndexError, ZeroDivisionError,
            statistics.StatisticsError) as exc:
        raise WorkloadError(f"{kind} probe output is incomplete: {exc!r}") from None


def requests_rows(kind: str, probe: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-request (per-iteration) data, for percentiles computed from the raw values."""
    return get(kind).requests_rows(probe)


def detail(kind: str, probe: dict[str, Any]) -> dict[str, Any]:
    """Raw timings the metrics were computed from, kept in the record."""
    return get(kind).detail(probe)


def metric_info() -> list[MetricInfo]:
    """The registry entries every workload declares, in registry order."""
    return [m for w in REGISTRY.values() for m in w.metric_info]
