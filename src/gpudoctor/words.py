"""Counting words: the one place plural forms are chosen (``1 check``, ``2 checks``).

Low-level and dependency-free, so checks, fixes, the CLI and the renderers
can all import it without import cycles.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["noun", "plural", "verb"]


def noun(n: float, word: str, many: str | None = None) -> str:
    """The form of ``word`` that goes with ``n``, without the number:
    ``noun(1, "file") == "file"``, ``noun(2, "file") == "files"``,
    ``noun(2, "index", "indexes") == "indexes"``. Only exactly 1 is singular
    (``0 files``, ``0.5 CPUs``)."""
    return word if n == 1 else (many or word + "s")


def plural(n: float, word: str, many: str | None = None) -> str:
    """``plural(1, "check") == "1 check"``, ``plural(2, "check") == "2 checks"``;
    ``many`` for irregular plurals (``plural(3, "index", "indexes")``). A float
    is written with ``:g`` (``plural(1.0, "CPU") == "1 CPU"``, ``plural(1.5, "CPU") == "1.5 CPUs"``)."""
    text = format(n, "g") if isinstance(n, float) else str(n)
    return f"{text} {noun(n, word, many)}"


def verb(n: float, one: str, many: str) -> str:
    """The verb form agreeing with ``n`` things: ``verb(1, "is", "are") == "is"``."""
    return one if n == 1 else many


def models(names: Iterable[str]) -> str:
    """GPU names summarised per model, in the order first seen: ``"8x NVIDIA H100 80GB HBM3"``,
    ``"NVIDIA A100-SXM4-80GB, NVIDIA L4"`` (a count only where a model repeats), so a node with
    thousands of GPUs reads as one short phrase, not a list of every device."""
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{n}x {name}" if n > 1 else name for name, n in counts.items())
