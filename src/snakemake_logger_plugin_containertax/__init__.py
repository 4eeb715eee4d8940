"""Snakemake reads `--configfile` before the Snakefile runs and, where it cannot, says only
"Config file is not valid JSON or YAML" or "Config file must be given as JSON or YAML with
keys at top level", naming neither the file nor the line (issue #44). No part of the
workflow runs by then; but Snakemake imports every installed logger plugin while it builds
its command line, so this package is one for that reason alone: on import it wraps
Snakemake's config loading so that, where Snakemake refuses a config file, the message is
containertax's reading of it (the file, line and column, and what is wrong:
campaign.configfile.unreadable). A file Snakemake reads is never touched, and the handler
below logs nothing (choosing it with --logger changes nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from logging import LogRecord
from pathlib import Path
from types import TracebackType
from typing import Any

from snakemake_interface_common.exceptions import WorkflowError
from snakemake_interface_logger_plugins.base import LogHandlerBase


def _clear(load: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Snakemake's load_configfile, its refusal reworded by containertax's reader."""

    def load_configfile(configpath: Any) -> Any:
        try:
            return load(configpath)
        except Exception as exc:  # WorkflowError; UnicodeDecodeError for a binary file
            if not isinstance(configpath, str | Path):
                raise
            from containertax.campaign.configfile import unreadable

            better = unreadable(Path(configpath))
            if better is None:  # containertax reads it: Snakemake's own words stand
                raise
            # a WorkflowError whose traceback ends in Snakemake's own code: Snakemake then
            # prints the message alone, with no frame (its cut_traceback)
            raise WorkflowError(better).with_traceback(_ending_in_snakemake(
                exc.__traceback__)) from None

    load_configfile.__wrapped__ = load  # type: ignore[attr-defined]
    return load_configfile


def _ending_in_snakemake(tb: TracebackType | None) -> TracebackType | None:
    """The traceback cut after its innermost frame in Snakemake's package."""
    import snakemake

    root = str(Path(snakemake.__file__).resolve().parent)
    last, walk = None, tb
    while walk is not None:
        if str(Path(walk.tb_frame.f_code.co_filename).resolve()).startswith(root):
            last = walk
        walk = walk.tb_next
    if last is not None:
        last.tb_next = None
    return tb


def _install() -> None:
    """Wrap both names Snakemake loads config files by (the --configfile settings and the
    Snakefile's configfile: directive); once, and not at all where they moved."""
    try:
        from snakemake.common import configfile
        from snakemake.settings import types
    except ImportError:
        return
    for module in (configfile, types):
        load = getattr(module, "load_configfile", None)
        if callable(load) and not hasattr(load, "__wrapped__"):
            module.load_configfile = _clear(load)


_install()


class LogHandler(LogHandlerBase):
    """The handler a logger plugin must have; it logs nothing."""

    def emit(self, record: LogRecord) -> None:
        return None

    @property
    def writes_to_stream(self) -> bool:
        return False

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return False

    @property
    def has_formatter(self) -> bool:
        return False

    @property
    def needs_rulegraph(self) -> bool:
        return False
