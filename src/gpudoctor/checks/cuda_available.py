"""Check ``cuda.available``: the headline. Is CUDA usable in each target, and if not, what is the
single most likely root cause?

The check reads only the target's own probe (torch installed, importable, a CUDA build,
``torch.cuda.is_available()``) and leaves a provisional finding; the root cause is derived after
evaluation from the findings of the whole run (:mod:`gpudoctor.causes`): the failing finding that
nothing else explains, ties broken by the catalogue's headline priority (platform → driver →
libcuda → framework → arch → libraries → visibility → initialisation). The summary reads "CUDA is
unavailable in <python>: <root cause>" (or "unusable" when ``torch.cuda.is_available()`` is True
but kernels cannot run). Shown first in ``gpudoctor check``.

- no NVIDIA GPU and no driver -> ``info`` (nothing to fix on a CPU machine);
- a root cause found -> ``fail`` with that finding's explanation and commands, what was ruled out
  and a command to verify it by hand;
- CUDA available and nothing wrong -> ``ok`` (never better than the worst finding it summarises);
- unavailable for an unknown reason -> ``fail`` with torch's own message.
"""

from __future__ import annotations

from dataclasses import replace

from gpudoctor.checks._gpu import has_nvidia_gpu, per_target
from gpudoctor.facts import Facts
from gpudoctor.facts.targets import ProbeFacts, TargetFacts
from gpudoctor.model import Check, Finding, Status
from gpudoctor.words import models, plural


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
        evidence["headline"] = "nogpu"
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
        # issue 25: without torch, CUDA usability is decided from the driver API and the other frameworks
        # (a platform or driver fault below them is the root cause the cause graph puts in the headline)
        from gpudoctor.checks._usability import headline_without_torch

        decided = headline_without_torch(CHECK, facts, t, probe, None)
        if decided is not None:
            return decided
    if not tf.installed or tf.import_failed:
        what = "torch is not installed" if not tf.installed else f"`import torch` fails: {tf.import_error}"
        # provisional: a driver fault found by another check of this run comes first (gpudoctor.causes)
        evidence.update({"headline": "torch", "torch_problem": what})
        return CHECK.finding(
            Status.FAIL,
            f"CUDA is unavailable in {python}: {what}",
            "See `torch.install` for the cause and the exact command.",
            evidence=evidence,
            target=t.label,
        )
    if tf.hip:
        return CHECK.finding(Status.SKIP, f"torch {tf.version} is a ROCm build; CUDA does not apply", target=t.label)
    if tf.is_cpu_build:
        evidence["headline"] = "unknown"  # torch.install names the CUDA build to install
        return CHECK.finding(
            Status.FAIL,
            f"CUDA is unavailable in {python}: torch {tf.version} is a CPU-only build",
            "A CPU-only build never uses the GPU; see `torch.install` for the exact "
            "`pip install ... --index-url` command of a CUDA build this driver runs.",
            evidence=evidence,
            target=t.label,
        )
    # provisional: a failing finding of this run that nothing else explains becomes the root cause
    evidence["headline"] = "works" if tf.cuda_available else "unknown"
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


def evaluate(facts: Facts) -> list[Finding]:
    """:func:`assess` per target; a target whose probe failed says so, and whether this machine has a GPU."""
    kind = "unknown" if has_nvidia_gpu(facts) else "nogpu"
    return [
        f if f.evidence else replace(f, evidence={"headline": kind})
        for f in per_target("cuda.available", assess)(facts)
    ]


CHECK = Check(
    id="cuda.available",
    title="headline: is CUDA usable in each target, and the single most likely root cause",
    needs=("targets", "nvidia", "gpu", "os", "loader", "cuda_wheels", "cuda_libraries", "platform", "kmod"),
    evaluate=evaluate,
)
