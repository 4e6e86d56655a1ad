"""Check ``cuda.context``: can a CUDA context be created on every GPU the job sees?

Reads the CUDA driver API section of the probe (``cuInit``, then per visible
device ``cuCtxCreate``/``cuCtxDestroy``; NVIDIA CUDA Driver API reference).
``torch.cuda.is_available()`` only counts devices; a GPU that fell off the
bus, sits in an exclusive-process compute mode taken by another job, or has
an uncorrectable ECC error is counted yet fails on first use. This check
finds that before the job starts.

- no NVIDIA GPU/driver, or libcuda not loadable -> ``skip`` (``cuda.libcuda`` reports it);
- ``cuInit`` fails on a machine with a GPU -> ``fail`` with the CUresult and the remedy
  for that code (:data:`INIT_CAUSES`: 999 after suspend/resume or a missing ``nvidia_uvm``,
  802 Fabric Manager not running, 34 stub library, 100 no device, 803/804 cuda-compat);
- a context fails on some device -> ``fail`` naming each device and CUresult;
- every context created -> ``ok``.
"""

from __future__ import annotations

from gpudoctor.checks._gpu import has_nvidia_gpu, per_target
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.targets import ProbeFacts, TargetFacts
from gpudoctor.model import Check, Command, Finding, Status

_REMEDY = (
    "Look at the GPU with `nvidia-smi -q -d ECC,PERFORMANCE,COMPUTE` and the kernel log "
    "(`sudo dmesg | grep -i -e NVRM -e Xid`). An `Exclusive_Process` compute mode held by another job "
    "makes `cuCtxCreate` fail with `CUDA_ERROR_DEVICE_BUSY`/`INVALID_DEVICE`; an Xid 79 (fallen off "
    "the bus) or uncorrectable ECC error needs a GPU reset (`sudo nvidia-smi -r -i N`) or a reboot; "
    "drain the node until then."
)

#: the commands of :data:`_REMEDY`, the first one safe to run as is
_LOOK = (
    Command("nvidia-smi -q -d ECC,PERFORMANCE,COMPUTE", "the GPUs' ECC errors, clocks and compute mode"),
    Command("sudo dmesg | grep -i -e NVRM -e Xid", "the driver's messages in the kernel log", "root"),
)


#: cuInit CUresult name -> (short cause for the summary, cause, remedy, the check that owns the
#: same cause or ""). Sources: CUDA Driver API reference (CUresult); pytorch/pytorch issues #88639
#: and #49081 (999 after suspend, fixed by reloading nvidia_uvm; /dev/nvidia-uvm missing in a
#: container); NVIDIA Fabric Manager User Guide (802 on NVSwitch systems until
#: nvidia-fabricmanager of the driver's version runs).
INIT_CAUSES: dict[str, tuple[str, str, str, str]] = {
    "CUDA_ERROR_UNKNOWN": (
        "the nvidia_uvm module needs reloading (typical after a suspend/resume)",
        "the driver's unified-memory module is in a bad state or missing — typically after a suspend/resume "
        "with CUDA processes open, or when `nvidia_uvm` is not loaded / `/dev/nvidia-uvm` does not exist",
        "Close every CUDA program, then reload the module:\n\n```\nsudo rmmod nvidia_uvm && sudo modprobe "
        "nvidia_uvm\n```\n\n(`sudo nvidia-modprobe -u -c 0` creates a missing `/dev/nvidia-uvm`; in a container "
        "the host must have it, and the container must be given it). If it comes back after every suspend, "
        "enable the driver's `nvidia-suspend`/`nvidia-resume` services or reboot.",
        "",
    ),
    "CUDA_ERROR_SYSTEM_NOT_READY": (
        "NVIDIA Fabric Manager is not running (NVSwitch system)",
        "the system is not ready: on an NVSwitch machine (HGX/DGX A100, H100, H200) the NVIDIA Fabric Manager "
        "service is not running or is of another version than the driver",
        "Start it, in the exact version of the driver:\n\n```\nsudo systemctl enable --now nvidia-fabricmanager\n"
        "systemctl status nvidia-fabricmanager\n```\n\n(install the `nvidia-fabricmanager-<branch>` package "
        "matching the driver if it is missing).",
        "",
    ),
    "CUDA_ERROR_STUB_LIBRARY": (
        "the libcuda loaded is the CUDA toolkit's stub",
        "the `libcuda` in this process is the CUDA toolkit's link-time stub, not the driver's",
        "Remove the toolkit's `stubs` directory from `LD_LIBRARY_PATH` / `/etc/ld.so.conf.d/` (see `cuda.libcuda`).",
        "cuda.libcuda",
    ),
    "CUDA_ERROR_NO_DEVICE": (
        "the driver sees no GPU in this process",
        "the driver sees no GPU in this process: `CUDA_VISIBLE_DEVICES` hides them, or (in a container) "
        "no `/dev/nvidia*` device was given",
        "See `cuda.devices` and `platform.container` for which one applies here.",
        "",
    ),
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": (
        "libcuda and the kernel module do not belong together",
        "the user-space `libcuda` and the kernel module do not belong together (a cuda-compat copy older "
        "than the driver, or a driver upgraded without a reboot)",
        "See `cuda.libcuda` for the copy that is loaded; reboot after a driver upgrade.",
        "cuda.libcuda",
    ),
    "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": (
        "a cuda-compat libcuda is loaded on a GPU that does not support it",
        "a cuda-compat (forward-compatibility) `libcuda` is loaded on a GPU that does not support it",
        "Remove the `compat` directory from the loader path (see `cuda.libcuda`).",
        "cuda.libcuda",
    ),
}


#: cuInit CUresult name -> the commands of its remedy in :data:`INIT_CAUSES`, preferred first
INIT_COMMANDS: dict[str, tuple[Command, ...]] = {
    "CUDA_ERROR_UNKNOWN": (
        Command(
            "sudo rmmod nvidia_uvm && sudo modprobe nvidia_uvm",
            "reload the unified-memory module (no CUDA program open)",
            "root",
        ),
    ),
    "CUDA_ERROR_SYSTEM_NOT_READY": (
        Command("sudo systemctl enable --now nvidia-fabricmanager", "start NVIDIA Fabric Manager", "root"),
        Command("systemctl status nvidia-fabricmanager", "whether it runs, and its version"),
    ),
}


def init_cause(init_error: str | None) -> tuple[str, str, str, str] | None:
    """(short cause, cause, remedy, owning check) for a ``cuInit`` error such as ``CUDA_ERROR_UNKNOWN (999): unknown
    error``, or None for a code without a known single cause."""
    name = (init_error or "").split(" ", 1)[0]
    return INIT_CAUSES.get(name)


def assess(facts: Facts, t: TargetFacts, probe: ProbeFacts) -> Finding:
    """The ``cuda.context`` finding for one target (pure)."""
    drv = probe.cuda_driver
    if isinstance(drv, Unavailable):
        return CHECK.finding(Status.SKIP, f"the CUDA driver API was not probed: {drv.reason}", target=t.label)
    if not has_nvidia_gpu(facts) and not (drv.loaded and drv.device_count):
        return CHECK.finding(Status.SKIP, "no NVIDIA GPU or driver here", target=t.label)
    if not drv.loaded:
        return CHECK.finding(Status.SKIP, "libcuda.so.1 cannot be loaded (see cuda.libcuda)", target=t.label)
    evidence = {
        "python": probe.executable,
        "driver_api_version": drv.driver_api_version,
        "devices": [f"{d.index}: {d.name} ctx={'ok' if d.context_ok else d.context_error}" for d in drv.devices],
    }
    if not drv.init_ok:
        known = init_cause(drv.init_error)
        if known is not None:
            short, cause, remedy, owner = known
            return CHECK.finding(
                Status.FAIL,
                f"cuInit fails in {probe.executable} with {(drv.init_error or '').split(':')[0]}: {short}",
                f"The CUDA driver refuses to initialise in this process (`{drv.init_error}`), so no CUDA program "
                f"can start (`torch.cuda.is_available()` is False). Cause: {cause}.\n\n{remedy}",
                evidence=evidence,
                target=t.label,
                caused_by=(owner,) if owner else (),
                commands=INIT_COMMANDS.get((drv.init_error or "").split(" ", 1)[0], ()),
            )
        return CHECK.finding(
            Status.FAIL,
            f"cuInit fails in {probe.executable}: {drv.init_error}",
            f"The CUDA driver refuses to initialise in this process, so no CUDA program can start.\n\n"
            f"```\nnvidia-smi\n```\n\n{_REMEDY}",
            evidence=evidence,
            target=t.label,
            commands=(Command("nvidia-smi", "whether the driver answers at all"), *_LOOK),
        )
    bad = [d for d in drv.devices if d.context_ok is False]
    if bad:
        names = "; ".join(f"cuda:{d.index} ({d.name}): {d.context_error}" for d in bad)
        return CHECK.finding(
            Status.FAIL,
            f"no CUDA context can be created on {len(bad)} of {len(drv.devices)} GPUs: {names}",
            f"`cuCtxCreate` failed, so the first CUDA call of a job on these GPUs fails although "
            f"`torch.cuda.device_count()` counts them.\n\n```\nnvidia-smi -q -d ECC,PERFORMANCE,COMPUTE\n```\n\n"
            f"{_REMEDY}",
            evidence=evidence,
            target=t.label,
            commands=_LOOK,
        )
    n = len(drv.devices)
    if not n:
        return CHECK.finding(Status.SKIP, "CUDA enumerates no device here (see cuda.devices)", target=t.label)
    return CHECK.finding(
        Status.OK,
        f"a CUDA context opens on all {n} GPUs" if n > 1 else "a CUDA context opens on the GPU",
        evidence=evidence,
        target=t.label,
    )


CHECK = Check(
    id="cuda.context",
    title="a CUDA context can be created and destroyed on every visible GPU (driver API)",
    needs=("targets", "nvidia", "gpu"),
    evaluate=per_target("cuda.context", assess),
)
