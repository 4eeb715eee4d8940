"""trtllm-bench inside the environment under test (the TensorRT-LLM image's own tools).

Prepares the model's dataset once (the first environment to need it writes it into the
shared, mounted dataset folder; every later run of every environment reads that file), then
runs the benchmark with its report written to the work folder and its log captured: the
host parses both (containertax.trtllm).
"""

import time

T_ENTER = time.time()  # first statement: the launcher's clock minus this is start-up latency

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

from probe_common import header, max_rss_kib, write_atomic  # noqa: E402


def version() -> str | None:
    try:
        from importlib.metadata import version as v

        return v("tensorrt_llm")
    except Exception:  # noqa: BLE001 - absent or unreadable: reported as None
        return None


def read(path: str) -> str:
    with open(path) as fh:
        return fh.read()


def run(argv: list, log_path: str) -> tuple[int, float]:
    t0 = time.perf_counter()
    with open(log_path, "a") as log:
        rc = subprocess.call(argv, stdout=log, stderr=subprocess.STDOUT)
    return rc, time.perf_counter() - t0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--dataset", required=True)
    p.add_argument("--prepare", required=True, help="JSON argv that writes the dataset")
    p.add_argument("--bench", required=True, help="JSON argv of the benchmark")
    p.add_argument("--check", action="store_true")
    args = p.parse_args(argv)
    work = os.path.dirname(args.out)
    log_path = os.path.join(work, "trtllm-bench.log")
    result = header("trtllm", T_ENTER, 0.0, {"tensorrt_llm": version()})
    if args.check:
        rc, _ = run(["trtllm-bench", "--help"], log_path)
        if rc != 0:
            print(read(log_path)[-3000:], file=sys.stderr)
            return rc
        write_atomic(args.out, result)
        return 0
    if not os.path.exists(args.dataset):
        rc, result["prepare_s"] = run(json.loads(args.prepare), log_path)
        if rc != 0 or not os.path.exists(args.dataset):
            print(read(log_path)[-3000:], file=sys.stderr)
            return rc or 3
        result["prepared_dataset_here"] = True
    rc, result["bench_s"] = run(json.loads(args.bench), log_path)
    log = read(log_path)
    result["log_tail"] = log[-20000:]
    report = os.path.join(work, "report.json")
    result["report"] = json.loads(read(report)) if os.path.exists(report) else None
    result["max_rss_kib"] = max_rss_kib()
    result["t_exit_unix"] = time.time()
    if rc != 0:
        print(log[-3000:], file=sys.stderr)
        return rc
    write_atomic(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
