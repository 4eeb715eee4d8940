"""Campaign configuration: schema validation, semantic checks and a typed view.

The Snakefile and the command line load configs through the same function, so an error
reads the same everywhere: it names the file, the key and the fix.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from containertax import workloads
from containertax.campaign import stopping
from containertax.campaign.paths import CampaignPaths
from containertax.core import packaged
from containertax.core.errors import ContainertaxError

SCHEMA_PATH = packaged.schema("config.schema.yaml")


class ConfigError(ContainertaxError, ValueError):
    """A config that cannot drive a campaign; the message says where and how to fix it."""


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
                                  f"{self.source}); see containertax.analysis.importer.")
            return list(dict.fromkeys(str(r["model"]).strip() for r in rows if r["model"]))

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
        text = json.dumps(_without_new_defaults(raw), default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


# Keys added to the schema after campaigns were committed: at their default they leave the
# config hash as it was, so a committed campaign stays the campaign its records name.
HASH_NEUTRAL_DEFAULTS = (("thermal", "cooldown"), ("thermal", "adaptive"),
                         ("analysis", "resolution_pct"))
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
            sub = _schema()[part] if part == "$defs" else sub[part]
    return sub


def _without_new_defaults(raw: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    for path in HASH_NEUTRAL_DEFAULTS:
        parent, sub = out, _schema()
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


# libyaml where PyYAML was built with it (ten times faster on the schema)
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def _schema() -> dict[str, Any]:
    return yaml.load(SCHEMA_PATH.read_text(), Loader=YAML_LOADER)  # noqa: S506 - a safe loader


def _extend_with_default(validator_class: type) -> type:
    """A validator that fills in schema defaults, as snakemake.utils.validate does."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):  # type: ignore[no-untyped-def]
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if "default" in sub and prop not in instance:
                    instance[prop] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    import jsonschema  # noqa: PLC0415 - a cell step reads an already validated config

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


@cache
def _validator_class() -> type:
    import jsonschema  # noqa: PLC0415

    return _extend_with_default(jsonschema.Draft202012Validator)


def _key(path: Any) -> str:
    parts = [f"[{p}]" if isinstance(p, int) else f".{p}" for p in path]
    return "".join(parts).lstrip(".") or "(top level)"


def validate_schema(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Validate against the JSON Schema and fill in defaults; returns a new dict."""
    data = copy.deepcopy(data)
    validator = _validator_class()(_schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        lines = []
        for err in errors:
            hint = err.schema.get("description", "") if isinstance(err.schema, dict) else ""
            fix = f" (the key: {hint})" if hint and err.absolute_path else ""
            lines.append(f"  {source}: key '{_key(err.absolute_path)}': {err.message}.{fix}")
        raise ConfigError(
            f"{source} does not match workflow/schemas/config.schema.yaml; correct these "
            f"keys (config/README.md documents each):\n" + "\n".join(lines)
        )
    return data


def _kind_problems(data: dict[str, Any]) -> list[str]:
    """Workload kinds the registry lacks (the schema takes any name: the registry is the
    one list of kinds)."""
    named = [("workload.kind", (data.get("workload") or {}).get("kind"))]
    named += [(f"models[{i}].kind", m.get("kind")) for i, m in enumerate(data.get("models") or [])
              if isinstance(m, dict)]
    return [f"key '{key}': unknown workload kind {kind!r}; choose one of "
            f"{sorted(workloads.KINDS)} (a new kind: a module in containertax/workloads/ and "
            "its line in workloads.REGISTRY)." for key, kind in named
            if kind is not None and kind not in workloads.REGISTRY]


def _semantic_checks(data: dict[str, Any], source: str) -> None:
    problems: list[str] = _kind_problems(data)
    envs = data.get("environments", {})
    for env_id, env in envs.items():
        if env["kind"] in ("chroot", "docker") and not env.get("image"):
            problems.append(
                f"key 'environments.{env_id}.image' is missing: a {env['kind']} environment "
                "needs the image it runs (name:tag or id)."
            )
        if env["kind"] != "docker" and env.get("options"):
            problems.append(
                f"key 'environments.{env_id}.options' is only for kind docker; "
                f"remove it or set kind: docker."
            )
        if env["kind"] != "chroot" and env.get("gpu"):
            problems.append(
                f"key 'environments.{env_id}.gpu' is only for kind chroot (native sees the "
                "GPU; docker: options.nvidia_devices and options.nvidia_libraries, or "
                "options.gpus with the NVIDIA Container Toolkit)."
            )
        for j, spec in enumerate(env.get("mounts") or []):
            parts = str(spec).split(":")
            target = parts[1] if len(parts) in (2, 3) else ""
            if (len(parts) not in (2, 3) or not parts[0] or not target.startswith("/")
                    or ".." in Path(target).parts
                    or (len(parts) == 3 and parts[2] not in ("ro", "rw"))):
                problems.append(
                    f"key 'environments.{env_id}.mounts[{j}]': '{spec}' is not "
                    "HOST:TARGET[:ro|rw] with an absolute TARGET free of '..' (e.g. "
                    "/models:/models:ro).")
        if env["kind"] == "native" and env.get("mounts"):
            problems.append(
                f"key 'environments.{env_id}.mounts': a native environment sees the host "
                "filesystem; remove mounts."
            )
    ids = [m["id"] for m in data.get("models", [])]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        problems.append(f"key 'models': duplicate id(s) {dupes}; every model id must be unique.")
    ref = data.get("reference_environment")
    if ref is not None and envs and ref not in envs:
        problems.append(
            f"key 'reference_environment': '{ref}' is not an environment; "
            f"choose one of {sorted(envs)}."
        )
    if data["thermal"]["sensor"] != "none" and data["thermal"]["timeout_s"] < data["thermal"][
        "poll_s"
    ]:
        problems.append("key 'thermal.timeout_s' must be at least 'thermal.poll_s'.")
    problems += _lanes_problems(data)
    adaptive = data["thermal"]["adaptive"]
    if adaptive["min_s"] > adaptive["max_s"]:
        problems.append("key 'thermal.adaptive.min_s' must not exceed 'thermal.adaptive.max_s' "
                        f"({adaptive['min_s']} > {adaptive['max_s']}).")
    problems += _results_dir_problems(data)
    problems += _metric_problems(data.get("analysis", {}))
    problems += _import_study_problems(data.get("analysis", {}))
    problems += stopping.problems(data)
    if problems:
        raise ConfigError(f"{source}:\n" + "\n".join(f"  {p}" for p in problems))


BIBLIOGRAPHY = packaged.paper_dir() / "references.bib"


def _import_study_problems(analysis: dict[str, Any]) -> list[str]:
    """analysis.import_study describes an imported table, so it needs one; its citation
    must be an entry of the paper's bibliography, else the PDF would print '(?)'."""
    study = analysis.get("import_study")
    if study is None:
        return []
    if "import_csv" not in analysis:
        return ["key 'analysis.import_study' describes an imported study: set "
                "analysis.import_csv too, or remove it."]
    key = study.get("citation")
    if key and BIBLIOGRAPHY.exists() and not re.search(
            rf"@\w+\s*{{\s*{re.escape(key)}\s*,", BIBLIOGRAPHY.read_text()):
        return [f"key 'analysis.import_study.citation': '{key}' is not an entry of "
                f"{BIBLIOGRAPHY.name} (paper/); add the study's BibTeX entry there, or "
                "leave citation out."]
    return []


def _lanes_problems(data: dict[str, Any]) -> list[str]:
    """Semantic problems of the `lanes` key (the schema checks the shapes; campaign.lanes
    reads the checked lanes)."""
    problems: list[str] = []
    configured = data.get("lanes") or []
    ids = [str(lane.get("id")) for lane in configured]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        problems.append(f"key 'lanes': duplicate id(s) {dupes}; every lane id must be unique.")
    places = [(lane.get("host"), str(lane.get("gpu"))) for lane in configured]
    twice = sorted({f"{h or 'this host'}:{g}" for h, g in places if places.count((h, g)) > 1})
    if twice:
        problems.append(f"key 'lanes': GPU(s) {twice} named by more than one lane; two lanes on "
                        "one GPU would measure each other's load. Give each lane its own GPU.")
    reps = data.get("repetitions", 0)
    if configured and reps < len(configured):
        problems.append(f"key 'lanes': {len(configured)} lanes but only {reps} repetitions; "
                        "a lane runs whole repetitions, so give at least one per lane.")
    return problems


def _results_dir_problems(data: dict[str, Any]) -> list[str]:
    """results_dir stays inside the working directory (the checkout), unless the config
    opts into an absolute folder with results_dir_absolute: true."""
    text = str(data.get("results_dir", "results"))
    path = Path(text)
    if path.is_absolute():
        if data.get("results_dir_absolute"):
            return []
        return [f"key 'results_dir': '{text}' is absolute; give a folder inside the working "
                "directory (e.g. results), or set results_dir_absolute: true to put results "
                "there on purpose."]
    if ".." in path.parts or not path.parts:
        return [f"key 'results_dir': '{text}' leaves the working directory; give a folder "
                "inside it (e.g. results)."]
    return []


def _metric_problems(analysis: dict[str, Any]) -> list[str]:
    """Metrics and the headline metric must be known: an unknown one silently analysed
    nothing (a paper of '0 primary tests') or was replaced by another."""
    from containertax.workloads import metric_registry as registry

    known = registry.registry(analysis.get("define_metrics"))
    problems = []
    unknown = [m for m in analysis.get("metrics") or [] if m not in known]
    if unknown:
        problems.append(f"key 'analysis.metrics': unknown metric(s) {unknown}; choose from "
                        f"{sorted(known)} or define them under analysis.define_metrics.")
    head = analysis.get("headline_metric")
    chosen = analysis.get("metrics") or sorted(known)
    if head is not None and head not in chosen:
        problems.append(f"key 'analysis.headline_metric': '{head}' is not "
                        + ("one of analysis.metrics " if analysis.get("metrics") else
                           "a known metric ") + f"{sorted(chosen)}; choose one of them.")
    return problems


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` laid on `base`: mappings merge key by key, null removes a key, anything else
    (lists included) replaces."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


MAX_NODES = 100_000  # the demo config has ~100; an alias bomb expands to billions


class _StrictLoader(yaml.SafeLoader):
    """YAML as a config needs it: a key given twice is an error (PyYAML keeps the last one
    silently), and a document whose aliases expand beyond MAX_NODES values (a 'billion
    laughs') is refused before anything copies it."""

    def get_single_node(self) -> Any:
        node = super().get_single_node()
        sizes: dict[int, int] = {}

        def expanded(n: Any) -> int:
            if id(n) not in sizes:
                sizes[id(n)] = 1  # a cycle counts once
                if isinstance(n, yaml.SequenceNode):
                    sizes[id(n)] += sum(expanded(c) for c in n.value)
                elif isinstance(n, yaml.MappingNode):
                    sizes[id(n)] += sum(expanded(k) + expanded(v) for k, v in n.value)
                sizes[id(n)] = min(sizes[id(n)], MAX_NODES + 1)
            return sizes[id(n)]

        if node is not None and expanded(node) > MAX_NODES:
            raise yaml.constructor.ConstructorError(
                None, None, f"its aliases (*name) expand to more than {MAX_NODES} values; "
                "write the values out instead", node.start_mark)
        return node

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "in a mapping", node.start_mark,
                    f"key '{key}' is given twice (first on line {seen[key].line + 1}); "
                    "keep one", key_node.start_mark)
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """'line L, column C: what is wrong', from PyYAML's marked errors."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    what = " ".join(str(x) for x in (getattr(exc, "context", None),
                                     getattr(exc, "problem", None)) if x) or str(exc)
    if "\t" in what or "tab" in what:
        what += " (YAML indents with spaces, never tabs)"
    return where + what


def _read_yaml(path: Path, named_by: str) -> dict[str, Any]:
    """A config file's mapping, or a ConfigError naming the file (and who named it)."""
    via = "" if named_by == str(path) else f" (named by {named_by})"
    if path.is_dir():
        raise ConfigError(f"{path}{via} is a folder, not a config file; name a .yaml file.")
    try:
        with path.open() as fh:
            data = yaml.load(fh, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader)
    except FileNotFoundError:
        raise ConfigError(f"{named_by}: no such config file {path}.") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}{via} is not a text file; name a .yaml config.") from None
    except OSError as exc:
        raise ConfigError(f"{path}{via} cannot be read: {exc.strerror}.") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}{via}: not valid YAML: {_yaml_problem(exc)}.") from None
    except RecursionError:
        raise ConfigError(f"{path}{via}: nested too deeply to be a config.") from None
    if not isinstance(data, dict) or not data:
        what = "empty" if data is None or data == {} else f"a {type(data).__name__}"
        raise ConfigError(
            f"{path}{via} is {what}, not a mapping of keys: a config starts with e.g. "
            "'campaign: NAME' (config/README.md documents each key).")
    return data


def resolve_base(data: dict[str, Any], source: str, chain: tuple[str, ...] = ()) -> dict[str, Any]:
    """A config with `base: FILE` is that file (itself resolved) with this one laid on it;
    `models` may then list ids of the base's models to run a subset of them."""
    if "base" not in data:
        return data
    if not isinstance(data["base"], str) or not data["base"]:
        raise ConfigError(f"{source}: key 'base' must be the path of a config file (relative "
                          f"to {source}), got {data['base']!r}.")
    path = (Path(source).parent / str(data["base"])).resolve()
    if str(path) in chain:
        raise ConfigError(f"{source}: key 'base': {path} inherits from itself "
                          f"({' -> '.join(chain)}).")
    named = f"{source}: key 'base'"
    raw_base = _read_yaml(path, named)
    stray = sorted(str(k) for k in raw_base if k not in _schema()["properties"] and k != "base")
    if stray:
        raise ConfigError(f"{named}: {path} is not a campaign config (unknown top-level "
                          f"key(s) {stray}); name a config file such as config/config.yaml.")
    base = resolve_base(raw_base, str(path), (*chain, str(path)))
    over = {k: v for k, v in data.items() if k != "base"}
    models = over.pop("models", None)
    merged = merge(base, over)
    if models is not None:
        merged["models"] = _select_models(models, base.get("models", []), source, path)
    merged["based_on"] = [str(data["base"]), *base.get("based_on", [])]
    return merged


def _select_models(models: list[Any], base_models: list[Any], source: str,
                   base_path: Path) -> list[Any]:
    by_id = {m.get("id"): m for m in base_models if isinstance(m, dict)}
    out = []
    for i, m in enumerate(models):
        if isinstance(m, str):
            if m not in by_id:
                raise ConfigError(
                    f"{source}: key 'models[{i}]': '{m}' is not a model of {base_path}; "
                    f"choose from {sorted(by_id)} or give the model's mapping.")
            out.append(copy.deepcopy(by_id[m]))
        else:
            out.append(m)
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


def _check_metric_names(data: dict[str, Any], source: str) -> None:
    """Metric names in the analysis section must be known: a misspelt name would silently
    analyse nothing."""
    from containertax.workloads.metric_registry import registry

    analysis = data.get("analysis", {})
    known = registry(analysis.get("define_metrics"))
    problems = []
    for key in ("metrics", "primary_metrics"):
        for i, name in enumerate(analysis.get(key) or []):
            if name not in known:
                problems.append(f"key 'analysis.{key}[{i}]': '{name}' is not a known metric; "
                                "correct the name or define it under analysis.define_metrics.")
    head = analysis.get("headline_metric")
    if head is not None and head not in known:
        problems.append(f"key 'analysis.headline_metric': '{head}' is not a known metric; "
                        "correct the name or define it under analysis.define_metrics.")
    if problems:
        raise ConfigError(f"{source}:\n" + "\n".join(f"  {p}" for p in problems))


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
    if isinstance(data.get("environments"), dict):
        data["environments"] = resolve_replicas(
            resolve_extends(resolve_derived(data["environments"], source, workdir), source),
            source)
    data = validate_schema(data, source)
    _semantic_checks(data, source)
    _check_metric_names(data, source)
    campaign = campaign_of(data, source, workdir)
    if not campaign.is_import:
        _workload_checks(campaign)
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


def read_config_file(path: Path) -> dict[str, Any]:
    """A config file read strictly (keys given twice, alias bombs, tabs: errors with line)."""
    return _read_yaml(Path(path), str(path))


def load_file(path: str | Path, workdir: Path = Path(".")) -> Campaign:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: no such config file.")
    campaign = load_campaign(_read_yaml(path, str(path)), str(path), workdir)
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


def check_owner(campaign: Campaign) -> None:
    """A new config that reuses the name of a campaign with records (e.g. h100) would
    write its cells into that campaign: refused, unless it is that campaign's config (or a
    config laid on it with base:), or says extends_campaign: true."""
    if campaign.raw.get("extends_campaign") or campaign.is_import:
        return
    first = next(iter(campaign.paths.raw_records()), None)
    if first is None:
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
        deriving = load_campaign(_read_yaml(config_file, str(config_file)), str(config_file),
                                 workdir)
        file = derived_options(deriving.root, env_id)
        own = {k: v for k, v in spec.items() if k != "derived_from"}
        source_info: dict[str, Any] = {"kind": "derived", "campaign": deriving.name,
                                       "config": str(config_file), "file": str(file)}
        if file.is_file():
            derived = yaml.safe_load(file.read_text()) or {}
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
                f"`containertax best-options {src['config']} --derive {env.id}` (the study "
                "workflow does both), or set declared_by_hand: true with the options.")
        elif env.id == "docker_optimised" and not src:
            problems.append(
                f"{key}': its options are neither derived (derived_from: phase-2b.yaml) nor "
                "declared by hand (declared_by_hand: true); say which (config/README.md, "
                "'Derived options').")
    return problems
