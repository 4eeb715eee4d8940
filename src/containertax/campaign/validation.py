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
            if not fix:  # a oneOf without a description: each alternative's complaint
                fix = _accepted(err)
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


# Host paths whose mount gives the process under test the host (or the engine that starts
# containers as root): refused, like the checkout and every results folder, unless the
# environment declares the mount with a reason in mount_reasons (the paper prints it).
SENSITIVE_HOST = {
    "/etc": "the host's configuration (passwords, keys, the engine's settings)",
    "/proc": "the host's processes", "/sys": "the host kernel's settings",
    "/dev": "the host's devices", "/root": "root's home folder",
    "/var/run/docker.sock": "the Docker socket (root on the host)",
    "/run/docker.sock": "the Docker socket (root on the host)",
    "/run/podman/podman.sock": "the Podman socket (root on the host)",
    "/run/containerd/containerd.sock": "the containerd socket (root on the host)",
}
# the checkout whose code runs (src/containertax/campaign/ -> its root), where there is one
CHECKOUT = next((p for p in Path(__file__).resolve().parents[2:4]
                 if (p / "pyproject.toml").exists()), None)
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# a path or an image reference, never shell syntax: the probe's interpreter and the image
# reach command lines (chroot, podman, ch-run) and the preflight
PYTHON_PATH = re.compile(r"[A-Za-z0-9_./+-]+")
IMAGE_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*")


def _overlaps(path: Path, other: Path) -> bool:
    """path is other, lies inside it, or holds it."""
    return path == other or other in path.parents or path in other.parents


def _mount_danger(host: str, workdir: Path, results_dir: Path, campaign: Path
                  ) -> tuple[str, bool] | None:
    """What a mount of `host` would expose, and whether it holds the campaign's own raw
    records; None: nothing this check knows of."""
    path = Path(host).resolve()
    plain = Path(host)
    if path == Path("/"):
        return "the host's root", True
    if _overlaps(path, campaign):
        return f"the campaign's own records ({campaign})", True
    if _overlaps(path, results_dir):
        return f"a results folder ({results_dir})", False
    for checkout in (workdir, CHECKOUT):
        if checkout is not None and _overlaps(path, checkout):
            return f"the checkout ({checkout})", False
    for danger, what in SENSITIVE_HOST.items():
        if _overlaps(path, Path(danger)) or _overlaps(plain, Path(danger)):
            return f"{what} ({danger})", False
    if path.name.endswith(".sock"):
        return "a socket (an engine's, root on the host)", False
    return None


def _mount_problems(data: dict[str, Any], source: str, workdir: Path) -> None:
    """A bind mount of /, the Docker socket, /etc, /proc, /sys, /dev, /root, the checkout
    or any results folder would let the process under test read or change the host, or
    the records it is measured by (a read-write mount of / did mount the host's root into
    the container): refused unless environments.<id>.mount_reasons declares the mount with
    a reason, which the paper prints. A read-write mount of the campaign's own records is
    refused even then: the container could rewrite the records it is measured by."""
    workdir = workdir.resolve()
    results_dir = (workdir / str(data["results_dir"])).resolve()
    campaign = results_dir / str(data["campaign"])
    problems = []
    for env_id, env in (data.get("environments") or {}).items():
        reasons = env.get("mount_reasons") or {}
        if env.get("mounts_above_results") is not None:
            problems.append(
                f"{source}: key 'environments.{env_id}.mounts_above_results' is replaced by "
                f"mount_reasons: give environments.{env_id}.mount_reasons a line "
                "'HOST: why it is mounted' for each such mount (the paper prints it).")
        hosts = []
        for j, spec in enumerate(env.get("mounts") or []):
            parts = str(spec).split(":")
            host = parts[0]
            hosts.append(host)
            if not host.startswith("/"):
                continue  # a named volume; the format check names a malformed spec
            danger = _mount_danger(host, workdir, results_dir, campaign)
            if danger is None:
                continue
            what, own = danger
            writable = len(parts) < 3 or parts[2] != "ro"
            key = f"{source}: key 'environments.{env_id}.mounts[{j}]': '{spec}' mounts {what}"
            if own and writable and host in reasons:
                problems.append(
                    f"{key} read-write: the process under test could rewrite the records "
                    "it is measured by, whatever the reason. Mount it read-only "
                    f"({host}:{parts[1] if len(parts) > 1 else host}:ro) or not at all.")
            elif host not in reasons:
                problems.append(
                    f"{key} into the container, where the process under test could read "
                    "or change the host or the campaign's raw records. Mount only the "
                    "folders it needs (e.g. /usr:/usr:ro), or declare it on purpose with "
                    f"environments.{env_id}.mount_reasons: {{'{host}': 'why it is "
                    "mounted'}} (the paper prints the reason).")
        for host in sorted(set(reasons) - set(hosts)):
            problems.append(
                f"{source}: key 'environments.{env_id}.mount_reasons.{host}': no mount of "
                f"{host} in environments.{env_id}.mounts; remove the reason or add the mount.")
    if problems:
        raise ConfigError("\n".join(problems))


def _variable_problems(env_id: str, env: dict[str, Any]) -> list[str]:
    """Environment variables, the probe's interpreter and the image as the runtimes take
    them: a name with '=', ';' or a NUL byte, a value with a NUL byte, or shell syntax in
    `python` or `image` passed check and failed (or ran) later."""
    problems = []
    for name, value in (env.get("env") or {}).items():
        if not ENV_NAME.fullmatch(str(name)):
            problems.append(
                f"key 'environments.{env_id}.env': variable name {str(name)!r} is not a "
                "name a process can be given (letters, digits and _, not starting with a "
                "digit; no '=', ';', spaces or NUL); rename it.")
        if "\0" in str(value):
            problems.append(
                f"key 'environments.{env_id}.env.{name}': the value holds a NUL byte, "
                "which no process environment can carry; remove it.")
    python = env.get("python")
    if python is not None and not PYTHON_PATH.fullmatch(str(python)):
        problems.append(
            f"key 'environments.{env_id}.python': {str(python)!r} is not a plain "
            "interpreter path or name (letters, digits, '_', '.', '/', '+', '-'; no "
            "spaces or shell syntax such as ';', '$', '|', '&', quotes); give the "
            "interpreter's path, e.g. /usr/bin/python3.")
    image = env.get("image")
    if image is not None and not IMAGE_REF.fullmatch(str(image)):
        problems.append(
            f"key 'environments.{env_id}.image': {str(image)!r} is not an image reference "
            "(name[:tag][@digest] or an id: letters, digits, '.', '_', '-', '/', ':', '@'; "
            "no spaces or shell syntax); give the image's name or id.")
    return problems


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
                   f"{e.message}{_accepted(e)} (workflow/schemas/config.schema.yaml "
                   f"$defs/{definition}).")
    return out


def _accepted(err: Any) -> str:
    """What a value must be, for an error that does not say it ('not valid under any of
    the given schemas' of a oneOf): the key's description, else each alternative's own
    complaint."""
    if err.validator not in ("oneOf", "anyOf"):
        return ""
    hint = err.schema.get("description", "") if isinstance(err.schema, dict) else ""
    if hint:
        return f"; accepted: {hint}"
    forms = sorted({sub.message for sub in err.context or []})
    return f"; accepted forms, each unmet: {'; '.join(forms)}" if forms else ""


def _semantic_checks(data: dict[str, Any], source: str) -> None:
    problems: list[str] = _kind_problems(data)
    envs = data.get("environments", {})
    for env_id, env in envs.items():
        problems += _environment_problems(env_id, env)
        problems += _variable_problems(env_id, env)
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
    # a cold or per-environment compile cache is one folder a run empties or refills: two
    # lanes running at once would empty it under each other (execution/compilecache.py)
    own = [str(m.get("id")) for m in data.get("models") or []
           if isinstance(m, dict) and m.get("compile_cache") in ("cold", "per_environment")]
    if len(configured) > 1 and own:
        problems.append(f"key 'models[].compile_cache': model(s) {own} empty or refill their "
                        f"cache before every run, and {len(configured)} lanes run at once; "
                        "run them in one lane, or use compile_cache: shared.")
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
