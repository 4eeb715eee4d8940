"""Campaign configuration: the typed view of a validated config (Campaign), what its hash
covers, and load_campaign, which lays a config on its base, resolves its environments,
validates it (campaign/validation.py) and checks its workloads.

The Snakefile and the command line load configs through the same function, so an error
reads the same everywhere: it names the file, the key and the fix. Reading a file strictly
and `base:` live in campaign/configfile.py.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from containertax import workloads
from containertax.campaign import factorial
from containertax.campaign.configerror import ConfigError  # config.ConfigError, as ever
from containertax.campaign.configfile import (
    merge,
    read_config_file,
    resolve_base,
    strict_yaml,
    yaml_problem,
)
from containertax.campaign.paths import CampaignPaths
from containertax.campaign.validation import schema, validate
from containertax.core.cell import ID_RULE, ID_WORDS
from containertax.core.records import written_mismatch


@dataclass(frozen=True)
class Environment:
    id: str
    kind: str
    spec: dict[str, Any]

    @property
    def image(self) -> str | None:
        return self.spec.get("image")

    @property
    def python(self) -> str:
        return self.spec.get("python", "python3")


@dataclass(frozen=True)
class Model:
    id: str
    params: dict[str, Any]


@dataclass(frozen=True)
class Campaign:
    name: str
    source: str
    raw: dict[str, Any] = field(repr=False)
    environments: tuple[Environment, ...]
    models: tuple[Model, ...]
    repetitions: int
    reference: str
    # the working directory relative paths of the config are resolved against: '.' in the
    # workflow and its steps (Snakemake's working directory), paths.project_root in check
    workdir: Path = Path(".")

    @property
    def root(self) -> Path:
        return self.workdir / self.raw["results_dir"] / self.name

    @property
    def import_path(self) -> Path:
        """analysis.import_csv, resolved as results_dir is."""
        return self.workdir / self.analysis["import_csv"]

    @property
    def paths(self) -> CampaignPaths:
        """Every location of this campaign's files."""
        return CampaignPaths(self.root)

    @property
    def workload(self) -> dict[str, Any]:
        return self.raw.get("workload", {})

    @property
    def analysis(self) -> dict[str, Any]:
        return self.raw["analysis"]

    @property
    def is_import(self) -> bool:
        """An analysis of results this workflow did not produce (analysis.import_csv)."""
        return "import_csv" in self.analysis

    @property
    def thermal(self) -> dict[str, Any]:
        return self.raw["thermal"]

    @property
    def telemetry(self) -> dict[str, Any]:
        return self.raw["telemetry"]

    @property
    def schedule(self) -> dict[str, Any]:
        return self.raw["schedule"]

    @property
    def replicas(self) -> dict[str, str]:
        """A/A controls: replica id -> the environment it copies."""
        return {e.id: e.spec["replica_of"] for e in self.environments if "replica_of" in e.spec}

    def environment(self, env_id: str) -> Environment:
        return next(e for e in self.environments if e.id == env_id)

    def model(self, model_id: str) -> Model:
        return next(m for m in self.models if m.id == model_id)

    def derived_options_sha256(self) -> dict[str, str]:
        """Environment -> sha256 of the derived options file it now takes (derived and
        written only): what a record's provenance.options_source must name to be current."""
        return {e.id: e.spec["options_source"]["sha256"] for e in self.environments
                if (e.spec.get("options_source") or {}).get("sha256")}

    def alternative(self) -> Path | None:
        """The config of the factorial design's declared alternative (factorial.alternative,
        relative to this config; not run), timed beside it by the study's rehearsal."""
        name = (self.raw.get("factorial") or {}).get("alternative")
        if not name:
            return None
        path = Path(self.source).parent / str(name)
        if not path.exists():
            raise ConfigError(f"{self.source}: key 'factorial.alternative': {path} does not "
                              "exist; name the alternative's config file relative to this "
                              "one, or remove the key.")
        return path

    def analysis_models(self) -> list[str]:
        """Models of the analysis, known when the workflow is planned: the config's, or
        those of an imported table (read with the standard library: planning imports no
        pandas; the import rule checks the table in full)."""
        if not self.is_import:
            return [m.id for m in self.models]
        path = self.import_path
        if not path.exists():
            raise ConfigError(f"{self.source}: key 'analysis.import_csv': {path} does not "
                              "exist.")
        with path.open(newline="") as fh:
            lines = (line for line in fh if not line.lstrip().startswith("#"))
            rows = csv.DictReader(lines, skipinitialspace=True)
            if "model" not in (rows.fieldnames or []):
                raise ConfigError(f"{path}: no 'model' column (analysis.import_csv in "
                                  f"{self.source}); see containertax.statistics.importer.")
            models = list(dict.fromkeys(str(r["model"]).strip() for r in rows if r["model"]))
        bad = [m for m in models if not ID_RULE.fullmatch(m)]
        if bad:  # else a Snakemake wildcard error before the import rule's own check
            raise ConfigError(f"{path}: column 'model': {bad[:3]} are not ids: use "
                              f"{ID_WORDS}; rename them in the CSV (analysis.import_csv in "
                              f"{self.source}).")
        return models

    def workload_kind(self, model_id: str) -> str:
        """A model's workload kind: its own 'kind' key, else workload.kind."""
        return str(self.model(model_id).params.get("kind", self.workload["kind"]))

    def workload_params(self, model_id: str) -> dict[str, Any]:
        """Workload defaults overlaid with the model's own parameters."""
        params = {k: v for k, v in self.workload.items() if k != "kind"}
        params.update({k: v for k, v in self.model(model_id).params.items() if k != "kind"})
        return params

    def config_hash(self) -> str:
        # order matters (it sets the schedule); the base-file chain does not: phase-2d.yaml
        # and config.yaml are one campaign; nor do lanes (where cells run, not what they
        # measure: a campaign may gain a GPU half-way, and each record names its lane), nor
        # the permissions extends_campaign and results_dir_absolute (issue #16)
        raw = {k: v for k, v in self.raw.items()
               if k not in ("based_on", "lanes", "extends_campaign", "results_dir_absolute",
                            "paper")}  # the paper's metadata: words, not measurement
        envs = raw.get("environments")
        if isinstance(envs, dict):
            raw["environments"] = self._hashed_environments(envs)
        if isinstance(raw.get("factorial"), dict):  # the declared alternative: a pointer
            raw["factorial"] = {k: v for k, v in raw["factorial"].items()
                                if k != "alternative"}
        text = json.dumps(_without_new_defaults(raw), default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def _hashed_environments(self, envs: dict[str, Any]) -> dict[str, Any]:
        """Environments as the hash sees them: without `differences` and `mount_reasons`
        (words: why a difference is part of the factor, why a mount is there; not what
        runs), and with the compile cache's path
        in the hash where its default changed (issue #40): /containertax/cache, the old
        default, hashes as the key's absence did; the new default, the host's own path,
        hashes as a marker, so a campaign run under it is never taken for one run before."""
        compiles = any(workloads.uses_compile_cache(self.workload_kind(m.id),
                                                    self.workload_params(m.id))
                       for m in self.models)
        out = {}
        for env_id, spec in envs.items():
            if not isinstance(spec, dict):
                out[env_id] = spec
                continue
            spec = {k: v for k, v in spec.items()
                    if k not in ("differences", "mount_reasons")}
            options = dict(spec.get("options") or {})
            if options.get("cache_mount") == "inside":
                del options["cache_mount"]
                spec["options"] = options
            elif compiles and "cache_mount" not in options and _cache_moved(spec):
                spec["cache_at_host_path"] = True
            out[env_id] = spec
        return out


def _cache_moved(spec: dict[str, Any]) -> bool:
    """Whether issue #40 moved this environment's compile cache (to its host path): every
    kind but those that always saw the host's filesystem (a host process, host_paths)."""
    from containertax import runtimes

    kind = spec.get("kind")
    if kind not in runtimes.REGISTRY:
        return False
    runtime = runtimes.get(str(kind))
    return not (runtime.launcher == "process" or runtime.host_paths)


# Keys added to the schema after campaigns were committed: at their default they leave the
# config hash as it was, so a committed campaign stays the campaign its records name.
HASH_NEUTRAL_DEFAULTS = (("thermal", "cooldown"), ("thermal", "adaptive"),
                         ("analysis", "resolution_pct"), ("analysis", "import_repeats"),
                         ("analysis", "import_duplicates"))
# Keys that change only how the looks decide, never what a run measures, out of the hash at
# any value: what a look was decided under is its look file's rule (campaign/looks.py), which
# refuses a look of another rule. stopping.drift_check came after campaigns had run without
# it; those name `drift_check: false`, the rule their looks ran under, and stay the
# campaign their records name.
HASH_DECISION_ONLY = (("stopping", "drift_check"),)
# Keys whose default changed after campaigns were committed: at the new default they hash as
# the old one did (the old value is no longer valid, so no config can mean both).
# analysis.primary_test: 'auto' (a Shapiro-Wilk pretest choosing Welch or Mann-Whitney)
# became 'paired_t' (#11); it changes the analysis of the records, not what they measured.
HASH_CHANGED_DEFAULTS = {("analysis", "primary_test"): ("paired_t", "auto")}
# Workload keys (a workload kind's own defaults, not the schema's) whose default changed
# after campaigns were committed while the old value stays valid: transformers' attention
# was 'sdpa' and is 'auto' now ('sdpa_gqa' under engine decoding). A config that names the
# old value hashes as a config without the key did; one without it hashes as the new
# default, so no two configs that measure differently share a hash.
HASH_WORKLOAD_DEFAULTS = {("transformers", "attn_implementation"): ("auto", "sdpa")}
# Stopping-rule keys added with a new default while the old behaviour stays a valid value
# (issue #33): before them every rule tested each look at the spending increment with no
# shape check. A config that names the old behaviour (results/h100-stopping's) hashes as a
# config without the key did; the new default, filled in, stays in the hash, so a campaign
# run under the new rule is never taken for one run under the old.
HASH_STOPPING_BEFORE = {"boundaries": "union", "shape_check": False}


def _filled_default(sub: dict[str, Any]) -> Any:
    """A subschema's default with its own properties' defaults filled in."""
    value = copy.deepcopy(sub.get("default"))
    if isinstance(value, dict):
        for prop, inner in sub.get("properties", {}).items():
            if prop not in value and "default" in inner:
                value[prop] = _filled_default(inner)
    return value


def _deref(sub: dict[str, Any]) -> dict[str, Any]:
    """A subschema, with a local '$ref' ('#/$defs/...') followed."""
    ref = sub.get("$ref")
    if ref:
        for part in ref.removeprefix("#/").split("/"):
            sub = schema()[part] if part == "$defs" else sub[part]
    return sub


def _without_new_defaults(raw: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    for path in HASH_NEUTRAL_DEFAULTS:
        parent, sub = out, schema()
        for key in path[:-1]:
            parent = parent.get(key, {}) if isinstance(parent, dict) else {}
            sub = _deref(sub["properties"][key])
        sub = _deref(sub["properties"][path[-1]])
        if isinstance(parent, dict) and path[-1] in parent \
                and parent[path[-1]] == _filled_default(sub):
            del parent[path[-1]]
    for (section, key), (now, before) in HASH_CHANGED_DEFAULTS.items():
        parent = out.get(section)
        if isinstance(parent, dict) and parent.get(key) == now:
            parent[key] = before
    for section, key in HASH_DECISION_ONLY:
        if isinstance(out.get(section), dict):
            out[section].pop(key, None)
    stop = out.get("stopping")
    if isinstance(stop, dict):
        for key, before in HASH_STOPPING_BEFORE.items():
            if key in stop and stop[key] == before:
                del stop[key]
    work = out.get("workload")
    if isinstance(work, dict):
        kinds = {work.get("kind")} | {m.get("kind") for m in out.get("models") or []
                                      if isinstance(m, dict)}
        for (kind, key), (now, before) in HASH_WORKLOAD_DEFAULTS.items():
            if kind not in kinds:
                continue
            if work.get(key, now) == now:  # left at the new default, or naming it
                work.pop(key, None)
                out[f"{kind}.{key}"] = now  # at the end: the key's position cannot matter
            elif work.get(key) == before:
                del work[key]
    return out


def resolve_extends(envs: dict[str, Any], source: str) -> dict[str, Any]:
    """An environment with `extends: OTHER` is OTHER's settings with its own laid on them
    (null removes an inherited option): one variant of a baseline per environment. The
    result keeps what it was made of as `variant_of` and `variant`."""
    done: dict[str, Any] = {}

    def resolve(env_id: str, trail: tuple[str, ...]) -> dict[str, Any]:
        if env_id in done:
            return done[env_id]
        spec = envs[env_id]
        parent = spec.get("extends") if isinstance(spec, dict) else None
        if parent is None:
            done[env_id] = spec
            return spec
        if parent not in envs:
            raise ConfigError(f"{source}: key 'environments.{env_id}.extends': '{parent}' is "
                              f"not an environment; choose one of {sorted(envs)}.")
        if parent in trail:
            raise ConfigError(f"{source}: key 'environments.{env_id}.extends': a cycle "
                              f"({' -> '.join((*trail, parent))}).")
        own = {k: v for k, v in spec.items() if k != "extends"}
        base = {k: v for k, v in resolve(parent, (*trail, parent)).items()
                if k not in ("variant_of", "variant", "description")}
        done[env_id] = {**merge(base, own), "variant_of": parent,
                        "variant": own.get("options", {})}
        return done[env_id]

    return {env_id: resolve(env_id, (env_id,)) for env_id in envs}


def resolve_replicas(envs: dict[str, Any], source: str) -> dict[str, Any]:
    """An environment `replica_of: OTHER` is OTHER's settings under its own id: an A/A
    control, scheduled like any other environment and compared with OTHER, not with the
    reference. It may set nothing but a description."""
    out = dict(envs)
    for env_id, spec in envs.items():
        if not isinstance(spec, dict) or "replica_of" not in spec:
            continue
        other = spec["replica_of"]
        original = envs.get(other) if isinstance(envs.get(other), dict) else {}
        # a resolved config (config.resolved.json) carries the copied settings: equal is fine
        extra = sorted(k for k in set(spec) - {"replica_of", "description"}
                       if spec[k] != original.get(k))
        if extra:
            raise ConfigError(f"{source}: key 'environments.{env_id}': a replica has "
                              f"identical settings, so {extra} may not be set; remove them "
                              f"(or use 'extends: {other}' for a variant).")
        if other not in envs or other == env_id:
            raise ConfigError(f"{source}: key 'environments.{env_id}.replica_of': '{other}' "
                              f"is not another environment; choose one of "
                              f"{sorted(e for e in envs if e != env_id)}.")
        if isinstance(envs[other], dict) and "replica_of" in envs[other]:
            raise ConfigError(f"{source}: key 'environments.{env_id}.replica_of': '{other}' "
                              "is itself a replica; name the environment it copies.")
        base = {k: v for k, v in envs[other].items() if k != "description"}
        out[env_id] = {**base, **spec}
    return out


def load_campaign(data: dict[str, Any], source: str = "<config>",
                  workdir: Path = Path(".")) -> Campaign:
    """Validate a config mapping (already parsed) and return the campaign it describes,
    its relative paths resolved against `workdir` (paths.project_root)."""
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{source}: empty or not a mapping; see config/README.md.")
    data = resolve_base(data, source)
    for key, kind in (("models", list), ("environments", dict)):
        if key in data and not isinstance(data[key], kind):
            shape = ("a list of mappings ('- id: NAME' ...)" if kind is list
                     else "a mapping of environment ids to their settings")
            raise ConfigError(f"{source}: key '{key}' must be {shape}, got a "
                              f"{type(data[key]).__name__}; see config/README.md.")
    for i, m in enumerate(data.get("models") or []):
        if isinstance(m, str):
            raise ConfigError(f"{source}: key 'models[{i}]': '{m}' is a model id, which only "
                              "a config with 'base' can select; give the model's mapping.")
    if data.get("factorial") and isinstance(data.get("environments"), dict):
        data = factorial.expand(data, source)  # one environment per design row
    if isinstance(data.get("environments"), dict):
        data["environments"] = resolve_replicas(
            resolve_extends(resolve_derived(data["environments"], source, workdir), source),
            source)
    try:
        data = validate(data, source, workdir)
    except ConfigError as exc:
        raise _blame_derived(exc, data.get("environments") or {}) from None
    campaign = campaign_of(data, source, workdir)
    if not campaign.is_import:
        _workload_checks(campaign)
    campaign.alternative()  # a named alternative must exist (the rehearsal times it)
    return campaign


def campaign_of(data: dict[str, Any], source: str, workdir: Path = Path(".")) -> Campaign:
    """The typed view of a mapping that load_campaign has validated (schema defaults
    filled in); nothing is checked here."""
    environments = tuple(
        Environment(k, v["kind"], v) for k, v in data.get("environments", {}).items()
    )
    models = tuple(
        Model(m["id"], {k: v for k, v in m.items() if k != "id"}) for m in data.get("models", [])
    )
    return Campaign(
        name=data["campaign"],
        source=source,
        raw=data,
        environments=environments,
        models=models,
        repetitions=data["repetitions"],
        reference=data.get("reference_environment") or environments[0].id,
        workdir=Path(workdir),
    )


def _workload_checks(campaign: Campaign) -> None:
    """Each model's parameters, checked by its workload kind's module, named by key."""
    problems: list[str] = []
    for i, model in enumerate(campaign.models):
        kind = campaign.workload_kind(model.id)
        if kind in workloads.REGISTRY:  # else _kind_problems has already refused it
            problems += workloads.problems(kind, campaign.workload_params(model.id),
                                           workloads.Where(campaign.source, i, model.id))
            unknown = sorted(set(model.params) - workloads.known_keys(kind))
            if unknown:
                problems.append(
                    f"{campaign.source}: key 'models[{i}]' (model {model.id}): unknown key(s) "
                    f"{unknown} for a {kind} workload; its keys are "
                    f"{sorted(workloads.known_keys(kind))}.")
    if problems:
        raise ConfigError("\n".join(problems))


def load_file(path: str | Path, workdir: Path = Path(".")) -> Campaign:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: no such config file.")
    campaign = load_campaign(read_config_file(path), str(path), workdir)
    check_owner(campaign)
    return campaign


def digest(cfg: dict[str, Any]) -> str:
    """What the resolved config's steps check before trusting it without validation."""
    return hashlib.sha256(json.dumps(cfg).encode()).hexdigest()


def write_resolved(campaign: Campaign, path: Path) -> None:
    """The validated config the steps read, with its digest; rewritten only when it
    changes."""
    from containertax.core.records import atomic_write_text

    # key order is meaningful (environment order feeds the schedule): never sort keys
    cfg = json.loads(json.dumps(campaign.raw, default=str))
    text = json.dumps({"source": campaign.source, "digest": digest(cfg), "config": cfg},
                      indent=1) + "\n"
    if not path.exists() or path.read_text() != text:
        atomic_write_text(path, text)


def identity(campaign: Campaign) -> dict[str, Any]:
    """What the campaign's cells measure: each model's workload kind and parameters, and
    each environment's settings (without its description, and without options another
    campaign derives: a change of those supersedes records, campaign/integrity.py). The
    campaign's other settings (repetitions, analysis, stopping, schedule, thermal gate)
    may change; these may not, for a model or environment that has cells."""
    if campaign.is_import:  # an import's identity is the table it analyses
        return {"models": {}, "environments": {},
                "import": {"import_csv": str(campaign.analysis["import_csv"])}}
    models = {m.id: {"kind": campaign.workload_kind(m.id),
                     **campaign.workload_params(m.id)} for m in campaign.models}
    envs = {e.id: env_settings(e.spec) for e in campaign.environments}
    # what every cell's run does besides its workload and environment: dropping the page
    # cache before it, sampling telemetry beside it
    settings = {key: campaign.raw.get(key) for key in MEASURING_KEYS}
    return json.loads(json.dumps({"models": models, "environments": envs,
                                  "settings": settings}, default=str))


def env_settings(spec: dict[str, Any]) -> dict[str, Any]:
    """An environment's settings as the pin holds them: without its words (description,
    mount_reasons, differences: outside the config hash too), without options another
    campaign derives, and with `cache_mount: inside` as its absence (the path every
    campaign had before issue #40, which the hash, too, reads as the key's absence)."""
    derived = (spec.get("options_source") or {}).get("kind") == "derived"
    drop = {"description", "options_source", "variant", "mount_reasons", "differences",
            *(("options",) if derived else ())}
    out = {k: v for k, v in spec.items() if k not in drop}
    options = out.get("options")
    if isinstance(options, dict) and options.get("cache_mount") == "inside":
        out["options"] = {k: v for k, v in options.items() if k != "cache_mount"}
    return out


# top-level config sections that change what a run measures (besides models, workload and
# environments): pinned, so a config that changes them is refused (#44)
MEASURING_KEYS = ("memory", "telemetry")


# option names a record may hold under an older name (results/h100-warmup's compile_cache)
RECORD_OPTION_RENAMES = {"compile_cache": "cache_mount"}


def identity_from_records(campaign: Campaign) -> dict[str, Any] | None:
    """The identity the campaign's records were measured under (each model's workload kind
    and parameters, each environment's settings, as the first record of each says), for
    a campaign whose pin is missing (a fresh clone: pins came after records were
    committed); None without records this workflow wrote."""
    models: dict[str, Any] = {}
    envs: dict[str, Any] = {}
    source = None
    for path in campaign.paths.raw_records():
        model, env = path.parent.parent.name, path.parent.name
        if model in models and env in envs:
            continue
        try:
            rec = json.loads(path.read_text())
            work, spec = rec["workload"], rec["environment"]["spec"]
            source = source or rec["provenance"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a record this workflow wrote; the analysis says so
        if isinstance(work, dict) and isinstance(work.get("params"), dict):
            models.setdefault(model, {"kind": work.get("kind"), **work["params"]})
        if isinstance(spec, dict):
            settings = dict(spec)
            if isinstance(settings.get("options"), dict):  # options renamed since
                settings["options"] = {RECORD_OPTION_RENAMES.get(k, k): v
                                       for k, v in settings["options"].items()}
            envs.setdefault(env, env_settings(settings))
    if not models and not envs:
        return None
    return json.loads(json.dumps({
        "models": models, "environments": envs,
        "config_source": (source or {}).get("config_source"),
        "config_hash": (source or {}).get("config_hash"), "recreated_from_records": True,
        **visit_settings(campaign)}, default=str))


def visit_settings(campaign: Campaign) -> dict[str, Any]:
    """{'settings': ...} of the newest pin a GPU visit kept with the records
    (raw/visits/*/campaign.pin.json, committed), else {}: the records do not say the
    pinned measuring settings (memory, telemetry), and without them a fresh clone accepted
    a config that changed telemetry.hz (issue #44)."""
    from containertax.campaign.paths import VISITS

    for path in sorted(campaign.paths.root.glob(f"{VISITS}/*/campaign.pin.json"),
                       reverse=True):
        try:
            settings = json.loads(path.read_text()).get("settings")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(settings, dict):
            return {"settings": settings}
    return {}


def read_pin(campaign: Campaign) -> dict[str, Any] | None:
    """The campaign's pin (paths.PIN), None when it has none; a damaged one is an error
    naming the file and the fix."""
    path = campaign.paths.pin
    try:
        pin = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: the pin of campaign {campaign.name} cannot be read "
                          f"({exc}); move it aside (mv {path} {path}.bad) and run again "
                          "with the campaign's own config, which pins it anew.") from None
    if not isinstance(pin, dict) or not all(
            isinstance(pin.get(k), dict) for k in ("models", "environments")):
        raise ConfigError(f"{path}: not a pin this workflow wrote (no 'models' and "
                          "'environments' mappings); move it aside (mv "
                          f"{path} {path}.bad) and run again with the campaign's own config.")
    return pin


def _pin_conflicts(pin: dict[str, Any], mine: dict[str, Any]) -> list[str]:
    """Each model or environment that both have, measured differently, with its keys, and
    each measuring setting (MEASURING_KEYS) the pin holds that differs. A pin recreated
    from records compares the keys both name (a key its records lack came later)."""
    out = []
    before, now = pin.get("import"), mine.get("import")
    if (before or now) and before != now:
        out.append(f"the analysed table: {before} pinned, {now} here")
    shared = bool(pin.get("recreated_from_records"))
    for key, value in (pin.get("settings") or {}).items():
        here = (mine.get("settings") or {}).get(key)
        if key in (mine.get("settings") or {}) and value != here:
            out.append(f"{key}: {value!r} pinned, {here!r} here")
    for section, word in (("models", "model"), ("environments", "environment")):
        for item, settings in mine[section].items():
            before = pin[section].get(item)
            if before is None or before == settings:
                continue
            names = set(before) & set(settings) if shared else set(before) | set(settings)
            keys = sorted(k for k in names if before.get(k) != settings.get(k))
            if not keys:
                continue
            shown = "; ".join(f"{k}: {before.get(k, '(unset)')!r} pinned, "
                              f"{settings.get(k, '(unset)')!r} here" for k in keys[:4])
            out.append(f"{word} {item}: {shown}{' ...' if len(keys) > 4 else ''}")
    return out


def check_owner(campaign: Campaign) -> None:
    """A campaign has one identity: the first invocation that ran jobs pinned what its
    cells measure (paths.PIN; pin_campaign). Another config naming the campaign that
    measures a pinned model or environment differently (whatever its file is called) is
    refused, naming both files and the fix; one that adds models, environments or
    repetitions extends it. `extends_campaign: true` writes into it on purpose. A campaign
    with records but no pin (committed before pins existed, a fresh clone) is held to the
    identity its records name (identity_from_records: the keys both name); records that
    name none, to the config file they name."""
    pin = read_pin(campaign)
    if campaign.raw.get("extends_campaign"):
        return
    where = campaign.paths.pin
    if pin is None and not campaign.is_import:
        pin = identity_from_records(campaign)  # a fresh clone: the records say it
        where = "recreated from its raw records"
    if pin is not None:
        conflicts = _pin_conflicts(pin, identity(campaign))
        if conflicts:
            raise ConfigError(
                f"{campaign.source}: key 'campaign': campaign '{campaign.name}' is pinned to "
                f"the config {pin.get('config_source')} (config hash "
                f"{pin.get('config_hash')}, {where}), and this config "
                f"measures differently: " + "; ".join(conflicts) + ". Its cells would mix "
                "two measurements under one name. Fix: give this config a new campaign "
                "name; or extend the campaign as config/README.md says ('Extending a "
                "campaign': add models, environments or repetitions, change no pinned "
                "setting); or set extends_campaign: true to write into it on purpose.")
        return
    # records that say no identity (no workload or environment settings): held to the
    # config file they name
    first = next(iter(campaign.paths.raw_records()), None)
    if first is None or campaign.is_import:
        return
    try:
        owner = json.loads(first.read_text())["provenance"]["config_source"]
    except (OSError, ValueError, KeyError, TypeError):
        return  # not a record this workflow wrote; the analysis will say so
    mine = {Path(campaign.source).name, *(Path(b).name for b in campaign.raw.get("based_on", []))}
    if Path(str(owner)).name not in mine:
        raise ConfigError(
            f"{campaign.source}: key 'campaign': '{campaign.name}' already holds records of "
            f"another config ({owner}, e.g. {first}). Choose a new campaign name, or set "
            "extends_campaign: true to add cells to that campaign on purpose.")


def claim(campaign: Campaign, resolved: Path, now: str | None = None) -> None:
    """What an invocation that runs jobs does before anything else writes: under one lock
    (paths.pin + .lock), check the campaign's owner, pin it and write the resolved config
    the steps read. Two configs started at the same moment on a new campaign: the second
    sees the first's pin and is refused before it writes anything (before, each wrote its
    pin and resolved config before Snakemake's lock was taken, and one's jobs could
    measure the other's config)."""
    from containertax.core.records import locked

    with locked(campaign.paths.pin.with_name(campaign.paths.pin.name + ".lock")):
        check_owner(campaign)
        pin_campaign(campaign, now)
        write_resolved(campaign, resolved)


_HELD: dict[str, int] = {}  # campaign root -> the open descriptor that holds its writer lock


def hold_folder(campaign: Campaign, workdir: Path | None = None) -> str | None:
    """One working folder writes a campaign at a time. Snakemake's lock lives in the
    working folder (.snakemake/), so two checkouts (or two folders' configs) whose
    results_dir is the same folder each took their own lock and interleaved their steps in
    it: one's preflight removed the other's work folder, and the other failed with "fix
    environments.docker.python". The main Snakemake process of an invocation that runs jobs
    holds paths.WRITER_LOCK (flock, dropped by the kernel when it ends, even by SIGKILL) for
    its lifetime and writes who it is to paths.WRITER. While another process holds it, a
    ConfigError names both working folders and configs and the fix. Returns the working
    folder that wrote the campaign last, where it is another (said as a warning: a campaign
    continued from another clone is allowed), else None."""
    import fcntl
    import os
    import socket

    from containertax.core.records import atomic_write_text, utc_now

    here = str(Path(workdir or Path.cwd()).resolve())
    paths = campaign.paths
    key = str(paths.root.resolve())
    if key in _HELD:
        return None
    try:
        before = json.loads(paths.writer.read_text())
    except (OSError, ValueError):
        before = {}
    before = before if isinstance(before, dict) else {}
    paths.root.mkdir(parents=True, exist_ok=True)
    fd = os.open(paths.writer_lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        other = before.get("workdir", "(unknown)")
        where = ("another working folder" if other != here
                 else "another invocation in this working folder")
        raise ConfigError(
            f"{campaign.source}: key 'results_dir': the campaign folder {paths.root} is being "
            f"written by {where}: {other} (config {before.get('config_source', '?')}, "
            f"process {before.get('pid', '?')} on {before.get('host', '?')}, since "
            f"{before.get('utc', '?')}); this invocation runs in {here} (config "
            f"{campaign.source}). Snakemake's lock guards one working folder only, so the "
            "two would interleave their cells and steps in one campaign folder. Fix: wait "
            "for that invocation to end (or stop it), or give this config a results folder "
            "of its own (results_dir, or another campaign name).") from None
    _HELD[key] = fd
    atomic_write_text(paths.writer, json.dumps({
        "workdir": here, "config_source": campaign.source, "pid": os.getpid(),
        "host": socket.gethostname(), "utc": utc_now()}, indent=1) + "\n")
    last = before.get("workdir")
    return str(last) if last and last != here else None


def pin_campaign(campaign: Campaign, now: str | None = None) -> None:
    """Pin the campaign's identity (the first invocation that runs jobs; a campaign whose
    pin is missing is pinned as its records say first), add the models and environments
    an extension brings, and the measuring settings a pin from before them lacks; a pinned
    entry is never changed (a config with extends_campaign: true leaves it as it was).
    Atomic; written only when its content changes. Called under claim's lock."""
    from containertax.core.records import atomic_write_text, utc_now

    now = now or utc_now()
    pin = read_pin(campaign)
    mine = identity(campaign)
    if pin is None and not campaign.is_import:
        recreated = identity_from_records(campaign)
        if recreated is not None:
            pin = {"campaign": campaign.name, "utc": now, **recreated, "extended_by": []}
    if pin is None:
        pin = {"campaign": campaign.name, "config_source": campaign.source,
               "config_hash": campaign.config_hash(), "utc": now, **mine,
               "extended_by": []}
        atomic_write_text(campaign.paths.pin, json.dumps(pin, indent=1, default=str) + "\n")
        return
    added = {section: sorted(set(mine[section]) - set(pin[section]))
             for section in ("models", "environments")}
    missing_settings = "settings" not in pin and "settings" in mine \
        and not campaign.raw.get("extends_campaign")
    if missing_settings:
        pin["settings"] = mine["settings"]
    if not any(added.values()):
        if missing_settings or not campaign.paths.pin.exists():
            atomic_write_text(campaign.paths.pin,
                              json.dumps(pin, indent=1, default=str) + "\n")
        return
    for section in ("models", "environments"):
        for item, settings in mine[section].items():
            pin[section].setdefault(item, settings)
    pin.setdefault("extended_by", []).append(
        {"config_source": campaign.source, "config_hash": campaign.config_hash(),
         "utc": now, **added})
    atomic_write_text(campaign.paths.pin, json.dumps(pin, indent=1, default=str) + "\n")


def resolve_derived(envs: dict[str, Any], source: str, workdir: Path = Path(".")
                    ) -> dict[str, Any]:
    """Where an environment's Docker options come from, recorded as `options_source`:
    `derived_from: FILE` (a campaign config, relative to `source`) takes them from the
    file that campaign's analysis derived (`containertax best-options FILE --derive ENV`,
    paths.derived_options), or marks them pending while it does not exist (check refuses
    it, and the workflow's gate waits for it); `declared_by_hand: true` keeps the options
    written in the config."""
    from containertax.campaign.paths import derived_options

    out = dict(envs)
    for env_id, spec in envs.items():
        if not isinstance(spec, dict):
            continue
        key = f"{source}: key 'environments.{env_id}"
        if "derived_from" in spec and spec.get("declared_by_hand"):
            raise ConfigError(f"{key}': derived_from and declared_by_hand: true exclude each "
                              "other; keep derived_from to use the derived options, or "
                              "declared_by_hand with the options written out.")
        if spec.get("declared_by_hand"):
            out[env_id] = {**spec, "options_source": {
                "kind": "hand", "options": spec.get("options") or {}}}
            continue
        if "derived_from" not in spec:
            continue
        if spec.get("options"):
            raise ConfigError(f"{key}.options': options are given, but derived_from says "
                              "they are derived; remove them (or replace derived_from with "
                              "declared_by_hand: true to use them).")
        config_file = Path(source).parent / str(spec["derived_from"])
        if not config_file.is_file():
            raise ConfigError(f"{key}.derived_from': {config_file} does not exist; name the "
                              "deriving campaign's config relative to this file (e.g. "
                              "phase-2b.yaml).")
        deriving = load_campaign(read_config_file(config_file), str(config_file), workdir)
        file = derived_options(deriving.root, env_id)
        own = {k: v for k, v in spec.items() if k != "derived_from"}
        source_info: dict[str, Any] = {"kind": "derived", "campaign": deriving.name,
                                       "config": str(config_file), "file": str(file)}
        if file.exists():
            derived = read_derived(file, f"{key}.derived_from'", str(config_file), env_id)
            source_info.update(
                sha256=hashlib.sha256(file.read_bytes()).hexdigest(),
                options=derived.get("options") or {},
                qualifying=derived.get("qualifying") or [],
                comparisons_sha256=derived.get("comparisons_sha256"))
            own["options"] = derived.get("options") or {}
            own.setdefault("description", derived.get("description", ""))
        else:
            source_info["pending"] = True
        out[env_id] = {**own, "options_source": source_info}
    return out


def read_derived(file: Path, key: str, config_file: str, env_id: str) -> dict[str, Any]:
    """A derived options file (optimisation.write_derived), read strictly: a file that is
    not UTF-8 YAML holding a mapping with an `options` mapping (empty, a list, binary,
    unreadable, a folder, no `options` key, a key given twice) is an error naming that
    file, never "no options" (which would supersede valid records and measure them again);
    so is a file whose content is not what its derivation wrote (the sha256 it put in the
    deriving campaign's hashes.jsonl)."""
    fix = (f"derive it again (`containertax best-options {config_file} --derive {env_id}`), "
           "or restore it from a backup; it is read because of")
    try:
        content = file.read_bytes()
        derived = strict_yaml(content.decode("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        why = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise ConfigError(f"{file}: the derived options file cannot be read ({why}); {fix} "
                          f"{key}.") from None
    except yaml.YAMLError as exc:  # a key given twice included (strict_yaml)
        raise ConfigError(f"{file}: the derived options file cannot be read "
                          f"({type(exc).__name__}: {yaml_problem(exc)}); {fix} {key}."
                          ) from None
    if not isinstance(derived, dict) or not isinstance(derived.get("options"), dict):
        what = ("empty" if derived is None else
                f"a {type(derived).__name__}, not a mapping" if not isinstance(derived, dict)
                else "without its key 'options'" if "options" not in derived
                else "its key 'options' is not a mapping")
        raise ConfigError(f"{file}: the derived options file is {what}; {fix} {key}.")
    edited = written_mismatch(file.parent.parent, file, content)  # root/derived/ENV.yaml
    if edited is not None:
        raise ConfigError(
            f"{file}: the derived options file is not what `best-options --derive` wrote "
            f"(sha256 {edited[0][:12]}, hashes.jsonl has {edited[1][:12]}): edited by hand "
            f"after it was derived; {fix} {key} (options of your own: declared_by_hand: "
            "true with the options in the config).")
    return derived


def _blame_derived(exc: ConfigError, envs: dict[str, Any]) -> ConfigError:
    """A problem with an environment's options that a derived file supplied: said to be
    that file's, not the config's."""
    text = str(exc)
    notes = [f"(environments.{env_id}.options are not written in the config: they come "
             f"from the derived file {spec['options_source']['file']} (key 'options'); "
             "correct that file or derive it again with containertax best-options "
             f"{spec['options_source']['config']} --derive {env_id})"
             for env_id, spec in envs.items()
             if isinstance(spec, dict)
             and (spec.get("options_source") or {}).get("kind") == "derived"
             and f"environments.{env_id}.options" in text]
    return ConfigError("\n".join([text, *notes])) if notes else exc


def underived(campaign: Campaign) -> list[str]:
    """What `check` refuses about where options come from: a derived file not written yet,
    and a docker_optimised environment whose options are neither derived nor declared by
    hand (phases 2C and 2D take it from phase 2B's analysis)."""
    problems = []
    for env in campaign.environments:
        src = env.spec.get("options_source")
        key = f"{campaign.source}: key 'environments.{env.id}"
        if src and src.get("pending"):
            problems.append(
                f"{key}.derived_from': the options derived by campaign {src['campaign']} "
                f"({src['file']}) do not exist yet; run its analysis and then "
                f"`containertax best-options {src['config']} --derive {env.id}`; the study "
                "does both (`snakemake --cores 1` runs the DGX Spark study, 2A to 2D); or set "
                "declared_by_hand: true with the options.")
        elif env.id == "docker_optimised" and not src:
            problems.append(
                f"{key}': its options are neither derived (derived_from: phase-2b.yaml) nor "
                "declared by hand (declared_by_hand: true); say which (config/README.md, "
                "'Derived options').")
    return problems
