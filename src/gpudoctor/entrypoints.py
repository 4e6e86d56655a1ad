"""Entry points of the installed distributions, read from their metadata files as text.

What :func:`importlib.metadata.entry_points` finds, for the few fields the plug-in registry uses,
without its cost: importing ``importlib.metadata`` pulls in the ``email`` package, ``zipfile`` and
``csv``, and naming a provider through ``dist.metadata`` parses the whole ``METADATA`` file with the
email parser (gpudoctor's own holds its README). Together that was about a quarter of what the
entrypoint gate spent (``benchmarks/gate.py``). The light probe reads distributions the same way
(``probe/_script.py``).

The rules are importlib.metadata's (Python 3.11, ``MetadataPathFinder``):

- distributions are ``*.dist-info`` and ``*.egg-info`` entries (suffix in any case) of each
  ``sys.path`` directory, in path order, and the ``EGG-INFO`` of a ``sys.path`` entry named
  ``*.egg`` (an easy_install egg); within one directory ``.dist-info`` before ``.egg-info`` (sorted
  by name here, where importlib.metadata keeps the file system's order);
- the first distribution of a normalised name wins (PEP 503: runs of ``-_.`` are one ``_``, lower
  case), as in ``entry_points()``;
- ``entry_points.txt`` is INI-like: ``[group]`` lines (the group is what lies between the
  brackets, spaces kept), then ``name = value``; blank lines and lines starting with ``#`` or ``;``
  are skipped (importlib.metadata skips only ``#``; configparser, which the entry point
  specification names, skips both);
- the ``Name`` and ``Version`` headers are matched in any case (email headers);
- ``value`` is ``module[:attr[.attr...]] [extras]``; :meth:`EntryPoint.load` imports the module
  and follows the attributes.

Distributions inside zip files (``sys.path`` entries that are archives) are not read: no
installer puts plug-ins there.
"""

from __future__ import annotations

import errno
import functools
import importlib
import os
import re
import stat
from collections.abc import Sequence

__all__ = ["Distribution", "EntryPoint", "entry_points"]

_VALUE_RE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")
_NORMALISE_RE = re.compile(r"[-_.]+")
_HEADERS = {"name": "Name", "version": "Version"}
_SUFFIXES = (".dist-info", ".egg-info")


def _normalise(name: str) -> str:
    return _NORMALISE_RE.sub("_", name).lower()


def _open_text(path: str, errors: str = "strict"):
    """``open(path)`` for reading UTF-8 text, refusing what is not a regular file without blocking
    (a FIFO planted as ``METADATA`` or ``entry_points.txt`` would hang importlib.metadata)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        os.set_blocking(fd, True)
        return open(fd, encoding="utf-8", errors=errors)
    except BaseException:
        os.close(fd)
        raise


class Distribution:
    """One installed distribution: its metadata directory (``_path``, as importlib.metadata names
    it) and the ``Name``/``Version`` headers of its ``METADATA`` (or ``PKG-INFO``), read up to the
    first blank line (the description that follows is never parsed)."""

    def __init__(self, path: str):
        self._path = path
        self._headers: dict[str, str] | None = None

    @property
    def metadata(self) -> dict[str, str]:
        """The ``Name`` and ``Version`` headers (a key is missing when the file lacks it)."""
        if self._headers is None:
            headers: dict[str, str] = {}
            for meta in ("METADATA", "PKG-INFO"):
                try:
                    with _open_text(os.path.join(self._path, meta), errors="replace") as fh:
                        for line in fh:
                            if not line.strip():
                                break
                            key, sep, value = line.partition(":")
                            key = _HEADERS.get(key.strip().lower(), "")
                            if sep and key and key not in headers:
                                headers[key] = value.strip()
                except OSError:
                    continue
                break
            self._headers = headers
        return self._headers

    @property
    def name(self) -> str:
        """The ``Name`` header, else the name in the directory's name."""
        return self.metadata.get("Name") or os.path.basename(self._path).rsplit(".", 1)[0].split("-", 1)[0]

    @property
    def version(self) -> str:
        return self.metadata.get("Version", "")

    def read_text(self, filename: str) -> str | None:
        try:
            with _open_text(os.path.join(self._path, filename)) as fh:
                return fh.read()
        except (OSError, UnicodeDecodeError):
            return None


class EntryPoint:
    """``name = value`` of ``group``, provided by ``dist``: the attributes importlib.metadata's
    ``EntryPoint`` has for the registry, and :meth:`load`."""

    def __init__(self, name: str, value: str, group: str, dist: Distribution | None = None):
        self.name, self.value, self.group, self.dist = name, value, group, dist

    def load(self):
        """Import the module and return the object the value names. Raises ``ValueError`` for a
        malformed value, and whatever the import raises."""
        match = _VALUE_RE.match(self.value)
        if match is None:
            raise ValueError(f"entry point {self.name!r}: malformed value {self.value!r}")
        obj = importlib.import_module(match.group("module"))
        for attr in filter(None, (match.group("attr") or "").split(".")):
            obj = getattr(obj, attr)
        return obj

    def __repr__(self) -> str:
        return f"EntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


def _sections(text: str):
    """(group, name, value) for each entry of an ``entry_points.txt``."""
    group = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            group = line.strip("[]")
            continue
        name, sep, value = line.partition("=")
        if group is not None and sep:
            yield group, name.strip(), value.strip()


@functools.lru_cache(maxsize=8)
def _distributions(path: tuple[str, ...]) -> tuple[Distribution, ...]:
    """The distributions on ``path``, the first of each normalised name."""
    seen: set[str] = set()
    out: list[Distribution] = []
    for entry in path:
        directory = entry or "."
        try:
            names = os.listdir(directory)
        except OSError:  # a missing directory, a file (zip) on sys.path
            continue
        infos = sorted(n for n in names if n.lower().endswith(_SUFFIXES[0]))
        eggs = sorted(n for n in names if n.lower().endswith(_SUFFIXES[1]))
        for item in infos + eggs:
            dist = Distribution(os.path.join(directory, item))
            # importlib.metadata names a distribution by its directory only for the exact suffix
            stem, dot, ext = item.rpartition(".")
            key = _normalise(stem.split("-", 1)[0] if "." + ext in _SUFFIXES else dist.name)
            if key not in seen:
                seen.add(key)
                out.append(dist)
        if os.path.basename(directory).lower().endswith(".egg"):
            for item in names:
                if item.lower() == "egg-info":
                    dist = Distribution(os.path.join(directory, item))
                    if _normalise(dist.name) not in seen:
                        seen.add(_normalise(dist.name))
                        out.append(dist)
    return tuple(out)


def entry_points(group: str, path: Sequence[str] | None = None) -> list[EntryPoint]:
    """Every entry point of ``group`` on ``path`` (default ``sys.path``), in distribution order."""
    import sys

    out: list[EntryPoint] = []
    for dist in _distributions(tuple(sys.path if path is None else path)):
        text = dist.read_text("entry_points.txt")
        if not text or group not in text:
            continue
        out.extend(EntryPoint(name, value, g, dist) for g, name, value in _sections(text) if g == group)
    return out
