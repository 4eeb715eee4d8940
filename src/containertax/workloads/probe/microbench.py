"""GPU microbenchmarks timed with CUDA events inside the environment under test.

Pinned host-to-device and device-to-host copy bandwidth, and the four DeepBench forward
convolutions measured bare metal and in a container by the GPU passthrough notes (GTX
1080 Ti: 382, 46, 42 and 70 us; pinned copies 6.17 / 6.67 GB/s). A container can only
change what happens around a kernel (launch path, pinned memory, IPC), so these isolate
exactly that.
"""

import time

# first statement: the launcher's clock minus T_ENTER is start-up latency; T_ENTER_MONO
# opens the run's timeline (probe_common.mark)
T_ENTER, T_ENTER_MONO = time.time(), time.monotonic()

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402

from probe_common import (  # noqa: E402
    finish,
    header,
    mark,
    torch_facts,
    torch_peak_bytes,
    write_atomic,
)

mark("enter", T_ENTER_MONO)

# DeepBench conv_problems order: W, H, C, N, K, filter width S, filter height R,
# pad_w, pad_h, stride_w, stride_h (baidu-research/DeepBench, kernels/conv_problems.h).
CONVOLUTIONS = {
    "conv_341x79x32_n4_k32_5x10_s2": (341, 79, 32, 4, 32, 10, 5, 0, 0, 2, 2),
    "conv_224x224x3_n1_k64_7x7_s2": (224, 224, 3, 1, 64, 7, 7, 3, 3, 2, 2),
    "conv_56x56x256_n1_k128_1x1_s2": (56, 56, 256, 1, 128, 1, 1, 0, 0, 2, 2),
    "conv_7x7x512_n2_k2048_1x1_s1": (7, 7, 512, 2, 2048, 1, 1, 0, 0, 1, 1),
}


def event_times(torch, fn, warmup: int, repeats: int) -> list[float]:
    """Seconds per call, each call between its own pair of CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return times


def copies(torch, nbytes: int, warmup: int, repeats: int) -> dict:
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    host.fill_(1)
    h2d = event_times(torch, lambda: dev.copy_(host, non_blocking=True), warmup, repeats)
    d2h = event_times(torch, lambda: host.copy_(dev, non_blocking=True), warmup, repeats)
    return {"h2d": h2d, "d2h": d2h}


def convolutions(torch, dtype, warmup: int, repeats: int) -> dict:
    torch.backends.cudnn.benchmark = False  # the same algorithm choice in every environment
    out = {}
    gen = torch.Generator(device="cuda").manual_seed(0)
    for name, (w, h, c, n, k, s, r, pad_w, pad_h, stride_w, stride_h) in CONVOLUTIONS.items():
        x = torch.randn(n, c, h, w, device="cuda", dtype=dtype, generator=gen)
        weight = torch.randn(k, c, r, s, device="cuda", dtype=dtype, generator=gen)

        def conv(x=x, weight=weight, pad=(pad_h, pad_w), stride=(stride_h, stride_w)):
            return torch.nn.functional.conv2d(x, weight, padding=pad, stride=stride)

        out[name] = event_times(torch, conv, warmup, repeats)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--copy-mib", type=int, default=256, help="bytes per copy, MiB")
    p.add_argument("--dtype", default="float32", help="convolution data type")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--repeats", type=int, default=100)
    p.add_argument("--check", action="store_true", help="import, reach the GPU, report")
    args = p.parse_args(argv)

    t_import0 = time.perf_counter()
    import torch

    import_s = time.perf_counter() - t_import0
    mark("imports")
    cudnn = torch.backends.cudnn.version() if torch.cuda.is_available() else None
    result = header("microbench", T_ENTER, import_s, {**torch_facts(torch, "cuda"),
                                                      "cudnn": cudnn})
    if not torch.cuda.is_available():
        print("microbench needs a CUDA GPU; torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    torch.zeros(1, device="cuda")
    if args.check:
        write_atomic(args.out, result)
        return 0
    nbytes = args.copy_mib * 2**20
    copy_s = copies(torch, nbytes, args.warmup, args.repeats)
    conv_s = convolutions(torch, getattr(torch, args.dtype), args.warmup, args.repeats)
    result.update({
        "copy_bytes": nbytes,
        "copy_s": copy_s,
        "conv_s": conv_s,
        "conv_dtype": args.dtype,
        "warmup": args.warmup,
        "repeats": args.repeats,
        "summary_median_s": {k: statistics.median(v) for k, v in {**copy_s, **conv_s}.items()},
        **torch_peak_bytes(torch, "cuda"),
    })
    return finish(args.out, result)


if __name__ == "__main__":
    sys.exit(main())
