"""Collector for the ``kernel_log`` domain: NVIDIA XID events since boot.

Reads ``dmesg`` (read-only; never ``-c``), else ``journalctl -k -b``, each an
argv with a timeout through the System runner; at most the last
:data:`MAX_BYTES` of output are parsed. On an image root (``--root``) the
kernel log belongs to the host, so nothing is read.
"""

from __future__ import annotations

import re

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts import Unavailable
from gpudoctor.facts.kernel_log import MAX_EVENTS, KernelLogFacts, XidEvent

#: Bytes of kernel log parsed (the newest), so a huge journal cannot stall the doctor.
MAX_BYTES = 4 * 1024 * 1024
TIMEOUT_S = 10.0

_XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]*)\):\s*(?P<xid>\d+)\s*,?\s*(?P<text>.*)")
_TS_RE = re.compile(r"^\s*(\[[^\]]*\]|\S+\s+\d+\s+[\d:]+)")

#: Commands tried, in order: (argv, label).
SOURCES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("dmesg",), "dmesg"),
    (("journalctl", "-k", "-b", "--no-pager", "-q", "-o", "short-monotonic"), "journalctl -k -b"),
)


def parse_xid_lines(text: str) -> tuple[list[XidEvent], int]:
    """XID events in kernel log ``text`` (oldest first, newest :data:`MAX_EVENTS` kept) and the line count."""
    events: list[XidEvent] = []
    lines = text.splitlines()
    for line in lines:
        m = _XID_RE.search(line)
        if not m:
            continue
        ts = _TS_RE.match(line)
        events.append(
            XidEvent(
                xid=int(m.group("xid")),
                pci=m.group("pci"),
                text=m.group("text").strip()[:300],
                timestamp=ts.group(1) if ts and ts.start(1) < m.start() else "",
            )
        )
    return events[-MAX_EVENTS:], len(lines)


def collect_kernel_log(ctx: CollectContext) -> KernelLogFacts:
    """XID events from the kernel log. Not read on an image root, nor at the light level (the
    entrypoint gate) on a machine with no NVIDIA kernel driver loaded (no NVRM messages to find)."""
    from gpudoctor.collect.nvidia import kernel_driver_absent

    if not ctx.system.files.is_live:
        return KernelLogFacts("", Unavailable("the kernel log belongs to the running host, not an image root (--root)"))
    if ctx.options.probe_level == "light" and kernel_driver_absent(ctx.system.files):
        return KernelLogFacts(
            "", Unavailable("not read: no NVIDIA kernel driver is loaded here, so no XID to find (light gate)")
        )
    reasons = []
    for argv, label in SOURCES:
        result = ctx.system.runner.run(list(argv), timeout_s=TIMEOUT_S)
        if result.ok and result.stdout.strip():
            text = result.stdout[-MAX_BYTES:]
            events, count = parse_xid_lines(text)
            return KernelLogFacts(label, True, tuple(events), count)
        if result.ok:
            reasons.append(f"{label} printed nothing (no permission to read the kernel log, or an empty log)")
        else:
            reasons.append(result.describe_failure())
    return KernelLogFacts("", Unavailable("; ".join(reasons)))


COLLECTOR = Collector(domain="kernel_log", collect=collect_kernel_log, timeout_s=2 * TIMEOUT_S + 5.0)
