"""One model for the version strings gpudoctor reads, and how they compare.

The shapes this tool meets, and how each is read:

- dotted releases, PEP 440 (``packaging.version``, the parser pip uses): the NVIDIA driver
  ``535.104.05`` (leading zeros do not count: 535.104.5), CUDA ``12.4``, nvcc's ``V12.4.131``
  (a leading ``v``/``V`` is allowed), cuDNN ``8.9.7``, torch ``2.13.0+cu124`` (a local tag) and
  ``2.1.0a0+git34ab`` (a pre-release of a source build): :func:`parse`;
- CUDA API integers (``cudaDriverGetVersion``, ``cudaRuntimeGetVersion``: 1000*major + 10*minor):
  ``12040`` -> ``12.4``: :func:`cuda_from_int`;
- cuDNN integers (``cudnnGetVersion``: major*1000 + minor*100 + patch up to cuDNN 8, major*10000 +
  minor*100 + patch from cuDNN 9): ``8907`` -> (8, 9, 7), ``90100`` -> (9, 1, 0): :func:`cudnn_from_int`;
- PyTorch wheel tags (the local version of a CUDA build): ``cu118`` -> ``11.8``, ``cu92`` -> ``9.2``:
  :func:`wheel_cuda`;
- a symbol-version suffix ``12_4`` and a printed tuple ``(8, 3, 2)`` (from logs): :func:`underscore`,
  :func:`from_tuple_text`.

Failure is well defined: every function returns ``None`` for what it cannot read (``""``, ``N/A``,
``ERR!``, ``12.x``, non-ASCII digits) and never raises. :func:`v` is the lenient form for sort keys and
comparisons where an unreadable version should sort first (it reads as ``0``).
"""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

__all__ = [
    "ZERO",
    "Version",
    "compare",
    "cuda_from_int",
    "cudnn_from_int",
    "from_tuple_text",
    "libcuda_version",
    "major_minor",
    "parse",
    "split_local",
    "underscore",
    "v",
    "wheel_cuda",
]

#: what :func:`v` gives for a version it cannot read
ZERO = Version("0")

_INT = re.compile(r"[0-9]+")
_WHEEL = re.compile(r"cu([0-9]{2,})")
_LIBCUDA = re.compile(r"libcuda\.so\.([0-9]+\.[0-9]+(?:\.[0-9]+)?)$")


def parse(text: str | None) -> Version | None:
    """The version ``text`` names (surrounding blanks ignored), or None when it is not one."""
    if not isinstance(text, str):
        return None
    s = text.strip()
    if not s or not s.isascii():
        return None
    try:
        return Version(s)
    except InvalidVersion:
        return None


def v(text: str | None) -> Version:
    """:func:`parse`, with an unreadable version read as ``0`` (it sorts before every real one)."""
    return parse(text) or ZERO


def compare(a: str | None, b: str | None) -> int | None:
    """-1, 0 or 1 as ``a`` is older than, equal to or newer than ``b``; None when either is unreadable."""
    pa, pb = parse(a), parse(b)
    if pa is None or pb is None:
        return None
    return (pa > pb) - (pa < pb)


def major_minor(text: str | None) -> tuple[int, int] | None:
    """``"12.4.131"`` -> (12, 4), ``"12"`` -> (12, 0); None when unreadable."""
    p = parse(text)
    if p is None:
        return None
    release = (*p.release, 0)
    return release[0], release[1]


def split_local(version: str) -> tuple[str, str]:
    """``"2.1.0+cu121"`` -> (``"2.1.0"``, ``"cu121"``); no ``+``: (version, "")."""
    public, _, local = version.partition("+")
    return public, local


def _int(value: int | str | None) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and _INT.fullmatch(value.strip()):
        return int(value.strip())
    return None


def cuda_from_int(value: int | str | None) -> str | None:
    """A CUDA API integer as ``major.minor``: ``12040`` -> ``"12.4"``; None when not a non-negative integer."""
    n = _int(value)
    if n is None:
        return None
    return f"{n // 1000}.{(n % 1000) // 10}"


def cudnn_from_int(value: int | str | None) -> tuple[int, int, int] | None:
    """A cuDNN version integer as (major, minor, patch): ``8907`` -> (8, 9, 7), ``90100`` -> (9, 1, 0)."""
    n = _int(value)
    if n is None:
        return None
    if n >= 90000:
        return n // 10000, (n % 10000) // 100, n % 100
    return n // 1000, (n % 1000) // 100, n % 100


def wheel_cuda(tag: str | None) -> str | None:
    """The CUDA of a PyTorch wheel tag: ``cu118`` -> ``"11.8"``, ``cu92`` -> ``"9.2"``; None for ``cpu``,
    ``rocm6.1`` or anything else (the last digit is the minor version, as PyTorch names its indexes)."""
    m = _WHEEL.fullmatch(tag.strip()) if isinstance(tag, str) else None
    if m is None:
        return None
    digits = m.group(1)
    return f"{int(digits[:-1])}.{digits[-1]}"


def libcuda_version(path: str | None) -> str | None:
    """The driver version in a versioned libcuda's file name: ``.../libcuda.so.535.104.05`` -> ``"535.104.05"``;
    None for ``libcuda.so.1``. WSL's ``libcuda.so.1.1`` reads as ``"1.1"`` (no driver version): callers
    leave WSL's library directory out."""
    if not isinstance(path, str):
        return None
    m = _LIBCUDA.search(path)
    return m.group(1) if m else None


def underscore(value: str | None) -> str | None:
    """A symbol-version suffix ``12_4`` -> ``"12.4"``; None for other shapes."""
    if not isinstance(value, str) or not re.fullmatch(r"[0-9]+(?:_[0-9]+)*", value):
        return None
    return value.replace("_", ".")


def from_tuple_text(value: str | None) -> str | None:
    """The numbers of a printed tuple joined with dots: ``(8, 3, 2)`` -> ``"8.3.2"``; None without a number."""
    parts = _INT.findall(value) if isinstance(value, str) else []
    return ".".join(parts) if parts else None
