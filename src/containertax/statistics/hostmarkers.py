"""Where each environment ran, as its probe saw it from inside: a virtual machine (the
CPU's hypervisor flag, DMI vendor and product) and a container (/.dockerenv,
/run/.containerenv, the process's cgroup path). A "native" run may itself be a process in
a VM's container; the paper says so from these records instead of calling it bare metal.

The probe writes the markers (workloads/probe/probe_common.host_markers) under
inside.environment.markers; records from before it hold only in_container_hint
(/.dockerenv) and the last cgroup line, and the text says what was not recorded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from containertax.core.rawrecord import RawRecord
from containertax.statistics import texts


def _cgroup_paths(lines: Iterable[str] | str | None) -> list[str]:
    """The non-root cgroup paths of /proc/self/cgroup lines ('4:memory:/a/b' -> '/a/b')."""
    if lines is None:
        return []
    if isinstance(lines, str):
        lines = [lines]
    paths = {line.split(":", 2)[-1] for line in lines if line.count(":") >= 2}
    return sorted(p for p in paths if p not in ("", "/"))


def of_record(rec: RawRecord) -> dict[str, Any]:
    """One run's markers; None for what the record does not hold."""
    env = (rec.inside or {}).get("environment") or {}
    m = env.get("markers")
    if m is None:  # before the probe recorded the markers
        return {"recorded": False, "hypervisor_flag": None, "dmi_vendor": None,
                "dmi_product": None, "dockerenv": env.get("in_container_hint"),
                "containerenv": None, "cgroup": _cgroup_paths(env.get("cgroup"))}
    dmi = m.get("dmi") or {}
    return {"recorded": True, "hypervisor_flag": m.get("hypervisor_flag"),
            "dmi_vendor": dmi.get("sys_vendor") or None,
            "dmi_product": dmi.get("product_name") or None,
            "dockerenv": m.get("dockerenv"), "containerenv": m.get("containerenv"),
            "cgroup": _cgroup_paths(m.get("cgroup"))}


def by_environment(recs: Iterable[RawRecord]) -> dict[str, dict[str, Any]]:
    """Per environment, each marker's set of values over its runs (sorted lists)."""
    seen: dict[str, dict[str, set[Any]]] = {}
    for rec in recs:
        env = seen.setdefault(rec.cell.environment, {})
        for key, value in of_record(rec).items():
            values = value if isinstance(value, list) else [value]
            env.setdefault(key, set()).update(values)
    return {env: {k: sorted(v, key=str) for k, v in m.items()} for env, m in seen.items()}


def _short(path: str) -> str:
    """A cgroup path with its long hash components cut (they only identify the instance)."""
    return "/".join(p if len(p) <= 16 else "..." for p in path.split("/"))


# a path in the words below, set in \texttt by _tex (an identifier such as process_api, set
# as prose, would print its underscore as a space)
_CODE = "\x00{}\x01"


def _tex(text: str) -> str:
    """The words TeX-escaped, each marked path in \texttt."""
    return re.sub("\x00(.*?)\x01", lambda m: "\\texttt{" + m.group(1) + "}", texts.tex(text))


def describe(m: dict[str, Any]) -> str:
    """'ran ...' for one environment's markers (from by_environment)."""
    hyp = m.get("hypervisor_flag", [None])
    vendor = [v for v in m.get("dmi_vendor", []) if v]
    product = [v for v in m.get("dmi_product", []) if v]
    files = [name for key, name in (("dockerenv", "/.dockerenv"),
                                    ("containerenv", "/run/.containerenv"))
             if True in m.get(key, [])]
    mixed_files = any(len(set(m.get(k, []))) > 1 for k in ("dockerenv", "containerenv"))
    cgroups = list(dict.fromkeys(_short(p) for p in m.get("cgroup", [])))
    cg = f"cgroup {', '.join(_CODE.format(c) for c in cgroups)}" if cgroups else ""
    if hyp == [True]:
        dmi = "; ".join(x for x in (f"DMI vendor {', '.join(vendor)}" if vendor else "",
                                    f"product {', '.join(product)}" if product else "") if x)
        vm = f"in a virtual machine (CPU hypervisor flag set{'; ' + dmi if dmi else ''})"
    elif True in hyp:
        vm = "in a virtual machine in some runs only (CPU hypervisor flag set in some)"
    else:  # no flag where it was recorded; unknown where nothing was
        vm = "" if False in hyp else "unknown"
    if files:
        where = (f"inside a container ({' and '.join(files)} present"
                 f"{' in some runs' if mixed_files else ''}{'; ' + cg if cg else ''})")
        if vm == "unknown":
            return f"{where}; whether in a virtual machine was not recorded"
        return f"{where} {vm}" if vm else f"{where}, with no CPU hypervisor flag"
    if vm == "unknown":
        return (f"with no /.dockerenv{' (' + cg + ')' if cg else ''}; the other "
                "virtualisation markers were not recorded")
    if vm:
        return f"{vm}{', ' + cg if cg else ''}, with no container marker file"
    return ("on bare metal as far as the markers show (no CPU hypervisor flag, no container "
            f"marker file{'; ' + cg if cg else ''})")


def sentence(markers: dict[str, dict[str, Any]], order: list[str] | None = None) -> str:
    """The paper's sentence (TeX-escaped): environments with the same markers together."""
    if not markers:
        return ""
    groups: dict[str, list[str]] = {}
    for env in order or sorted(markers):
        if env in markers:
            groups.setdefault(describe(markers[env]), []).append(env)
    parts = [f"{' and '.join(envs)} ran {words}" for words, envs in groups.items()]
    return _tex("As each environment's probe saw it from inside: " + "; ".join(parts) + ".")


def values(recs: list[RawRecord], reference: str, order: list[str]) -> dict[str, Any]:
    """The paper's macros: where-ran (the sentence) and whether the reference was itself
    virtualised or containerised (ref-virtualised, ref-where: its words; ref-kind: the
    abstract's few words, 'inside a container' and/or 'in a virtual machine')."""
    markers = by_environment(recs)
    ref = markers.get(reference)
    ref_words = describe(ref) if ref else ""
    nested = bool(ref) and (True in ref.get("hypervisor_flag", []) or
                            True in ref.get("dockerenv", []) or
                            True in ref.get("containerenv", []))
    in_container = bool(ref) and (True in ref.get("dockerenv", []) or
                                  True in ref.get("containerenv", []))
    in_vm = bool(ref) and True in ref.get("hypervisor_flag", [])
    kind = " ".join(w for w, on in (("inside a container", in_container),
                                    ("in a virtual machine", in_vm)) if on)
    return {"where-ran": sentence(markers, order), "ref-virtualised": nested,
            "ref-where": _tex(ref_words) or "--", "ref-kind": kind or "--"}
