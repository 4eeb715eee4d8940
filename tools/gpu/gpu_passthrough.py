"""The GPU in a chroot and in a container without the NVIDIA Container Toolkit (GPU machine).

Builds tools/gpu/cuda/cudaprobe.cu (CUDA runtime linked statically, so the program
carries no driver), makes an image holding only that program and its C/C++ libraries
(`docker import`), exports its root filesystem as the workflow's rootfs rule does, and runs
the program through the workflow's own launchers:

  chroot  with gpu: true / false
  docker  with options nvidia_devices + nvidia_libraries / neither

Passing means: it finds and uses the GPU exactly where the driver was passed in, and fails
where it was not (so the image really has no driver of its own).

    python3 tools/gpu/gpu_passthrough.py --out passthrough.json
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

from containertax.campaign import config  # noqa: E402
from containertax.execution import environments  # noqa: E402
from containertax.runtimes import chroot as chroot_kind  # noqa: E402
from containertax.runtimes import docker as docker_kind  # noqa: E402
from containertax.runtimes import passthrough  # noqa: E402

IMAGE = "containertax-cudaprobe:1"


def build_image(work: Path) -> str:
    binary = work / "cudaprobe"
    subprocess.run(["nvcc", "-O2", "-o", str(binary), str(REPO / "tools/gpu/cuda/cudaprobe.cu")],
                   check=True)
    # the program's C/C++ libraries, and those the driver library itself needs (libdl,
    # libpthread, librt...): what any CUDA base image has, but not the driver
    driver = passthrough.driver_libraries()["libcuda.so.1"]
    libs = sorted({line.split("=>")[-1].split("(")[0].strip()
                   for target in (str(binary), driver)
                   for line in subprocess.run(["ldd", target], capture_output=True, text=True,
                                              check=True).stdout.splitlines()
                   if not passthrough.is_driver_library(Path(line.split()[0]).name)})
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in ("bin", "tmp", "proc", "sys", "dev", "etc"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        tar.add(binary, "bin/cudaprobe")
        for lib in libs:
            if lib.startswith("/"):
                tar.add(str(Path(lib).resolve()), lib.lstrip("/"))
    return docker_kind.import_image(buf.getvalue(), IMAGE)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="passthrough-"))
    result: dict = {"image_id": build_image(work)}
    raw = {
        "campaign": "passthrough", "results_dir": str(work / "results"),
        "environments": {
            "chroot_gpu": {"kind": "chroot", "image": IMAGE, "gpu": True},
            "chroot_plain": {"kind": "chroot", "image": IMAGE},
            "docker_gpu": {"kind": "docker", "image": IMAGE,
                           "options": {"nvidia_devices": True, "nvidia_libraries": True,
                                       "network": "none"}},
            "docker_plain": {"kind": "docker", "image": IMAGE, "options": {"network": "none"}},
        },
        "workload": {"kind": "matmul"}, "models": [{"id": "m", "size": 1}],
    }
    campaign = config.load_campaign(raw, "gpu_passthrough.py")
    for env in campaign.environments:
        launcher = environments.launcher(campaign, env.id)
        if isinstance(launcher, chroot_kind.ChrootLauncher) and not launcher.rootfs().exists():
            chroot_kind.export_rootfs(IMAGE, launcher.rootfs())
        (work / "probe").mkdir(exist_ok=True)
        (work / "w").mkdir(exist_ok=True)
        try:
            out = launcher.run(environments.Launch(
                argv=["/bin/cudaprobe"], probe_dir=work / "probe", work_dir=work / "w",
                timeout_s=120, label=env.id))
            result[env.id] = {"returncode": out.returncode, "output": out.output.strip(),
                              "wall_s": round(out.wall_s, 3),
                              "driver_libraries": out.resolved.get("driver_libraries"),
                              "volumes": out.resolved.get("volumes")}
        except environments.EnvironmentFailure as exc:
            result[env.id] = {"error": str(exc)}
    expect = {"chroot_gpu": 0, "docker_gpu": 0}
    result["passed"] = all(
        (result[e].get("returncode") == 0) == (e in expect) for e in raw["environments"])
    shutil.rmtree(work, ignore_errors=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1)[:6000])
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
