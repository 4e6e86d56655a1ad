"""Moved to :mod:`gpudoctor.sources.aptsources` (package sources grouped by tool); kept for imports."""

from gpudoctor.sources.aptsources import *  # noqa: F403
from gpudoctor.sources.aptsources import (  # noqa: F401  (private names some callers use)
    DISTRO_COMPONENTS,
    VALID_PART_NAME,
    SourcesError,
    classify_uri,
    distro_archive,
    find_rewrites,
    is_distro_source,
    parse_deb822,
    parse_one_line,
    replace_base,
    rewrite_deb822,
    rewrite_one_line,
)
