"""Where the files the workflow needs at run time are: the Snakefile and its rules, the
schemas, the conda environment, the paper's sources. They are package data under
containertax/share/ (links to the checkout's own folders there, copied into an installed
wheel), found through importlib.resources: the same in a checkout, an editable install
and a plain `pip install .`, without counting parent folders. Paths are returned resolved:
in a checkout they are the checkout's own files, as the rules and messages name them.

Ground floor: standard library only.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def share() -> Path:
    """The package's share/ folder (in a checkout: links to Snakefile, workflow/, paper/,
    envs/, resources/ of the checkout)."""
    return Path(str(files("containertax"))) / "share"


def package() -> Path:
    """The containertax package's own folder (its modules, for the analysis's code inputs)."""
    return Path(str(files("containertax")))


def snakefile() -> Path:
    return (share() / "Snakefile").resolve()


def schema(name: str) -> Path:
    """A schema of workflow/schemas/ (config.schema.yaml, record.schema.yaml)."""
    return (share() / "workflow" / "schemas" / name).resolve()


def paper_dir() -> Path:
    """The paper's sources (main.tex, references.bib)."""
    return (share() / "paper").resolve()


def resource(relative: str) -> Path:
    """A data file of resources/ (e.g. the prior results the discussion answers), named by
    its path relative to the checkout's root (campaign/paths.py spells it)."""
    return (share() / relative).resolve()


def checkout() -> Path:
    """The folder the Snakefile really lies in: the checkout (through the link) for a
    checkout or an editable install, the installed share/ folder otherwise (then no git
    commit is known)."""
    return snakefile().parent
