"""Check ``platform.visibility``: the GPUs a scheduler or MIG setup makes
visible to each target, against what CUDA and the target's torch accept.

Sources: NVIDIA MIG User Guide, "CUDA Device Enumeration" (a CUDA process
enumerates a single MIG instance, whatever CUDA_VISIBLE_DEVICES lists); CUDA
Programming Guide, "CUDA Environment Variables" (index, ``GPU-`` and ``MIG-``
forms; an invalid entry hides itself and the rest); the torch parsing limits
in ``data/platform.toml`` [[visible_devices]]; Ray docs "Accelerator support"
(Ray sets ``CUDA_VISIBLE_DEVICES`` to the GPUs a task or actor reserved, empty
when it reserved none); Slurm gres.conf/sbatch docs (GPUs come from
``--gres=gpu:N``/``--gpus=N``; older releases export ``NoDevFiles`` when a
job has none); NVIDIA k8s-device-plugin (``nvidia.com/gpu`` requests).

- empty / all-invalid value set by Ray, Slurm or Kubernetes -> ``fail`` naming
  who set it and the request that gives the job GPUs;
- a valid UUID form this torch release cannot parse -> ``fail`` naming the
  release that fixes it;
- several ``MIG-`` UUIDs -> ``warn`` (one MIG instance per process);
- otherwise ``ok``; nothing set -> ``ok``.
"""

from __future__ import annotations

from typing import Any

from gpudoctor.checks import SkipCheck
from gpudoctor.checks._gpu import target_probes
from gpudoctor.checks._platform import platform_of
from gpudoctor.checks._visibility import assess, gpus_seen_by
from gpudoctor.facts import Facts
from gpudoctor.model import Check, Finding


def evaluate(facts: Facts) -> list[Finding]:
    probes: list[tuple[str, str | None, dict[str, Any], int | None]] = [
        (
            t.label,
            pr.torch.version if pr.torch.import_ok else None,
            dict(pr.env),
            gpus_seen_by(facts, pr.torch.device_count if pr.torch.import_ok else None),
        )
        for t, pr in target_probes(facts)
        if pr is not None
    ]
    if probes:
        return [assess(facts, env, tv, label, seen) for label, tv, env, seen in probes]
    p = platform_of(facts)
    if p is None:
        raise SkipCheck("neither a target probe nor the platform facts were collected")
    return [assess(facts, dict(p.env), None, None, gpus_seen_by(facts, None))]


CHECK = Check(
    id="platform.visibility",
    title="GPU visibility set by schedulers and MIG: CUDA_VISIBLE_DEVICES vs CUDA and the torch release",
    needs=("platform", "targets", "nvidia", "gpu"),
    evaluate=evaluate,
)
