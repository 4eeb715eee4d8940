"""Reading a config file strictly (a key given twice, an alias bomb, a tab: an error naming
the file and the line) and laying configs on their base (`base: FILE`)."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml

from containertax.campaign.configerror import ConfigError
from containertax.campaign.validation import schema

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


def strict_yaml(text: str) -> Any:
    """YAML text read as strictly as a config (a key given twice is an error)."""
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader)


def yaml_problem(exc: yaml.YAMLError) -> str:
    """Where and what, from a YAML error (for files other than configs: derived options)."""
    return _yaml_problem(exc)


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


def unreadable(path: Path) -> str | None:
    """Why a config file cannot be read, as every reader of a config says it (the file, the
    line and column, what is wrong, the fix); None when it reads as a mapping. Snakemake's
    own refusal of a --configfile is reworded by this (snakemake_logger_plugin_containertax)."""
    try:
        _read_yaml(Path(path), str(path))
    except ConfigError as exc:
        return str(exc)
    return None


def study_campaigns(path: Path) -> list[Path] | None:
    """The campaign configs a study config names (relative to its folder), or None when the
    file is no study config (no top-level `study:` mapping). Only such a file is parsed here:
    every other file is read strictly by the campaign's own reading, which says what is wrong.
    `containertax check` and the Snakefile (a study or one campaign) decide by this."""
    try:
        text = Path(path).read_text()
        data = yaml.safe_load(text) if re.search(r"^study:", text, re.M) else None
    except (OSError, ValueError, yaml.YAMLError):  # not text, unreadable, not YAML
        return None
    if not isinstance(data, dict) or not isinstance(data.get("study"), dict):
        return None
    return [Path(path).parent / str(c.get("config"))
            for c in data["study"].get("campaigns") or [] if isinstance(c, dict)]


def read_config_file(path: Path) -> dict[str, Any]:
    """A config file read strictly (keys given twice, alias bombs, tabs: errors with line)."""
    return _read_yaml(Path(path), str(path))


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
    stray = sorted(str(k) for k in raw_base if k not in schema()["properties"] and k != "base")
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
