"""Check ``devices.kernel-log``: NVIDIA-related kernel messages other than XIDs, this boot and the one before.

The messages (``facts.kernel_log.KernelMessage`` kinds) and what each means:

- ``fallen_off_bus``: NVRM lost the GPU on the PCIe bus (XID 79's companion line) -> ``fail`` this
  boot, ``warn`` the previous one;
- ``probe_failed``: the driver could not initialise a GPU (``RmInitAdapter failed``, "probe routine
  failed / was not called", GSP firmware) -> ``fail`` this boot;
- ``unsupported_gpu``: the installed branch does not drive this GPU -> ``fail``;
- ``api_mismatch``: user-space and kernel module of different releases -> ``fail``;
- ``key_rejected``: Secure Boot / lockdown refused an unsigned module -> ``fail`` when the nvidia
  module is not loaded now, else ``info``;
- ``unsigned_module``: the module loaded unsigned ("module verification failed ... tainting
  kernel": Secure Boot is off) -> ``info`` (it would be refused with Secure Boot on);
- ``nouveau``: nouveau drove an NVIDIA GPU this boot -> ``fail`` when no nvidia module is loaded;
- ``aer_uncorrected``: PCIe uncorrectable errors -> ``fail`` this boot, ``warn`` the previous;
  ``aer_corrected``: corrected errors -> ``warn`` from 10 in a boot (a marginal link, riser or slot).

Each finding names the boot (this one / the previous one) and the time. Remedies fit the machine
(:mod:`gpudoctor.hostpkg`): the distribution's package manager on the host, the host operator
from a container.
"""

from __future__ import annotations

import re
from typing import Any

from gpudoctor import hostpkg
from gpudoctor.checks import require
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.kernel_log import KernelLogFacts, KernelMessage
from gpudoctor.facts.nvidia import NvidiaDriverFacts, PciGpuFacts
from gpudoctor.facts.platform import KernelModuleFacts
from gpudoctor.facts.topology import TopologyFacts
from gpudoctor.gpu_inventory import account
from gpudoctor.model import Check, Command, Finding, Status

#: corrected AER messages in one boot from which a warning is given (one now and then is normal)
AER_CORRECTED_WARN = 10

MEANING = {
    "fallen_off_bus": "the GPU fell off the PCIe bus (the driver lost all contact with it)",
    "probe_failed": "the driver could not initialise the GPU",
    "unsupported_gpu": "the installed driver branch does not support this GPU",
    "api_mismatch": "the user-space driver and the kernel module are different releases",
    "key_rejected": "Secure Boot (kernel lockdown) refused to load an unsigned or untrusted module",
    "unsigned_module": "the nvidia module was loaded unsigned (Secure Boot is off)",
    "nouveau": "the nouveau driver drove an NVIDIA GPU",
    "aer_uncorrected": "uncorrectable PCIe errors",
    "aer_corrected": "corrected PCIe errors",
}


def _boot(m: KernelMessage) -> str:
    return "this boot" if m.boot == 0 else "the previous boot"


def _cite(msgs: list[KernelMessage], n: int = 3) -> str:
    lines = [f"[{_boot(m)}{', ' + m.when if m.when else ''}] {m.text}" for m in msgs[-n:]]
    return "```\n" + "\n".join(lines) + "\n```"


def _module_state(facts: Facts) -> tuple[bool | None, bool]:
    """(nvidia module loaded now or None when unknown, a module exists for the running kernel)."""
    km = facts.of(KernelModuleFacts)
    if isinstance(km, Unavailable):
        nv = facts.of(NvidiaDriverFacts)
        loaded = None if isinstance(nv, Unavailable) else isinstance(nv.driver_version, str)
        return loaded, False
    built = bool(km.kernel_release and km.kernel_release in km.installed_for)
    return km.loaded, built


def _short(bdf: str) -> str:
    return bdf.lower()[5:] if re.match(r"^[0-9a-fA-F]{4}:", bdf) else bdf.lower()


def _gpu_addresses(facts: Facts) -> set[str]:
    """PCI addresses (``02:00.0``) of the NVIDIA GPUs and the bridges above them, when known; empty when
    not (then every AER message counts)."""
    out: set[str] = set()
    pci = facts.of(PciGpuFacts)
    if not isinstance(pci, Unavailable):
        out |= {_short(d.bus_id) for d in pci.devices}
    topo = facts.of(TopologyFacts)
    if not isinstance(topo, Unavailable):
        for path in topo.paths:
            out.add(_short(path.bus_id))
            out |= {_short(b.bus_id) for b in path.bridges}
    return out


def _all_open(facts: Facts) -> bool:
    """NVML answers now and opens every GPU bound to nvidia (an error logged earlier this boot is over)."""
    nv = facts.of(NvidiaDriverFacts)
    if isinstance(nv, Unavailable) or nv.nvml != "ok" or not nv.devices:
        return False
    return not any(a.nvml in ("unopened", "absent") for a in account(facts))


def _branch(facts: Facts) -> str:
    nv = facts.of(NvidiaDriverFacts)
    if isinstance(nv, Unavailable) or not isinstance(nv.driver_version, str):
        return ""
    return nv.driver_version.split(".")[0]


def evaluate(facts: Facts) -> list[Finding]:
    log = require(facts, KernelLogFacts)
    if isinstance(log.readable, Unavailable):
        return [
            CHECK.finding(
                Status.SKIP,
                "the kernel log could not be read",
                f"{log.readable.reason}.\n\nAs root: `sudo journalctl -k -b 0 | grep -iE 'nvrm|nvidia|nouveau|aer'` "
                "(and `-b -1` for the boot before).",
            )
        ]
    near = _gpu_addresses(facts)
    by: dict[tuple[str, int], list[KernelMessage]] = {}
    ignored = 0
    for m in log.messages:
        if m.kind.startswith("aer_") and near and not any(a in m.text.lower() for a in near):
            ignored += 1  # a PCIe error of another device (NVMe, NIC): not this check's business
            continue
        by.setdefault((m.kind, m.boot), []).append(m)
    loaded, built = _module_state(facts)
    all_open = _all_open(facts)
    evidence: dict[str, Any] = {
        "source": log.source,
        "previous_boot": log.previous_boot if isinstance(log.previous_boot, str) else str(log.previous_boot),
        "counts": {f"{k} ({'this boot' if b == 0 else 'previous boot'})": len(v) for (k, b), v in by.items()},
        "aer_of_other_devices": ignored,
    }
    findings: list[tuple[Status, str, str, tuple[Command, ...]]] = []
    reboot = hostpkg.reset_gpu_commands(facts, [], reboot=True)

    def add(status: Status, kind: str, boot: int, remedy: str, commands: tuple[Command, ...]) -> None:
        msgs = by[(kind, boot)]
        when = f" at {msgs[-1].when}" if msgs[-1].when else ""
        pci = f" ({msgs[-1].pci})" if msgs[-1].pci else ""
        summary = f"{MEANING[kind]}{pci}, {_boot(msgs[-1])}{when}"
        findings.append(
            (status, summary, f"The kernel log says {MEANING[kind]}:\n\n{_cite(msgs)}\n\n{remedy}", commands)
        )

    for boot in (0, -1):
        cur = boot == 0
        if ("fallen_off_bus", boot) in by:
            add(
                Status.FAIL if cur else Status.WARN,
                "fallen_off_bus",
                boot,
                (
                    "The GPU is unusable until the node is rebooted (a GPU reset rarely brings it back). "
                    + hostpkg.reset_gpu(facts, [], reboot=True)
                    if cur
                    else "The node was rebooted since. If it happens again, reseat the GPU and check its power "
                    "cables, riser and slot; collect `sudo nvidia-bug-report.sh` for the vendor."
                )
                + " Common causes: power delivery, overheating, a marginal PCIe link (see the AER lines).",
                reboot
                if cur
                else (Command("sudo nvidia-bug-report.sh", "a report of the GPU's state for the vendor", "root"),),
            )
        if ("aer_uncorrected", boot) in by:
            add(
                Status.FAIL if cur else Status.WARN,
                "aer_uncorrected",
                boot,
                "Uncorrectable PCIe errors on the GPU's link usually take the GPU off the bus (XID 79). Check the "
                "link: `sudo lspci -vvv -s <address> | grep -E 'LnkSta|UESta|CESta'`; reseat the GPU or riser, "
                "and update the system firmware.",
                (
                    Command(
                        f"sudo lspci -vvv -s {by[('aer_uncorrected', boot)][-1].pci or '<address>'} | grep -E "
                        "'LnkSta|UESta|CESta'",
                        "the GPU link's state and error status",
                        "root",
                    ),
                ),
            )
        if cur and ("probe_failed", 0) in by:
            text = " ".join(m.text for m in by[("probe_failed", 0)])
            probe_cmds = reboot
            if "not called" in text or ("nouveau", 0) in by:
                remedy = "Another driver (nouveau) took the GPU first. " + hostpkg.blacklist_nouveau(facts)
                probe_cmds = hostpkg.blacklist_nouveau_commands(facts)
            else:
                remedy = (
                    "The driver found the GPU but could not bring it up (GSP firmware, VBIOS, power, or a GPU "
                    "in a bad state). A cold boot (power off, not just reboot) clears most; then try the newest "
                    "driver of the branch, and on GSP errors the proprietary flavour. "
                    + hostpkg.reset_gpu(facts, [], reboot=True)
                )
            # a probe that failed and then succeeded (the driver retries) leaves the log behind
            add(Status.FAIL if not all_open else Status.WARN, "probe_failed", 0, remedy, probe_cmds)
        if cur and ("unsupported_gpu", 0) in by:
            add(
                Status.FAIL,
                "unsupported_gpu",
                0,
                "Install a driver branch that lists this GPU (NVIDIA's supported-chips list of the branch). "
                + hostpkg.install_driver(facts),
                hostpkg.install_driver_commands(facts),
            )
        if cur and ("api_mismatch", 0) in by and not all_open:
            add(
                Status.FAIL,
                "api_mismatch",
                0,
                "The driver packages were upgraded while the old module stayed loaded. "
                + hostpkg.reset_gpu(facts, [], reboot=True),
                reboot,
            )
        if cur and ("key_rejected", 0) in by:
            if loaded is False or loaded is None:
                add(
                    Status.FAIL if loaded is False else Status.WARN,
                    "key_rejected",
                    0,
                    ("A module for the running kernel exists but is not trusted. " if built else "")
                    + hostpkg.secure_boot(facts, module_for_kernel=built, branch=_branch(facts)),
                    hostpkg.secure_boot_commands(facts, module_for_kernel=built, branch=_branch(facts)),
                )
        if cur and ("nouveau", 0) in by and loaded is False and ("probe_failed", 0) not in by:
            add(Status.FAIL, "nouveau", 0, hostpkg.blacklist_nouveau(facts), hostpkg.blacklist_nouveau_commands(facts))
        corrected = by.get(("aer_corrected", boot), [])
        if len(corrected) >= AER_CORRECTED_WARN and ("aer_uncorrected", boot) not in by:
            add(
                Status.WARN,
                "aer_corrected",
                boot,
                f"{len(corrected)} corrected PCIe errors (at most {len(corrected)} kept) point at a marginal link: "
                "it works but retries, and degrades under load. Find the device: `sudo lspci -vvv | grep -B30 "
                "CESta`; reseat the GPU or riser; `pcie_aspm=off` on the kernel command line helps some boards.",
                (Command("sudo lspci -vvv | grep -B30 CESta", "which device reports the corrected errors", "root"),),
            )
    if ("unsigned_module", 0) in by and not findings:
        msgs = by[("unsigned_module", 0)]
        return [
            CHECK.finding(
                Status.INFO,
                "the nvidia module was loaded unsigned this boot (Secure Boot is off)",
                f"{_cite(msgs, 1)}\n\nHarmless while Secure Boot is off; with Secure Boot on this module would be "
                "refused. Before turning Secure Boot on:\n\n"
                + hostpkg.secure_boot(facts, module_for_kernel=True, branch=_branch(facts)),
                evidence=evidence,
            )
        ]
    if not findings:
        before = f"; previous boot read from {log.previous_boot}" if isinstance(log.previous_boot, str) else ""
        return [
            CHECK.finding(
                Status.OK,
                f"no NVIDIA driver, PCIe or module-signing errors in the kernel log ({log.source}{before})",
                "" if isinstance(log.previous_boot, str) else f"Previous boot not read: {log.previous_boot.reason}.",
                evidence=evidence,
            )
        ]
    order = {Status.FAIL: 0, Status.WARN: 1}
    findings.sort(key=lambda f: order.get(f[0], 2))
    status, summary, explanation, commands = findings[0]
    rest = findings[1:]
    if rest:
        explanation += "\n\nAlso in the kernel log:\n\n" + "\n".join(f"- {s}" for _st, s, _e, _c in rest)
    return [CHECK.finding(status, summary, explanation, evidence=evidence, commands=commands)]


CHECK = Check(
    id="devices.kernel-log",
    title="NVIDIA driver, PCIe and module-signing messages in the kernel log (this boot and the previous)",
    needs=("kernel_log", "os", "kmod", "nvidia", "gpu", "topology"),
    evaluate=evaluate,
)
