"""Check ``devices.xid``: NVIDIA XID errors in the kernel log since boot.

Each ``NVRM: Xid`` line is looked up in ``data/xid.toml`` (meaning, operator
action, fatal or not; rows from NVIDIA's XID documentation):

- ``fail``: a fatal XID (e.g. 48 double-bit ECC, 79 fallen off the bus, 95
  uncontained ECC) since boot -> drain the node, reset or reboot, RMA if it recurs;
- ``warn``: XIDs that need attention, or numbers not in the table;
- ``info``: only application-level XIDs (13, 31, 43, 45);
- ``ok``: none; ``skip`` when the kernel log cannot be read (with the command to run).

Tagged ``gate``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from gpudoctor.checks import require
from gpudoctor.data import load_table
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.kernel_log import KernelLogFacts, XidEvent
from gpudoctor.model import Check, Command, Finding, Status

DOC = "https://docs.nvidia.com/deploy/xid-errors/index.html"


def xid_table() -> dict[int, dict[str, Any]]:
    """XID number -> row of ``data/xid.toml``."""
    return {int(r["xid"]): r for r in load_table("xid")["xid"]}


def evaluate(facts: Facts) -> list[Finding]:
    log = require(facts, KernelLogFacts)
    if isinstance(log.readable, Unavailable):
        return [
            CHECK.finding(
                Status.SKIP,
                "the kernel log could not be read to look for XID errors",
                f"{log.readable.reason}.\n\nRun as root to include it: `sudo gpudoctor check "
                f"devices.xid`, or look yourself: `sudo dmesg | grep -i xid`.",
            )
        ]
    table = xid_table()
    groups: OrderedDict[tuple[int, str], list[XidEvent]] = OrderedDict()
    for ev in log.events:
        if ev.boot == 0:
            groups.setdefault((ev.xid, ev.pci), []).append(ev)
    before = _previous(log, table)
    if not groups:
        if before is not None:
            return [before]
        return [
            CHECK.finding(
                Status.OK,
                f"no XID errors in the kernel log since boot ({log.source})"
                + (
                    f"; none in the previous boot either ({log.previous_boot})"
                    if isinstance(log.previous_boot, str)
                    else ""
                ),
                evidence={"source": log.source, "lines_read": log.lines_read},
            )
        ]
    lines: list[str] = []
    statuses: list[Status] = []
    events: list[dict[str, Any]] = []
    evidence: dict[str, Any] = {"source": log.source, "events": events}
    first_fatal = None
    for (xid, pci), evs in groups.items():
        row = table.get(xid)
        status = Status(row["status"]) if row else Status.WARN
        statuses.append(status)
        where = f"GPU at PCI {pci}" if pci else "a GPU"
        meaning = row["meaning"] if row else "not in gpudoctor's XID table"
        action = row["action"] if row else f"look it up in NVIDIA's XID documentation ({DOC})"
        count = f"{len(evs)}×" if len(evs) > 1 else "once"
        at = f" at {evs[-1].when}" if evs[-1].when else ""
        lines.append(
            f"**XID {xid}** on {where}, {count} (last{at}: `{evs[-1].text[:160]}`): {meaning}. "
            f"{'**Fatal.** ' if row and row['fatal'] else ''}Action: {action}"
        )
        events.append(
            {"xid": xid, "pci": pci, "count": len(evs), "fatal": bool(row and row["fatal"]), "last": evs[-1].text[:160]}
        )
        if row and row["fatal"] and first_fatal is None:
            first_fatal = (xid, where, row["meaning"])
    worst = Status.worst(statuses)
    body = "\n".join(f"- {line}" for line in lines)
    if first_fatal:
        xid, where, meaning = first_fatal
        return [
            CHECK.finding(
                Status.FAIL,
                f"fatal XID {xid} on {where} since boot: {meaning.split(':')[0]}",
                "The NVIDIA driver logged errors that leave the GPU unusable until it is reset. "
                "Keep jobs off this node:\n\n" + body,
                evidence=evidence,
                commands=(
                    DMESG,
                    Command("nvidia-smi -q", "the GPUs' state; a GPU reset (`nvidia-smi -r`) or reboot clears it"),
                ),
                doc_url=DOC,
            )
        ]
    summary = ", ".join(f"XID {x}" for x, _ in groups)
    return [
        CHECK.finding(
            worst,
            f"XID errors in the kernel log since boot: {summary}",
            body,
            evidence=evidence,
            doc_url=DOC,
            commands=(DMESG,),
        )
    ]


#: the XID lines of this boot, with their context (each XID's action is in the explanation)
DMESG = Command("sudo dmesg | grep -i xid", "the XID errors since boot", "root")


def _previous(log: KernelLogFacts, table: dict[int, dict[str, Any]]) -> Finding | None:
    """A warning for fatal or attention XIDs of the previous boot (the one before the last reboot)."""
    groups: OrderedDict[tuple[int, str], list[XidEvent]] = OrderedDict()
    for ev in log.events:
        if ev.boot == -1:
            groups.setdefault((ev.xid, ev.pci), []).append(ev)
    serious = [(k, evs) for k, evs in groups.items() if (table.get(k[0]) or {"status": "warn"})["status"] != "info"]
    if not serious:
        return None
    lines = []
    for (xid, pci), evs in serious:
        row = table.get(xid)
        meaning = row["meaning"] if row else "not in gpudoctor's XID table"
        at = f" at {evs[-1].when}" if evs[-1].when else ""
        where = f"GPU at PCI {pci}" if pci else "a GPU"
        lines.append(f"**XID {xid}** on {where}, {len(evs)}× (last{at}): {meaning}")
    (xid, pci), _ = serious[-1]
    booted = f" (this boot started {log.boot_time})" if log.boot_time else ""
    return CHECK.finding(
        Status.WARN,
        f"XID {xid} in the previous boot, before the last reboot{booted}: "
        + ((table.get(xid) or {}).get("meaning", "see NVIDIA's XID catalogue")).split(":")[0],
        f"The previous boot's kernel log ({log.previous_boot}) has XID errors; none so far in this boot. A reboot "
        "clears the GPU's state but not the cause: if it was a hardware fault (fallen off the bus, uncorrectable "
        "ECC) it tends to come back under load.\n\n"
        + "\n".join(f"- {line}" for line in lines)
        + "\n\nWatch it (`sudo journalctl -k -f | grep -i xid`); if it recurs, drain the node and collect "
        "`sudo nvidia-bug-report.sh` for the vendor.",
        evidence={
            "previous_boot": log.previous_boot,
            "events": [{"xid": x, "pci": p, "count": len(e), "boot": -1} for (x, p), e in serious],
        },
        doc_url=DOC,
        commands=(
            Command("sudo journalctl -k -f | grep -i xid", "watch for the XID to come back", "root"),
            Command("sudo nvidia-bug-report.sh", "if it recurs: a report for the vendor", "root"),
        ),
    )


CHECK = Check(
    id="devices.xid",
    title="NVIDIA XID errors in the kernel log",
    needs=("kernel_log",),
    evaluate=evaluate,
)
