"""Where every file of a campaign lives: one object, used by the Snakefile, every module and
the tests, so that no location is rebuilt by hand.

A cell's files are named by its repetition with a fixed width (rep001), so raising a
campaign's repetitions renames nothing. Records written before that (rep01, rep1: the width
once followed the repetition count) are still found: a cell whose raw record or cooldown
exists under an older name keeps that name, and committed records are never renamed.

Standard library (and core.records, itself standard library only): the Snakefile imports
this when it plans the workflow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from containertax.core.records import HASHES, LEDGER  # their names; core cannot import up

REP_WIDTH = 3

# Templates relative to the campaign root; the Snakefile fills them with its wildcards.
CELL_DIR = "raw/{model}/{environment}"
RAW = CELL_DIR + "/rep{rep}.json"
TELEMETRY = CELL_DIR + "/rep{rep}.telemetry.csv"
REQUESTS = CELL_DIR + "/rep{rep}.requests.csv"
RUN_LOG = CELL_DIR + "/rep{rep}.log"
COOLDOWN = CELL_DIR + "/rep{rep}.cooldown.json"
GATE = "cells/{model}/{environment}/rep{rep}.gate.json"
# Files moved aside, never deleted, each under raw/.<why>/<when>/<model>/<environment>/
# (four levels deep: no reader of raw/*/*/ sees them): a record found damaged, and the
# side files (.cooldown.json ...) of a record that is missing, before its cell runs again.
ASIDE = "raw/.{why}/{stamp}"
DAMAGED = "damaged"
ORPHANED = "orphaned"
# records measured under derived options that have changed since (integrity.superseded)
SUPERSEDED = "superseded"
SUPERSEDED_NOTE = "SUPERSEDED.json"  # in that folder: what each moved record measured
# The run and cooldown steps' own outputs: the raw record and its .cooldown.json are no
# rule's output, so Snakemake never deletes them (before a forced job, after a failed one).
RAN = "cells/{model}/{environment}/rep{rep}.ran.json"
DONE = "cells/{model}/{environment}/rep{rep}.done.json"
LOG = "logs/{step}/{model}/{environment}/rep{rep}.log"
# Raw records found whole when the workflow was last planned, by (size, mtime_ns, inode):
# a record is parsed again only when one of those changes (campaign.integrity)
VERIFIED = ".raw-verified.json"
RUN_LOCK = ".run.lock"
# Which working folder's Snakemake writes the campaign now: held (flock) by the invocation's
# main process while it runs, with who holds it beside it (config.hold_folder). Snakemake's
# own lock guards one working folder; two checkouts sharing a results_dir are refused here.
WRITER_LOCK = ".writer.lock"
WRITER = ".writer.json"
SCHEDULE = "schedule.csv"
SYSTEM = "system.json"
RESOLVED = "config.resolved.json"
# What the campaign's cells measure, pinned by its first invocation that ran jobs (per model
# and environment, with the config that pinned it): another config naming the campaign is
# refused (config.check_owner)
PIN = "campaign.pin.json"
BASELINE = "thermal-baseline.json"  # idle temperature for thermal.cooldown: adaptive
COMPILE_CACHE = "compile-cache"  # torch.compile's caches, shared by every environment
# a model's own compile-cache arm (models[].compile_cache: cold, per_environment): the
# folder its runs see, the same path in every environment, and each environment's saved copy
COMPILE_CACHE_ARMS = "compile-cache-arms"
COMPILE_CACHE_ARM = COMPILE_CACHE_ARMS + "/{model}/live"
COMPILE_CACHE_SAVED = COMPILE_CACHE_ARMS + "/{model}/saved/{environment}"
PREFLIGHT = "preflight/{environment}.json"
ROOTFS = "rootfs/{image}"
ROOTFS_MARKER = "rootfs/{image}.image.json"
RUNS = "runs.csv"
# what the import step did to an imported table (statistics/importer.py): the rows it read,
# the exact copies it dropped and the runs it numbered by start time, for the data section
IMPORT_REPORT = "stats/import.json"
REQUESTS_ALL = "requests.csv"
WORK = "work"
COMPARISONS = "stats/comparisons.csv"
# every finding once (statistics/findings.py): what every table, figure and sentence prints
FINDINGS = "stats/findings.csv"
# the campaign's facts (statistics/facts.py): every count, metric name and compiled run the
# prose states, and what the review's claims audit holds the PDF's text to
FACTS = "stats/facts.json"
ORDER = "stats/order.csv"  # the realised order of the runs within blocks (statistics/order.py)
INTERIM = "interim/look{look}.json"  # a stopping rule's decision after look k (sequential.smk)
VISITS = "raw/visits"  # each visit's copy of its ledger, schedule and system facts
RAW_DIR = "raw"
ROOTFS_DIR = "rootfs"
# Every cell this campaign ever planned, with its position: written beside schedule.csv by
# the schedule step (not a Snakemake output, which Snakemake deletes before the step runs).
POSITIONS = "schedule.positions.csv"

# Logs of the steps that are not per cell (one per rule; the cell steps' is LOG above).
STEP_LOG = "logs/{step}.log"
PREFLIGHT_LOG = "logs/preflight/{environment}.log"
ROOTFS_LOG = "logs/rootfs/{image}.log"
# an image handed to an environment's runtime (runtimes/<kind>.py provide): what was handed
# over, where the runtime keeps it when in the campaign (Charliecloud's directory), the log
PROVIDED = "provided/{environment}.json"
PROVIDED_DIR = "provided/{environment}.image"
PROVIDED_LOG = "logs/provided/{environment}.log"
DATASET_LOG = "logs/dataset{dataset_dir}/{dataset_name}.log"

# The analysis: quality -> stats per model -> correction -> figures, tables, numbers -> PDF.
ANNOTATED = "stats/annotated.csv"
KEPT = "stats/kept.csv"
QUALITY = "stats/quality.json"
MODEL_COMPARISONS = "stats/models/{model}.csv"
MODEL_DESCRIPTIVES = "stats/models/{model}.descriptives.csv"
DESCRIPTIVES = "stats/descriptives.csv"
PAPER_DIR = "paper"
FIGURES_DIR = PAPER_DIR + "/figures"
FIGURES_TEX = PAPER_DIR + "/figures.tex"
TABLES_DIR = PAPER_DIR + "/tables"
TABLE = TABLES_DIR + "/{table}.tex"
# The tables step's outputs, in the order the rule names them
TABLES = ("headline", "estimates", "tests", "descriptives", "system", "memory",
          "environments", "workloads", "design", "memory-chain", "phases")
NUMBERS_TEX = PAPER_DIR + "/numbers.tex"
QUALITY_TEX = PAPER_DIR + "/quality.tex"
PDF = PAPER_DIR + "/paper.pdf"
# A factorial campaign's effects (statistics/factorial.py) and its paper section, beside
# which the half-normal plots lie (publishing/factorial_paper.py)
EFFECTS = "stats/effects.csv"
FACTORIAL_TEX = PAPER_DIR + "/factorial.tex"
# a factorial campaign's abstract words (\fxcompare, \fxheadline), written beside it
FACTORIAL_ABSTRACT = PAPER_DIR + "/factorial-abstract.tex"
REVIEW = PAPER_DIR + "/review.json"  # what a reviewer would reject (publishing/review.py)

# A rehearsal's own files (campaign/rehearsal.py), in the rehearsal campaign's root
REHEARSAL_CONFIG = "rehearsal-config.yaml"
REHEARSAL_JSON = "rehearsal.json"
REHEARSAL_MD = "rehearsal.md"


# The file that marks a checkout's root: Snakemake runs there (README), so that folder is
# the working directory against which results_dir and analysis.import_csv are relative.
PROJECT_MARKER = "Snakefile"


def image_slug(image: str) -> str:
    """An image name as one path component (the rootfs folder, its marker and its log)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", image)


def project_root(config_file: Path, directory: Path | None = None) -> Path:
    """The working directory Snakemake will resolve a config's relative paths against, as
    `containertax check` sees it: `directory` where given (Snakemake's --directory), else
    the nearest folder above the config file that holds the Snakefile (the checkout the
    README runs Snakemake in), else the current directory. The current directory itself
    is returned as '.', so that paths and messages stay as they were there."""
    if directory is not None:
        root = Path(directory)
    else:
        here = Path(config_file).resolve().parent
        root = next((d for d in (here, *here.parents) if (d / PROJECT_MARKER).is_file()),
                    Path.cwd())
    return Path(".") if root.resolve() == Path.cwd().resolve() else root.resolve()


def rep_label(repetition: int) -> str:
    """The repetition as new files name it: rep001 whatever the campaign's size."""
    return f"{repetition:0{REP_WIDTH}d}"


def legacy_labels(repetition: int) -> list[str]:
    """Names older records may carry (width 2, as the committed H100 records, or none)."""
    return list(dict.fromkeys([f"{repetition:02d}", str(repetition)]))


@dataclass(frozen=True)
class CellPaths:
    """The files of one cell (one model, environment and repetition)."""

    root: Path
    model: str
    environment: str
    label: str

    def _at(self, template: str) -> Path:
        return self.root / template.format(model=self.model, environment=self.environment,
                                           rep=self.label)

    @property
    def raw(self) -> Path:
        return self._at(RAW)

    @property
    def telemetry(self) -> Path:
        return self._at(TELEMETRY)

    @property
    def requests(self) -> Path:
        return self._at(REQUESTS)

    @property
    def run_log(self) -> Path:
        return self._at(RUN_LOG)

    @property
    def cooldown(self) -> Path:
        return self._at(COOLDOWN)

    @property
    def gate(self) -> Path:
        return self._at(GATE)

    @property
    def side_files(self) -> list[Path]:
        """The files in raw/ that belong to the record: pairing them with another record
        would be wrong."""
        return [self.cooldown, self.telemetry, self.requests, self.run_log]

    @property
    def ran(self) -> Path:
        return self._at(RAN)

    @property
    def done(self) -> Path:
        return self._at(DONE)


@dataclass(frozen=True)
class CampaignPaths:
    """Every location under one campaign's root (results_dir/campaign)."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    def at(self, template: str, **fill: str) -> Path:
        return self.root / template.format(**fill) if fill else self.root / template

    def cell(self, model: str, environment: str, repetition: int) -> CellPaths:
        """A cell's files: under an older name where its record or cooldown already exists
        there, else under the fixed-width name."""
        for label in legacy_labels(repetition):
            old = CellPaths(self.root, model, environment, label)
            if old.raw.exists() or old.cooldown.exists():
                return old
        return CellPaths(self.root, model, environment, rep_label(repetition))

    def cell_labelled(self, model: str, environment: str, label: str) -> CellPaths:
        """A cell's files under the label a rule's wildcard gives (rep001 or an older name)."""
        return CellPaths(self.root, model, environment, label)

    @property
    def raw_dir(self) -> Path:
        return self.root / RAW_DIR

    def raw_records(self) -> list[Path]:
        """Every raw record present, whatever its name's width."""
        return sorted(p for p in self.raw_dir.glob("*/*/rep*.json")
                      if p.name.count(".") == 1 and p.stem[3:].isdigit())
        # (isdigit takes any script's digits: rep٠٠١.json and rep².json are listed, and
        # integrity.canonical_repetition names them, never read as a cell's record)

    def aside(self, why: str, stamp: str) -> Path:
        """Where files of raw/ are moved aside (ASIDE), for one reason at one time."""
        return self.at(ASIDE, why=why, stamp=stamp)

    def telemetry_files(self, environment: str) -> list[Path]:
        return sorted(self.raw_dir.glob(f"*/{environment}/rep*.telemetry.csv"))


    @property
    def ledger(self) -> Path:
        return self.root / LEDGER

    @property
    def hashes(self) -> Path:
        """The sha256 of each file a step derived (a look, derived options, runs.csv), one
        JSON line per write (core.records.hash_written): not the ledger, which holds the
        cells' steps, so building a paper from committed records writes no ledger."""
        return self.root / HASHES

    def ledgers(self) -> list[Path]:
        """Every ledger the campaign holds: each lane's, and the copies each visit to a
        machine keeps under raw/visits/ (scripts/gpu-campaign.sh), which a fresh clone
        has without the others."""
        return (sorted(self.root.glob("ledger*.jsonl"))
                + sorted((self.root / VISITS).glob("*/ledger*.jsonl")))

    @property
    def order(self) -> Path:
        """The realised order of the runs within blocks (the quality rule)."""
        return self.root / ORDER

    @property
    def verified(self) -> Path:
        return self.root / VERIFIED

    @property
    def run_lock(self) -> Path:
        return self.root / RUN_LOCK

    @property
    def writer_lock(self) -> Path:
        return self.root / WRITER_LOCK

    @property
    def writer(self) -> Path:
        """Who holds writer_lock: working folder, config, process, host, since when."""
        return self.root / WRITER

    @property
    def schedule(self) -> Path:
        return self.root / SCHEDULE

    @property
    def system(self) -> Path:
        return self.root / SYSTEM

    @property
    def resolved(self) -> Path:
        return self.root / RESOLVED

    @property
    def pin(self) -> Path:
        """The campaign's identity, pinned by its first invocation (config.pin)."""
        return self.root / PIN

    @property
    def baseline(self) -> Path:
        """The idle temperature the adaptive cooldown returns to (thermal.cooldown)."""
        return self.root / BASELINE

    @property
    def compile_cache(self) -> Path:
        """torch.compile's caches, bound at the same place in every environment."""
        return self.root / COMPILE_CACHE

    def compile_cache_arm(self, model: str) -> Path:
        """The compile cache a model with its own arm (cold, per_environment) runs with:
        one path for every environment, so that a path never tells them apart."""
        return self.at(COMPILE_CACHE_ARM, model=model)

    def compile_cache_saved(self, model: str, environment: str) -> Path:
        """An environment's own primed cache of a per_environment model, between runs."""
        return self.at(COMPILE_CACHE_SAVED, model=model, environment=environment)

    def preflight(self, environment: str) -> Path:
        return self.at(PREFLIGHT, environment=environment)

    def rootfs(self, image: str) -> Path:
        """An image's exported root filesystem (the folder named by image_slug)."""
        return self.at(ROOTFS, image=image_slug(image))

    def rootfs_marker(self, image: str) -> Path:
        return self.at(ROOTFS_MARKER, image=image_slug(image))

    def provided(self, environment: str) -> Path:
        return self.at(PROVIDED, environment=environment)

    def image_dir(self, environment: str) -> Path:
        return self.at(PROVIDED_DIR, environment=environment)

    def rootfs_log(self, image: str) -> Path:
        """The log of exporting an image's root filesystem (logs/rootfs/<slug>.log)."""
        return self.at(ROOTFS_LOG, image=image_slug(image))

    @property
    def runs(self) -> Path:
        return self.root / RUNS

    @property
    def import_report(self) -> Path:
        """The import step's counts (IMPORT_REPORT)."""
        return self.root / IMPORT_REPORT

    @property
    def requests_all(self) -> Path:
        return self.root / REQUESTS_ALL

    @property
    def comparisons(self) -> Path:
        """Every comparison after correction within its family (the correct rule)."""
        return self.root / COMPARISONS

    @property
    def findings(self) -> Path:
        """The findings table (the findings rule): what the paper prints."""
        return self.root / FINDINGS

    @property
    def facts(self) -> Path:
        """The campaign's facts (the findings rule): what the prose states."""
        return self.root / FACTS

    def work(self, name: str) -> Path:
        """A scratch folder of one attempt (kept when it fails, for the post-mortem)."""
        return self.root / WORK / name

    def interim(self, look: int) -> Path:
        """The interim decision of a stopping rule after its look-th look (1-based),
        written atomically by the interim checkpoint (statistics.sequential)."""
        return self.root / INTERIM.format(look=look)

    @property
    def positions(self) -> Path:
        """Every cell ever planned, with its position (schedule.positions.csv)."""
        return self.root / POSITIONS

    def step_log(self, step: str) -> Path:
        """The log of a step that is not per cell (logs/<step>.log)."""
        return self.at(STEP_LOG, step=step)

    def preflight_log(self, environment: str) -> Path:
        return self.at(PREFLIGHT_LOG, environment=environment)

    @property
    def rootfs_dir(self) -> Path:
        return self.root / ROOTFS_DIR

    @property
    def annotated(self) -> Path:
        return self.root / ANNOTATED

    @property
    def kept(self) -> Path:
        return self.root / KEPT

    @property
    def quality(self) -> Path:
        """The quality report (stats/quality.json)."""
        return self.root / QUALITY

    def model_comparisons(self, model: str) -> Path:
        return self.at(MODEL_COMPARISONS, model=model)

    def model_descriptives(self, model: str) -> Path:
        return self.at(MODEL_DESCRIPTIVES, model=model)

    @property
    def descriptives(self) -> Path:
        return self.root / DESCRIPTIVES

    @property
    def paper_dir(self) -> Path:
        return self.root / PAPER_DIR

    @property
    def figures_dir(self) -> Path:
        return self.root / FIGURES_DIR

    @property
    def figures_tex(self) -> Path:
        return self.root / FIGURES_TEX

    @property
    def tables_dir(self) -> Path:
        return self.root / TABLES_DIR

    def table(self, name: str) -> Path:
        return self.at(TABLE, table=name)

    @property
    def numbers_tex(self) -> Path:
        return self.root / NUMBERS_TEX

    @property
    def quality_tex(self) -> Path:
        return self.root / QUALITY_TEX

    @property
    def pdf(self) -> Path:
        return self.root / PDF

    @property
    def review(self) -> Path:
        return self.root / REVIEW

    @property
    def rehearsal_config(self) -> Path:
        return self.root / REHEARSAL_CONFIG

    @property
    def effects(self) -> Path:
        return self.root / EFFECTS

    @property
    def rehearsal_json(self) -> Path:
        return self.root / REHEARSAL_JSON

    @property
    def rehearsal_md(self) -> Path:
        return self.root / REHEARSAL_MD


# --- the analysis's files inside the folders its rules are given (publishing/report.py): the
# same names as the campaign-relative constants above, never spelled twice ------------------
FIGURES_IN_PAPER = Path(FIGURES_DIR).name  # the figures folder, as the paper's source names it


def quality_files(out_dir: Path) -> dict[str, Path]:
    """The quality rule's outputs in its folder: the annotated and kept runs, quality.json."""
    return {"annotated": out_dir / Path(ANNOTATED).name, "kept": out_dir / Path(KEPT).name,
            "report": out_dir / Path(QUALITY).name}


def figure_file(out_dir: Path, name: str, number: int | None = None) -> Path:
    """A figure's PDF: drawn as <name>.pdf, then renamed with its number in the paper
    (NN-<name>.pdf), for the captions of the HTML report."""
    return out_dir / (f"{number:02d}-{name}.pdf" if number is not None else f"{name}.pdf")


def figure_in_paper(figure: Path) -> str:
    """A figure's path as the paper's source includes it (relative to the paper folder)."""
    return f"{FIGURES_IN_PAPER}/{figure.name}"


def table_file(out_dir: Path, name: str) -> Path:
    """A generated table's LaTeX file in the tables rule's folder."""
    return out_dir / Path(TABLE.format(table=name)).name

# The prior results the discussion answers (publishing/discussion.py), relative to the
# checkout's root (the Snakefile's folder)
PRIOR_WORK = "resources/prior_work.yaml"

# The live status page (publishing/statuspage.py), rewritten after every cell; under a
# stopping rule it shows the interim decisions (INTERIM above, statistics/sequential.py)
STATUS_PAGE = "status.html"
# what the page read from each raw record, keyed by the record's (size, mtime_ns, inode):
# a rebuild after a cell parses only that cell's record (a cache: deleting it is harmless)
STATUS_CACHE = ".status-cache.json"


def status_page(root: Path) -> Path:
    """The campaign's status page: one self-contained HTML file, opened from disk."""
    return Path(root) / STATUS_PAGE


def status_cache(root: Path) -> Path:
    """The status page's cache of what it read from each raw record."""
    return Path(root) / STATUS_CACHE

# A study (config `study:`): several campaigns analysed as one (publishing/study.py,
# workflow/study.smk). Its files live under results_dir/study-<name>/.
STUDY_DIR = "study-{name}"
STUDY_CAMPAIGN = "campaigns/{campaign}.json"  # one campaign's analysis done, with its hashes
STUDY_TABLE = "study.csv"  # the study's family of comparisons, corrected together
STUDY_PAPER = "paper"
STUDY_PDF = "study.pdf"
# Options derived from a campaign's analysis (phase 2B -> docker_optimised of 2C and 2D),
# under the deriving campaign's root; rewritten only when their content changes.
DERIVED_OPTIONS = "derived/{environment}.yaml"


def study_root(results_dir: Path, name: str) -> Path:
    """The folder of one study's files (results_dir/study-<name>)."""
    return Path(results_dir) / STUDY_DIR.format(name=name)


def derived_options(campaign_root: Path, environment: str) -> Path:
    """Where a campaign's analysis writes the options it derives for `environment`."""
    return Path(campaign_root) / DERIVED_OPTIONS.format(environment=environment)
