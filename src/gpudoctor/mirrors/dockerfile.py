"""Moved to :mod:`gpudoctor.sources.dockerfile` (package sources grouped by tool); kept for imports."""

from typing import Any

import gpudoctor.sources.dockerfile as _moved
from gpudoctor.sources.dockerfile import *  # noqa: F403


def __getattr__(name: str) -> Any:  # every name, private ones included, from the new home
    return getattr(_moved, name)
