"""Facts from the kernel log: NVIDIA XID events and NVIDIA-related kernel messages of the
current and the previous boot.

Sources: ``dmesg`` (the kernel ring buffer, read-only) or, when that is not
permitted (``kernel.dmesg_restrict=1``), ``journalctl -k -b`` (the current
boot's kernel messages); the previous boot from ``journalctl -k -b -1`` where
journald keeps it (persistent storage), else ``/var/log/kern.log*`` (syslog). The NVIDIA driver logs each XID as
``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.``
(NVIDIA XID documentation, "Xid Messages").
"""

from __future__ import annotations

from gpudoctor.facts.base import Unavailable, domain
from gpudoctor.records import frozen_dataclass


@frozen_dataclass
class XidEvent:
    """One ``NVRM: Xid`` line.

    Attributes:
        xid: the XID number (e.g. 79).
        pci: the GPU's PCI address as the driver prints it (``0000:3b:00``), or "".
        text: the rest of the line after the number (pid, process name, detail), truncated to 300 characters.
        timestamp: the line's timestamp as printed (``[12345.678901]`` seconds since boot for dmesg), or "".
        boot: 0 the current boot, -1 the one before (journald's boot offsets; kern.log split at
            each "Linux version" line).
        when: wall-clock time, ISO 8601 (journal ``short-iso``; dmesg seconds since boot added to
            the boot time of ``/proc/stat``), or "".
    """

    xid: int
    pci: str
    text: str
    timestamp: str = ""
    boot: int = 0
    when: str = ""


@frozen_dataclass
class KernelMessage:
    """One NVIDIA-related kernel message other than an XID.

    Attributes:
        kind: ``fallen_off_bus`` (NVRM "GPU has fallen off the bus"), ``probe_failed`` (NVRM
            "RmInitAdapter failed", "probe routine failed", "None of the NVIDIA devices were
            initialized"), ``unsupported_gpu`` ("... is not supported by the NVIDIA <branch> driver
            release", "not supported by open nvidia.ko"), ``api_mismatch`` (NVRM "API mismatch"),
            ``key_rejected`` (Secure Boot / lockdown refused the module: "Key was rejected by
            service", "Loading of unsigned module is rejected", "unsigned module loading is
            restricted"), ``unsigned_module`` ("module verification failed: signature and/or
            required key missing - tainting kernel": loaded, unsigned), ``nouveau`` (nouveau drove
            an NVIDIA GPU), ``aer_corrected`` / ``aer_uncorrected`` (PCIe Advanced Error Reporting).
        text: the message, from the subsystem on (at most 300 characters).
        boot: 0 current, -1 previous.
        when: wall-clock time, ISO 8601, or "".
        pci: the PCI address the line names, or "".
        timestamp: the timestamp as printed, or "".
    """

    kind: str
    text: str
    boot: int = 0
    when: str = ""
    pci: str = ""
    timestamp: str = ""


@domain("kernel_log")
@frozen_dataclass
class KernelLogFacts:
    """NVIDIA XID events in the kernel log of the current boot.

    Attributes:
        source: the command that answered (``dmesg`` or ``journalctl -k -b``), or "".
        readable: True, or Unavailable with why no kernel log could be read
            (permission, no such command, an image root).
        events: every XID line found, oldest first (at most :data:`MAX_EVENTS`, the newest kept).
        lines_read: kernel log lines read (the read is bounded to the last 4 MiB).
        messages: NVIDIA-related kernel messages other than XIDs, of both boots, oldest first
            (at most :data:`MAX_MESSAGES`).
        previous_boot: the source the previous boot's log came from (``journalctl -k -b -1``,
            ``/var/log/kern.log``), or Unavailable with why none could be read (journald keeps
            only the current boot when its storage is volatile).
        boot_time: the current boot's wall-clock start, ISO 8601 (``btime`` of ``/proc/stat``), or "".
    """

    source: str
    readable: bool | Unavailable
    events: tuple[XidEvent, ...] = ()
    lines_read: int = 0
    messages: tuple[KernelMessage, ...] = ()
    previous_boot: str | Unavailable = Unavailable("not read")
    boot_time: str = ""


#: Most XID events kept (the newest ones).
MAX_EVENTS = 200
#: Most other kernel messages kept (the newest ones), and at most this many per kind and boot.
MAX_MESSAGES = 300
MAX_PER_KIND = 20
