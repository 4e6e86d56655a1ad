"""The catalogue of built-in checks (``data/checks.toml``): area, display order, gate membership,
probe level and headline priority of every check gpudoctor ships, read from one table.

Everything that used to keep its own list of check ids derives from it: the registry's display
order (:func:`sort_key`), the report areas of built-ins (:func:`gpudoctor.areas.area_for`), the
gate's selection (:func:`gate_ids`), the ``gate`` tags and probe levels the registry gives the
built-in :class:`~gpudoctor.model.Check` values, and the tie-break between root causes
(:func:`headline_priority`). Plug-ins declare the same fields on their ``Check``.

Pure data: no import of the model (the model imports :mod:`gpudoctor.areas`, which reads this).
"""

from __future__ import annotations

import functools

from gpudoctor.data import load_table
from gpudoctor.records import frozen_dataclass

__all__ = ["Row", "gate_ids", "headline_priority", "row", "rows", "sort_key"]

GATE_LEVELS = ("light", "deep")
PROBE_LEVELS = ("light", "full")
#: sort position of an id in no row and of no anchored family: after every built-in
_LAST = 10**9


@frozen_dataclass
class Row:
    """One built-in check's metadata (see the header of ``data/checks.toml``)."""

    id: str
    area: str
    order: int
    gate: str = ""
    probe: str = "full"
    headline: int | None = None
    tags: tuple[str, ...] = ()
    verify: str = ""

    @property
    def family(self) -> str:
        return self.id.split(".", 1)[0]


@functools.cache
def rows() -> dict[str, Row]:
    """id -> :class:`Row`, in display order. Raises ``ValueError`` naming the row for a malformed table."""
    out: dict[str, Row] = {}
    for raw in load_table("checks")["check"]:
        try:
            r = Row(
                id=raw["id"],
                area=raw["area"],
                order=int(raw["order"]),
                gate=raw.get("gate", ""),
                probe=raw.get("probe", "full"),
                headline=raw.get("headline"),
                tags=tuple(raw.get("tags", ())),
                verify=raw.get("verify", ""),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"checks.toml: malformed row {raw!r}: {exc}") from None
        if r.gate not in ("", *GATE_LEVELS) or r.probe not in PROBE_LEVELS or r.id in out:
            raise ValueError(f"checks.toml: row {r.id!r}: gate must be light/deep, probe light/full, ids unique")
        out[r.id] = r
    return dict(sorted(out.items(), key=lambda kv: kv[1].order))


def row(check_id: str) -> Row | None:
    """The catalogue row of a built-in check, or None (a plug-in, or gpudoctor's own findings)."""
    return rows().get(check_id)


@functools.cache
def _anchors() -> dict[str, int]:
    """family -> the sort position of its plug-ins: after its last built-in, else the ``[families]`` anchor."""
    anchors = {str(k): int(v) for k, v in load_table("checks").get("families", {}).items()}
    for r in rows().values():
        anchors[r.family] = max(r.order, anchors.get(r.family, 0))
    return anchors


def sort_key(check_id: str) -> tuple[int, int, str]:
    """Display order: a built-in by its ``order``; any other id after the last built-in of its family
    (or at its family's anchor), by id; ids of unknown families last."""
    r = row(check_id)
    if r is not None:
        return (r.order, 0, check_id)
    return (_anchors().get(check_id.split(".", 1)[0], _LAST), 1, check_id)


def gate_ids(deep: bool = True) -> frozenset[str]:
    """The built-in gate checks: every one with ``deep``, else only those the light gate runs."""
    return frozenset(r.id for r in rows().values() if r.gate == "light" or (deep and r.gate == "deep"))


def headline_priority(check_id: str) -> int | None:
    """The headline priority of a candidate root cause (lower: more fundamental), or None."""
    r = row(check_id)
    return r.headline if r is not None else None
