# Shared state of the workflow: the validated campaign, its schedule and its paths.
import re
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

# Planning needs only the campaign layer (config, schedule, paths): no analysis stack.
import containertax.core.packaged as ct_packaged
from containertax.campaign import config as ct_config
from containertax.campaign import configfile as ct_configfile
from containertax.campaign import paths as R
from containertax.campaign import schedule as ct_schedule
from containertax.campaign import lanes as ct_lanes
from containertax.campaign.paths import image_slug
import containertax.runtimes as ct_runtimes
from containertax.campaign import datasets as ct_datasets
from containertax.campaign import integrity as ct_integrity
from containertax.campaign import stopping as ct_stopping
from containertax.campaign import looks as ct_looks
from containertax.campaign import quantise as ct_quantise
from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

# A campaign is run with --configfile (workflow/rules/mode.smk); the profile's
# replace-workflow-config makes that file the whole config.
CONFIG_SOURCE = CLI_CONFIGS[-1]
try:
    # the file read strictly, for what Snakemake's reader lets pass (keys given twice)
    if Path(CONFIG_SOURCE).is_file():
        ct_configfile.read_config_file(Path(CONFIG_SOURCE))
    CAMPAIGN = ct_config.load_campaign(config, str(CONFIG_SOURCE))
    ct_config.check_owner(CAMPAIGN)
    # options another campaign's analysis derives and that do not exist yet (phase 2C/2D
    # before 2B's analysis): check's message, with the command that makes them, rather than
    # Snakemake's missing input
    _UNDERIVED = ct_config.underived(CAMPAIGN)
    if _UNDERIVED:
        raise ct_config.ConfigError("\n".join(_UNDERIVED))
except (ct_config.ConfigError, ValueError) as exc:  # WorkloadError is a ValueError
    raise WorkflowError(str(exc)) from None

# Relative results_dir and analysis.import_csv are resolved against this working directory
# (Campaign.root, Campaign.import_path); `containertax check` resolves them against the
# checkout holding the config (paths.project_root): where that is not here, say so.
if Path(CONFIG_SOURCE).is_file() and R.project_root(Path(CONFIG_SOURCE)) != Path("."):
    print(
        f"containertax: note: {CONFIG_SOURCE} lies in the checkout "
        f"{R.project_root(Path(CONFIG_SOURCE))}, but Snakemake runs in {Path.cwd()}: its "
        f"paths are relative to {Path.cwd()} (containertax check --directory "
        f"{Path.cwd()} checks them so).",
        file=sys.stderr,
    )

ROOT = CAMPAIGN.root
PATHS = CAMPAIGN.paths
CELLS = ct_schedule.plan(CAMPAIGN)
RESOLVED = str(PATHS.resolved)


def planning_only():
    """Whether this invocation only plans (-n, --lint, --list-rules, --dag, --summary...)
    or only tends Snakemake's own state (--unlock, --cleanup-metadata, --list-changes,
    --report, ...), as Snakemake's own argument parser reads the command line: then
    nothing is written and no record is moved.
    """
    from snakemake.cli import get_argument_parser

    args, _ = get_argument_parser().parse_known_args(sys.argv[1:])
    return bool(
        args.dryrun
        or args.lint
        or args.list_rules
        or args.list_target_rules
        or args.dag
        or args.rulegraph
        or args.filegraph
        or args.summary
        or args.detailed_summary
        or args.unlock
        or args.cleanup_metadata
        or args.cleanup_shadow
        or args.list_changes
        or args.report
        or args.archive
        or args.containerize
        or args.export_cwl
        or args.print_compilation
        or args.generate_unit_tests
        or args.delete_all_output
        or args.delete_temp_output
        or args.touch
    )


# The validated config every step reads, rewritten before the DAG is built whenever its
# content changed (its mtime then reruns what depends on it); not while only planning,
# where the resolved_config rule stands for it on a fresh results folder.
# The first invocation that runs jobs pins what the campaign's cells measure (check_owner
# above refuses another config that measures a pinned model or environment differently).
# Owner check, pin and resolved config under one lock (config.claim): of two configs
# started at once on a new campaign, the second sees the first's pin and is refused.
# One working folder writes a campaign at a time (config.hold_folder): the main process
# holds the campaign's writer lock while it runs; another checkout or folder whose
# results_dir is the same folder is refused naming both (Snakemake's lock is per folder).
if not planning_only():
    try:
        if workflow.is_main_process:
            _LAST_WRITER = ct_config.hold_folder(CAMPAIGN)
            if _LAST_WRITER:
                logger.warning(
                    f"{CONFIG_SOURCE}: the campaign folder {ROOT} was last written from "
                    f"another working folder, {_LAST_WRITER}; this invocation continues it "
                    f"from {Path.cwd()}."
                )
        ct_config.claim(CAMPAIGN, PATHS.resolved)
    except ct_config.ConfigError as exc:
        raise WorkflowError(str(exc)) from None
    except OSError as exc:
        raise WorkflowError(f"{CONFIG_SOURCE}: results folder {ROOT}: {exc}") from None
# The steps run from the Python that runs Snakemake, or under --sdm conda from the rules'
# environment (envs/workflow.yaml installs this package into it).
USE_CONDA = "conda" in {
    str(m).lower() for m in workflow.deployment_settings.deployment_method
}
CT = (
    "python -m containertax"
    if USE_CONDA
    else f"{shlex.quote(sys.executable)} -m containertax"
)
ENVS = {e.id: e for e in CAMPAIGN.environments}
# a factorial campaign (config factorial:) adds the effects step (rules/analysis.smk)
FACTORIAL = bool(CAMPAIGN.raw.get("factorial"))
IMAGES = {
    image_slug(e.image): e.image
    for e in CAMPAIGN.environments
    if ct_runtimes.get(e.kind).image_step == "rootfs"
}

# trtllm models' synthetic datasets (path -> model), written before any run
DATASETS = ct_datasets.all_datasets(CAMPAIGN)
DATASET_DIRS = (
    "|".join(sorted({re.escape(str(Path(p).parent)) for p in DATASETS})) or "(?!)"
)


def dataset_model(wildcards):
    return DATASETS[f"{wildcards.dataset_dir}/{wildcards.dataset_name}.jsonl"]


def dataset_quantised(wildcards):
    """The marker of the checkpoint a dataset's vocabulary is read from, where the workflow
    makes that checkpoint (rules/quantise.smk)."""
    path = CAMPAIGN.workload_params(dataset_model(wildcards)).get("model_path")
    return [QUANTISE[str(path)].marker] if str(path) in QUANTISE else []


# model -> the dataset its cells read (none for other workloads), looked up per gate job
MODEL_DATASETS = {m.id: ct_datasets.of_model(CAMPAIGN, m.id) for m in CAMPAIGN.models}


def cell_dataset(wildcards):
    """The dataset a trtllm cell reads (none for other workloads)."""
    return MODEL_DATASETS[wildcards.model]


# Execution order: the cell at schedule position p gets priority N - p for its gate, run
# and cooldown; with --cores 1 Snakemake then runs the cells in schedule order. Cells are
# never chained through files, so one failed cell blocks nothing else.
# (Positions are stable under config edits, so they may have gaps: count from the last.)
CELL_PATHS = [PATHS.cell(c.model, c.environment, c.repetition) for c in CELLS]
LAST = max((c.position for c in CELLS), default=-1)
PRIORITY = {
    (p.model, p.environment, p.label): LAST + 1 - c.position
    for c, p in zip(CELLS, CELL_PATHS)
}
FIRST = LAST + 2

# Lanes (config `lanes`; without it one lane): each lane is a resource of limit 1 that the
# gate, run and cooldown of its cells take, so a lane runs one step at a time, in schedule
# order (the priorities above), whatever --cores or --jobs says, while lanes run side by
# side. On SLURM the lane's placement becomes the executor's resources.
LANES = {lane.id: lane for lane in ct_lanes.lanes(CAMPAIGN)}
for _lane in LANES.values():
    workflow.register_resource(_lane.resource, 1)
LANE_OF_CELL = {
    (p.model, p.environment, p.label): LANES[c.lane] for c, p in zip(CELLS, CELL_PATHS)
}


def cell_lane(wildcards):
    return LANE_OF_CELL[(wildcards.model, wildcards.environment, wildcards.rep)]


def _lane_takes(resource):
    return lambda wildcards: int(cell_lane(wildcards).resource == resource)


def _slurm(key):
    return lambda wildcards: ct_lanes.slurm_resources(cell_lane(wildcards))[key]


# With one lane (no `lanes` in the config) every cell takes it: a constant, as a function
# costs Snakemake a signature inspection per job when it plans.
LANE_RESOURCES = {
    lane.resource: 1 if len(LANES) == 1 else _lane_takes(lane.resource)
    for lane in LANES.values()
}
# Preparation (system facts, rootfs export, preflight) takes every lane: under --cores N it
# never runs beside a measured cell of another lane.
ALL_LANES = {lane.resource: 1 for lane in LANES.values()}
# Checkpoints made here before any run reads them (rules/quantise.smk): under every lane.
QUANTISE = {} if CAMPAIGN.is_import else ct_quantise.jobs(CAMPAIGN)
QUANTISE_CT = CT
MACHINE = ALL_LANES
if any(lane.slurm or lane.host for lane in LANES.values()):
    LANE_RESOURCES.update({key: _slurm(key) for key in ct_lanes.SLURM_KEYS})


wildcard_constraints:
    model=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    environment=r"[A-Za-z0-9][A-Za-z0-9_-]*",
    rep=r"\d+",
    image=r"[A-Za-z0-9_.-]+",


def at(template, **fill):
    """A path of this campaign, from a template in containertax.campaign.paths."""
    return str(PATHS.at(template, **fill))


def cell_priority(wildcards):
    return PRIORITY[(wildcards.model, wildcards.environment, wildcards.rep)]


CELL_FILES = {}  # template -> the paths of every cell (planning asks several times)


def cell_files(template):
    """One file per cell, under the name its records already have (rep01 in campaigns
    recorded before the fixed width) or rep001; built once per template."""
    if template not in CELL_FILES:
        CELL_FILES[template] = [
            at(template, model=p.model, environment=p.environment, rep=p.label)
            for p in CELL_PATHS
        ]
    return CELL_FILES[template]


# Records measured under derived options that have changed since (phase 2B's analysis ->
# docker_optimised of 2C and 2D): they measured another variant, so when jobs run they are
# moved aside (raw/.superseded/<when>/, never deleted) and their cells measured again; a
# dry run names them (campaign/integrity.py).
_OPTIONS_NOW = CAMPAIGN.derived_options_sha256()
if _OPTIONS_NOW:
    _SUPERSEDED = ct_integrity.superseded_records(
        [raw for raw in cell_files(R.RAW) if Path(raw).exists()], _OPTIONS_NOW
    )
    if _SUPERSEDED and planning_only():
        logger.warning(ct_integrity.superseded_message(_SUPERSEDED, None))
    elif _SUPERSEDED:
        _MOVED_TO = ct_integrity.move_superseded(PATHS, _SUPERSEDED)
        logger.warning(ct_integrity.superseded_message(_SUPERSEDED, _MOVED_TO))


# Records outside the campaign's schedule (a cell a config edit removed, a record added by
# hand, a block beyond the stopping rule's stop of its model) are never analysed: a dry run
# names them; when jobs run they are moved aside like superseded ones (kept, ledgered). A
# config that writes into another's campaign on purpose (extends_campaign) moves nothing.
try:  # a damaged look file, or one of another stopping rule, is named (looks.py)
    _UNSCHEDULED = ct_schedule.unscheduled(CAMPAIGN, CELLS)
except ct_config.ConfigError as exc:
    raise WorkflowError(str(exc)) from None
if _UNSCHEDULED and (planning_only() or CAMPAIGN.raw.get("extends_campaign")):
    logger.warning(
        ct_integrity.unscheduled_message(
            _UNSCHEDULED, None, kept=bool(CAMPAIGN.raw.get("extends_campaign"))
        )
    )
elif _UNSCHEDULED:
    _MOVED_TO = ct_integrity.move_unscheduled(PATHS, _UNSCHEDULED)
    logger.warning(ct_integrity.unscheduled_message(_UNSCHEDULED, _MOVED_TO))


# The raw records present when the workflow is planned, looked up once: the targets,
# pending_cells, run_if_pending and record_folders each ask about every cell, and nothing
# here writes a record before the DAG is built. (onsuccess looks again, after the jobs.)
RAW_PRESENT = frozenset(raw for raw in cell_files(R.RAW) if Path(raw).exists())
# Each present record is checked by content (campaign/integrity.py): a damaged one stops
# the invocation, naming its cell and the fix, whatever the file times say; file times in
# the future (clock skew) are named before Snakemake's output-time guard fails a job.
_DAMAGED, _FUTURE = ct_integrity.check_records(
    PATHS, sorted(RAW_PRESENT), write_cache=not planning_only()
)
if _DAMAGED:
    raise WorkflowError(ct_integrity.damaged_message(PATHS, _DAMAGED))
if _FUTURE:
    logger.warning(ct_integrity.future_message(_FUTURE))
# A cell without its record is unfinished whatever its .done.json says (a record deleted
# by hand): that marker (the cooldown's output, no data: the cooldown is in raw/) is removed,
# so gate, run and cooldown run again; the run step moves the old side files aside.
_STALE_DONE = [
    done
    for raw, done in zip(cell_files(R.RAW), cell_files(R.DONE))
    if raw not in RAW_PRESENT and Path(done).exists()
]
if _STALE_DONE and planning_only():
    logger.warning(
        f"{len(_STALE_DONE)} cell(s) have no raw record but a finished marker (e.g. "
        f"{_STALE_DONE[0]}): the next invocation that runs jobs runs them again."
    )
else:
    for _done in _STALE_DONE:
        Path(_done).unlink(missing_ok=True)


def _literal(text):
    """Text in a shell command, safe from Snakemake's formatting."""
    return text.replace("{", "{{").replace("}", "}}")


def cell_step(step, args):
    """A cell step's shell command: the step, the resolved config and the cell's wildcards,
    then `args`. Written into the command, not given as params: Snakemake expands every
    job's params while it plans (a rule with a conda environment), a measurable part of
    planning 900 cells. The config is the gate's input only: the run comes after its
    gate, a pending cell's cooldown after its run, and when jobs run the file is written
    before the DAG is built (a done cell's cooldown); each such input costs Snakemake a
    dependency to resolve per job."""
    config = "{input.config:q}" if step == "gate" else _literal(shlex.quote(RESOLVED))
    return (
        f"{_literal(CT)} {step} --config {config} --model {{wildcards.model}} "
        f"--environment {{wildcards.environment}} --rep {{wildcards.rep}} {args}"
    )


def image_marker(wildcards):
    """The image as the environment's kind needs it (runtimes/<kind>.py image_step): the
    exported root filesystem (chroot), or the image handed to the runtime (provide)."""
    env = ENVS[wildcards.environment]
    step = ct_runtimes.get(env.kind).image_step
    # plain, not ancient(): a forced (incomplete) rootfs job would otherwise hide every
    # job downstream of it from Snakemake's planning (see cells.smk)
    if step == "rootfs":
        return [at(R.ROOTFS_MARKER, image=image_slug(env.image))]
    if step == "provide":
        return [at(R.PROVIDED, environment=env.id)]
    return []


# Every analysis step depends on all analysis code (statistics/ and publishing/), the record
# reader and its schema, the paths, the workloads' metric registry entries and the
# environment kinds (runtimes/: the paper prints each kind's words, flags and isolation):
# with mtime rerun triggers, editing any of it rebuilds the statistics, figures, tables
# and paper.
PKG = ct_packaged.package()  # the package's own folder, in a checkout or installed
ANALYSIS_CODE = sorted(
    [str(p) for p in (PKG / "statistics").glob("*.py")]
    + [str(p) for p in (PKG / "publishing").glob("*.py")]
    + [str(p) for p in (PKG / "workloads").glob("*.py")]
    + [str(p) for p in (PKG / "runtimes").glob("*.py")]
    + [
        str(PKG / "core" / "records.py"),
        str(PKG / "core" / "rawrecord.py"),
        str(PKG / "campaign" / "paths.py"),
        str(PKG / "campaign" / "factorial.py"),
        str(ct_packaged.schema("record.schema.yaml")),
        str(Path(workflow.basedir) / R.PRIOR_WORK),
    ]
)


def record_folders(wildcards):
    """Folders of the raw records present when the workflow is planned (aggregate.smk).
    No rule makes a folder, so these never pull a benchmark cell into the DAG; a
    folder's mtime changes whenever a record is linked in or moved away."""
    return sorted({str(Path(p).parent) for p in RAW_PRESENT})


# Does this invocation run the cells (the default target, `all` or `cells`)? Then the
# analysis waits for every pending cell, so that runs.csv and the paper hold each record
# this invocation adds; an analysis target alone (`snakemake paper`) analyses the records
# present and runs no cell. (The targets are known when the DAG is built, not at parse.)
def requested_targets():
    settings = workflow.dag_settings
    return set(settings.targets) if settings is not None else set()


def runs_cells(targets):
    return not targets or bool(targets & {"all", "cells"})


def finished(raw, cooldown):
    """A cell is finished when its record and its cooldown are in raw/ (a fresh clone of
    committed records has no .done.json)."""
    return Path(raw).exists() and Path(cooldown).exists()


def unfinished_cell_files():
    """The last file (.done.json) of every cell not finished: the cells to run."""
    return [
        done
        for raw, cooldown, done in zip(
            cell_files(R.RAW), cell_files(R.COOLDOWN), cell_files(R.DONE)
        )
        if raw not in RAW_PRESENT or not Path(cooldown).exists()
    ]


def pending_cells(wildcards):
    """The last file of every cell without a record, when this invocation runs cells."""
    if not runs_cells(requested_targets()):
        return []
    if STOPPING:  # the cells the stopping rule allows (sequential.smk)
        return sequential_targets(wildcards)
    return [
        done
        for raw, done in zip(cell_files(R.RAW), cell_files(R.DONE))
        if raw not in RAW_PRESENT
    ]


RAN_IF_PENDING = {
    (p.model, p.environment, p.label): [] if raw in RAW_PRESENT else [ran]
    for p, raw, ran in zip(CELL_PATHS, cell_files(R.RAW), cell_files(R.RAN))
}


def run_if_pending(wildcards):
    """A cell whose raw record exists is done: nothing may pull its run (or its gate and
    preflight) back into the DAG, e.g. after a fresh clone of committed raw records."""
    key = (wildcards.model, wildcards.environment, wildcards.rep)
    if key in RAN_IF_PENDING:
        return list(RAN_IF_PENDING[key])
    raw = at(R.RAW, **dict(wildcards))  # a cell the schedule does not name
    return [] if Path(raw).exists() else [at(R.RAN, **dict(wildcards))]


try:
    ANALYSIS_MODELS = CAMPAIGN.analysis_models()
except ct_config.ConfigError as exc:
    raise WorkflowError(str(exc)) from None


def record_folders_or_none(wildcards):
    return [] if CAMPAIGN.is_import else record_folders(wildcards)


PAPER_SOURCES = sorted(
    str(p) for p in ct_packaged.paper_dir().iterdir() if p.suffix in (".tex", ".bib")
)


def unfinished_cells(targets):
    """Cells this invocation was asked to finish (all of them, or the .done.json files
    named as targets) without their record or cooldown in raw/ at its end."""
    asked = {str(Path(t)) for t in targets} | {str(Path(t).resolve()) for t in targets}
    allowed = sequential_allowed_now() if STOPPING else None  # blocks the rule allows
    return sorted(
        str(Path(raw).relative_to(ROOT / "raw")).removesuffix(".json")
        for c, raw, cooldown, done in zip(
            CELLS, cell_files(R.RAW), cell_files(R.COOLDOWN), cell_files(R.DONE)
        )
        if (runs_cells(targets) or done in asked)
        and not finished(raw, cooldown)
        and (allowed is None or c.repetition <= allowed.get(c.model, 0))
    )


# Environments whose options another campaign's analysis derives (config derived_from,
# phase 2B -> docker_optimised of 2C and 2D): their gates take the derived file, so their
# cells cannot run before it exists, and pending ones rerun when its content changes.
DERIVED_OPTIONS = {
    e.id: e.spec["options_source"]["file"]
    for e in CAMPAIGN.environments
    if e.spec.get("options_source", {}).get("kind") == "derived"
}


def derived_options(wildcards):
    """The derived options file of the cell's environment (none for most)."""
    file = DERIVED_OPTIONS.get(wildcards.environment)
    return [file] if file else []
