"""A config mapping checked before it drives a campaign: the JSON Schema (its defaults
filled in) and the semantic checks the schema cannot express. Every problem names the file,
the key and the fix. jsonschema is imported only when a config is validated: a cell step
reads an already validated one."""

from __future__ import annotations

import copy
import re
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from containertax import runtimes, workloads
from containertax.campaign import stopping
from containertax.campaign.configerror import ConfigError
from containertax.core import packaged

SCHEMA_PATH = packaged.schema("config.schema.yaml")

# libyaml where PyYAML was built with it (ten times faster on the schema)
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def schema() -> dict[str, Any]:
    """The config schema, parsed once (config's hash and base: read it too)."""
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
    validator = _validator_class()(schema())
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


def validate(data: dict[str, Any], source: str, workdir: Path = Path(".")) -> dict[str, Any]:
    """The schema (defaults filled in; returns a new dict), then the semantic checks and the
    metric names: what load_campaign trusts. workdir: what results_dir is relative to."""
    data = validate_schema(data, source)
    _semantic_checks(data, source)
    _mount_problems(data, source, workdir)
    _check_metric_names(data, source)
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


def _mount_problems(data: dict[str, Any], source: str, workdir: Path) -> None:
    """A bind mount of / or of a folder holding the campaign's results would let the
    process under test read or change the host, or the campaign's own raw records (a
    read-write mount of / did mount the host's root into the container): refused unless
    the environment says mounts_above_results: true."""
    results = (workdir / str(data["results_dir"]) / str(data["campaign"])).resolve()
    problems = []
    for env_id, env in (data.get("environments") or {}).items():
        if env.get("mounts_above_results"):
            continue
        for j, spec in enumerate(env.get("mounts") or []):
            host = str(spec).split(":")[0]
            if not host.startswith("/"):
                continue  # a named volume; the format check names a malformed spec
            path = Path(host).resolve()
            if path == Path("/") or path == results or path in results.parents:
                what = "the host's root" if path == Path("/") else \
                    f"a folder holding the campaign's results ({results})"
                problems.append(
                    f"{source}: key 'environments.{env_id}.mounts[{j}]': '{spec}' mounts "
                    f"{what} into the container, where the process under test could read "
                    "or change the host and the campaign's raw records. Mount only the "
                    "folders it needs (e.g. /usr:/usr:ro), or set "
                    f"environments.{env_id}.mounts_above_results: true to allow it on "
                    "purpose.")
    if problems:
        raise ConfigError("\n".join(problems))


def _environment_problems(env_id: str, env: dict[str, Any]) -> list[str]:
    """An environment's settings against its kind's declaration (runtimes/<kind>.py): the
    kind registered, the image where it needs one, only the keys it takes, its options
    against the schema's $defs it names, and its own checks."""
    kind = env.get("kind")
    if kind not in runtimes.REGISTRY:
        return [f"key 'environments.{env_id}.kind': unknown environment kind {kind!r}; choose "
                f"one of {sorted(runtimes.KINDS)} (a new kind: a module in "
                "containertax/runtimes/ and its line in runtimes.REGISTRY)."]
    runtime = runtimes.get(kind)
    problems = []
    if runtime.needs_image and not env.get("image"):
        problems.append(f"key 'environments.{env_id}.image' is missing: a {kind} environment "
                        "needs the image it runs (name:tag or id).")
    takes = runtime.keys or frozenset()
    for key in ("options", "gpu", "mounts"):
        if env.get(key) and key not in takes:
            which = sorted(k for k, r in runtimes.REGISTRY.items() if key in (r.keys or ()))
            problems.append(f"key 'environments.{env_id}.{key}' is only for kind "
                            f"{' or '.join(which)} (not {kind}); remove it or change the kind.")
    if env.get("options") and runtime.options_schema:
        problems += _options_problems(env_id, env["options"], runtime.options_schema)
    return problems + (runtime.problems(env_id, env) if runtime.problems else [])


def _options_problems(env_id: str, options: dict[str, Any], definition: str) -> list[str]:
    """options against the schema's $defs/<definition>, the kind's own flags."""
    import jsonschema  # noqa: PLC0415

    sub = {**schema()["$defs"][definition], "$defs": schema()["$defs"]}
    validator = jsonschema.Draft202012Validator(sub)
    out = []
    for e in sorted(validator.iter_errors(options), key=lambda e: list(e.absolute_path)):
        where = _key(e.absolute_path) if e.absolute_path else ""
        out.append(f"key 'environments.{env_id}.options{'.' + where if where else ''}': "
                   f"{e.message} (workflow/schemas/config.schema.yaml $defs/{definition}).")
    return out


def _semantic_checks(data: dict[str, Any], source: str) -> None:
    problems: list[str] = _kind_problems(data)
    envs = data.get("environments", {})
    for env_id, env in envs.items():
        problems += _environment_problems(env_id, env)
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
