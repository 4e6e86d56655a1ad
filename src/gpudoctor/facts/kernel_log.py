"""Facts from the kernel log: NVIDIA XID events since boot.

Source: ``dmesg`` (the kernel ring buffer, read-only) or, when that is not
permitted (``kernel.dmesg_restrict=1``), ``journalctl -k -b`` (the current
boot's kernel messages). The NVIDIA driver logs each XID as
``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.``
(NVIDIA XID documentation, "Xid Messages").
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudoctor.facts.base import Unavailable, domain


@dataclass(frozen=True)
class XidEvent:
    """One ``NVRM: Xid`` line.

    Attributes:
        xid: the XID number (e.g. 79).
        pci: the GPU's PCI address as the driver prints it (``0000:3b:00``), or "".
        text: the rest of the line after the number (pid, process name, detail), truncated to 300 characters.
        timestamp: the line's timestamp as printed (``[12345.678901]`` seconds since boot for dmesg), or "".
    """

    xid: int
    pci: str
    text: str
    timestamp: str = ""


@domain("kernel_log")
@dataclass(frozen=True)
class KernelLogFacts:
    """NVIDIA XID events in the kernel log of the current boot.

    Attributes:
        source: the command that answered (``dmesg`` or ``journalctl -k -b``), or "".
        readable: True, or Unavailable with why no kernel log could be read
            (permission, no such command, an image root).
        events: every XID line found, oldest first (at most :data:`MAX_EVENTS`, the newest kept).
        lines_read: kernel log lines read (the read is bounded to the last 4 MiB).
    """

    source: str
    readable: bool | Unavailable
    events: tuple[XidEvent, ...] = ()
    lines_read: int = 0


#: Most XID events kept (the newest ones).
MAX_EVENTS = 200
