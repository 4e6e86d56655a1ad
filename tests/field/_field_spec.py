"""What the field corpus's two formats share: a TOML spec (a case's ``case.toml``, a log's
sidecar ``<name>.toml``) read and checked the same way -- readable TOML, no unknown key, the
public report's URL as ``source``, the required strings present. Used by ``field_replay.py``
and ``logs_replay.py``, which add the checks of their own format."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the 3.10 branch
    import tomli as tomllib

#: a public report's address: http(s), a host with a dot, a path
URL = re.compile(r"^https?://[a-z0-9.-]+\.[a-z]{2,}/")


def read_spec(path: Path, where: str, error: type[ValueError]) -> dict[str, Any]:
    """``path`` parsed as TOML; ``error(f"{where}: ...")`` when it cannot be read or parsed."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise error(f"{where}: {exc}") from None


def spec_problems(spec: Mapping[str, Any], keys: Iterable[str], required: Iterable[str]) -> list[str]:
    """What breaks the rules every spec shares: keys outside ``keys``, a ``source`` that is not
    a public URL, a ``required`` key that is not a non-empty string."""
    problems = []
    unknown = set(spec) - set(keys)
    if unknown:
        problems.append(f"unknown keys {sorted(unknown)}")
    if not isinstance(spec.get("source"), str) or not URL.match(spec["source"]):
        problems.append("source must be a public URL (the report's)")
    for key in required:
        if not isinstance(spec.get(key), str) or not spec[key]:
            problems.append(f"{key} is required")
    return problems
