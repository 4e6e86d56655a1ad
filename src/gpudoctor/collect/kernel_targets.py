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

from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from gpudoctor.collect import CollectContext
from gpudoctor.facts import Unavailable
from gpudoctor.facts.jupyter import JupyterFacts, KernelLaunch
from gpudoctor.facts.targets import KERNEL_KIND, TargetFacts
from gpudoctor.probe import probe_target

__all__ = ["KERNEL_KIND", "kernel_label", "kernel_targets"]


def kernel_label(name: str) -> str:
    """``kernel:NAME``, the target label of kernel ``name``."""
    return f"kernel:{name}"


def kernel_targets(
    ctx: CollectContext, submit: Callable[[str, Mapping[str, str]], Future] | None = None
) -> list[TargetFacts]:
    """Probe every Python kernel of ``ctx.facts["jupyter"]``; [] when those facts are Unavailable.

    ``submit(python, env)`` starts a probe and returns a future (the targets
    collector passes its :class:`~gpudoctor.collect.targets.ProbeCache`, so a
    kernel identical to the terminal is probed once); by default each kernel
    is probed in a pool of its own.
    """
    from gpudoctor.collect.jupyter import target_environment

    jupyter = ctx.facts.get("jupyter")
    if not isinstance(jupyter, JupyterFacts):
        return []
    kernels = [k for k in jupyter.kernels if k.is_python and k.error is None and k.interpreter is not None]
    if not kernels:
        return []
    timeout = ctx.options.probe_timeout_s
    own_pool = None
    if submit is None:
        own_pool = ThreadPoolExecutor(max_workers=max(1, min(4, len(kernels))))
        submit = lambda python, env: own_pool.submit(  # noqa: E731 - the same shape as the injected one
            probe_target, ctx.system, python, env=env, timeout_s=timeout
        )
    try:
        pending = []
        for k in kernels:
            interp = k.interpreter
            if interp is None:  # pragma: no cover - filtered out above
                continue
            overrides = dict(k.env_resolved)
            overrides.update(interp.wrapper_env)
            if isinstance(k.launch, KernelLaunch) and k.launch.ok and not isinstance(k.launch.probe, Unavailable):
                probe: Any = k.launch.probe  # --deep: what the really launched kernel printed
            else:
                probe = submit(interp.path, target_environment(ctx.system.env, k))
            pending.append((k, interp, overrides, probe))
        from gpudoctor.collect.targets import failed_version

        out = []
        for k, interp, overrides, probe in pending:
            result = probe.result() if isinstance(probe, Future) else probe
            out.append(
                TargetFacts(
                    label=kernel_label(k.name),
                    python=interp.path,
                    kind=KERNEL_KIND,
                    probe=result,
                    env_overrides=overrides,
                    python_version=failed_version(
                        ctx.system, interp.path, result, target_environment(ctx.system.env, k)
                    ),
                )
            )
        return out
    finally:
        if own_pool is not None:
            own_pool.shutdown(wait=True)
