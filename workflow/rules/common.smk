# Shared state of the workflow: the validated campaign, its schedule and its paths.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from containertax.campaign import config as ct_config
from containertax.analysis import report as ct_report
from containertax.execution import records as R
from containertax.campaign import schedule as ct_schedule
from containertax.cli import write_resolved
from containertax.execution.environments import image_slug
from snakemake.exceptions import WorkflowError

# With --configfile, the profile's replace-workflow-config makes that file the whole config.
CLI_CONFIGS = list(workflow.overwrite_configfiles or [])
CONFIG_SOURCE = CLI_CONFIGS[-1] if CLI_CONFIGS else "config/config.yaml"
try:
    CAMPAIGN = ct_config.load_campaign(config, str(CONFIG_SOURCE))
except ct_config.ConfigError as exc:
    raise WorkflowError(str(exc)) from None

ROOT = CAMPAIGN.root
CELLS = ct_schedule.plan(CAMPAIGN)
RESOLVED = str(ROOT / "config.resolved.json")
write_resolved(CAMPAIGN, Path(RESOLVED))
CT = f"{sys.executable} -m containertax"
ENVS = {e.id: e for e in CAMPAIGN.environments}
IMAGES = {
    image_slug(e.image): e.image for e in CAMPAIGN.environments if e.kind == "chroot"
}

# Execution order: the cell at schedule position p gets priority N - p for its gate, run
# and cooldown; with --cores 1 Snakemake then runs the cells in schedule order. Cells are
# never chained through files, so one failed cell blocks nothing else.
PRIORITY = {
    (c.model, c.environment, ct_schedule.rep_label(CAMPAIGN, c.repetition)): len(CELLS)
    - c.position
    for c in CELLS
}
FIRST = len(CELLS) + 1


wildcard_constraints:
    model=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    environment=r"[A-Za-z0-9][A-Za-z0-9_-]*",
    rep=r"\d+",
    image=r"[A-Za-z0-9_.-]+",


def at(template, **fill):
    """A path of this campaign, from a template in containertax.execution.records."""
    return str(ROOT / template.format(**fill)) if fill else str(ROOT / template)


def cell_priority(wildcards):
    return PRIORITY[(wildcards.model, wildcards.environment, wildcards.rep)]


def cell_files(template):
    return [
        at(
            template,
            model=c.model,
            environment=c.environment,
            rep=ct_schedule.rep_label(CAMPAIGN, c.repetition),
        )
        for c in CELLS
    ]


def cell_args(wildcards):
    return (
        f"--model {wildcards.model} "
        f"--environment {wildcards.environment} --rep {wildcards.rep}"
    )


def rootfs_marker(wildcards):
    """A chroot environment needs its image's exported root filesystem."""
    env = ENVS[wildcards.environment]
    if env.kind == "chroot":
        return [ancient(at(R.ROOTFS_MARKER, image=image_slug(env.image)))]
    return []


# Every analysis rule depends on all analysis code (and the record reader): with mtime
# rerun triggers, editing any of it rebuilds the statistics, figures, tables and paper.
ANALYSIS_CODE = sorted(
    str(p)
    for p in (Path(workflow.basedir) / "src" / "containertax" / "analysis").glob("*.py")
) + [str(Path(workflow.basedir) / "src" / "containertax" / "execution" / "records.py")]


def record_folders(wildcards):
    """Folders of the raw records present when the workflow is planned (aggregate.smk).
    No rule makes a folder, so the analysis never pulls a benchmark cell into the DAG; a
    folder's mtime changes whenever a record is linked in or moved away."""
    return sorted({str(Path(p).parent) for p in cell_files(R.RAW) if Path(p).exists()})


def record_if_pending(wildcards):
    """A cell whose raw record exists is done: nothing may pull its run (or its gate and
    preflight) back into the DAG, e.g. after a fresh clone of committed raw records."""
    raw = at(R.RAW, **dict(wildcards))
    return [] if Path(raw).exists() else [ancient(raw)]


ANALYSIS_MODELS = ct_report.model_ids(CAMPAIGN)


def record_folders_or_none(wildcards):
    return [] if CAMPAIGN.is_import else record_folders(wildcards)


PAPER_SOURCES = sorted(str(p) for p in (Path(workflow.basedir) / "paper").glob("*.tex"))
