"""Check ``devices.inventory``: every NVIDIA GPU on the PCI bus accounted for.

Joins the PCI bus (sysfs, vendor 0x10de, display/3D class), NVML and each
target's CUDA enumeration by PCI address (:mod:`gpudoctor.gpu_inventory`):

- ``fail``: a GPU bound to ``nvidia`` that NVML counts but cannot open
  (``nvmlDeviceGetHandleByIndex``: "GPU is lost", "Unknown Error"; ``nvidia-smi``
  says "Unable to determine the device handle"), or does not list at all; or a GPU
  whose driver asks for a reset / reboot / drain (``NVML_FI_DEV_GET_GPU_RECOVERY_ACTION``);
- ``warn``: a GPU bound to another driver or to none next to working ones (the
  cause is ``platform.kernel-module``'s), or a GPU NVML opened that a target's CUDA
  does not enumerate while the others do;
- ``ok``: each GPU listed with its driver, NVML index and CUDA view;
- ``skip``: no NVIDIA GPU on the bus and none from NVML, or NVML not run (see ``nvidia.driver``).

Remedies fit the machine (:mod:`gpudoctor.hostpkg`): a container user is told what
the host operator must do.
"""

from __future__ import annotations

from typing import Any

from gpudoctor import hostpkg
from gpudoctor.checks import SkipCheck
from gpudoctor.checks._devices import bullets
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.nvidia import NvidiaDriverFacts
from gpudoctor.gpu_inventory import GpuAccount, account, describe
from gpudoctor.model import Check, Command, Finding, Status

#: recovery actions (nvmlGpuRecoveryAction_t) -> (what the driver asks, reboot instead of reset)
RECOVERY = {
    "gpu_reset": ("a GPU reset", False),
    "node_reboot": ("a reboot of the node", True),
    "drain_p2p": ("draining peer-to-peer traffic (stop the jobs using this GPU's P2P/NVLink), then a reset", False),
    "drain_and_reset": ("draining its work, then a GPU reset", False),
    "bus_reset": ("a PCIe bus reset (a reboot of the node)", True),
    "system_reboot": ("a reboot of the whole system", True),
    "recover_imex_domain": ("recovering its IMEX domain (multi-node NVLink)", False),
}


def _lost_text(lost: list[GpuAccount]) -> str:
    errors = {a.nvml_error for a in lost}
    if any("lost" in e.lower() or "unknown" in e.lower() for e in errors):
        why = (
            '"GPU is lost" / "Unknown Error" from `nvmlDeviceGetHandleByIndex` means the driver lost contact '
            "with the GPU: it fell off the PCIe bus (XID 79), failed to initialise at boot (`NVRM: RmInitAdapter "
            'failed`), or is stuck after an uncontained error. `nvidia-smi` prints "Unable to determine the device '
            'handle for GPU ..." for it. The kernel log says which (`devices.kernel-log`, or '
            "`sudo journalctl -k -b 0 | grep -E 'NVRM|Xid'`)."
        )
    elif any("requires restart" in e.lower() or "reset" in e.lower() for e in errors):
        why = (
            'NVML answers "GPU requires restart" (`NVML_ERROR_RESET_REQUIRED`): after an error the driver keeps '
            "the GPU closed until it is reset (or the node rebooted)."
        )
    elif any("permission" in e.lower() for e in errors):
        why = (
            "NVML may not open the GPU's device node (`/dev/nvidia<minor>`): its permissions, or the container's "
            "device cgroup, keep this process out (`ls -l /dev/nvidia*`)."
        )
    else:
        why = "NVML cannot open it; the kernel log usually says why (`sudo dmesg | grep -E 'NVRM|Xid'`)."
    return why


def evaluate(facts: Facts) -> list[Finding]:
    nv = facts.of(NvidiaDriverFacts)
    accounts = account(facts)
    if not accounts:
        raise SkipCheck("no NVIDIA GPU on the PCI bus and none from NVML")
    evidence: dict[str, Any] = {
        "gpus": [describe(a).replace("**", "").replace("`", "") for a in accounts],
        "nvml_device_count": None
        if isinstance(nv, Unavailable) or isinstance(nv.device_count, Unavailable)
        else nv.device_count,
    }
    lines = [describe(a) for a in accounts]
    if all(a.nvml == "not asked" for a in accounts):
        raise SkipCheck("NVML was not run, so GPUs cannot be matched to it (see nvidia.driver)")
    lost = [a for a in accounts if a.nvml in ("unopened", "absent") and a.driver in ("nvidia", "unknown")]
    if lost:
        n = len(lost)
        ok = sum(1 for a in accounts if a.nvml == "opened")
        names = ", ".join(a.bus_id or f"NVML GPU {a.nvml_index}" for a in lost)
        targets = [str(a.nvml_index) if a.nvml_index is not None else a.bus_id for a in lost]
        gone = any("lost" in a.nvml_error.lower() or "unknown" in a.nvml_error.lower() for a in lost)
        return [
            CHECK.finding(
                Status.FAIL,
                f"{n} of {len(accounts)} NVIDIA GPU{'s' if len(accounts) != 1 else ''} bound to the driver "
                f"cannot be used: NVML cannot open {names}" + (f" (only {ok} usable)" if ok else ""),
                "Each GPU on the PCI bus, its driver, NVML and CUDA:\n\n"
                + bullets(lines)
                + "\n\n"
                + _lost_text(lost)
                + " Jobs that ask for every GPU of this node fail or hang; keep them off it.\n\n"
                + hostpkg.reset_gpu(facts, targets, reboot=gone),
                evidence=evidence,
                commands=hostpkg.reset_gpu_commands(facts, targets, reboot=gone),
            )
        ]
    recover = [
        (a, dev.recovery_action)
        for a in accounts
        if a.nvml == "opened" and not isinstance(nv, Unavailable)
        for dev in nv.devices
        if dev.index == a.nvml_index and isinstance(dev.recovery_action, str) and dev.recovery_action in RECOVERY
    ]
    if recover:
        a, action = recover[0]
        what, reboot = RECOVERY[action]
        evidence["recovery_action"] = {str(x.nvml_index): act for x, act in recover}
        return [
            CHECK.finding(
                Status.FAIL,
                f"the driver says NVML GPU {a.nvml_index} ({a.bus_id}) needs {what.split(' (')[0]}",
                f"NVML's recovery action for this GPU is `{action}` (`NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`): the "
                f"driver saw an error it cannot contain and the GPU stays unreliable until {what}.\n\n"
                + bullets(lines)
                + "\n\n"
                + hostpkg.reset_gpu(facts, [str(x.nvml_index) for x, _ in recover], reboot=reboot),
                evidence=evidence,
                commands=hostpkg.reset_gpu_commands(facts, [str(x.nvml_index) for x, _ in recover], reboot=reboot),
            )
        ]
    other = [a for a in accounts if a.driver not in ("nvidia", "unknown")]
    hidden = [(a, label) for a in accounts if a.nvml == "opened" for label, seen in a.cuda if seen == "no"]
    if other and any(a.nvml == "opened" for a in accounts):
        return [
            CHECK.finding(
                Status.WARN,
                f"{len(other)} NVIDIA GPU{'s' if len(other) != 1 else ''} on the PCI bus not driven by nvidia: "
                + ", ".join(f"{a.bus_id} ({a.driver})" for a in other),
                bullets(lines) + "\n\nSee `platform.kernel-module` for why the module did not bind them.",
                evidence=evidence,
                commands=(Command("lspci -nnk -d 10de:", "which kernel driver each NVIDIA device is bound to"),),
            )
        ]
    if hidden and len({label for _a, label in hidden}) and any(seen == "yes" for a in accounts for _l, seen in a.cuda):
        a, label = hidden[0]
        return [
            CHECK.finding(
                Status.WARN,
                f"NVML GPU {a.nvml_index} ({a.bus_id}) is not enumerated by CUDA in {label}",
                bullets(lines) + "\n\nCUDA hides GPUs outside `CUDA_VISIBLE_DEVICES` (see `cuda.devices`); a GPU the "
                "driver opened but CUDA skips while others work can also be in MIG mode or out of memory.",
                evidence=evidence,
                commands=(
                    Command("nvidia-smi -L", "every GPU the driver has, with its UUID and MIG instances"),
                    Command("echo $CUDA_VISIBLE_DEVICES", "the GPUs CUDA is allowed to enumerate"),
                ),
            )
        ]
    n = len(accounts)
    return [
        CHECK.finding(
            Status.OK,
            f"all {n} NVIDIA GPU{'s' if n != 1 else ''} on the PCI bus are bound to nvidia and opened by NVML",
            bullets(lines),
            evidence=evidence,
        )
    ]


CHECK = Check(
    id="devices.inventory",
    title="every NVIDIA GPU on the PCI bus: driver, NVML, CUDA",
    needs=("gpu", "nvidia", "os", "targets"),
    evaluate=evaluate,
)
