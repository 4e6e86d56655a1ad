"""Check ``cuda.context``: can a CUDA context be created on every GPU the job sees?

Reads the CUDA driver API section of the probe (``cuInit``, then per visible
device ``cuCtxCreate``/``cuCtxDestroy``; NVIDIA CUDA Driver API reference).
``torch.cuda.is_available()`` only counts devices; a GPU that fell off the
bus, sits in an exclusive-process compute mode taken by another job, or has
an uncorrectable ECC error is counted yet fails on first use. This check
finds that before the job starts.

- no NVIDIA GPU/driver, or libcuda not loadable -> ``skip`` (``cuda.libcuda`` reports it);
- ``cuInit`` fails on a machine with a GPU -> ``fail`` with the CUresult;
- a context fails on some device -> ``fail`` naming each device and CUresult;
- every context created -> ``ok``.
"""

from __future__ import annotations

from gpudoctor.checks._gpu import has_nvidia_gpu, per_target
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.targets import ProbeFacts, TargetFacts
from gpudoctor.model import Check, Finding, Status

_REMEDY = (
    "Look at the GPU with `nvidia-smi -q -d ECC,PERFORMANCE,COMPUTE` and the kernel log "
    "(`sudo dmesg | grep -i -e NVRM -e Xid`). An `Exclusive_Process` compute mode held by another job "
    "makes `cuCtxCreate` fail with `CUDA_ERROR_DEVICE_BUSY`/`INVALID_DEVICE`; an Xid 79 (fallen off "
    "the bus) or uncorrectable ECC error needs a GPU reset (`sudo nvidia-smi -r -i N`) or a reboot; "
    "drain the node until then."
)


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
        return CHECK.finding(
            Status.FAIL,
            f"cuInit fails in {probe.executable}: {drv.init_error}",
            f"The CUDA driver refuses to initialise in this process, so no CUDA program can start.\n\n"
            f"```\nnvidia-smi\n```\n\n{_REMEDY}",
            evidence=evidence,
            target=t.label,
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
        )
    n = len(drv.devices)
    if not n:
        return CHECK.finding(Status.SKIP, "CUDA enumerates no device here (see cuda.devices)", target=t.label)
    return CHECK.finding(
        Status.OK, f"a CUDA context opens on all {n} GPU{'s' if n != 1 else ''}", evidence=evidence, target=t.label
    )


CHECK = Check(
    id="cuda.context",
    title="a CUDA context can be created and destroyed on every visible GPU (driver API)",
    needs=("targets", "nvidia", "gpu"),
    evaluate=per_target("cuda.context", assess),
    tags=("gate",),
    probe_level="light",  # issue 14: reads only what the light probe reports too
)
