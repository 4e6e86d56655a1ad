"""Check ``cuda.available``: the headline. Is CUDA usable in each target, and
if not, what is the single most likely root cause?

It reuses the other GPU checks' pure ``assess`` functions and takes the first
``fail`` in causal order: platform (``platform.container``,
``platform.kernel-module``) → driver (``nvidia.driver``, ``cuda.driver``, ``platform.driver-branch``) →
``cuda.libcuda`` → ``cuda.arch`` → libraries (``cudnn.load``) → visibility
(``cuda.devices``) → driver initialisation (``cuda.context``: ``cuInit``, a context per GPU). The summary reads "CUDA is unavailable in <python>: <root
cause>" (or "unusable" when ``torch.cuda.is_available()`` is True but kernels
cannot run). Shown first in ``gpudoctor check``.

- no NVIDIA GPU and no driver -> ``info`` (nothing to fix on a CPU machine);
- a root cause found -> ``fail`` with that check's explanation;
- CUDA available and nothing wrong -> ``ok``;
- unavailable for an unknown reason -> ``fail`` with torch's own message.
"""

from __future__ import annotations

from collections.abc import Callable

from gpudoctor.checks import (
    cuda_arch,
    cuda_context,
    cuda_devices,
    cuda_driver,
    cuda_libcuda,
    cudnn_load,
    nvidia_driver,
)
from gpudoctor.checks._gpu import has_nvidia_gpu, per_target
from gpudoctor.facts import Facts
from gpudoctor.facts.nvidia import NvidiaDriverFacts
from gpudoctor.facts.targets import ProbeFacts, TargetFacts
from gpudoctor.model import Check, Finding, Status
from gpudoctor.words import models, plural

#: the causal order of the per-target checks consulted after the driver
ORDER: tuple[tuple[str, Callable[[Facts, TargetFacts, ProbeFacts], Finding]], ...] = (
    ("cuda.driver", cuda_driver.assess),
    ("platform.driver-branch", lambda facts, t, probe: _branch(facts, t, probe)),
    ("cuda.libcuda", cuda_libcuda.assess),
    ("cuda.arch", cuda_arch.assess),
    ("cudnn.load", cudnn_load.assess),
    ("cuda.devices", cuda_devices.assess),
    ("cuda.context", cuda_context.assess),
)


def _platform_fault(facts: Facts) -> Finding | None:
    """The first ``fail`` of the platform checks below the driver: GPU not injected into the
    container, wrong or missing kernel module."""
    from gpudoctor.checks import SkipCheck, platform_container, platform_kernel_module

    for evaluate in (platform_container.evaluate, platform_kernel_module.evaluate_module):
        try:
            found = [f for f in evaluate(facts) if f.status == Status.FAIL]
        except SkipCheck:
            continue
        if found:
            return found[0]
    return None


def _branch(facts: Facts, t: TargetFacts, probe: ProbeFacts) -> Finding:
    """``platform.driver-branch`` as a per-target step (its verdict does not depend on the target)."""
    from gpudoctor.checks import SkipCheck, platform_kernel_module

    try:
        return platform_kernel_module.evaluate_branch(facts)[0]
    except SkipCheck as exc:
        return Finding(check="platform.driver-branch", status=Status.SKIP, summary=str(exc))


def _driver_fault(facts: Facts) -> Finding | None:
    platform = _platform_fault(facts)
    if platform is not None:
        return platform
    if isinstance(facts.of(NvidiaDriverFacts), NvidiaDriverFacts):
        found = [f for f in nvidia_driver.evaluate(facts) if f.status == Status.FAIL]
        return found[0] if found else None
    return None


def root_cause(facts: Facts, t: TargetFacts, probe: ProbeFacts) -> Finding | None:
    """The first failing finding in causal order for this target, or None."""
    fault = _driver_fault(facts)
    if fault is not None:
        return fault
    tf = probe.torch
    if tf.is_cpu_build:
        return Finding(
            check="torch.install",
            status=Status.FAIL,
            summary=f"torch {tf.version} is a CPU-only build",
            explanation="A CPU-only build never uses the GPU; see `torch.install` for the exact "
            "`pip install ... --index-url` command of a CUDA build this driver runs.",
        )
    for _cid, fn in ORDER:
        finding = fn(facts, t, probe)
        if finding.status == Status.FAIL:
            return finding
    return None


def assess(facts: Facts, t: TargetFacts, probe: ProbeFacts) -> Finding:
    """The headline finding for one target (pure)."""
    tf = probe.torch
    python = probe.executable
    gpu = has_nvidia_gpu(facts)
    evidence = {
        "python": python,
        "torch": tf.version or tf.dist_version,
        "torch.cuda.is_available()": tf.cuda_available,
    }
    if not gpu:
        where = (
            "no NVIDIA GPU and no NVIDIA driver on this machine"
            if gpu is False
            else "no NVIDIA driver is visible (and the PCI bus could not be listed to look for a GPU)"
        )
        return CHECK.finding(
            Status.INFO,
            f"CUDA is unavailable in {python}: {where}",
            "Nothing to repair on a machine without an NVIDIA GPU; the GPU checks are skipped. "
            "In a container on a GPU host, `platform.container` says how to give it the GPU on this "
            "platform.",
            evidence=evidence,
            target=t.label,
        )
    if not tf.installed:
        # issue 11: an environment built on another GPU framework is judged by cuda.frameworks/cuda.libraries
        from gpudoctor.checks.cuda_frameworks import frameworks_of

        others = [f for f in frameworks_of(facts, t.label) or [] if f.name != "torch"]
        if others:
            return CHECK.finding(
                Status.SKIP,
                f"torch is not installed in {python}; its GPU framework"
                f"{'s are' if len(others) > 1 else ' is'} "
                f"{', '.join(f'{f.dist} {f.version}' for f in others)} "
                f"(see cuda.frameworks and cuda.libraries)",
                target=t.label,
            )
    if not tf.installed or tf.import_failed:
        what = "torch is not installed" if not tf.installed else f"`import torch` fails: {tf.import_error}"
        fault = _driver_fault(facts)
        if fault is not None:  # both stand in the way: the driver first (a wheel is chosen for the driver)
            evidence.update({"root_cause_check": fault.check, "then_check": "torch.install"})
            later = " once the driver works: the CUDA build is chosen for the driver" if not tf.installed else ""
            return CHECK.finding(
                Status.FAIL,
                f"CUDA is unavailable in {python}: {fault.summary}; and {what}",
                f"Two things stand in the way, the driver first:\n\n1. The driver (from `{fault.check}`): "
                f"{fault.explanation}\n\n2. torch: see `torch.install` for the cause and the command{later}.",
                evidence=evidence,
                target=t.label,
            )
        return CHECK.finding(
            Status.FAIL,
            f"CUDA is unavailable in {python}: {what}",
            "See `torch.install` for the cause and the exact command.",
            evidence=evidence,
            target=t.label,
        )
    if tf.hip:
        return CHECK.finding(Status.SKIP, f"torch {tf.version} is a ROCm build; CUDA does not apply", target=t.label)
    cause = root_cause(facts, t, probe)
    if cause is not None:
        verb = "unusable" if tf.cuda_available else "unavailable"
        evidence.update({"root_cause_check": cause.check})
        evidence.update({f"{cause.check}.{k}": val for k, val in dict(cause.evidence).items()})
        return CHECK.finding(
            Status.FAIL,
            f"CUDA is {verb} in {python}: {cause.summary}",
            f"Root cause (from `{cause.check}`; checked in the order driver → libcuda → arch → libraries → "
            f"visibility → initialisation):\n\n{cause.explanation}",
            evidence=evidence,
            target=t.label,
        )
    if tf.cuda_available:
        n = tf.device_count if tf.device_count is not None else len(tf.devices)
        names = models(d.name for d in tf.devices)  # per model: 10,000 GPUs are one short phrase
        # a snapshot (or a light probe) without a device count says nothing rather than "0 GPUs"
        count = f": {plural(n, 'GPU')}" if n else ""
        return CHECK.finding(
            Status.OK,
            f"CUDA works in {python}{count}" + (f" ({names})" if names else ""),
            evidence=evidence,
            target=t.label,
        )
    message = tf.cuda_error or "torch gave no message"
    return CHECK.finding(
        Status.FAIL,
        f"CUDA is unavailable in {python}: no known cause matched; torch says: {message.splitlines()[0]}",
        f"None of the driver, libcuda, arch, cuDNN or visibility checks found a fault. torch reported:\n\n```\n"
        f"{message}\n```\n\nRun `gpudoctor check --format markdown -v` and include its output in a bug report.",
        evidence=evidence,
        target=t.label,
    )


CHECK = Check(
    id="cuda.available",
    title="headline: is CUDA usable in each target, and the single most likely root cause",
    needs=("targets", "nvidia", "gpu", "os", "loader", "cuda_wheels", "cuda_libraries", "platform", "kmod"),
    evaluate=per_target("cuda.available", assess),
    tags=("gate",),
    probe_level="light",  # issue 14: reads only what the light probe reports too
)
