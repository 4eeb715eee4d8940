"""The one base class of the project's known failures: the command line catches it and
prints the message in one line with exit status 1, without a traceback.

Ground floor: imports nothing of containertax, so every module may raise a subclass and
the command line may catch them all without importing the modules that raise them.
"""

from __future__ import annotations


class ContainertaxError(Exception):
    """A failure whose message already says what happened, where, and how to fix it."""
