"""Where every file of a campaign lives: one object, used by the Snakefile, every module and
the tests, so that no location is rebuilt by hand.

A cell's files are named by its repetition with a fixed width (rep001), so raising a
campaign's repetitions renames nothing. Records written before that (rep01, rep1: the width
once followed the repetition count) are still found: a cell whose raw record or cooldown
exists under an older name keeps that name, and committed records are never renamed.

Standard library only: the Snakefile imports this when it plans the workflow.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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
# The run and cooldown steps' own outputs: the raw record and its .cooldown.json are no
# rule's output, so Snakemake never deletes them (before a forced job, after a failed one).
RAN = "cells/{model}/{environment}/rep{rep}.ran.json"
DONE = "cells/{model}/{environment}/rep{rep}.done.json"
LOG = "logs/{step}/{model}/{environment}/rep{rep}.log"
LEDGER = "ledger.jsonl"
# Raw records found whole when the workflow was last planned, by (size, mtime_ns, inode):
# a record is parsed again only when one of those changes (campaign.integrity)
VERIFIED = ".raw-verified.json"
RUN_LOCK = ".run.lock"
SCHEDULE = "schedule.csv"
SYSTEM = "system.json"
RESOLVED = "config.resolved.json"
BASELINE = "thermal-baseline.json"  # idle temperature for thermal.cooldown: adaptive
COMPILE_CACHE = "compile-cache"  # torch.compile's caches, shared by every environment
PREFLIGHT = "preflight/{environment}.json"
ROOTFS = "rootfs/{image}"
ROOTFS_MARKER = "rootfs/{image}.image.json"
RUNS = "runs.csv"
REQUESTS_ALL = "requests.csv"
WORK = "work"
COMPARISONS = "stats/comparisons.csv"
ORDER = "stats/order.csv"  # the realised order of the runs within blocks (analysis/order.py)
INTERIM = "interim/look{look}.json"  # a stopping rule's decision after look k (sequential.smk)
VISITS = "raw/visits"  # each visit's copy of its ledger, schedule and system facts


# The file that marks a checkout's root: Snakemake runs there (README), so that folder is
# the working directory against which results_dir and analysis.import_csv are relative.
PROJECT_MARKER = "Snakefile"


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
        return self.root / "raw"

    def raw_records(self) -> list[Path]:
        """Every raw record present, whatever its name's width."""
        return sorted(p for p in self.raw_dir.glob("*/*/rep*.json")
                      if p.name.count(".") == 1 and p.stem[3:].isdigit())

    def aside(self, why: str, stamp: str) -> Path:
        """Where files of raw/ are moved aside (ASIDE), for one reason at one time."""
        return self.at(ASIDE, why=why, stamp=stamp)

    def telemetry_files(self, environment: str) -> list[Path]:
        return sorted(self.raw_dir.glob(f"*/{environment}/rep*.telemetry.csv"))


    @property
    def ledger(self) -> Path:
        return self.root / LEDGER

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
    def schedule(self) -> Path:
        return self.root / SCHEDULE

    @property
    def system(self) -> Path:
        return self.root / SYSTEM

    @property
    def resolved(self) -> Path:
        return self.root / RESOLVED

    @property
    def baseline(self) -> Path:
        """The idle temperature the adaptive cooldown returns to (thermal.cooldown)."""
        return self.root / BASELINE

    @property
    def compile_cache(self) -> Path:
        """torch.compile's caches, bound at the same place in every environment."""
        return self.root / COMPILE_CACHE

    def preflight(self, environment: str) -> Path:
        return self.at(PREFLIGHT, environment=environment)

    def rootfs(self, image_slug: str) -> Path:
        return self.at(ROOTFS, image=image_slug)

    def rootfs_marker(self, image_slug: str) -> Path:
        return self.at(ROOTFS_MARKER, image=image_slug)

    @property
    def runs(self) -> Path:
        return self.root / RUNS

    @property
    def requests_all(self) -> Path:
        return self.root / REQUESTS_ALL

    @property
    def comparisons(self) -> Path:
        """Every comparison after correction within its family (the correct rule)."""
        return self.root / COMPARISONS

    def work(self, name: str) -> Path:
        """A scratch folder of one attempt (kept when it fails, for the post-mortem)."""
        return self.root / WORK / name

    def interim(self, look: int) -> Path:
        """The interim decision of a stopping rule after its look-th look (1-based),
        written atomically by the interim checkpoint (analysis.sequential)."""
        return self.root / INTERIM.format(look=look)
