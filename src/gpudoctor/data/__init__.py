"""Data tables shipped with gpudoctor (TOML), read from this package's directory.

Every row of every table names its ``source`` (release notes, docs, wheel
metadata); a test enforces that. Tables are read once per process.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["load_table", "table_names"]

#: the tables sit beside this module: a plain directory read, not ``importlib.resources``, whose
#: import pulls pathlib, tempfile, zipfile and urllib into every start of the entrypoint gate
_DIR = os.path.dirname(os.path.abspath(__file__))


@functools.cache
def load_table(name: str) -> dict[str, Any]:
    """Parse ``data/<name>.toml``. Raises ``FileNotFoundError`` for an unknown table."""
    with open(os.path.join(_DIR, f"{name}.toml"), encoding="utf-8") as fh:
        return tomllib.loads(fh.read())


def table_names() -> list[str]:
    """Names of every shipped table (without ``.toml``)."""
    return sorted(n[:-5] for n in os.listdir(_DIR) if n.endswith(".toml"))
