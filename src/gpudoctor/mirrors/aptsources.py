"""Moved to :mod:`gpudoctor.sources.aptsources` (package sources grouped by tool); kept for imports."""

from typing import Any

import gpudoctor.sources.aptsources as _moved
from gpudoctor.sources.aptsources import *  # noqa: F403


def __getattr__(name: str) -> Any:  # every name, private ones included, from the new home
    return getattr(_moved, name)
