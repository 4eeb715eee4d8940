"""Command line: the steps the Snakefile's rules call, and `status` for people.

Known failures print one clear message and exit 1, without a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from containertax.campaign import config, paths, schedule
from containertax.execution import records

# Failures that print one line, by module. Each step imports only the modules it uses (a
# gate or cooldown starts in about half the time of one importing every step's machinery;
# the analysis stack stays off a machine that only runs cells): a module's failures can
# only have been raised where it was imported.
KNOWN = {
    "containertax.campaign.config": ("ConfigError",),
    "containertax.campaign.optimisation": ("OptimisationError",),
    "containertax.execution.preflight": ("PreflightError",),
    "containertax.execution.thermal": ("GateTimeout", "SensorError"),
    "containertax.execution.gating": ("RunFailed", "StorageFailure"),
    "containertax.execution.environments": ("EnvironmentFailure",),
    "containertax.execution.records": ("RecordExistsError",),
    "containertax.execution.rawrecord": ("RecordError",),
    "containertax.workloads.base": ("WorkloadError",),
    "containertax.workloads.trtllm": ("DatasetError",),
    "containertax.analysis.importer": ("ImportError_",),
    "containertax.analysis.paper": ("PaperError",),
    "containertax.analysis.report": ("AnalysisError",),
}


def known_failures() -> tuple[type[BaseException], ...]:
    return tuple(getattr(sys.modules[m], name) for m, names in KNOWN.items()
                 if m in sys.modules for name in names)


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


def _setup_logging(log_path: str | None) -> None:
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="a"))
    logging.basicConfig(level=logging.INFO, handlers=handlers, force=True,
                        format="%(asctime)s %(levelname)s %(message)s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="containertax", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def cell_cmd(name: str, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_)
        p.add_argument("--config", required=True)
        p.add_argument("--model", required=True)
        p.add_argument("--environment", required=True)
        p.add_argument("--rep", required=True)
        p.add_argument("--log")
        return p

    p = cell_cmd("gate", "wait for the thermal gate of a cell")
    p.add_argument("--out", required=True)
    p = cell_cmd("run", "run one cell")
    p.add_argument("--gate", required=True)
    p.add_argument("--out", required=True, help="the step's outcome (the record is beside)")
    p = cell_cmd("cooldown", "cool down after a cell")
    p.add_argument("--out", required=True)

    p = sub.add_parser("dataset", help="write a trtllm model's synthetic token dataset "
                       "(before any run)")
    p.add_argument("--config", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--log")

    p = sub.add_parser("preflight", help="check one environment")
    p.add_argument("--config", required=True)
    p.add_argument("--environment", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--log")

    for name, help_ in [("system", "record system facts"), ("schedule", "write schedule.csv"),
                        ("aggregate", "write runs.csv"), ("import", "validate an imported CSV")]:
        p = sub.add_parser(name, help=help_)
        p.add_argument("--config", required=True)
        p.add_argument("--out", required=True)
        p.add_argument("--requests-out")
        p.add_argument("--log")

    # analysis steps: each reads named inputs and writes named outputs
    analysis = {
        "quality": (["runs"], ["out_dir", "out_order"]),
        "stats": (["kept", "requests", "models"], ["outs", "out_descs"]),
        "correct": (["models", "descs"], ["out", "out_desc"]),
        "figures": (["kept", "comparisons", "requests"], ["out_dir", "out_tex"]),
        "tables": (["kept", "comparisons", "desc", "order", "quality"], ["out_dir"]),
        "numbers": (["kept", "comparisons", "quality", "order"], ["out", "out_quality"]),
        "paper": (["source", "build"], ["out"]),
    }
    for name, (ins, outs) in analysis.items():
        p = sub.add_parser(name, help=f"analysis step: {name}")
        p.add_argument("--config", required=True)
        p.add_argument("--log")
        for arg in ins + outs:
            many = arg in ("models", "descs", "outs", "out_descs")
            p.add_argument(f"--{arg.replace('_', '-')}", nargs="*" if many else None)

    p = sub.add_parser("rootfs", help="export an image's root filesystem for chroot")
    p.add_argument("--image", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--log")

    p = sub.add_parser("host-image", help="import an image of empty folders, for running the "
                       "host's software in a container (GPU machines without a registry)")
    p.add_argument("tag")

    p = sub.add_parser("targets", help="the files that complete some repetitions (blocks): "
                       "one visit to a machine runs whole blocks")
    p.add_argument("config")
    p.add_argument("--reps", required=True, help="e.g. 1-4 or 5,6")

    p = sub.add_parser("best-options", help="phase 2B: the Docker options whose variant beat "
                       "the baseline, and their combination for docker_optimised")
    p.add_argument("config", help="the phase-2B config (e.g. config/phase-2b.yaml)")
    p.add_argument("--metric", default="token_throughput")
    p.add_argument("--write", metavar="CONFIG", help="replace the BEGIN/END best-options block "
                   "of docker_optimised in this file (e.g. config/config.yaml)")

    p = sub.add_parser("rehearse", help="every model x environment once with few requests "
                       "(its own campaign, <name>-rehearsal), then a go/no-go table; exit 0 "
                       "on GO, 2 on NO-GO")
    p.add_argument("config", help="the study's config file (e.g. config/config.yaml)")
    p.add_argument("--requests", type=int, help="requests (repeats) per run; default per "
                   "workload: trtllm 32, transformers 2, matmul 3, microbench 10")
    p.add_argument("--snakemake", nargs=argparse.REMAINDER, default=[],
                   help="further arguments for Snakemake (last on the line)")

    p = sub.add_parser("check", help="check a config file before anything runs: YAML, "
                       "schema, workloads, results folder, campaign name, an import's CSV; "
                       "exit 1 naming the file, the key and the fix")
    p.add_argument("config", help="the campaign's config file (e.g. config/demo.yaml)")
    p.add_argument("--directory", "-d", help="Snakemake's working directory, against which "
                   "results_dir and analysis.import_csv are relative (as snakemake "
                   "--directory); default: the checkout holding the config (the nearest "
                   "folder above it with the Snakefile), else the current directory")

    p = sub.add_parser("status", help="progress and ETA of a campaign")
    p.add_argument("config", help="the campaign's config file (e.g. config/demo.yaml)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--lanes", type=int, action="append", default=[],
                   help="also estimate the campaign's wall time on this many lanes (repeatable)")

    args = parser.parse_args(argv)
    _setup_logging(getattr(args, "log", None))
    try:
        if args.command == "check":
            return _check(args.config, args.directory)
        return _dispatch(args)
    except Exception as exc:
        if not isinstance(exc, known_failures()):
            raise
        logging.getLogger("containertax").error("%s", exc)
        return 1


def _check(path: str, directory: str | None = None) -> int:
    """Everything about a config that can be known without running it, in seconds; the
    README's commands run this first, before Snakemake reads the file its own way. Its
    relative paths are resolved where Snakemake will resolve them (paths.project_root),
    wherever check itself runs."""
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
        # the import rule's own check (campaign/ is below analysis/: it is called here)
        from containertax.analysis import importer
        from containertax.analysis.metrics import registry

        try:
            frame = importer.read_checked(campaign.import_path,
                                          registry(campaign.analysis.get("define_metrics")),
                                          campaign.reference)
        except importer.ImportError_ as exc:
            raise config.ConfigError(f"{path}: key 'analysis.import_csv': {exc}") from None
        print(f"{path}: ok: campaign {campaign.name} analyses {campaign.import_path} "
              f"({len(frame)} rows), results in {campaign.root}")
        return 0
    cells = schedule.plan(campaign)
    print(f"{path}: ok: campaign {campaign.name}, {len(cells)} cells "
          f"({len(campaign.models)} models x {len(campaign.environments)} environments x "
          f"{campaign.repetitions} repetitions), results in {campaign.root}")
    if campaign.raw.get("stopping"):
        print(config.stopping_summary(campaign.raw, len(cells)))
    for warning in schedule.design_warnings(campaign):
        print(f"warning: {warning}")
    return 0


def _dispatch(args: argparse.Namespace) -> int:
    cmd = args.command
    if cmd in ("rootfs", "host-image"):
        from containertax.execution import environments
    if cmd == "rootfs":
        environments.export_rootfs(args.image, Path(args.out))
        return 0
    if cmd == "host-image":
        print(environments.host_software_image(args.tag))
        return 0
    if cmd == "rehearse":
        from containertax.campaign import rehearsal

        result = rehearsal.run(Path(args.config), args.requests,
                               snakemake_args=args.snakemake)
        print(rehearsal.render(result))
        return 0 if result["go"] else 2
    campaign = load(args.config)
    if cmd == "targets":
        print("\n".join(schedule.block_targets(campaign, _rep_range(args.reps))))
    elif cmd == "best-options":
        from containertax.campaign import optimisation

        comparisons = campaign.paths.comparisons
        if not comparisons.exists():
            raise optimisation.OptimisationError(
                f"{comparisons} does not exist: run the analysis of {args.config} first "
                f"(snakemake --cores 1 paper --configfile {args.config}).")
        import pandas as pd

        verdicts = optimisation.judge(campaign, pd.read_csv(comparisons), args.metric)
        print(optimisation.render(campaign, verdicts, args.metric))
        if args.write:
            chosen = optimisation.write_block(Path(args.write), campaign, verdicts,
                                              args.metric, comparisons, records.utc_now())
            print(f"\nwrote docker_optimised options {chosen} into {args.write}")
    elif cmd == "status":
        from containertax.campaign import status

        summary = status.summarize(campaign, args.lanes)
        print(json.dumps(summary, indent=1) if args.json else status.render(summary))
    elif cmd == "gate":
        from containertax.execution import gating

        gating.gate(campaign, args.model, args.environment, args.rep, Path(args.out))
    elif cmd == "run":
        from containertax.execution import cells

        cells.run(campaign, args.model, args.environment, args.rep, Path(args.gate),
                  Path(args.out), Path(args.log) if args.log else None)
    elif cmd == "cooldown":
        from containertax.execution import gating

        gating.cool(campaign, args.model, args.environment, args.rep, Path(args.out))
    elif cmd == "dataset":
        from containertax.workloads import trtllm

        params = {**trtllm.WORKLOAD.defaults, **campaign.workload_params(args.model)}
        meta = trtllm.write_dataset(params, Path(args.out))
        logging.getLogger("containertax").info(
            "dataset %s: %d requests, %d+%d tokens, vocabulary %d, sha256 %s", args.out,
            meta["num_requests"], meta["input_len"], meta["output_len"], meta["vocab_size"],
            meta["sha256"])
    elif cmd == "preflight":
        from containertax.execution import preflight

        preflight.write_environment(campaign, args.environment, Path(args.out))
    elif cmd == "system":
        from containertax.execution import preflight

        records.write_json(Path(args.out), preflight.system(campaign))
    elif cmd == "schedule":
        for warning in schedule.design_warnings(campaign):  # in the schedule step's log
            logging.getLogger("containertax").warning("%s", warning)
        schedule.write_csv(schedule.known_cells(campaign), campaign.root / schedule.POSITIONS)
        schedule.write_csv(schedule.plan(campaign), Path(args.out))
    elif cmd == "aggregate":
        from containertax.analysis import aggregate

        aggregate.write(campaign.root, Path(args.out),
                        Path(args.requests_out) if args.requests_out else None)
    elif cmd == "import":
        from containertax.analysis import report

        frame = report.read_import(campaign)
        records.atomic_write_text(Path(args.out), frame.to_csv(index=False))
        if args.requests_out:
            records.atomic_write_text(Path(args.requests_out), "")
    else:
        _analysis(cmd, campaign, args)
    return 0


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
    from containertax.analysis import paper, report

    if cmd == "quality":
        report.run_quality(campaign, Path(a.runs), Path(a.out_dir), _opt(a.out_order))
    elif cmd == "stats":
        outputs = {m: (Path(o), Path(d))
                   for m, o, d in zip(a.models, a.outs, a.out_descs, strict=True)}
        report.run_stats(campaign, Path(a.kept), _opt(a.requests), outputs)
    elif cmd == "correct":
        report.run_correct([Path(p) for p in a.models], [Path(p) for p in a.descs],
                           Path(a.out), Path(a.out_desc))
    elif cmd == "figures":
        report.run_figures(campaign, Path(a.kept), Path(a.comparisons), _opt(a.requests),
                           Path(a.out_dir), Path(a.out_tex))
    elif cmd == "tables":
        report.run_tables(campaign, Path(a.kept), Path(a.comparisons), Path(a.desc),
                          Path(a.out_dir), _opt(a.order), _opt(a.quality))
    elif cmd == "numbers":
        report.run_numbers(campaign, Path(a.kept), Path(a.comparisons), Path(a.quality),
                           Path(a.out), Path(a.out_quality), _opt(a.order))
    elif cmd == "paper":
        paper.build(Path(a.source), Path(a.build), Path(a.out), report.label_names(campaign),
                    campaign.root)


if __name__ == "__main__":
    sys.exit(main())
