"""Virtualisation and container markers: read by the probe from inside each environment
(planted files under a fake root), and the paper's words for them."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

from containertax.statistics import hostmarkers
from tests.conftest import REPO

PROBE = REPO / "src" / "containertax" / "workloads" / "probe" / "probe_common.py"


def probe_common():
    spec = importlib.util.spec_from_file_location("probe_common", PROBE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


CPUINFO_VM = ("processor\t: 0\nflags\t\t: fpu vme sse2 hypervisor avx2\n\n"
              "processor\t: 1\nflags\t\t: fpu vme sse2 hypervisor avx2\n")
CPUINFO_METAL = "processor\t: 0\nflags\t\t: fpu vme sse2 avx2\n"
CGROUP = "4:memory:/process_api/8b3c9336d6a0960e954e168675e9c130\n0::/\n"


def test_markers_of_a_container_in_a_vm(tmp_path):
    root = plant(tmp_path, {"/proc/cpuinfo": CPUINFO_VM, "/proc/self/cgroup": CGROUP,
                            "/sys/class/dmi/id/sys_vendor": "QEMU\n",
                            "/sys/class/dmi/id/product_name": "Standard PC (Q35)\n",
                            "/.dockerenv": ""})
    m = probe_common().host_markers(str(root))
    assert m == {"hypervisor_flag": True,
                 "dmi": {"sys_vendor": "QEMU", "product_name": "Standard PC (Q35)"},
                 "dockerenv": True, "containerenv": False,
                 "cgroup": ["4:memory:/process_api/8b3c9336d6a0960e954e168675e9c130", "0::/"]}


def test_markers_of_bare_metal_and_of_unreadable_files(tmp_path):
    pc = probe_common()
    metal = pc.host_markers(str(plant(tmp_path / "metal", {
        "/proc/cpuinfo": CPUINFO_METAL, "/proc/self/cgroup": "0::/user.slice\n",
        "/run/.containerenv": ""})))
    assert metal["hypervisor_flag"] is False and metal["dockerenv"] is False
    assert metal["containerenv"] is True  # podman's file
    # nothing readable: unknown (None), never "absent"
    empty = pc.host_markers(str(tmp_path / "nothing"))
    assert empty == {"hypervisor_flag": None, "dmi": {"sys_vendor": None,
                                                       "product_name": None},
                     "dockerenv": False, "containerenv": False, "cgroup": None}


def test_the_probe_reports_its_markers():
    facts = probe_common().environment_facts()
    assert set(facts["markers"]) == {"hypervisor_flag", "dmi", "dockerenv", "containerenv",
                                     "cgroup"}
    assert facts["markers"]["dockerenv"] == Path("/.dockerenv").exists()


def record(env: str, environment: dict) -> SimpleNamespace:
    return SimpleNamespace(cell=SimpleNamespace(environment=env),
                           inside={"environment": environment})


def test_paper_words_for_each_case():
    vm_container = {"markers": {"hypervisor_flag": True, "dmi": {"sys_vendor": "QEMU",
                                                                 "product_name": None},
                                "dockerenv": True, "containerenv": False,
                                "cgroup": CGROUP.splitlines()}}
    metal = {"markers": {"hypervisor_flag": False, "dmi": {}, "dockerenv": False,
                         "containerenv": False, "cgroup": ["0::/"]}}
    legacy = {"in_container_hint": True, "cgroup": "0::/"}
    recs = [record("native", vm_container), record("native", vm_container),
            record("docker", metal), record("old", legacy)]
    v = hostmarkers.values(recs, "native", ["native", "docker", "old"])
    assert v["ref-virtualised"] is True
    text = v["where-ran"]
    assert ("native ran inside a container (/.dockerenv present; cgroup "
            "\\texttt{/process\\_\\allowbreak{}api/...}) in a virtual machine (CPU hypervisor "
            "flag set; DMI vendor QEMU)") in text
    assert "docker ran on bare metal as far as the markers show" in text
    assert "old ran inside a container (/.dockerenv present); whether in a virtual machine " \
           "was not recorded" in text
    bare = hostmarkers.values([record("native", metal)], "native", ["native"])
    assert bare["ref-virtualised"] is False
    # runs that disagree are not summarised as all alike
    mixed = hostmarkers.by_environment([record("native", vm_container),
                                        record("native", metal)])
    assert "in some runs" in hostmarkers.describe(mixed["native"])
    assert hostmarkers.values([], "native", [])["where-ran"] == ""
