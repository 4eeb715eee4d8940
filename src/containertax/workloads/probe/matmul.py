"""Square matrix product timed inside the environment under test (the Sani et al. workload).

Runs identically natively, in a chroot and in a container: standard library plus numpy.
Start-up (interpreter, imports, allocation) is timed apart from compute, which the
2025 paper folded into one number.
"""

import time

# first statement: the launcher's clock minus T_ENTER is start-up latency; T_ENTER_MONO
# opens the run's timeline (probe_common.mark)
T_ENTER, T_ENTER_MONO = time.time(), time.monotonic()

import argparse  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

from probe_common import (  # noqa: E402
    finish,
    header,
    mark,
    torch_facts,
    torch_peak_bytes,
    torch_sync,
    write_atomic,
)

mark("enter", T_ENTER_MONO)

# Test only: a known slowdown for the known-effect check (tests/test_known_effect.py).
# Each timed product is stretched by this fraction of its own time by spinning the CPU
# inside the timed region; the probe reports it, so a campaign can never carry it unseen.
SLOWDOWN = float(os.environ.get("CONTAINERTAX_TEST_SLOWDOWN", "0") or 0)


def stretch(t0: float) -> None:
    """Spin until the product started at t0 has taken (1 + SLOWDOWN) times its time."""
    if SLOWDOWN > 0:
        until = t0 + (time.perf_counter() - t0) * (1 + SLOWDOWN)
        while time.perf_counter() < until:
            pass


def numpy_facts(np) -> dict:
    facts = {"numpy": np.__version__}
    try:
        cfg = np.show_config(mode="dicts")
        facts["blas"] = cfg.get("Build Dependencies", {}).get("blas", {}).get("name")
    except TypeError:  # numpy < 1.25 has no mode argument
        info = getattr(np.__config__, "blas_opt_info", {}) or {}
        # listed once per use ('blas', 'blas'): each library once
        facts["blas"] = ",".join(dict.fromkeys(info.get("libraries", []))) or None
    return facts


def loaded_libraries(words=("blas", "lapack", "mkl", "omp")) -> list:
    """Shared libraries actually mapped: the BLAS that ran, not the one that was built for."""
    found = set()
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                path = line.split()[-1]
                if path.startswith("/") and any(w in path.lower() for w in words):
                    found.add(os.path.realpath(path))
    except OSError:
        return []
    return sorted(found)


def torch_matmul(torch, args) -> dict:
    """GPU products timed one by one, synchronising before and after each."""
    dev = args.device
    t_alloc0 = time.perf_counter()
    gen = torch.Generator(device=dev).manual_seed(args.seed)
    dtype = getattr(torch, args.dtype)
    a = torch.randn(args.size, args.size, device=dev, dtype=dtype, generator=gen)
    b = torch.randn(args.size, args.size, device=dev, dtype=dtype, generator=gen)
    sync = torch_sync(torch, dev)
    sync()
    alloc_s = time.perf_counter() - t_alloc0
    mark("model")  # the operands on the device
    for _ in range(args.warmup):
        a @ b
    sync()
    if args.warmup:
        mark("warm")
    times = []
    c = None
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        c = a @ b
        sync()
        stretch(t0)
        times.append(time.perf_counter() - t0)
    mark("window_end")
    return {
        "size": args.size, "dtype": args.dtype, "warmup": args.warmup, "repeats": args.repeats,
        "alloc_s": alloc_s, "iteration_s": times,
        "checksum": float(c.float().abs().sum()) if c is not None else None,
        **torch_peak_bytes(torch, dev),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--dtype", default="float64")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default="numpy", choices=["numpy", "torch"])
    p.add_argument("--device", default="cuda", help="torch device (torch backend)")
    p.add_argument("--check", action="store_true", help="import and report versions only")
    args = p.parse_args(argv)

    t_import0 = time.perf_counter()
    if args.backend == "torch":
        import torch

        import_s = time.perf_counter() - t_import0
        mark("imports")
        # asks the device its name: creates the CUDA context (the device phase; before
        # this version inside import_s, as in results/h100-matmul and h100-sani-cold)
        software = torch_facts(torch, args.device)
    else:
        import numpy as np

        software = {**numpy_facts(np), "libraries": loaded_libraries()}
        import_s = time.perf_counter() - t_import0
        mark("imports")
    if SLOWDOWN:
        software["test_slowdown"] = str(SLOWDOWN)  # in the record's software facts
    result = header("matmul", T_ENTER, import_s, software)
    if args.backend == "torch" and args.device.startswith("cuda"):
        mark("device")  # torch_facts asked the device its name: the CUDA context is up
    if args.check:
        # the parameters as the run uses them, on 2x2 matrices: a bad dtype fails here, in
        # preflight, not in every run
        if args.backend == "torch":
            ones = torch.ones(2, 2, device=args.device, dtype=getattr(torch, args.dtype))
            (ones @ ones).sum().item()  # on cuda, the check must reach the GPU
        else:
            ones = np.ones((2, 2)).astype(args.dtype)
            (ones @ ones).sum()
        write_atomic(args.out, result)
        return 0
    if args.backend == "torch":
        result.update(torch_matmul(torch, args))
        return finish(args.out, result)

    t_alloc0 = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    a = rng.standard_normal((args.size, args.size)).astype(args.dtype)
    b = rng.standard_normal((args.size, args.size)).astype(args.dtype)
    alloc_s = time.perf_counter() - t_alloc0
    mark("model")  # the operands

    for _ in range(args.warmup):
        np.matmul(a, b)
    if args.warmup:
        mark("warm")
    times = []
    c = None
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        c = np.matmul(a, b)
        stretch(t0)
        times.append(time.perf_counter() - t0)
    mark("window_end")
    checksum = float(np.abs(c).sum()) if c is not None else None
    result.update(
        {
            "size": args.size,
            "dtype": args.dtype,
            "warmup": args.warmup,
            "repeats": args.repeats,
            "alloc_s": alloc_s,
            "iteration_s": times,
            "checksum": checksum,
        }
    )
    return finish(args.out, result)


if __name__ == "__main__":
    sys.exit(main())
