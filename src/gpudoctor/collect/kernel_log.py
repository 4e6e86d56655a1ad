"""Collector for the ``kernel_log`` domain: NVIDIA XIDs and NVIDIA-related kernel messages of
the current and the previous boot.

Current boot: ``dmesg`` (read-only; never ``-c``), else ``journalctl -k -b``. Previous boot:
``journalctl -k -b -1`` where journald keeps it (persistent storage), else the syslog files
``/var/log/kern.log``, ``kern.log.1`` (Debian/Ubuntu) or ``/var/log/messages`` (RHEL/SUSE),
split into boots at each ``Linux version`` line. Each argv runs with a timeout through the
System runner; at most the last :data:`MAX_BYTES` of each source are parsed, and at most
:data:`~gpudoctor.facts.kernel_log.MAX_PER_KIND` messages of a kind per boot are kept. The
kernel log belongs to the machine the commands run on: on an image root (``--root``) nothing
is read, unless the System says its commands speak for that root (a recorded machine replayed).
"""

from __future__ import annotations

import datetime as _dt
import re

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts import Unavailable
from gpudoctor.facts.kernel_log import (
    MAX_EVENTS,
    MAX_MESSAGES,
    MAX_PER_KIND,
    KernelLogFacts,
    KernelMessage,
    XidEvent,
)
from gpudoctor.system import Files

#: Bytes of kernel log parsed (the newest), so a huge journal cannot stall the doctor.
MAX_BYTES = 4 * 1024 * 1024
TIMEOUT_S = 10.0
#: Lines of the previous boot asked of journald (its newest: the crash is at the end).
PREVIOUS_LINES = 50000

_XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]*)\):\s*(?P<xid>\d+)\s*,?\s*(?P<text>.*)")
_TS_RE = re.compile(r"^\s*(\[[^\]]*\]|\S+\s+\d+\s+[\d:]+)")
_ISO_RE = re.compile(r"^\s*(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:?\d\d|Z)?)")
_SYSLOG_RE = re.compile(r"^\s*([A-Z][a-z]{2}\s+\d+\s+\d\d:\d\d:\d\d)")
_MONO_RE = re.compile(r"\[\s*(\d+\.\d+)\]")
_BDF_RE = re.compile(r"\b([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)\b")

#: (kind, pattern) in the order tried: the first that matches a line classifies it.
KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("fallen_off_bus", re.compile(r"NVRM: .*fallen off the bus", re.I)),
    (
        "probe_failed",
        re.compile(
            r"NVRM: .*(?:RmInitAdapter failed|rm_init_adapter failed|probe routine failed|probe routine was not "
            r"called|None of the NVIDIA devices were initialized|No NVIDIA (?:graphics adapter|GPU) (?:found|probed)|"
            r"NVIDIA init module failed|Cannot initialize GSP firmware)",
            re.I,
        ),
    ),
    (
        "unsupported_gpu",
        re.compile(
            r"NVRM: .*(?:is not supported by the NVIDIA .*driver release|not supported by open nvidia\.ko)", re.I
        ),
    ),
    ("api_mismatch", re.compile(r"NVRM: API mismatch", re.I)),
    (
        "key_rejected",
        re.compile(
            r"(?:Loading of unsigned module is rejected|unsigned module loading is restricted|"
            r"Key was rejected by service|Loading of module with unavailable key is rejected|"
            r"PKCS#7 signature not signed with a trusted key)",
            re.I,
        ),
    ),
    ("unsigned_module", re.compile(r"\bnvidia[\w-]*: module verification failed", re.I)),
    ("nouveau", re.compile(r"\bnouveau [0-9a-fA-F]{4}:[0-9a-fA-F]{2}:|\[drm\] Initialized nouveau", re.I)),
    ("aer_uncorrected", re.compile(r"AER: .*Uncorrect|severity=Uncorrect", re.I)),
    ("aer_corrected", re.compile(r"AER: .*Correct(?:ed|able) error|severity=Correct", re.I)),
)

#: Substrings one of which every line of :data:`KINDS` contains: lines without any are skipped before
#: the patterns run (most kernel lines are about other devices).
_KEYS = (
    "NVRM",
    "nvidia",
    "nouveau",
    "AER",
    "severity=",
    "nsigned module",
    "Key was rejected",
    "unavailable key",
    "PKCS#7",
)

#: Commands tried for the current boot, in order: (argv, label).
SOURCES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("dmesg",), "dmesg"),
    (("journalctl", "-k", "-b", "--no-pager", "-q", "-o", "short-monotonic"), "journalctl -k -b"),
)
PREVIOUS_ARGV = ("journalctl", "-k", "-b", "-1", "--no-pager", "-q", "-o", "short-iso", "-n", str(PREVIOUS_LINES))
#: Syslog files with kernel messages, oldest first (Debian/Ubuntu kern.log; RHEL/SUSE messages).
SYSLOG_FILES = ("/var/log/kern.log.1", "/var/log/kern.log", "/var/log/messages.1", "/var/log/messages")
_BOOT_MARK = re.compile(r"kernel: (?:\[\s*0\.0+\] )?Linux version \d")


def parse_xid_lines(text: str) -> tuple[list[XidEvent], int]:
    """XID events in kernel log ``text`` (oldest first, newest :data:`MAX_EVENTS` kept) and the line count."""
    events: list[XidEvent] = []
    lines = text.splitlines()
    for line in lines:
        if "Xid" not in line:
            continue
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


def _when(line: str, boot_time: _dt.datetime | None) -> str:
    """Wall-clock time of a line: its ISO or syslog stamp, else boot time + dmesg seconds."""
    m = _ISO_RE.match(line)
    if m:
        return m.group(1)
    m = _SYSLOG_RE.match(line)
    if m:
        return " ".join(m.group(1).split())
    m = _MONO_RE.search(line[:40])
    if m and boot_time is not None:
        return (boot_time + _dt.timedelta(seconds=float(m.group(1)))).isoformat(timespec="seconds")
    return ""


def _body(line: str) -> str:
    """The message without the syslog/journal prefix (from the subsystem on)."""
    cut = line.split(" kernel: ", 1)
    text = cut[1] if len(cut) == 2 else line
    return re.sub(r"^\s*\[\s*[\d.]+\]\s*", "", text).strip()[:300]


def classify(line: str) -> str | None:
    """The kind of an NVIDIA-related kernel message (:data:`KINDS`), or None."""
    for kind, pattern in KINDS:
        if pattern.search(line):
            return kind
    return None


def parse_messages(text: str, boot: int, boot_time: _dt.datetime | None = None) -> list[KernelMessage]:
    """The NVIDIA-related messages other than XIDs in ``text`` (one boot), at most MAX_PER_KIND per kind (newest)."""
    per_kind: dict[str, list[KernelMessage]] = {}
    for line in text.splitlines():
        if not any(k in line for k in _KEYS):
            continue
        kind = classify(line)
        if kind is None or ("NVRM: Xid" in line and kind != "fallen_off_bus"):
            continue  # XIDs are events of their own; XID 79's text is also the fallen-off-the-bus message
        body = _body(line)
        bdfs = _BDF_RE.findall(body)
        ts = _MONO_RE.search(line[:60])
        per_kind.setdefault(kind, []).append(
            KernelMessage(
                kind=kind,
                text=body,
                boot=boot,
                when=_when(line, boot_time),
                pci=bdfs[-1] if bdfs else "",
                timestamp=ts.group(0) if ts else "",
            )
        )
    out = [m for msgs in per_kind.values() for m in msgs[-MAX_PER_KIND:]]
    order = {id(m): i for i, m in enumerate(m for msgs in per_kind.values() for m in msgs)}
    return sorted(out, key=lambda m: order[id(m)])


def boot_time(files: Files) -> _dt.datetime | None:
    """The current boot's start (``btime`` of ``/proc/stat``), UTC."""
    text = files.read_text_or_none("/proc/stat") or ""
    m = re.search(r"^btime\s+(\d+)", text, re.M)
    return _dt.datetime.fromtimestamp(int(m.group(1)), _dt.timezone.utc) if m else None


def split_boots(text: str) -> list[str]:
    """Syslog text split at each kernel ``Linux version`` line, oldest boot first."""
    boots: list[list[str]] = [[]]
    for line in text.splitlines():
        if _BOOT_MARK.search(line) and boots[-1]:
            boots.append([])
        boots[-1].append(line)
    return ["\n".join(b) for b in boots if b]


def _syslog_previous(files: Files) -> tuple[str, str] | None:
    """(previous boot's text, source) from the syslog files, or None when they hold no earlier boot."""
    chunks = []
    used = []
    for path in SYSLOG_FILES:
        try:
            data = files.read_bytes(path, tail=MAX_BYTES)
        except OSError:
            continue
        chunks.append(data.decode("utf-8", errors="replace"))
        used.append(path)
    if not chunks:
        return None
    boots = split_boots("\n".join(chunks)[-2 * MAX_BYTES :])
    if len(boots) < 2:
        return None
    return boots[-2], " + ".join(used)


def _previous_boot(ctx: CollectContext, xids: list[XidEvent], messages: list[KernelMessage]) -> str | Unavailable:
    """Read the previous boot (journald, else syslog files); add its events. Returns the source or why not."""
    result = ctx.system.runner.run(list(PREVIOUS_ARGV), timeout_s=TIMEOUT_S)
    reasons = []
    volatile = "no persistent journal" in (result.stderr + result.stdout).lower()
    if result.ok and result.stdout.strip() and not volatile:
        text = result.stdout[-MAX_BYTES:]
        label = "journalctl -k -b -1"
    else:
        if volatile:
            reasons.append(
                "journald keeps only the current boot (no persistent journal: Storage=volatile or auto "
                "without /var/log/journal)"
            )
        elif result.ok:
            reasons.append("journalctl -k -b -1 printed nothing (no earlier boot in the journal, or no permission)")
        else:
            reasons.append(result.describe_failure())
        found = _syslog_previous(ctx.system.files)
        if found is None:
            reasons.append("no earlier boot in /var/log/kern.log* or /var/log/messages*")
            return Unavailable("; ".join(reasons))
        text, label = found
    events, _ = parse_xid_lines(text)
    for ev in events:
        xids.append(XidEvent(ev.xid, ev.pci, ev.text, ev.timestamp, boot=-1, when=_when_of(text, ev)))
    messages.extend(parse_messages(text, -1))
    return label


def _when_of(text: str, ev: XidEvent) -> str:
    for line in text.splitlines():
        if "NVRM: Xid" in line and ev.text[:60] in line:
            return _when(line, None)
    return ""


def collect_kernel_log(ctx: CollectContext) -> KernelLogFacts:
    """XID events and NVIDIA-related messages from the kernel log, current and previous boot. Not read
    on an image root, nor at the light level (the entrypoint gate) on a machine with no NVIDIA kernel
    driver loaded (no NVRM messages to find)."""
    from gpudoctor.collect.nvidia import kernel_driver_absent

    if not ctx.system.commands_live:
        return KernelLogFacts("", Unavailable("the kernel log belongs to the running host, not an image root (--root)"))
    if ctx.options.probe_level == "light" and kernel_driver_absent(ctx.system.files):
        return KernelLogFacts(
            "", Unavailable("not read: no NVIDIA kernel driver is loaded here, so no XID to find (light gate)")
        )
    booted = boot_time(ctx.system.files)
    reasons = []
    for argv, label in SOURCES:
        result = ctx.system.runner.run(list(argv), timeout_s=TIMEOUT_S)
        if result.ok and result.stdout.strip():
            text = result.stdout[-MAX_BYTES:]
            events, count = parse_xid_lines(text)
            events = [
                XidEvent(e.xid, e.pci, e.text, e.timestamp, 0, _when(e.timestamp, booted) if e.timestamp else "")
                for e in events
            ]
            messages = parse_messages(text, 0, booted)
            if ctx.options.probe_level == "light":  # the entrypoint gate: this boot only
                previous: str | Unavailable = Unavailable("not read by the light gate")
                all_events = events
            else:
                before: list[XidEvent] = []
                earlier: list[KernelMessage] = []
                previous = _previous_boot(ctx, before, earlier)
                all_events = before[-MAX_EVENTS:] + events
                messages = earlier + messages
            return KernelLogFacts(
                label,
                True,
                tuple(all_events[-2 * MAX_EVENTS :]),
                count,
                tuple(messages[-MAX_MESSAGES:]),
                previous,
                booted.isoformat(timespec="seconds") if booted else "",
            )
        if result.ok:
            reasons.append(f"{label} printed nothing (no permission to read the kernel log, or an empty log)")
        else:
            reasons.append(result.describe_failure())
    return KernelLogFacts("", Unavailable("; ".join(reasons)))


COLLECTOR = Collector(domain="kernel_log", collect=collect_kernel_log, timeout_s=3 * TIMEOUT_S + 5.0)
