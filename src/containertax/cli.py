"""Command line: the steps the Snakefile's rules call, and `status` for people.

Known failures (containertax.core.errors.ContainertaxError) print one clear message and exit 1,
without a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import logging
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from containertax.campaign import config, paths, schedule, stopping
from containertax.core import records
from containertax.core.errors import ContainertaxError


def load(path: str) -> config.Campaign:
    """A user's YAML config, or the resolved JSON the Snakefile writes for its steps.

    The resolved JSON holds a config that the Snakefile validated when it planned the
    workflow, with the digest it had then (config.write_resolved): while the digest
    matches, a step does not validate it again (that import and check cost more than a
    gate's work); a hand-edited one is validated as any config."""
    p = Path(path)
    if p.suffix == ".json":
        data = json.loads(p.read_text())
        if data.get("digest") == config.digest(data["config"]):
            return config.campaign_of(data["config"], data["source"])
        return config.load_campaign(data["config"], data["source"])
    return config.load_file(p)


class _LogFile(logging.FileHandler):
    """A step's log file. One that cannot be written (a full disk) says so once, in one
    line on stderr (where Snakemake shows it), instead of a '--- Logging error ---' dump
    with a traceback per message; the messages still reach stderr."""

    failed = False

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        if not self.failed:
            self.failed = True
            exc = sys.exc_info()[1]
            sys.stderr.write(f"containertax: log file {self.baseFilename} not written "
                             f"({exc}); its messages go to stderr only\n")


def _setup_logging(log_path: str | None) -> None:
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path:
        try:
            Path(log_path).parent.mkdir(parents=True, exist_ok=True)
            handlers.append(_LogFile(log_path, mode="a"))
        except OSError as exc:
            sys.stderr.write(f"containertax: log file {log_path} not opened ({exc}); "
                             "messages go to stderr only\n")
    logging.basicConfig(level=logging.INFO, handlers=handlers, force=True,
                        format="%(asctime)s %(levelname)s %(message)s")


# --- the commands' handlers: each imports only the modules it uses (a gate or cooldown
# starts in about half the time of one importing every step's machinery; the analysis
# stack stays off a machine that only runs cells), and returns the exit status.

def _gate(a: argparse.Namespace) -> int:
    from containertax.execution import gating

    with _page_on_failure(a.config):
        gating.gate(load(a.config), a.model, a.environment, a.rep, Path(a.out))
    return 0


def _run(a: argparse.Namespace) -> int:
    from containertax.execution import cells

    with _page_on_failure(a.config):
        cells.run(load(a.config), a.model, a.environment, a.rep, Path(a.gate), Path(a.out),
                  Path(a.log) if a.log else None)
    return 0


def _cooldown(a: argparse.Namespace) -> int:
    from containertax.execution import gating

    with _page_on_failure(a.config):
        gating.cool(load(a.config), a.model, a.environment, a.rep, Path(a.out))
    _refresh_status_page(a.config)  # the cell is finished
    return 0


STATUS_PAGE_ENV = "CONTAINERTAX_STATUS_PAGE"  # "0": no page after each cell
STATUS_PAGE_TIMEOUT_S = 120


@contextlib.contextmanager
def _page_on_failure(config_path: str) -> Iterator[None]:
    """A failed cell step shows on the status page at once; the failure still propagates."""
    try:
        yield
    except Exception:
        _refresh_status_page(config_path)
        raise


def _refresh_status_page(config_path: str) -> None:
    """Rewrite the status page after a cell, in a child process (`status --html`): the
    cell steps keep off the analysis stack, and run it to its end before the next cell's
    gate, so it never overlaps a measured run. Never fails the cell: an error is logged."""
    import os
    import subprocess

    if os.environ.get(STATUS_PAGE_ENV) == "0":
        return
    log = logging.getLogger("containertax")
    try:
        out = subprocess.run([sys.executable, "-m", "containertax", "status", config_path,
                              "--html"], capture_output=True, text=True,
                             timeout=STATUS_PAGE_TIMEOUT_S, check=False)
        if out.returncode != 0:
            tail = "\n".join((out.stdout + out.stderr).strip().splitlines()[-10:])
            log.error("status page not written (exit %s; the cell is unaffected):\n%s",
                      out.returncode, tail)
    except Exception as exc:  # noqa: BLE001 - a page is never worth a failed cell
        log.error("status page not written (the cell is unaffected): %s: %s",
                  type(exc).__name__, exc)


def _dataset(a: argparse.Namespace) -> int:
    from containertax.workloads import trtllm

    campaign = load(a.config)
    params = {**trtllm.WORKLOAD.defaults, **campaign.workload_params(a.model)}
    meta = trtllm.write_dataset(params, Path(a.out))
    logging.getLogger("containertax").info(
        "dataset %s: %d requests, %d+%d tokens, vocabulary %d, sha256 %s", a.out,
        meta["num_requests"], meta["input_len"], meta["output_len"], meta["vocab_size"],
        meta["sha256"])
    return 0


def _preflight(a: argparse.Namespace) -> int:
    from containertax.execution import preflight

    preflight.write_environment(load(a.config), a.environment, Path(a.out))
    return 0


def _provide(a: argparse.Namespace) -> int:
    from containertax.execution import environments

    environments.provide_image(load(a.config), a.environment, Path(a.out))
    return 0


def _system(a: argparse.Namespace) -> int:
    from containertax.execution import preflight

    records.write_json(Path(a.out), preflight.system(load(a.config)))
    return 0


def _schedule(a: argparse.Namespace) -> int:
    campaign = load(a.config)
    for warning in schedule.design_warnings(campaign):  # in the schedule step's log
        logging.getLogger("containertax").warning("%s", warning)
    schedule.write_csv(schedule.known_cells(campaign), campaign.paths.positions)
    schedule.write_csv(schedule.plan(campaign), Path(a.out))
    return 0


def _aggregate(a: argparse.Namespace) -> int:
    from containertax.statistics import aggregate

    campaign = load(a.config)
    skip = frozenset(u.path for u in schedule.unscheduled(campaign))
    aggregate.write(campaign.root, Path(a.out),
                    Path(a.requests_out) if a.requests_out else None, skip)
    return 0


def _import(a: argparse.Namespace) -> int:
    from containertax.statistics import importer, steps

    campaign = load(a.config)
    frame = steps.read_import(campaign)
    text = frame.to_csv(index=False)
    records.atomic_write_text(Path(a.out), text)
    records.hash_written(campaign.root, Path(a.out), "import", text)  # edited: refused
    if a.report_out:  # the copies dropped and the runs renumbered, for the data section
        records.write_json(Path(a.report_out), frame.attrs.get(importer.COUNTS, {}))
    if a.requests_out:
        records.atomic_write_text(Path(a.requests_out), "")
    return 0


def _quantise(a: argparse.Namespace) -> int:
    from containertax.execution import quantise

    quantise.quantise(a.model, a.out, a.image, a.log, a.qformat)
    return 0


def _rootfs(a: argparse.Namespace) -> int:
    from containertax.runtimes import chroot

    chroot.export_rootfs(a.image, Path(a.out))
    return 0


def _host_image(a: argparse.Namespace) -> int:
    from containertax.runtimes import docker

    print(docker.host_software_image(a.tag))
    return 0


def _targets(a: argparse.Namespace) -> int:
    print("\n".join(schedule.block_targets(load(a.config), _rep_range(a.reps))))
    return 0


def _best_options(a: argparse.Namespace) -> int:
    from containertax.campaign import optimisation

    campaign = load(a.config)
    if campaign.raw.get("factorial"):
        return _best_options_factorial(campaign, a)
    comparisons = campaign.paths.comparisons
    if not comparisons.exists():
        raise optimisation.OptimisationError(
            f"{comparisons} does not exist: run the analysis of {a.config} first "
            f"(snakemake --cores 1 paper --configfile {a.config}).")
    import pandas as pd

    verdicts = optimisation.judge(campaign, pd.read_csv(comparisons), a.metric)
    print(optimisation.render(campaign, verdicts, a.metric))
    if a.write:
        chosen = optimisation.write_block(Path(a.write), campaign, verdicts, a.metric,
                                          comparisons, records.utc_now())
        print(f"\nwrote docker_optimised options {chosen} into {a.write}")
    if a.derive:
        file, written = optimisation.write_derived(campaign, a.derive, a.metric)
        print(f"\n{'wrote' if written else 'unchanged:'} {file}")
    return 0


def _best_options_factorial(campaign: config.Campaign, a: argparse.Namespace) -> int:
    """best-options of a factorial 2B: the levels its estimated effects choose."""
    from containertax.campaign import optimisation

    effects = campaign.paths.effects
    if not effects.exists():
        raise optimisation.OptimisationError(
            f"{effects} does not exist: run the analysis of {a.config} first "
            f"(snakemake --cores 1 paper --configfile {a.config}).")
    if a.write:
        raise optimisation.OptimisationError(
            f"{a.config}: --write fills a block from one-at-a-time verdicts; a factorial "
            "campaign's options are derived from its effects: use --derive ENV.")
    import pandas as pd

    choice = optimisation.factorial_choice(campaign, pd.read_csv(effects, dtype={"model": str}),
                                           a.metric)
    print(f"{campaign.name}: options from the estimated effects on {a.metric} "
          f"({effects}; a factor qualifies when better at one level on every model and "
          f"Holm-significant on one at alpha = {campaign.analysis['alpha']}):\n")
    print("\n".join(f"  {line}" for line in choice.evidence))
    print(f"\nchosen: {choice.options or 'no option (= the baseline)'}; predicted gain "
          + ", ".join(f"{m} {g:+.1%}" for m, g in choice.predicted.items()))
    if a.derive:
        file, written = optimisation.write_derived(campaign, a.derive, a.metric)
        print(f"\n{'wrote' if written else 'unchanged:'} {file}")
    return 0


def _doctor(a: argparse.Namespace) -> int:
    from containertax.execution import doctor

    table, code = doctor.doctor(Path(a.config))
    print(table)
    return code


def _rehearse(a: argparse.Namespace) -> int:
    from containertax.campaign import configfile, rehearsal
    from containertax.execution import doctor

    if not a.skip_doctor:
        table, code = doctor.doctor(Path(a.config))
        print(table)
        if code:
            print("rehearse: fix what the readiness check names first (or --skip-doctor)")
            return code
    study = configfile.study_campaigns(Path(a.config))
    if study:  # a study: rehearse its widest campaign, time every campaign from it
        campaigns = [config.load_file(p) for p in study]
        widest = max(range(len(study)), key=lambda i: (len(campaigns[i].models),
                                                       len(campaigns[i].environments)))
        result = rehearsal.run(study[widest], a.requests, snakemake_args=a.snakemake)
        print(rehearsal.render(result))
        print("\n" + rehearsal.render_study(rehearsal.study_estimate(result, campaigns)))
        return 0 if result["go"] else 2
    result = rehearsal.run(Path(a.config), a.requests, snakemake_args=a.snakemake)
    print(rehearsal.render(result))
    campaign = config.load_file(Path(a.config))
    if campaign.alternative() is not None:  # a factorial: its declared alternative beside it
        print("\n" + rehearsal.render_study(rehearsal.study_estimate(result, [campaign])))
    return 0 if result["go"] else 2


def _check_cmd(a: argparse.Namespace) -> int:
    return _check(a.config, a.directory)


def _raw_hash_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("campaign", help="a campaign's results folder, the one holding raw/ "
                   "(e.g. results/h100-matmul)")
    p.add_argument("--expect", help="the hash a paper prints (its first 16 or more hex "
                   "digits): exit 1 unless the records give it")


def _raw_hash(a: argparse.Namespace) -> int:
    """The study paper's hash of a campaign's raw records, for a reader to check that the
    paper was built from exactly these (publishing/study.py: raw_hash)."""
    from containertax.publishing.study import raw_hash

    raw = Path(a.campaign) / "raw"
    if not raw.is_dir():
        raise ContainertaxError(f"{a.campaign}: no raw/ folder here; give the campaign's "
                                "results folder, the one holding raw/ (e.g. "
                                "results/h100-matmul)")
    digest, files = raw_hash(Path(a.campaign))
    print(f"{digest}  {files} files  {raw}")
    if a.expect is None:
        return 0
    want = a.expect.strip().lower()
    if len(want) < 16 or any(c not in "0123456789abcdef" for c in want):
        raise ContainertaxError(f"--expect {a.expect!r}: give at least the first 16 hex "
                                "digits of the hash the paper prints")
    if not digest.startswith(want):
        print(f"raw-hash: {raw} does not give the expected hash: {want} expected, "
              f"{digest[:len(want)]} found", file=sys.stderr)
        return 1
    return 0


def _snakefile(a: argparse.Namespace) -> int:
    from containertax.core import packaged

    print(packaged.snakefile())
    return 0


def _status(a: argparse.Namespace) -> int:
    if a.html:
        from containertax.publishing import statuspage

        print(statuspage.write(load(a.config)))
        return 0
    from containertax.campaign import status

    summary = status.summarize(load(a.config), a.lanes)
    print(json.dumps(summary, indent=1) if a.json else status.render(summary))
    return 0


def _interim(a: argparse.Namespace) -> int:
    from containertax.statistics import sequential

    sequential.write_interim(load(a.config), int(a.look), Path(a.out), Path(a.log))
    return 0


def _interim_args(p: argparse.ArgumentParser) -> None:
    for arg in ("--config", "--look", "--out", "--log"):
        p.add_argument(arg, required=True)


def _analysis_step(a: argparse.Namespace) -> int:
    _analysis(a.command, load(a.config), a)
    return 0


# --- the commands' arguments

def _cell_args(p: argparse.ArgumentParser) -> None:
    for arg in ("--config", "--model", "--environment", "--rep"):
        p.add_argument(arg, required=True)
    p.add_argument("--log")


def _gate_args(p: argparse.ArgumentParser) -> None:
    _cell_args(p)
    p.add_argument("--out", required=True)


def _run_args(p: argparse.ArgumentParser) -> None:
    _cell_args(p)
    p.add_argument("--gate", required=True)
    p.add_argument("--out", required=True, help="the step's outcome (the record is beside)")


def _dataset_args(p: argparse.ArgumentParser) -> None:
    for arg in ("--config", "--model", "--out"):
        p.add_argument(arg, required=True)
    p.add_argument("--log")


def _preflight_args(p: argparse.ArgumentParser) -> None:
    for arg in ("--config", "--environment", "--out"):
        p.add_argument(arg, required=True)
    p.add_argument("--log")


def _table_step_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--requests-out")
    p.add_argument("--report-out")  # import: its counts (paths.IMPORT_REPORT)
    p.add_argument("--log")


# analysis steps: each reads named inputs and writes named outputs
ANALYSIS = {
    "quality": (["runs"], ["out_dir", "out_order"]),
    "stats": (["kept", "requests", "models"], ["outs", "out_descs"]),
    "correct": (["models", "descs"], ["out", "out_desc"]),
    "findings": (["kept", "comparisons", "quality"], ["out", "out_facts"]),
    "figures": (["kept", "findings", "requests"], ["out_dir", "out_tex"]),
    "tables": (["kept", "findings", "desc", "order", "quality"], ["out_dir"]),
    "numbers": (["kept", "findings", "quality", "order"], ["out", "out_quality"]),
    "paper": (["source", "build"], ["out"]),
    "effects": (["kept"], ["out", "out_tex"]),
}


def _analysis_args(name: str) -> Callable[[argparse.ArgumentParser], None]:
    def add(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", required=True)
        p.add_argument("--log")
        ins, outs = ANALYSIS[name]
        for arg in ins + outs:
            many = arg in ("models", "descs", "outs", "out_descs")
            p.add_argument(f"--{arg.replace('_', '-')}", nargs="*" if many else None)
    return add


def _quantise_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="the Hugging Face name (models[].model)")
    p.add_argument("--out", required=True, help="the checkpoint folder (models[].model_path)")
    p.add_argument("--image", required=True, help="the TensorRT-LLM image that runs hf_ptq.py")
    p.add_argument("--qformat", help="hf_ptq.py's --qformat (models[].quantization: fp8, "
                   "nvfp4, ...); default the recipe's")
    p.add_argument("--log", required=True)


def _rootfs_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--image", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--log")


def _host_image_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("tag")


def _targets_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config")
    p.add_argument("--reps", required=True, help="e.g. 1-4 or 5,6")


def _best_options_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="the phase-2B config (e.g. config/phase-2b.yaml)")
    p.add_argument("--metric", default="token_throughput")
    p.add_argument("--write", metavar="CONFIG", help="replace the BEGIN/END best-options block "
                   "of docker_optimised in this file (e.g. config/config.yaml)")
    p.add_argument("--derive", metavar="ENV", help="write the combined options as ENV's "
                   "derived options (results/<2B campaign>/derived/ENV.yaml), only when their "
                   "content changes: the config of 2C/2D says derived_from: phase-2b.yaml")


def _rehearse_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="the campaign's config file (e.g. config/config.yaml)")
    p.add_argument("--requests", type=int, help="requests (repeats) per run; default per "
                   "workload: trtllm 32, transformers 2, matmul 3, microbench 10")
    p.add_argument("--skip-doctor", action="store_true", help="do not run `doctor` first")
    p.add_argument("--snakemake", nargs=argparse.REMAINDER, default=[],
                   help="further arguments for Snakemake (last on the line)")


def _doctor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="a campaign's or a study's config file (e.g. "
                   "config/study-spark.yaml)")


def _check_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="the campaign's config file (e.g. config/demo.yaml)")
    p.add_argument("--directory", "-d", help="Snakemake's working directory, against which "
                   "results_dir and analysis.import_csv are relative (as snakemake "
                   "--directory); default: the checkout holding the config (the nearest "
                   "folder above it with the Snakefile), else the current directory")


def _status_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="the campaign's config file (e.g. config/demo.yaml)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--lanes", type=int, action="append", default=[],
                   help="also estimate the campaign's wall time on this many lanes (repeatable)")
    p.add_argument("--html", action="store_true", help="(re)write the campaign's status page, "
                   "results/<campaign>/status.html (rewritten after every cell anyway)")


@dataclass(frozen=True)
class Command:
    """One subcommand: its arguments, and the handler that runs it (exit status)."""

    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace], int]


COMMANDS: dict[str, Command] = {
    "gate": Command("wait for the thermal gate of a cell", _gate_args, _gate),
    "run": Command("run one cell", _run_args, _run),
    "cooldown": Command("cool down after a cell", _gate_args, _cooldown),
    "dataset": Command("write a trtllm model's synthetic token dataset (before any run)",
                       _dataset_args, _dataset),
    "quantise": Command("make a quantised checkpoint with Model Optimizer's hf_ptq.py in the "
                        "image, once, before any run reads it; check it; write its marker",
                        _quantise_args, _quantise),
    "preflight": Command("check one environment", _preflight_args, _preflight),
    "system": Command("record system facts", _table_step_args, _system),
    "schedule": Command("write schedule.csv", _table_step_args, _schedule),
    "aggregate": Command("write runs.csv", _table_step_args, _aggregate),
    "import": Command("validate an imported CSV", _table_step_args, _import),
    **{name: Command(f"analysis step: {name}", _analysis_args(name), _analysis_step)
       for name in ANALYSIS},
    "rootfs": Command("export an image's root filesystem for chroot", _rootfs_args, _rootfs),
    "provide": Command("hand an environment's image to its runtime (Podman, Charliecloud)",
                       _preflight_args, _provide),
    "host-image": Command("import an image of empty folders, for running the host's software "
                          "in a container (GPU machines without a registry)",
                          _host_image_args, _host_image),
    "targets": Command("the files that complete some repetitions (blocks): one visit to a "
                       "machine runs whole blocks", _targets_args, _targets),
    "best-options": Command("phase 2B: the Docker options whose variant beat the baseline, "
                            "and their combination for docker_optimised",
                            _best_options_args, _best_options),
    "rehearse": Command("every model x environment once with few requests (its own "
                        "campaign, <name>-rehearsal), then a go/no-go table; exit 0 on GO, "
                        "2 on NO-GO", _rehearse_args, _rehearse),
    "doctor": Command("is this machine ready for the campaign or study? OS, driver and "
                      "NVML, Docker and the NVIDIA runtime, the image and its trtllm-bench "
                      "flags, checkpoints, devices, cores, page cache, disk and wall time, in "
                      "seconds, before any download; one row each, exit 1 if any fails",
                      _doctor_args, _doctor),
    "check": Command("check a config file before anything runs: YAML, schema, workloads, "
                     "results folder, campaign name, an import's CSV; exit 1 naming the "
                     "file, the key and the fix", _check_args, _check_cmd),
    "status": Command("progress and ETA of a campaign", _status_args, _status),
    "interim": Command("a stopping rule's interim analysis after one look", _interim_args,
                       _interim),
    "raw-hash": Command("the sha256 a study paper prints for a campaign's raw records "
                        "(each file's path under raw/, a NUL byte and the sha256 of its "
                        "content, in sorted order); --expect HASH: exit 1 unless it matches",
                        _raw_hash_args, _raw_hash),
    "snakefile": Command("the path of the workflow's Snakefile (installed with the package): "
                         "snakemake --snakefile \"$(containertax snakefile)\" ...",
                         lambda p: None, _snakefile),
}


def parser() -> argparse.ArgumentParser:
    """The command line, one subcommand per entry of COMMANDS."""
    top = argparse.ArgumentParser(prog="containertax", description=__doc__)
    sub = top.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        command.arguments(sub.add_parser(name, help=command.help))
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    _setup_logging(getattr(args, "log", None))
    try:
        return COMMANDS[args.command].handler(args)
    except ContainertaxError as exc:
        logging.getLogger("containertax").error("%s", exc)
        return 1
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        where = f" {exc.filename}" if exc.filename else ""
        logging.getLogger("containertax").error(
            "disk full: cannot write%s (%s); free space and run the step again (raw "
            "records are written whole or not at all; a failed cell reruns alone)",
            where, exc.strerror)
        return 1


def _check(path: str, directory: str | None = None) -> int:
    """Everything about a config that can be known without running it, in seconds; the
    README's commands run this first, before Snakemake reads the file its own way. Its
    relative paths are resolved where Snakemake will resolve them (paths.project_root),
    wherever check itself runs."""
    from containertax.campaign.configfile import study_campaigns

    study = study_campaigns(Path(path))
    if study is not None:  # a study config: check each campaign it names
        print(f"{path}: a study of {len(study)} campaigns (run it with snakemake --cores 1 "
              f"--configfile {path}); checking each:")
        return max([_check(str(c), directory) for c in study], default=0)
    workdir = paths.project_root(Path(path), Path(directory) if directory else None)
    if not workdir.is_dir():
        raise config.ConfigError(f"--directory {directory}: no such folder; name Snakemake's "
                                 "working directory (the checkout).")
    try:
        campaign = config.load_file(path, workdir)
    except (RecursionError, MemoryError) as exc:
        raise config.ConfigError(f"{path}: too deeply nested or too large to be a config "
                                 f"({type(exc).__name__}).") from None
    if campaign.is_import:
        # the import rule's own check (campaign/ is below statistics/: it is called here)
        from containertax.statistics import importer
        from containertax.workloads.metric_registry import registry

        try:
            frame = importer.read_checked(campaign.import_path,
                                          registry(campaign.analysis.get("define_metrics")),
                                          campaign.reference,
                                          campaign.analysis.get("import_repeats", "error"),
                                          campaign.analysis.get("import_duplicates", "error"))
        except importer.ImportFailure as exc:
            raise config.ConfigError(f"{path}: key 'analysis.import_csv': {exc}") from None
        print(f"{path}: ok: campaign {campaign.name} analyses {campaign.import_path} "
              f"({len(frame)} rows), results in {campaign.root}")
        return 0
    underived = config.underived(campaign)
    if underived:
        raise config.ConfigError("\n".join(underived))
    from containertax.campaign import parity

    refused = parity.problems(campaign)
    if refused:
        raise config.ConfigError("\n".join(refused))
    cells = schedule.plan(campaign)
    if campaign.raw.get("stopping"):  # every look written: whole, and of this rule
        from containertax.campaign import looks

        looks.read_looks(campaign.paths, stopping.Rule.from_campaign(campaign))
    print(f"{path}: ok: campaign {campaign.name}, {len(cells)} cells "
          f"({len(campaign.models)} models x {len(campaign.environments)} environments x "
          f"{campaign.repetitions} repetitions), results in {campaign.root}")
    differs = parity.summary(campaign)
    if differs:
        print(f"run context against {campaign.reference} (campaign/parity.py):")
        print("\n".join(differs))
    if campaign.raw.get("stopping"):
        print(stopping.summary(campaign.raw, len(cells)))
    if campaign.raw.get("factorial"):
        print(_factorial_summary(campaign))
    now = campaign.derived_options_sha256()
    if now:
        from containertax.campaign import integrity

        found = integrity.superseded_records(
            [str(p) for p in campaign.paths.raw_records()], now)
        if found:
            print(f"warning: {integrity.superseded_message(found, None)}")
    outside = schedule.unscheduled(campaign)
    if outside:
        from containertax.campaign import integrity

        print("warning: " + integrity.unscheduled_message(
            outside, None, kept=bool(campaign.raw.get("extends_campaign"))))
    for warning in schedule.design_warnings(campaign):
        print(f"warning: {warning}")
    return 0


def _factorial_summary(campaign: config.Campaign) -> str:
    """The design, its alias structure, runs per block, and the time the rehearsal
    projects (its measured block time x blocks), or how to get it."""
    import json

    from containertax.campaign import factorial

    design = factorial.design_of(campaign.raw, campaign.source)
    assert design is not None
    text = factorial.render(design, len(campaign.environments), campaign.repetitions,
                            len(campaign.models))
    rehearsal = paths.CampaignPaths(campaign.root.with_name(f"{campaign.name}-rehearsal"))
    try:
        est = json.loads(rehearsal.rehearsal_json.read_text())["estimate"]
        return (f"{text}\n  projected by the rehearsal ({rehearsal.rehearsal_json}): "
                f"{est['cells']} cells, {est['wall_s'] / 3600:.1f} h")
    except (OSError, ValueError, KeyError, TypeError):
        return (f"{text}\n  projected time: no rehearsal yet (containertax rehearse "
                f"{campaign.source} measures one block and projects the campaign)")


def _rep_range(text: str) -> set[int]:
    reps: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            reps.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise config.ConfigError(f"--reps {text!r}: expected e.g. 1-4 or 5,6") from None
    return reps


def _opt(value: str | None) -> Path | None:
    return Path(value) if value else None


def _analysis(cmd: str, campaign: config.Campaign, a: argparse.Namespace) -> None:
    # each step imports only the modules it uses (the paper step: LaTeX and the review, not
    # the analysis); scipy and statsmodels load where a step calls them (statistics/)
    if cmd in ("quality", "stats", "correct", "findings"):
        from containertax.statistics import steps
    elif cmd in ("figures", "tables", "numbers"):
        from containertax.publishing import report
    if cmd in ("figures", "tables", "numbers", "paper") and not campaign.is_import and len(
            campaign.environments) < 2:
        # the paper compares environments; a one-environment campaign's cells, records and
        # statistics are made, but its paper would be a traceback (a KeyError in tables)
        only = ", ".join(e.id for e in campaign.environments) or "none"
        raise config.ConfigError(
            f"{campaign.source}: key 'environments': campaign '{campaign.name}' has one "
            f"environment ({only}), and its paper compares environments; add a second "
            f"environment (e.g. a replica: '{only}-aa: {{replica_of: {only}}}'), or build "
            "only its cells (snakemake cells)")

    if cmd == "quality":
        steps.run_quality(campaign, Path(a.runs), Path(a.out_dir), _opt(a.out_order))
    elif cmd == "stats":
        outputs = {m: (Path(o), Path(d))
                   for m, o, d in zip(a.models, a.outs, a.out_descs, strict=True)}
        steps.run_stats(campaign, Path(a.kept), _opt(a.requests), outputs)
    elif cmd == "correct":
        steps.run_correct([Path(p) for p in a.models], [Path(p) for p in a.descs],
                           Path(a.out), Path(a.out_desc))
    elif cmd == "findings":
        steps.run_findings(campaign, Path(a.kept), Path(a.comparisons), Path(a.quality),
                            Path(a.out), _opt(a.out_facts))
    elif cmd == "figures":
        report.run_figures(campaign, Path(a.kept), Path(a.findings), _opt(a.requests),
                           Path(a.out_dir), Path(a.out_tex))
    elif cmd == "tables":
        report.run_tables(campaign, Path(a.kept), Path(a.findings), Path(a.desc),
                          Path(a.out_dir), _opt(a.order), _opt(a.quality))
    elif cmd == "numbers":
        report.run_numbers(campaign, Path(a.kept), Path(a.findings), Path(a.quality),
                           Path(a.out), Path(a.out_quality), _opt(a.order))
    elif cmd == "effects":
        from containertax.publishing import factorial_paper

        factorial_paper.run_effects(campaign, Path(a.kept), Path(a.out), Path(a.out_tex))
    elif cmd == "paper":
        from containertax.publishing import paper
        from containertax.statistics.policy import label_names

        paper.build(Path(a.source), Path(a.build), Path(a.out), label_names(campaign),
                    campaign.root)


if __name__ == "__main__":
    sys.exit(main())
