"""Check ``devices.pcie``: is each GPU's PCIe link at its full generation and width?

From ``nvmlDeviceGetCurrPcieLinkGeneration/Width`` against
``nvmlDeviceGetMaxPcieLinkGeneration/Width`` (the most the GPU *and* the
slot support). An idle GPU lowers its link generation to save power
(NVML API reference), so:

- ``warn``: fewer lanes than the link supports (e.g. x4 in an x16 slot), or a
  lower generation while the GPU is busy -> seating, riser, BIOS slot settings;
- ``info``: a lower generation on an idle GPU (recheck under load);
- ``ok``: full generation and width.
"""

from __future__ import annotations

from gpudoctor.checks._devices import (
    NVML_DOC,
    bullets,
    gpus_with_health,
    head,
    label,
    num,
)
from gpudoctor.facts import Facts
from gpudoctor.model import Check, Command, Finding, Status


def evaluate(facts: Facts) -> list[Finding]:
    bad: list[str] = []
    idle: list[str] = []
    evidence = {}
    for dev, h in gpus_with_health(facts):
        gc, gm, wc, wm = (
            num(h.pcie_gen_current),
            num(h.pcie_gen_max),
            num(h.pcie_width_current),
            num(h.pcie_width_max),
        )
        util = num(h.utilization_gpu_pct)
        link = f"Gen{gc} x{wc} (can do Gen{gm} x{wm})"
        evidence[f"gpu{dev.index}"] = {
            "link": link if None not in (gc, gm, wc, wm) else "unavailable",
            "utilization_pct": util if util is not None else "unavailable",
        }
        if None in (gc, gm, wc, wm):
            continue
        name = label(dev)
        if wc < wm:
            bad.append(f"{name}: **{link}** — only {wc} of {wm} lanes trained")
        elif gc < gm and (util or 0) > 0:
            bad.append(f"{name}: **{link}** while {util} % busy")
        elif gc < gm:
            idle.append(f"{name}: {link} at idle")
    if bad:
        return [
            CHECK.finding(
                Status.WARN,
                f"PCIe link below its maximum: {head(bad[0])}" + (f" and {len(bad) - 1} more" if len(bad) > 1 else ""),
                "Host-to-GPU copies (data loading, checkpoints) are slower than the hardware allows:\n\n"
                + bullets(bad)
                + "\n\nWhat to check: the GPU sits fully in its slot; the riser cable or card is "
                "rated for this generation; the BIOS sets the slot to Gen auto/its generation and x16 (not bifurcated "
                "x4x4x4x4); `sudo lspci -vvv -s <bus id>` (LnkSta vs LnkCap) and PCIe AER errors in `dmesg`.",
                evidence=evidence,
                commands=(
                    Command("nvidia-smi -q -d PCIE", "each GPU's current and maximum link generation and width"),
                ),
                doc_url=NVML_DOC,
            )
        ]
    if idle:
        return [
            CHECK.finding(
                Status.INFO,
                "PCIe link generation lowered on an idle GPU (power saving)",
                bullets(idle) + "\n\nAn idle GPU lowers its link generation to save power; this is normal. To see the "
                "link under load, run `nvidia-smi -q -d PCIE` while a job is running, or rerun `gpudoctor check "
                "devices.pcie` then.",
                evidence=evidence,
            )
        ]
    return [CHECK.finding(Status.OK, "every GPU's PCIe link runs at its full generation and width", evidence=evidence)]


CHECK = Check(
    id="devices.pcie",
    title="GPU PCIe link generation and width",
    needs=("nvidia",),
    evaluate=evaluate,
)
