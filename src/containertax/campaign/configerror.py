"""The error of a config that cannot drive a campaign. Its own module, below the three that
raise it (configfile, validation, config), so none imports another for it; config.ConfigError
is this class."""

from __future__ import annotations

from containertax.core.errors import ContainertaxError


class ConfigError(ContainertaxError, ValueError):
    """A config that cannot drive a campaign; the message says where and how to fix it."""
