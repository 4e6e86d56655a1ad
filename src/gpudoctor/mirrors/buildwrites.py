"""Moved to :mod:`gpudoctor.sources.buildwrites` (package sources grouped by tool); kept for imports."""

from typing import Any

import gpudoctor.sources.buildwrites as _moved
from gpudoctor.sources.buildwrites import *  # noqa: F403


def __getattr__(name: str) -> Any:  # every name, private ones included, from the new home
    return getattr(_moved, name)
