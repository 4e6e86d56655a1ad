"""Check ``devices.ecc``: GPU memory errors, retired pages and remapped rows (NVML).

Per GPU, worst first (NVIDIA "Dynamic Page Retirement" and "GPU Memory
Error Management" documentation; values from ``nvmlDeviceGetTotalEccErrors``,
``nvmlDeviceGetRetiredPages*``, ``nvmlDeviceGetRemappedRows``):

- ``fail``: an uncorrectable (double-bit) ECC error since the driver loaded
  (volatile count), lifetime uncorrectable errors that no retired page or
  remapped row accounts for, or a row-remapping failure -> drain the node,
  reset the GPU, RMA if it recurs;
- ``warn``: pages pending retirement or a remap pending -> reset the GPU when idle;
- ``ok``: none of these (ECC unsupported, as on GeForce boards, says so).

Tagged ``gate``: a GPU in the fail state must not receive a job.
"""

from __future__ import annotations

from gpudoctor.checks._devices import (
    bullets,
    ev,
    gpus_with_health,
    head,
    label,
    num,
    shown,
)
from gpudoctor.facts import Facts
from gpudoctor.model import Check, Command, Finding, Status
from gpudoctor.words import noun, plural, verb

DOC = "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html"
#: corrected (single-bit) errors since the driver loaded from which a rising count is reported, when they are
#: also most of the GPU's lifetime count (NVML gives two counters, not a history: volatile since the driver
#: loaded, aggregate over the GPU's life; a volatile count that is most of the aggregate is a recent rise)
CORRECTED_RISING = 100
RESET = "`sudo nvidia-smi -r -i {i}` (stop every process on it first; `nvidia-smi` lists them) or reboot the node"


def evaluate(facts: Facts) -> list[Finding]:
    failed: list[str] = []
    pending: list[str] = []
    notes: list[str] = []
    rising: list[str] = []
    evidence = {}
    for dev, h in gpus_with_health(facts):
        evidence[f"gpu{dev.index}"] = {
            key: ev(getattr(h, key))
            for key in (
                "ecc_enabled",
                "ecc_volatile_uncorrected",
                "ecc_volatile_corrected",
                "ecc_aggregate_uncorrected",
                "ecc_aggregate_corrected",
                "retired_pages_sbe",
                "retired_pages_dbe",
                "retired_pages_pending",
                "remapped_rows_correctable",
                "remapped_rows_uncorrectable",
                "remap_pending",
                "remap_failure",
            )
        }
        name = label(dev)
        reset = RESET.format(i=dev.index)
        vol_unc = num(h.ecc_volatile_uncorrected) or 0
        agg_unc = num(h.ecc_aggregate_uncorrected) or 0
        handled = (num(h.retired_pages_dbe) or 0) + (num(h.remapped_rows_uncorrectable) or 0)
        if num(h.remap_failure):
            failed.append(
                f"{name}: **row remapping failed** — the memory can no longer be repaired; drain the "
                f"node and replace the GPU (RMA, attach `nvidia-bug-report.sh` output)"
            )
        if vol_unc > 0:
            failed.append(
                f"{name}: **{plural(vol_unc, 'uncorrectable ECC error')} since the driver loaded** — data on "
                f"this GPU may be corrupt; drain the node, then {reset}; RMA if it happens again"
            )
        elif agg_unc > 0 and handled == 0:
            failed.append(
                f"{name}: **{plural(agg_unc, 'uncorrectable ECC error')} in its lifetime** and no retired "
                f"page or remapped row accounts for {verb(agg_unc, 'it', 'them')}; drain the node, then "
                f"{reset}; RMA if {verb(agg_unc, 'it recurs', 'they recur')}"
            )
        elif agg_unc > 0:
            notes.append(
                f"{name}: {plural(agg_unc, 'uncorrectable ECC error')} in its lifetime, already handled "
                f"({handled} retired {noun(handled, 'page')}/remapped {noun(handled, 'row')})"
            )
        vol_cor = num(h.ecc_volatile_corrected) or 0
        agg_cor = num(h.ecc_aggregate_corrected) or 0
        if vol_cor >= CORRECTED_RISING and 2 * vol_cor >= agg_cor:
            rising.append(
                f"{name}: **{plural(vol_cor, 'corrected ECC error')} since the driver loaded**, "
                f"{'all' if vol_cor >= agg_cor else 'most'} of the {agg_cor} in its lifetime: the memory has started "
                f"to fail. Watch `nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER`; plan a reset when idle "
                f"({reset}) so retirements/remaps take effect, and an RMA if uncorrectable errors follow"
            )
        if num(h.retired_pages_pending):
            pending.append(
                f"{name}: pages are **pending retirement**; they are taken out of use at the next GPU "
                f"reset — when it is idle, {reset}"
            )
        if num(h.remap_pending):
            pending.append(
                f"{name}: a **row remap is pending**; it takes effect at the next GPU reset — when it is idle, {reset}"
            )
        if isinstance(h.ecc_enabled, bool) and not h.ecc_enabled:
            notes.append(f"{name}: ECC is disabled (enable with `sudo nvidia-smi -e 1 -i {dev.index}` and a reboot)")
        elif not isinstance(h.ecc_enabled, bool):
            notes.append(f"{name}: ECC is not supported ({shown(h.ecc_enabled)})")
    tail = ("\n\nAlso:\n" + bullets(notes)) if notes else ""
    first = (failed + pending)[0] if failed or pending else ""
    idx = next((d.index for d, _h in gpus_with_health(facts) if first.startswith(label(d) + ":")), 0)
    commands = (
        Command(f"nvidia-smi -q -d ECC -i {idx}", "the GPU's ECC counters and pending retirements"),
        Command(f"sudo nvidia-smi -r -i {idx}", "reset the GPU (stop every process on it first)", "root"),
    )
    if failed:
        return [
            CHECK.finding(
                Status.FAIL,
                f"uncorrectable GPU memory errors: {head(failed[0])}"
                + (f" and {len(failed) - 1} more" if len(failed) > 1 else ""),
                "A GPU whose memory returned uncorrectable errors can silently corrupt results and "
                "crash jobs. Keep jobs off this node until it is fixed:\n\n" + bullets(failed + pending) + tail,
                evidence=evidence,
                doc_url=DOC,
                commands=commands,
            )
        ]
    if pending or rising:
        if not pending:
            return [
                CHECK.finding(
                    Status.WARN,
                    f"corrected GPU memory errors rising: {head(rising[0])}",
                    "Corrected errors do not lose data, but a count that climbs since the last driver load is the "
                    "usual first sign of failing GPU memory:\n\n" + bullets(rising) + tail,
                    evidence=evidence,
                    doc_url=DOC,
                )
            ]
        tail = ("\n\nAlso rising:\n" + bullets(rising) if rising else "") + tail
        return [
            CHECK.finding(
                Status.WARN,
                f"GPU memory repair pending a reset: {head(pending[0])}",
                "Errors were corrected, and the bad memory is marked to be taken out of use, which "
                "happens only at a GPU reset or reboot:\n\n" + bullets(pending) + tail,
                evidence=evidence,
                doc_url=DOC,
                commands=commands,
            )
        ]
    return [
        CHECK.finding(
            Status.OK,
            "no uncorrectable memory errors, nothing pending retirement or remap",
            ("Notes:\n" + bullets(notes)) if notes else "",
            evidence=evidence,
        )
    ]


CHECK = Check(
    id="devices.ecc",
    title="GPU memory: ECC errors, retired pages, remapped rows",
    needs=("nvidia",),
    evaluate=evaluate,
)
