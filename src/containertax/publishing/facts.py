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

def environment_row(rec: dict[str, Any]) -> dict[str, str]:
    """How one environment was set up: its kind's own words for the record's settings
    (Runtime.entry, runtimes/<kind>.py: software, mounts, GPU access, isolation, flags);
    here only how the table words the mounts."""
    env = rec["environment"]
    kind = env["kind"]
    runtime = runtimes.get(kind)
    entry = runtime.entry(env, gpu_recorded=bool((rec.get("telemetry") or {}).get("gpu")))
    mounts = list(entry.mounts)
    return {"environment": env["id"], "kind": kind, "software": entry.software,
            # what its config declares as part of the factor (campaign/parity.py)
            "declared": declared_words(env.get("spec") or {}),
            # the container runtime and its version (none for native and chroot)
            "runtime": runtime_words(env) if runtime.runtime else "",
            "mounts": ", ".join(map(_mount_words, mounts)) or "none",
            "read_only": all(m.endswith(":ro") for m in mounts) if mounts else False,
            "gpu": entry.gpu, "isolation": entry.isolation,
            "flags": " ".join(entry.flags) or "none",
            "host_dirs": ", ".join(sorted({m.split(":")[0] for m in mounts
                                           if m.split(":")[0] == m.split(":")[1]
                                           and not _harness_at_host_path(m)}))}


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


def workload_row(rec: dict[str, Any]) -> dict[str, str]:
    from containertax import workloads

    w = rec["workload"]
    recorded = w.get("params", {})
    # the parameters the workload's probe reads (a campaign-wide setting such as batch_size
    # is recorded for a matrix product too, which ignores it), defaults filled in as it did
    known = workloads.REGISTRY[w["kind"]].defaults if w["kind"] in workloads.REGISTRY else None
    params = ({k: v for k, v in {**known, **recorded}.items() if k in known or k == "size"}
              if known else recorded)
    parts = [f"{_PARAM_WORDS.get(k, k)} {_value_words(v)}" for k, v in params.items()
             if k not in _SKIP_PARAMS and isinstance(v, str | int | float)]
    model = (rec.get("detail") or {}).get("model") or {}
    cfg = recorded.get("model_config") or model.get("config")
    if cfg:
        n = model.get("parameters")
        parts.insert(0, f"{cfg.get('model_type', 'model')} architecture, "
                        f"{cfg.get('num_hidden_layers', '?')} layers, hidden size "
                        f"{cfg.get('hidden_size', '?')}"
                     + (f", {n / 1e9:.2f}\u00a0B parameters" if n else ""))
    # the compile-cache arm the run declared (models[].compile_cache, issue #40; a record
    # from before the arms holds none, and its campaign shared one cache)
    arm = (((rec.get("memory") or {}).get("compile_cache") or {}).get("arm")
           or recorded.get("compile_cache"))
    if arm:
        parts.append(f"cache of compiled code {CACHE_ARM_WORDS.get(str(arm), str(arm))}")
    kind = workloads.REGISTRY.get(w["kind"])  # its words as the kind declares them
    return {"model": rec["cell"]["model"], "kind": kind.words if kind and kind.words else w["kind"],
            "params": "; ".join(parts) or "defaults",
            "random_weights": model.get("source") == "config"}


def from_records(root: Path) -> dict[str, Any]:
    """One pass over the raw records (through the validated reader): environments,
    workloads, machines, GPUs, where peak resident memory was read (inside.max_rss_source;
    empty in records before it) and the cores `cpuset_cpus: performance` resolved to on
    the machine that ran them (environment.resolved.cpuset: environment -> sorted
    'cpus (source)'; empty where no environment asked for them)."""
    from containertax.statistics.aggregate import read_records

    envs: dict[str, dict[str, str]] = {}
    work: dict[str, dict[str, str]] = {}
    hosts: set[str] = set()
    gpus: dict[str, str] = {}
    rss_sources: set[str] = set()
    cpusets: dict[str, set[str]] = {}
    for _, record in read_records(root):
        rec = record.to_dict()
        env_id = rec["environment"]["id"]
        if env_id not in envs:
            envs[env_id] = environment_row(rec)
        model = rec["cell"]["model"]
        if model not in work:
            work[model] = workload_row(rec)
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
    return {"environments": list(envs.values()), "workloads": list(work.values()),
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

