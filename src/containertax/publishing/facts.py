"""What the paper states about a campaign, read from its records and results: the verdict of
each headline comparison, how each environment was set up, each workload's parameters and
the design as it ran. Values and conditions only; the sentences are in paper/main.tex.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from containertax import runtimes
from containertax.campaign.parity import declared_words
from containertax.campaign.paths import COMPILE_CACHE, COMPILE_CACHE_ARMS
from containertax.statistics import decisions
from containertax.workloads.base import argv_value
from containertax.workloads.metric_registry import MetricInfo

if TYPE_CHECKING:
    from containertax.campaign.config import Campaign

# --- verdicts ------------------------------------------------------------------------


def verdict(r: pd.Series, info: MetricInfo | None, alpha: float) -> str:
    """The verdict word of one comparison, without caveats (statistics/decisions.py decides)."""
    return decisions.verdict(r, info.direction if info else "none", alpha).word


def why_not_estimable(r: pd.Series) -> str:
    """The reason a comparison has no estimate or no interval, from comparisons.py."""
    from containertax.publishing.tables import reason

    return reason(r, "not_estimable") or reason(r, "no_interval")


# --- environments and workloads from the records ---------------------------------------

def environment_row(rec: dict[str, Any]) -> dict[str, Any]:
    """How one record's environment was set up (environment_summary of that record)."""
    return environment_summary([rec])


def _environment_parts(rec: dict[str, Any]
                       ) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """One record's set-up in its kind's own words (Runtime.entry, runtimes/<kind>.py:
    software, mounts, GPU access, isolation, flags) and its mounts as (words, mode, host
    folder at its own path)."""
    env = rec["environment"]
    kind = env["kind"]
    runtime = runtimes.get(kind)
    entry = runtime.entry(env, gpu_recorded=bool((rec.get("telemetry") or {}).get("gpu")))
    return ({"kind": kind, "software": entry.software,
             # what its config declares as part of the factor (campaign/parity.py)
             "declared": declared_words(env.get("spec") or {}),
             # the container runtime and its version (none for native and chroot)
             "runtime": runtime_words(env) if runtime.runtime else "",
             "gpu": entry.gpu, "isolation": entry.isolation,
             "flags": " ".join(entry.flags) or "none"},
            [(_mount_words(m), _mount_mode(m), _host_dir(m)) for m in entry.mounts])


def environment_summary(recs: list[dict[str, Any]]) -> dict[str, Any]:
    """How an environment was set up in all its records: a value every record holds is
    printed once; where records differ, each value says whose runs held it; the mounts
    are the union of what the runs bound, each with its mode and, where not every run
    bound it, whose runs did. The first record read never stands for the rest (the
    h100-stopping-exact audit: only its qwen2 runs bound the compile cache read-write)."""
    models = [str((rec.get("cell") or {}).get("model", "")) for rec in recs]
    parts = [_environment_parts(rec) for rec in recs]
    row: dict[str, Any] = {"environment": recs[0]["environment"]["id"]}
    for key in parts[0][0]:
        row[key] = _differing([(model, scalars[key]) for model, (scalars, _) in
                               zip(models, parts, strict=True)])
    row["kind"] = parts[0][0]["kind"]  # one kind per environment id (the config's)
    # each (words, mode) bound: which runs bound it (their indices)
    bound: dict[tuple[str, str], list[int]] = {}
    for i, (_, mounts) in enumerate(parts):
        for words, mode, _ in mounts:
            runs = bound.setdefault((words, mode), [])
            if not runs or runs[-1] != i:
                runs.append(i)
    groups: dict[tuple[str, str], list[str]] = {}  # (mode, whose runs) -> mounts' words
    for (words, mode), runs in bound.items():
        groups.setdefault((mode, _whose([models[i] for i in runs], models)), []).append(words)
    all_ro = bool(bound) and all(mode == "ro" for _, mode in bound)
    order = sorted(groups, key=lambda g: (g[1] != "", g[0] != "ro"))  # stable: as bound
    row["mounts"] = "; ".join(
        ", ".join(groups[g]) + _mount_note("" if all_ro else g[0], g[1]) for g in order
    ) or "none"
    # main.tex says '(read-only)' after the whole list: only where every run's every mount was
    row["read_only"] = all_ro
    # the host's own folders bound read-only at their own paths, by any run (design_values:
    # 'it mounts the host's ... read-only')
    row["host_dirs"] = ", ".join(sorted({host for _, mounts in parts
                                         for _, mode, host in mounts if host and mode == "ro"}))
    return row


_MODE_WORDS = {"ro": "read-only", "rw": "read-write"}


def _mount_mode(volume: str) -> str:
    """'ro' or 'rw' as the bind recorded it ('/a:/b:ro', '/a:/b:rw,z'); '' where it names
    neither (nothing is said of its mode then)."""
    parts = volume.split(":")
    options = parts[2].split(",") if len(parts) > 2 else []
    return next((mode for mode in ("ro", "rw") if mode in options), "")


def _host_dir(volume: str) -> str:
    """The host folder a bind mounts at its own path ('/usr:/usr:ro' -> '/usr'); '' for
    a bind elsewhere and for the harness's compile cache at its host path."""
    parts = volume.split(":")
    if len(parts) < 2 or parts[0] != parts[1] or _harness_at_host_path(volume):
        return ""
    return parts[0]


def _mount_note(mode: str, whose: str) -> str:
    """' (read-write, in the runs of m only)': a group of mounts' mode and whose runs."""
    said = [words for words in (_MODE_WORDS.get(mode, ""), whose) if words]
    return f" ({', '.join(said)})" if said else ""


def _whose(having: list[str], models: list[str]) -> str:
    """Which of an environment's runs held something: '' for all of them, 'in the runs of
    m only' where those are all of some models' runs, else 'in n of the N runs'."""
    if len(having) == len(models):
        return ""
    held = sorted(set(having))
    if all(having.count(m) == models.count(m) for m in held):
        return f"in the runs of {' and '.join(held)} only"
    return f"in {len(having)} of the {len(models)} runs"


def _differing(values: list[tuple[str, str]]) -> str:
    """One value where every run held it; else each value and whose runs held it
    ('a in the runs of m only; b in the runs of n only')."""
    distinct = list(dict.fromkeys(value for _, value in values))
    if len(distinct) == 1:
        return distinct[0]
    models = [model for model, _ in values]
    return "; ".join(f"{value} {_whose([m for m, v in values if v == value], models)}"
                     for value in distinct)


def runtime_words(env: dict[str, Any]) -> str:
    """An environment's runtime as the paper names it, with its recorded version:
    'Podman (rootless) 4.3.1', 'Docker 20.10.24' (runtimes/<kind>.py words)."""
    runtime = runtimes.get(env["kind"])
    resolved = env.get("resolved") or {}
    version = (resolved.get("runtime") or {}).get("version") or resolved.get("engine_version")
    words = runtime.label(env.get("spec") or {})
    return f"{words} {version}" if version and runtime.runtime else words


def recorded_runtimes(env: dict[str, Any]) -> tuple[str, str] | None:
    """(runtime name, version) a record's environment ran under; None for none (native,
    chroot). Records before runtime provenance: Docker's engine_version."""
    runtime = runtimes.get(env["kind"])
    resolved = env.get("resolved") or {}
    version = (resolved.get("runtime") or {}).get("version") or resolved.get("engine_version")
    if not runtime.runtime or not version:
        return None
    return str(runtime.runtime), str(version)


def _harness_at_host_path(volume: str) -> bool:
    """The campaign's compile cache bound at its own host path (options.cache_mount:
    host_path): the harness's folder, not host software, though source equals target."""
    parts = volume.split(":")
    if len(parts) < 2 or parts[0] != parts[1]:
        return False
    path = Path(parts[0])  # the campaign's cache, or a model's arm (paths.COMPILE_CACHE_ARM)
    return path.name == COMPILE_CACHE or (path.name == "live"
                                          and path.parent.parent.name == COMPILE_CACHE_ARMS)


def _mount_words(volume: str) -> str:
    """'/usr:/usr:ro' -> '/usr'; '/data:/models:ro' -> '/data as /models'."""
    parts = volume.split(":")
    src, dst = parts[0], parts[1] if len(parts) > 1 else parts[0]
    if dst.startswith("/containertax/"):  # the harness's folder: where it lay on the machine
        return f"the campaign's {Path(src).name} folder as {dst}"  # says nothing of the runs
    if _harness_at_host_path(volume):  # likewise, at whatever path the machine had it
        if Path(src).name == "live":
            return "the model's cache-arm folder at its own host path"
        return f"the campaign's {COMPILE_CACHE} folder at its own host path"
    return src if src == dst else f"{src} as {dst}"


_PARAM_WORDS = {"batch_size": "batch", "input_len": "input tokens", "output_len": "output tokens",
                "requests": "measured requests", "warmup": "warm-up", "repeats": "timed repeats",
                "size": "n", "dtype": "dtype", "decoding": "decoding", "threads": "threads",
                "backend": "backend", "device": "device", "attn_implementation": "attention",
                "compile_mode": "torch.compile, mode",
                "coordinate_descent": "coordinate-descent tuning"}
# parameter values that are identifiers, in words (another identifier is printed as code)
_VALUE_WORDS = {"sdpa": "PyTorch SDPA", "sdpa_gqa": "PyTorch SDPA (grouped-query)",
                "eager": "eager", "flash_attention_2": "FlashAttention-2"}
_SKIP_PARAMS = {"timeout_s", "model_config", "seed", "device"}


def _value_words(value: str | int | float) -> str:
    """A parameter's value as the workloads table prints it: a switch as on/off (never
    Python's True/False), a known identifier in words."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return _VALUE_WORDS.get(str(value), str(value))


CACHE_ARM_WORDS = {"shared": "shared by every environment",
                   "cold": "emptied before every run",
                   "per_environment": "one per environment"}


def workload_row(rec: dict[str, Any]) -> dict[str, Any]:
    """One record's workload and parameters (workload_summary of that record)."""
    return workload_summary([rec])


NOT_RECORDED = "not recorded"
_ABSENT = object()  # a record holds no value (None is one: an unset option)
# where a probe reports a parameter it used (workloads/<kind>.py detail), for a record whose
# argv does not name it
_DETAIL_PATHS = {"attn_implementation": ("model", "attention"), "decoding": ("decoding",),
                 "compile_mode": ("compile", "mode"),
                 "coordinate_descent": ("compile", "coordinate_descent"),
                 "dtype": ("model", "dtype")}
# a parameter the harness passes in the probe's environment (workloads/base.thread_env)
_ENV_KEYS = {"threads": "OMP_NUM_THREADS"}


def recorded_value(rec: dict[str, Any], key: str) -> Any:
    """A parameter's value as the record itself holds it, never a default: the argv the
    probe ran with (what auto resolved to), else the probe's report of it (detail), else
    the config's value (workload.params), else the environment the harness gave the probe;
    _ABSENT where the record holds none."""
    w = rec["workload"]
    value = argv_value([str(a) for a in w.get("argv") or []], key)
    if value is not None:
        return value
    if key in _DETAIL_PATHS:
        found: Any = rec.get("detail") or {}
        for step in _DETAIL_PATHS[key]:
            found = found.get(step) if isinstance(found, dict) else None
        if found is not None:
            return found
    params = w.get("params") or {}
    if key in params:
        return params[key]
    if key in _ENV_KEYS and (w.get("env") or {}).get(_ENV_KEYS[key]) is not None:
        return w["env"][_ENV_KEYS[key]]
    return _ABSENT


def _workload_parts(rec: dict[str, Any]) -> dict[str, str]:
    """One record's parameters as the table words them, label -> value ('' labels the
    architecture): the parameters its kind's probe reads (a campaign-wide setting such as
    batch_size is recorded for a matrix product too, which ignores it), each as the record
    holds it (recorded_value); one it does not hold is not recorded, never filled in."""
    from containertax import workloads

    w = rec["workload"]
    given = w.get("params") or {}
    known = workloads.REGISTRY[w["kind"]].defaults if w["kind"] in workloads.REGISTRY else None
    keys = [*known, *(["size"] if "size" in given and "size" not in known else [])] \
        if known else list(given)
    parts: dict[str, str] = {}
    model = (rec.get("detail") or {}).get("model") or {}
    cfg = given.get("model_config") or model.get("config")
    if cfg:
        n = model.get("parameters")
        parts[""] = (f"{cfg.get('model_type', 'model')} architecture, "
                     f"{cfg.get('num_hidden_layers', '?')} layers, hidden size "
                     f"{cfg.get('hidden_size', '?')}"
                     + (f", {n / 1e9:.2f}\u00a0B parameters" if n else ""))
    for key in keys:
        if key in _SKIP_PARAMS:
            continue
        value = recorded_value(rec, key)
        if value is _ABSENT:
            if known and known.get(key) is not None:  # an optional one unset says nothing
                parts[_PARAM_WORDS.get(key, key)] = NOT_RECORDED
        elif isinstance(value, str | int | float):
            parts[_PARAM_WORDS.get(key, key)] = _value_words(value)
    # the compile-cache arm the run declared (models[].compile_cache, issue #40; a record
    # from before the arms holds none, and its campaign shared one cache)
    arm = (((rec.get("memory") or {}).get("compile_cache") or {}).get("arm")
           or given.get("compile_cache"))
    if arm:
        parts["cache of compiled code"] = CACHE_ARM_WORDS.get(str(arm), str(arm))
    return parts


def _counted(values: list[str]) -> str:
    """One value where every run held it; else each with its runs, most first
    ('eager in 2 runs, PyTorch SDPA in 2 runs')."""
    counts = {value: values.count(value) for value in dict.fromkeys(values)}
    if len(counts) == 1:
        return values[0]
    return ", ".join(f"{value} in {n} run{'s' if n > 1 else ''}" for value, n in
                     sorted(counts.items(), key=lambda item: -item[1]))


def workload_summary(recs: list[dict[str, Any]]) -> dict[str, Any]:
    """One model's workload and parameters in all its records: a value every run held is
    printed once, values that differ each with their run count; a parameter some runs do
    not hold counts as not recorded there, and one no run holds is left out. The first
    record read never stands for the rest, and a registry default never stands for a value
    (the h100-stopping-exact audit: today's 'attention auto' printed for runs that held
    sdpa_gqa)."""
    from containertax import workloads

    parts = [_workload_parts(rec) for rec in recs]
    labels = list(dict.fromkeys(label for part in parts for label in part))
    said = []
    for label in labels:
        values = [part.get(label, NOT_RECORDED) for part in parts]
        if set(values) == {NOT_RECORDED}:
            # no run holds it: left out, not printed as unknown (a plain-decoding run of
            # h100 holds no compile settings; "torch.compile, mode not recorded" read as
            # if it had compiled)
            continue
        value = _counted(values)
        said.append(f"{label} {value}" if label else value)
    kinds = []
    for rec in recs:  # its words as the kind declares them
        kind = workloads.REGISTRY.get(rec["workload"]["kind"])
        kinds.append(kind.words if kind and kind.words else rec["workload"]["kind"])
    return {"model": recs[0]["cell"]["model"], "kind": _counted(kinds),
            "params": "; ".join(said) or "defaults",
            "random_weights": any(((rec.get("detail") or {}).get("model") or {}).get("source")
                                  == "config" for rec in recs)}


def from_records(root: Path) -> dict[str, Any]:
    """One pass over the raw records (through the validated reader): environments,
    workloads, machines, GPUs, where peak resident memory was read (inside.max_rss_source;
    empty in records before it) and the cores `cpuset_cpus: performance` resolved to on
    the machine that ran them (environment.resolved.cpuset: environment -> sorted
    'cpus (source)'; empty where no environment asked for them)."""
    from containertax.statistics.aggregate import read_records

    envs: dict[str, list[dict[str, Any]]] = {}
    work: dict[str, list[dict[str, Any]]] = {}
    hosts: set[str] = set()
    gpus: dict[str, str] = {}
    rss_sources: set[str] = set()
    cpusets: dict[str, set[str]] = {}
    for _, record in read_records(root):
        rec = record.to_dict()
        env_id = rec["environment"]["id"]
        envs.setdefault(env_id, []).append(rec)  # every record, not the first read
        work.setdefault(rec["cell"]["model"], []).append(rec)
        hosts.add(str(rec["provenance"]["host"].get("hostname")))
        gpu = (rec.get("telemetry") or {}).get("gpu") or {}
        if gpu.get("uuid"):
            gpus[gpu["uuid"]] = gpu.get("name", "GPU")
        source = (rec.get("inside") or {}).get("max_rss_source")
        if source:
            rss_sources.add(str(source))
        cpuset = (rec["environment"].get("resolved") or {}).get("cpuset")
        if cpuset:
            cpusets.setdefault(env_id, set()).add(f"{cpuset['cpus']} ({cpuset['source']})")
    return {"environments": [environment_summary(recs) for recs in envs.values()],
            "workloads": [workload_summary(recs) for recs in work.values()],
            "hosts": sorted(hosts), "gpus": gpus, "rss_sources": sorted(rss_sources),
            "cpusets": {env: sorted(cores) for env, cores in sorted(cpusets.items())}}


# --- system and software of a campaign's runs ------------------------------------------

SOFTWARE_WORDS = {"blas": "BLAS", "numpy": "NumPy", "torch": "PyTorch", "cuda": "CUDA",
                  "cudnn": "cuDNN", "python": "Python", "transformers": "transformers"}


def software_words(key: str, value: str) -> str:
    """One piece of software a record names: 'blas' / 'blas,blas' (NumPy's build info
    lists a library once per use) as 'BLAS (libblas)', never 'blas blas,blas'."""
    name = SOFTWARE_WORDS.get(key, key)
    value = ", ".join(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))
    if value.lower() == key.lower():
        return f"{name} (lib{value})"
    return f"{name} {value}"


def system_facts(campaign: Campaign) -> dict[str, Any]:
    """System and software of the runs, from the raw records themselves (not from the
    machine that rebuilds the paper)."""
    if campaign.is_import:
        return {"Source": campaign.raw.get("description", campaign.analysis["import_csv"])}
    from containertax.statistics.aggregate import read_records

    seen: dict[str, set[str]] = {}

    def note(key: str, value: Any) -> None:
        if value not in (None, ""):
            seen.setdefault(key, set()).add(str(value))

    for _, rec in read_records(campaign.root):
        host = rec.provenance["host"]
        note("Host", host.get("hostname"))
        note("Kernel", host.get("kernel"))
        note("CPU", f"{host.get('cpu_model')} ({host.get('cpu_count')} logical)"
             if host.get("cpu_model") else None)
        note("Memory (MiB)", host.get("memory_total_mib"))
        sensor = rec.gate.get("sensor_info", {})
        note("GPU", sensor.get("gpu_name"))
        note("GPU UUID", (rec.telemetry.get("gpu") or {}).get("uuid"))
        note("Temperature sensor", rec.gate.get("sensor"))
        env = rec.environment
        resolved = env.get("resolved", {})
        ran = recorded_runtimes(env)  # the runtime's own name, never another's
        if ran:
            note(ran[0], ran[1])
        image = resolved.get("image") or {}
        note("Image", f"{image.get('name')} ({str(image.get('id', ''))[7:19]})"
             if image.get("id") else None)
        inside = rec.inside.get("software") or {}
        note(f"Software in {env['id']}", ", ".join(
            software_words(name, version) for name, version in inside.items()
            if isinstance(version, str) and "device" not in name))
        note("Snakemake", host.get("packages", {}).get("snakemake"))
        git = rec.provenance.get("git", {}) or {}
        commit = (git.get("commit") or "")[:12]
        # a working tree with changes beyond the commit ran: the commit alone is not the code
        dirty = {True: " with uncommitted changes (dirty)", False: " (clean)"}.get(
            git.get("dirty"), "")
        note("Git commit", commit + dirty if commit else None)
        note("Config hash", rec.provenance.get("config_hash"))
    return {key: "; ".join(sorted(values)) for key, values in seen.items()}


def record_facts(campaign: Campaign) -> dict[str, Any]:
    """from_records for a campaign; an imported study has no records, so nothing."""
    if campaign.is_import:
        return {"environments": [], "workloads": [], "hosts": [], "gpus": {}}
    return from_records(campaign.root)

