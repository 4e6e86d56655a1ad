"""Check ``devices.smoke``: does each GPU compute and copy correctly? (``gpudoctor check --deep``)

Reads the smoke test the probe ran inside the target interpreter
(``probe/_smoke.py``, facts ``ProbeFacts.smoke``):

- ``fail``: a matrix product that differs from the CPU result, a step that
  raised (allocation, copy), or a peer copy that arrived corrupted — naming the device;
- ``warn``: pinned host<->device bandwidth below half of what the PCIe link can
  carry (lanes x per-lane rate of its maximum generation), or steps skipped
  because the time budget ran out;
- ``ok``: every device passed; the bandwidth table is in the evidence (``-v``, JSON);
- ``skip``: not run (no ``--deep``) or no CUDA device.

Per-lane PCIe throughput per direction after line encoding (PCI-SIG base
specifications): Gen1 0.25, Gen2 0.5, Gen3 0.985, Gen4 1.969, Gen5 3.938,
Gen6 7.563 GB/s.
"""

from __future__ import annotations

from typing import Any

from gpudoctor.checks import SkipCheck, require
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.nvidia import GpuHealth, NvidiaDriverFacts, NvmlDevice
from gpudoctor.facts.targets import ProbeFacts, SmokeFacts, TargetsFacts
from gpudoctor.model import Check, Command, Finding, Status

#: GB/s per lane per direction, by PCIe generation (PCI-SIG base specifications, after encoding).
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
#: Pinned copies below this share of the link's theoretical figure warn.
MIN_LINK_SHARE = 0.5


def link_gbps(h: GpuHealth) -> tuple[float, str] | None:
    """(theoretical GB/s per direction, ``Gen5 x16``) of the link at its maximum, or None."""
    gen, width = h.pcie_gen_max, h.pcie_width_max
    if isinstance(gen, Unavailable) or isinstance(width, Unavailable) or gen not in PCIE_LANE_GBPS:
        return None
    return PCIE_LANE_GBPS[gen] * width, f"Gen{gen} x{width}"


def _bus(text: str | None) -> str:
    """``00000000:18:00.0`` and ``0000:18:00.0`` -> ``18:00.0``."""
    return (text or "").lower().split(":", 1)[-1][-7:] if text else ""


def _nvml_for(probe: ProbeFacts, index: int, facts: Facts) -> NvmlDevice | None:
    nv = facts.of(NvidiaDriverFacts)
    if isinstance(nv, Unavailable):
        return None
    cuda = next((d for d in probe.torch.devices if d.index == index), None)
    for dev in nv.devices:
        if cuda is not None and (
            (cuda.uuid and cuda.uuid == dev.uuid) or (cuda.pci_bus_id and _bus(cuda.pci_bus_id) == _bus(dev.pci_bus_id))
        ):
            return dev
    return None


def _fmt(v: float | Unavailable) -> str:
    return "—" if isinstance(v, Unavailable) else f"{v:.1f}"


def evaluate(facts: Facts) -> list[Finding]:
    targets = require(facts, TargetsFacts)
    chosen: tuple[str, ProbeFacts, SmokeFacts] | None = None
    reasons = []
    for t in targets.targets:
        if isinstance(t.probe, ProbeFacts) and isinstance(t.probe.smoke, SmokeFacts):
            chosen = t.label, t.probe, t.probe.smoke
            break
        if isinstance(t.probe, ProbeFacts) and isinstance(t.probe.smoke, Unavailable):
            reasons.append(f"{t.label}: {t.probe.smoke.reason}")
    if chosen is None:
        distinct = sorted({r.split(": ", 1)[1] for r in reasons})
        # one reason shared by every target is said once, without the labels
        said = distinct[0] if len(distinct) == 1 else "; ".join(reasons)
        if said.startswith("not run ("):  # the default reason: "did not run: not run (...)" says it twice
            raise SkipCheck("the GPU smoke test did not run " + said[len("not run ") :])
        raise SkipCheck("the GPU smoke test did not run: " + (said or "no probed interpreter"))
    target_label, probe, smoke = chosen
    if not smoke.devices:
        raise SkipCheck("the GPU smoke test found no CUDA device")
    failed: list[str] = []
    slow: list[str] = []
    table: dict[str, dict[str, Any]] = {}
    for d in smoke.devices:
        row = {
            "matmul": ("ok" if d.matmul_ok is True else "WRONG" if d.matmul_ok is False else "did not run"),
            "h2d_pageable_gbps": _fmt(d.h2d_pageable_gbps),
            "d2h_pageable_gbps": _fmt(d.d2h_pageable_gbps),
            "h2d_pinned_gbps": _fmt(d.h2d_pinned_gbps),
            "d2h_pinned_gbps": _fmt(d.d2h_pinned_gbps),
            "d2d_gbps": _fmt(d.d2d_gbps),
        }
        table[d.device] = row
        if d.matmul_ok is False:
            failed.append(
                f"{d.device}: a {512}x{512} matrix product differs from the CPU result "
                f"(relative error {d.matmul_rel_error})"
            )
        for e in d.errors:
            failed.append(f"{d.device}: {e}")
        if d.skipped:
            slow.append(f"{d.device}: not run within the time budget: {', '.join(d.skipped)}")
        nvml = _nvml_for(probe, d.index, facts)
        link = link_gbps(nvml.health) if nvml is not None and isinstance(nvml.health, GpuHealth) else None
        if link is not None:
            theo, name = link
            row["link"] = f"{name}: {theo:.1f} GB/s per direction"
            for key, label in (("h2d_pinned_gbps", "host→device"), ("d2h_pinned_gbps", "device→host")):
                v = getattr(d, key)
                if isinstance(v, float) and v < MIN_LINK_SHARE * theo:
                    slow.append(
                        f"{d.device}: pinned {label} copies reach {v:.1f} GB/s, "
                        f"{v / theo:.0%} of what its {name} link can carry ({theo:.1f} GB/s)"
                    )
    for p in smoke.peers:
        if p.copy_ok is False:
            failed.append(f"cuda:{p.src} → cuda:{p.dst}: the copied data arrived corrupted")
        for e in p.errors:
            (slow if e.startswith("skipped") else failed).append(f"cuda:{p.src} → cuda:{p.dst}: {e}")
    evidence = {
        "target": target_label,
        "devices": table,
        "peers": [f"cuda:{p.src}->cuda:{p.dst} access={p.can_access} copy={p.copy_ok}" for p in smoke.peers],
        "duration_ms": smoke.duration_ms,
    }
    if failed:
        return [
            CHECK.finding(
                Status.FAIL,
                f"GPU smoke test failed on {failed[0].split(': ')[0]}",
                "A GPU that computes wrong results or fails a copy must not run jobs:\n\n"
                + "\n".join(f"- {x}" for x in failed + slow)
                + "\n\nDrain the node; check `nvidia-smi -q -d ECC` "
                "and `sudo dmesg | grep -i xid`; reset the GPU (`sudo nvidia-smi -r -i <index>`) and rerun "
                "`gpudoctor check --deep devices.smoke`; RMA if it fails again.",
                evidence=evidence,
                commands=(
                    Command("nvidia-smi -q -d ECC", "memory errors behind wrong results"),
                    Command("sudo dmesg | grep -i xid", "the driver's XID errors", "root"),
                ),
            )
        ]
    if slow:
        return [
            CHECK.finding(
                Status.WARN,
                f"GPU copies slower than the PCIe link allows: {slow[0].split(': ')[0]}",
                "\n".join(f"- {x}" for x in slow) + "\n\nHalf the link's figure or less points at a degraded link "
                "(`devices.pcie`, `nvidia-smi -q -d PCIE`), a GPU on the far CPU socket (check `nvidia-smi topo -m` "
                "and bind the job with `numactl`), or IOMMU/ACS settings in the BIOS.",
                evidence=evidence,
                commands=(
                    Command("nvidia-smi -q -d PCIE", "each GPU's PCIe link generation and width"),
                    Command("nvidia-smi topo -m", "which CPU socket each GPU hangs off"),
                ),
            )
        ]
    n = len(smoke.devices)
    return [
        CHECK.finding(
            Status.OK,
            f"{n} GPU{'s' if n != 1 else ''} passed the smoke test (product, copies"
            + (", peer access" if smoke.peers else "")
            + ")",
            evidence=evidence,
        )
    ]


CHECK = Check(
    id="devices.smoke",
    title="GPU functional smoke test (--deep)",
    needs=("targets", "nvidia"),
    evaluate=evaluate,
)
