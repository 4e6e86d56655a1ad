"""Moved to :mod:`gpudoctor.sources.pipconf` (package sources grouped by tool); kept for imports."""

from gpudoctor.sources.pipconf import *  # noqa: F403
from gpudoctor.sources.pipconf import __all__  # noqa: F401
