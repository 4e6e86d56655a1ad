"""One model of ``CUDA_VISIBLE_DEVICES`` and ``NVIDIA_VISIBLE_DEVICES`` values.

CUDA reads ``CUDA_VISIBLE_DEVICES`` as a comma-separated list of device indices, ``GPU-<uuid>``
prefixes or ``MIG-<uuid>`` devices and stops at the first entry it cannot use: that entry and every
later one are hidden (CUDA Programming Guide, "CUDA Environment Variables"). An empty value, ``-1``,
``none``, ``NoDevFiles`` (old Slurm) or ``void`` hides every GPU. The NVIDIA container runtime reads
``NVIDIA_VISIBLE_DEVICES`` (``all``, ``none``, ``void``, indices, UUIDs).

An entry names a GPU only when this machine has it: an index below the GPU count, a prefix of a
GPU's UUID, a MIG device that exists (or, when the MIG instances are not known, while some GPU is or
may be in MIG mode). A value naming no GPU here is never "ok". Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gpudoctor.records import frozen_dataclass

__all__ = ["HIDING", "Entry", "Gpu", "VisibleDevices", "parse_visible"]

#: values (case-insensitive) that make no GPU visible
HIDING = ("", "-1", "none", "nodevfiles", "void")

_FORMS = (
    ("index", re.compile(r"^\d+$")),
    ("gpu-uuid", re.compile(r"^GPU-[0-9A-Fa-f-]+$")),
    ("mig-uuid", re.compile(r"^MIG-[0-9A-Za-z/-]+$")),
)


@frozen_dataclass
class Gpu:
    """What the model needs to know of one GPU: its index, UUID, MIG mode (None: unknown) and the
    UUIDs of its MIG devices (empty: none or unknown)."""

    index: int
    uuid: str = ""
    mig: bool | None = None
    mig_uuids: tuple[str, ...] = ()


@frozen_dataclass
class Entry:
    """One entry of the list: its text and form (``index``, ``gpu-uuid``, ``mig-uuid``, ``hide`` or
    ``garbage``)."""

    text: str
    form: str

    def names_gpu(self, gpus: Sequence[Gpu]) -> bool:
        """Whether this entry names a GPU (or MIG device) this machine has."""
        if self.form == "index":
            return int(self.text) < len(gpus)
        if self.form == "gpu-uuid":
            return any(g.uuid and g.uuid.startswith(self.text) for g in gpus)
        if self.form == "mig-uuid":
            known = [u for g in gpus for u in g.mig_uuids]
            if known:
                return any(u.startswith(self.text) or self.text.startswith(u) for u in known)
            return any(g.mig is not False for g in gpus)
        return False


@frozen_dataclass
class VisibleDevices:
    """A parsed value: the raw text and its entries."""

    raw: str
    entries: tuple[Entry, ...]

    @property
    def hides_all(self) -> bool:
        """True when no GPU can be visible whatever the machine has: empty, a hiding word, or a first
        entry of no known form (CUDA stops there)."""
        return not self.entries or self.entries[0].form in ("hide", "garbage")

    def first_invalid(self, gpus: Sequence[Gpu]) -> int | None:
        """Index of the first entry that names no GPU of ``gpus`` (everything from it on is hidden), or None."""
        for i, e in enumerate(self.entries):
            if not e.names_gpu(gpus):
                return i
        return None

    def names_gpus(self, gpus: Sequence[Gpu]) -> bool | None:
        """Whether the value makes at least one of ``gpus`` visible (None: no GPUs known to judge by)."""
        if self.hides_all:
            return False
        if not gpus:
            return None
        return self.first_invalid(gpus) != 0

    @property
    def migs(self) -> list[str]:
        return [e.text for e in self.entries if e.form == "mig-uuid"]


def _form(text: str) -> str:
    if text.lower() in HIDING:
        return "hide"
    return next((name for name, rx in _FORMS if rx.match(text)), "garbage")


def parse_visible(value: str) -> VisibleDevices:
    """Parse a ``CUDA_VISIBLE_DEVICES`` value (``"0,1"``, ``"GPU-8f3e..."``, ``"MIG-..."``, ``""``)."""
    text = value.strip()
    if text.lower() in HIDING:
        return VisibleDevices(value, ())
    return VisibleDevices(value, tuple(Entry(e.strip(), _form(e.strip())) for e in text.split(",")))
