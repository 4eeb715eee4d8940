"""GPU passthrough without the toolkit: finding the driver's libraries, and binding them
into a chroot. No NVIDIA driver here: the libraries are stand-in files (TEST DOUBLES);
the real path runs on the GPU machine (scripts/gpu-check.sh)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from containertax.campaign import config
from containertax.execution import environments
from containertax.runtimes import chroot as chroot_kind
from containertax.runtimes import passthrough
from tests.conftest import DEMO_IMAGE, needs_docker

LDCONFIG = """\
1234 libs found in cache `/etc/ld.so.cache'
\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1
\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1
\tlibcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1
\tlibcuda.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so
\tlibcudart.so.12 (libc6,x86-64) => /usr/local/cuda/lib64/libcudart.so.12
\tlibnvidia-ptxjitcompiler.so.1 (libc6,AArch64) => /usr/lib/aarch64/libnvidia-ptxjitcompiler.so.1
\tlibc.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /lib/x86_64-linux-gnu/libc.so.6
"""


def test_ldconfig_parse_keeps_driver_libraries_of_this_architecture():
    found = passthrough.parse_ldconfig(LDCONFIG, machine="x86_64")
    assert found == {
        "libnvidia-ml.so.1": "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
        "libcuda.so.1": "/usr/lib/x86_64-linux-gnu/libcuda.so.1",  # not the i386 one
        "libcuda.so": "/usr/lib/x86_64-linux-gnu/libcuda.so",
    }  # the CUDA runtime (libcudart) belongs to the image, not the driver
    arm = passthrough.parse_ldconfig(LDCONFIG, machine="aarch64")
    assert list(arm) == ["libnvidia-ptxjitcompiler.so.1"]


def test_driver_libraries_fall_back_to_known_folders(tmp_path, monkeypatch):
    lib = tmp_path / "lib64"
    lib.mkdir()
    real = lib / "libcuda.so.580.159.04"
    real.write_text("stand-in")
    (lib / "libcuda.so.1").symlink_to(real.name)
    monkeypatch.setattr(passthrough, "FALLBACK_DIRS", (str(lib),))
    monkeypatch.setattr(passthrough, "parse_ldconfig", lambda text: {})
    found = passthrough.driver_libraries()
    assert found["libcuda.so.1"] == str(real)  # bound as the soname, from the real file


def test_no_driver_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(passthrough, "FALLBACK_DIRS", (str(tmp_path),))
    monkeypatch.setattr(passthrough, "parse_ldconfig", lambda text: {})
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    with pytest.raises(passthrough.PassthroughError, match="libcuda.so"):
        passthrough.driver_libraries()


def _stand_in_driver(tmp_path, monkeypatch) -> dict[str, str]:
    """TEST DOUBLE: two files standing in for the host driver's libraries."""
    libs = {}
    for soname in ("libcuda.so.1", "libnvidia-ml.so.1"):
        real = tmp_path / f"{soname}.580.0"
        real.write_text(f"driver {soname}\n")
        libs[soname] = str(real)
    monkeypatch.setattr(passthrough, "driver_libraries", lambda: dict(libs))
    return libs


SHOW = ("import os; d = '/usr/local/containertax-driver'; "
        "print(os.environ['LD_LIBRARY_PATH'].split(':')[0]); "
        "print(*sorted(os.listdir(d))); print(open(d + '/libcuda.so.1').read().strip())")


def _run_show(launcher, tmp_path):
    """Run SHOW in the environment: the driver folder is first on LD_LIBRARY_PATH and holds
    the stand-ins under their sonames."""
    (tmp_path / "probe").mkdir()
    (tmp_path / "work").mkdir()
    out = launcher.run(environments.Launch(
        argv=["python3", "-c", SHOW], probe_dir=tmp_path / "probe", work_dir=tmp_path / "work",
        timeout_s=60, label="t"))
    assert out.returncode == 0, out.output
    assert out.output.split("\n")[:3] == ["/usr/local/containertax-driver",
                                          "libcuda.so.1 libnvidia-ml.so.1",
                                          "driver libcuda.so.1"]
    return out


@needs_docker
@pytest.mark.docker
@pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root")
def test_chroot_gpu_binds_driver_libraries_and_leaves_nothing(config_dict, tmp_path,
                                                              monkeypatch):
    _stand_in_driver(tmp_path, monkeypatch)
    config_dict["results_dir"] = str(tmp_path / "results")
    config_dict["results_dir_absolute"] = True
    config_dict["environments"] = {"chroot": {"kind": "chroot", "image": DEMO_IMAGE,
                                              "gpu": True}}
    config_dict["reference_environment"] = "chroot"
    campaign = config.load_campaign(config_dict, "test.yaml")
    launcher = environments.launcher(campaign, "chroot")
    chroot_kind.export_rootfs(DEMO_IMAGE, launcher.rootfs())
    out = _run_show(launcher, tmp_path)
    assert out.resolved["driver_libraries"]["libcuda.so.1"].endswith("libcuda.so.1.580.0")
    assert os.listdir(launcher.rootfs() / "usr/local/containertax-driver") == []  # a tmpfs
    assert str(launcher.rootfs()) not in Path("/proc/mounts").read_text()


@needs_docker
@pytest.mark.docker
def test_docker_nvidia_libraries_binds_driver_libraries(config_dict, tmp_path, monkeypatch):
    _stand_in_driver(tmp_path, monkeypatch)
    config_dict["results_dir"] = str(tmp_path / "results")
    config_dict["results_dir_absolute"] = True
    config_dict["environments"]["docker"]["options"]["nvidia_libraries"] = True
    campaign = config.load_campaign(config_dict, "test.yaml")
    _run_show(environments.launcher(campaign, "docker"), tmp_path)


def test_gpu_key_only_for_chroot(config_dict):
    config_dict["environments"]["native"]["gpu"] = True
    with pytest.raises(config.ConfigError, match="environments.native.gpu' is only for kind"):
        config.load_campaign(config_dict, "x.yaml")
