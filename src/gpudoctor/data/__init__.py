"""Data tables shipped with gpudoctor (TOML), loaded with importlib.resources.

Every row of every table names its ``source`` (release notes, docs, wheel
metadata); a test enforces that. Tables are read once per process.
"""

from __future__ import annotations

import functools
import sys
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["load_table", "table_names"]


@functools.cache
def load_table(name: str) -> dict[str, Any]:
    """Parse ``data/<name>.toml``. Raises ``FileNotFoundError`` for an unknown table."""
    text = resources.files(__name__).joinpath(f"{name}.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def table_names() -> list[str]:
    """Names of every shipped table (without ``.toml``)."""
    return sorted(p.name[:-5] for p in resources.files(__name__).iterdir() if p.name.endswith(".toml"))
