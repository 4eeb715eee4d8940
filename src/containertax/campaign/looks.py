"""A stopping rule's look files (paths.INTERIM), read in one place: each records the rule
it was decided under (`rule_fingerprint`), so a look decided under another rule (the
config's `stopping` or the analysis' alpha or margin changed since) is refused instead of
being printed beside words of the new rule, a damaged file is named with its fix
instead of a JSONDecodeError, and a file whose content is not what the checkpoint wrote
(its sha256 in the campaign's hashes.jsonl: core.records.hash_written) is refused as edited. The
workflow's planning, `check`, `status` and the paper read looks through read_look.

Standard library only: the Snakefile reads the looks when it plans the workflow.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from containertax.campaign.configerror import ConfigError
from containertax.campaign.stopping import RULE_BEFORE, Rule
from containertax.core.records import written_mismatch


class LookError(ConfigError):
    """A look file that cannot be trusted: damaged, or decided under another rule."""


def fingerprint(rule: Rule) -> dict[str, Any]:
    """What a look's decision depends on besides the records: every field of the rule
    (spending function, alpha, margin, looks; fields a later rule adds come with it) and
    a sha256 of them."""
    fields = {**asdict(rule), "looks": rule.looks()}
    text = json.dumps(fields, sort_keys=True, default=str)
    return {**fields, "sha256": hashlib.sha256(text.encode()).hexdigest()}


def _recorded(state: dict[str, Any]) -> dict[str, Any] | None:
    """The rule a look file says it was decided under, as comparable fields: its
    fingerprint, or (a file written before fingerprints) its rule and looks."""
    fp = state.get("rule_fingerprint")
    if isinstance(fp, dict):
        return fp
    rule = state.get("rule")
    if isinstance(rule, dict) and isinstance(state.get("looks"), list):
        return {**rule, "looks": state["looks"]}
    return None


def _differences(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """The rule's fields that differ: all of them for a fingerprinted look (a field it
    lacks counts as changed); for a look written before fingerprints, those it recorded and
    those added to the rule since (stopping.RULE_BEFORE: the look ran without them, so a
    drift check the config now has was not part of its decision)."""
    fingerprinted = "sha256" in recorded
    if fingerprinted and recorded["sha256"] == now["sha256"]:
        return []
    if not fingerprinted:
        recorded = {**RULE_BEFORE, **recorded}
    keys = [k for k in now if k != "sha256" and (fingerprinted or k in recorded)]
    changed = [f"{k}: {recorded.get(k, '(not recorded)')!r} then, {now[k]!r} now"
               for k in keys if recorded.get(k) != now[k]]
    return changed or (["its fingerprint's sha256"] if fingerprinted else [])


def _fix_damaged(path: Path) -> str:
    return (f"move it aside (mv {path} {path}.damaged): the next `snakemake --cores 1` "
            "decides that look again from the raw records (the interim checkpoint)")


def read_look(path: Path, rule: Rule | None = None) -> dict[str, Any]:
    """A look file's state; with `rule`, one decided under that rule. Anything else is a
    LookError naming the file and the fix."""
    path = Path(path)
    try:
        content = path.read_bytes()
        state = json.loads(content)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise LookError(f"{path}: the stopping rule's look file is damaged ({exc}); "
                        f"{_fix_damaged(path)}.") from None
    edited = written_mismatch(path.parent.parent, path, content)  # root/interim/lookK
    if edited is not None:
        raise LookError(
            f"{path}: the look file is not what the interim checkpoint wrote (sha256 "
            f"{edited[0][:12]}, hashes.jsonl has {edited[1][:12]}): edited after its look was "
            "decided (a decision, a rule or a fingerprint changed by hand is never obeyed). "
            f"Restore it (git checkout -- {path}), or {_fix_damaged(path)}.")
    models = state.get("models") if isinstance(state, dict) else None
    if not isinstance(models, dict) or not isinstance(state.get("continuing", []), list) \
            or any(not isinstance(v, dict) or not isinstance(v.get("blocks_allowed"), int)
                   or not isinstance(v.get("decision", ""), str) for v in models.values()):
        raise LookError(f"{path}: not a look file this workflow wrote (no 'models' with "
                        f"blocks_allowed each, or 'continuing' not a list); "
                        f"{_fix_damaged(path)}.")
    recorded = _recorded(state)
    if rule is not None and recorded is None:  # every look the checkpoint wrote names one
        raise LookError(f"{path}: the look file names no stopping rule it was decided under "
                        "(no 'rule_fingerprint', no 'rule' with 'looks'): not a look the "
                        "interim checkpoint wrote, so its decisions are never obeyed; "
                        f"{_fix_damaged(path)}.")
    if rule is not None:
        changed = _differences(recorded, fingerprint(rule))
        if changed:
            folder = path.parent
            raise LookError(
                f"{path}: this look was decided under another stopping rule than the "
                f"config's now ({'; '.join(changed)}): its decisions are not the new "
                "rule's. Restore the rule in the config (stopping, analysis.alpha, "
                "analysis.equivalence_margin), or, to decide every look again from the raw "
                f"records under the new rule, move the looks aside (mv {folder} "
                f"{folder}.old) and run `snakemake --cores 1`; blocks beyond a new stop "
                "are then moved to raw/.superseded/.")
    return state


def read_looks(paths: Any, rule: Rule) -> list[dict[str, Any]]:
    """The look files written so far, in order (up to the first missing one), each
    checked against the rule (read_look)."""
    out = []
    for k in range(1, len(rule.looks()) + 1):
        path = paths.interim(k)
        if not path.exists():
            break
        out.append(read_look(path, rule))
    return out
