"""Moved to :mod:`gpudoctor.sources.pipconf` (package sources grouped by tool); kept for imports."""

from typing import Any

import gpudoctor.sources.pipconf as _moved
from gpudoctor.sources.pipconf import *  # noqa: F403


def __getattr__(name: str) -> Any:  # every name, private ones included, from the new home
    return getattr(_moved, name)
