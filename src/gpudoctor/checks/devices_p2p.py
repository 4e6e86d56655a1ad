"""Check ``devices.p2p``: can the GPUs of this machine talk to each other directly, and what must
NCCL be told where they cannot?

Reads NVML's pairs (``nvmlDeviceGetP2PStatus``, ``nvmlDeviceGetTopologyCommonAncestor``), the
``nvidia-smi topo -m`` matrix, the ACS control of every bridge above each GPU, the IOMMU mode,
NVLink link states, and ``data/p2p.toml`` (GPU models and driver branches where P2P is
unsupported or known broken; the NCCL settings and their cost):

- ``warn``: ACS P2P redirect on a bridge above a GPU (NCCL hangs or crawls); a model/branch of the
  table whose P2P NVML still claims (hang risk); a GPU with NVLink links down while its peers'
  are up; translated IOMMU on several GPUs on bare metal;
- ``info``: P2P not supported between some pairs (NCCL falls back to host memory: correct, slower);
- ``ok``: P2P supported between every pair and nothing in the way; ``skip``: fewer than two GPUs.

Remedies fit the machine (:mod:`gpudoctor.hostpkg`): the BIOS / ``setpci`` / kernel command line
on the host, the host operator from a container.
"""

from __future__ import annotations

import re
from typing import Any

from gpudoctor import hostpkg
from gpudoctor.checks import SkipCheck
from gpudoctor.checks._devices import bullets
from gpudoctor.data import load_table
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.nvidia import NvidiaDriverFacts, NvmlDevice
from gpudoctor.facts.topology import ACS_BITS, ACS_REDIRECT, TopologyFacts
from gpudoctor.model import Check, Command, Finding, Status

DOC = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"


def cost(name: str) -> str:
    """The cost of an NCCL setting or platform feature (``data/p2p.toml`` [[setting]])."""
    for row in load_table("p2p")["setting"]:
        if row["name"] == name:
            return str(row["cost"])
    return ""


def known_issue(name: str, driver: str) -> dict[str, Any] | None:
    """The first ``data/p2p.toml`` [[p2p]] row covering a GPU name on a driver version, or None."""
    try:
        branch = int(driver.split(".")[0])
    except ValueError:
        branch = -1
    row: dict[str, Any]
    for row in load_table("p2p")["p2p"]:
        if re.search(row["name"], name) and row["branch_min"] <= branch <= row["branch_max"]:
            return row
    return None


def _flags(ctl: int) -> str:
    return " ".join(f"{n}{'+' if ctl & b else '-'}" for b, n in ACS_BITS)


def evaluate(facts: Facts) -> list[Finding]:
    nv = facts.of(NvidiaDriverFacts)
    topo = facts.of(TopologyFacts)
    devices: tuple[NvmlDevice, ...] = () if isinstance(nv, Unavailable) else nv.devices
    paths = () if isinstance(topo, Unavailable) else topo.paths
    if max(len(devices), len(paths)) < 2:
        raise SkipCheck("fewer than two GPUs: no peer-to-peer to check")
    driver = nv.driver_version if not isinstance(nv, Unavailable) and isinstance(nv.driver_version, str) else ""
    pairs = () if isinstance(nv, Unavailable) else nv.pairs
    evidence: dict[str, Any] = {
        "pairs": [f"GPU{p.a}-GPU{p.b}: {p.link} p2p={p.p2p_read}" for p in pairs],
        "matrix": [] if isinstance(topo, Unavailable) or isinstance(topo.matrix, Unavailable) else list(topo.matrix),
    }
    place = hostpkg.place(facts)
    problems: list[tuple[str, str, tuple[Command, ...]]] = []  # (summary, explanation, commands)
    p2p_off = Command("export NCCL_P2P_DISABLE=1", "in the job's environment: NCCL stops using peer-to-peer")

    redirect = [
        (path.bus_id, b.bus_id, b.acs_ctl)
        for path in paths
        for b in path.bridges
        if isinstance(b.acs_ctl, int) and b.acs_ctl & ACS_REDIRECT
    ]
    if redirect:
        bridges = sorted({b for _g, b, _c in redirect})
        lines = [f"bridge `{b}` above GPU `{g}`: ACSCtl {_flags(c)}" for g, b, c in redirect]
        evidence["acs_redirect"] = [f"{b} above {g}: 0x{c:04x}" for g, b, c in redirect]
        clear = tuple(
            Command(f"sudo setpci -s {b} ECAP_ACS+6.w=0000", "clear the bridge's ACS redirect until reboot", "root")
            for b in bridges
        )
        cmds = "```\n" + "\n".join(c.text for c in clear) + "\n```"
        problems.append(
            (
                f"PCIe ACS redirects peer-to-peer traffic on {len(bridges)} bridge(s) above the GPUs: NCCL hangs "
                "or crawls",
                "Access Control Services with Request/Completion Redirect on a bridge between GPUs sends every "
                "peer transaction up to the root complex (and the IOMMU): NCCL all-reduce hangs or runs at a "
                "fraction of its speed.\n\n"
                + bullets(lines)
                + "\n\nTurn ACS off in the BIOS (PCIe / IOMMU settings), or clear it until the next reboot. "
                + hostpkg.on_host(place, cmds, "clear the ACS redirect bits")
                + f"\n\nUntil then NCCL works with `NCCL_P2P_DISABLE=1` ({cost('NCCL_P2P_DISABLE=1')}). "
                f"Keep ACS on only where VMs need the isolation ({cost('ACS')}).",
                (*clear, p2p_off),
            )
        )
    for dev in devices:
        row = known_issue(dev.name, driver)
        claimed = [p for p in pairs if dev.index in (p.a, p.b) and p.p2p_read == "ok"]
        if row and (claimed or not pairs):
            others = ", ".join(f"GPU{p.b if p.a == dev.index else p.a}" for p in claimed) or "its peers"
            problems.append(
                (
                    f"{dev.name} with driver {driver}: peer-to-peer is {row['effect']} here, but the driver "
                    f"reports it with {others}",
                    f"{row['what']} ({row['source']}).\n\nWhat to do: {row['setting']} (`export NCCL_P2P_DISABLE=1` "
                    f"in the job's environment). `NCCL_P2P_DISABLE=1` costs: {cost('NCCL_P2P_DISABLE=1')}. "
                    "`gpudoctor check --deep devices.smoke` copies between every pair and checks what arrives.",
                    (p2p_off, Command("gpudoctor check --deep devices.smoke", "copy between every GPU pair and check")),
                )
            )
            break
    links = {d.index: d.nvlink_active for d in devices if isinstance(d.nvlink_active, int)}
    if links and max(links.values()) > 0 and min(links.values()) < max(links.values()):
        low = [
            f"GPU {i}: {n} of {max(links.values())} NVLink links active"
            for i, n in links.items()
            if n < max(links.values())
        ]
        problems.append(
            (
                "NVLink links down: " + "; ".join(low),
                bullets(low)
                + "\n\nA GPU with fewer active links than its peers talks to them slower, or over PCIe. Check "
                "`nvidia-smi nvlink -s` and `nvidia-smi nvlink -e`; on NVSwitch systems the fabric manager "
                "(`systemctl status nvidia-fabricmanager`); a GPU reset or reboot retrains the links.",
                (
                    Command("nvidia-smi nvlink -s", "each GPU's NVLink links and their state"),
                    Command("nvidia-smi nvlink -e", "NVLink error counters"),
                ),
            )
        )
    translated = [p.bus_id for p in paths if p.iommu_group_type in ("DMA", "DMA-FQ")]
    cmdline = "" if isinstance(topo, Unavailable) else topo.cmdline
    if len(translated) >= 2 and "iommu=pt" not in cmdline and not redirect:
        problems.append(
            (
                f"the IOMMU translates DMA for {len(translated)} GPUs (no iommu=pt): peer-to-peer may fail or slow down",
                f"GPUs {', '.join(translated)} are in IOMMU groups of type DMA ({cost('IOMMU')}). On bare metal, "
                "use passthrough mode. " + hostpkg.kernel_param(facts, "iommu=pt"),
                hostpkg.kernel_param_commands(facts, "iommu=pt"),
            )
        )
    if problems:
        summary, explanation, commands = problems[0]
        if len(problems) > 1:
            explanation += "\n\nAlso:\n\n" + bullets([s for s, _e, _c in problems[1:]])
        return [CHECK.finding(Status.WARN, summary, explanation, evidence=evidence, doc_url=DOC, commands=commands)]
    unsupported = [p for p in pairs if isinstance(p.p2p_read, str) and p.p2p_read != "ok"]
    matrix = () if isinstance(topo, Unavailable) or isinstance(topo.matrix, Unavailable) else topo.matrix
    nic = [(r, c, link) for r, c, link in matrix if r.startswith("GPU") and not c.startswith("GPU")]
    if nic and all(link in ("SYS", "NODE") for _r, _c, link in nic):
        far = sorted({c for _r, c, _l in nic})
        return [
            CHECK.finding(
                Status.INFO,
                f"every NIC ({', '.join(far)}) is across a CPU host bridge from every GPU: GPUDirect RDMA stays off",
                "`nvidia-smi topo -m` puts each GPU-NIC pair at NODE or SYS. NCCL uses GPUDirect RDMA only up to "
                "`NCCL_NET_GDR_LEVEL` (by default when NIC and GPU share a PCIe switch or host bridge), so network "
                "traffic is staged through host memory. Forcing it (`NCCL_NET_GDR_LEVEL=SYS`) sends it across the "
                "CPU interconnect instead, usually no faster; the lasting fix is a NIC in the GPUs' PCIe switch.",
                evidence=evidence,
                doc_url="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-net-gdr-level-formerly-nccl-ib-gdr-level",
            )
        ]
    if unsupported:
        lines = [f"GPU{p.a} ↔ GPU{p.b} ({p.link}): P2P {p.p2p_read}" for p in unsupported]
        return [
            CHECK.finding(
                Status.INFO,
                f"peer-to-peer is not available between {len(unsupported)} GPU pair(s): NCCL uses host memory there",
                bullets(lines) + f"\n\nNCCL detects this itself and falls back; nothing to set. It costs bandwidth: "
                f"{cost('NCCL_P2P_DISABLE=1').split(': ', 1)[-1]}. To restrict P2P to near pairs only, "
                f"`NCCL_P2P_LEVEL` ({cost('NCCL_P2P_LEVEL')}).",
                evidence=evidence,
                doc_url=DOC,
            )
        ]
    n = max(len(devices), len(paths))
    return [
        CHECK.finding(
            Status.OK,
            f"peer-to-peer between {n} GPUs: nothing in the way (no ACS redirect, no known-broken model/driver)",
            evidence=evidence,
        )
    ]


CHECK = Check(
    id="devices.p2p",
    title="GPU peer-to-peer and topology: ACS, IOMMU, NVLink, models/drivers where P2P is broken; NCCL settings",
    needs=("nvidia", "topology", "os"),
    evaluate=evaluate,
)
