"""Jupyter kernels as probe targets (used by the ``targets`` collector; not a collector itself).

One :class:`~gpudoctor.facts.targets.TargetFacts` per Python kernelspec:
kind ``kernel``, label ``kernel:NAME``, ``python`` the interpreter the
kernel really runs, ``env_overrides`` kernel.json's ``env`` after ``${VAR}``
substitution (plus an ``env VAR=...`` wrapper's assignments). The probe runs
that interpreter with the environment Jupyter would give the kernel, so the
GPU-stack checks judge each kernel exactly as they judge the terminal. With
``--deep`` the probe printed inside the really launched kernel is used when
the launch succeeded.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import List

from gpudoctor.collect import CollectContext
from gpudoctor.facts import Unavailable
from gpudoctor.facts.jupyter import JupyterFacts, KernelLaunch
from gpudoctor.facts.targets import TargetFacts
from gpudoctor.probe import probe_target

__all__ = ["kernel_targets", "KERNEL_KIND", "kernel_label"]

KERNEL_KIND = "kernel"


def kernel_label(name: str) -> str:
    """``kernel:NAME``, the target label of kernel ``name``."""
    return f"kernel:{name}"


def kernel_targets(ctx: CollectContext) -> List[TargetFacts]:
    """Probe every Python kernel of ``ctx.facts["jupyter"]``; [] when those facts are Unavailable."""
    from gpudoctor.collect.jupyter import target_environment

    jupyter = ctx.facts.get("jupyter")
    if not isinstance(jupyter, JupyterFacts):
        return []
    kernels = [k for k in jupyter.kernels if k.is_python and k.error is None and k.interpreter is not None]
    timeout = ctx.options.probe_timeout_s

    def one(k) -> TargetFacts:
        env = target_environment(ctx.system.env, k)
        overrides = dict(k.env_resolved)
        overrides.update(k.interpreter.wrapper_env)
        if isinstance(k.launch, KernelLaunch) and k.launch.ok and not isinstance(k.launch.probe, Unavailable):
            probe = k.launch.probe
        else:
            probe = probe_target(ctx.system, k.interpreter.path, env=env, timeout_s=timeout)
        return TargetFacts(label=kernel_label(k.name), python=k.interpreter.path, kind=KERNEL_KIND, probe=probe,
                           env_overrides=overrides)

    if not kernels:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(4, len(kernels)))) as pool:
        return list(pool.map(one, kernels))
