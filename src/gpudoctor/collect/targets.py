"""Collector for the ``targets`` domain: probe each target interpreter once.

Targets: every ``--python PATH`` if any were given, else the interpreter
running gpudoctor (``sys.executable``), plus the active environment's
interpreter (``$VIRTUAL_ENV/bin/python``, ``$CONDA_PREFIX/bin/python``) when
that is a different one — gpudoctor installed with pipx, say, runs from its
own venv while the user's torch lives in the activated one; then one target
per Python Jupyter kernel (kind ``kernel``, label ``kernel:NAME``), run with
the environment Jupyter gives that kernel (with ``--deep``, the probe run
inside the real kernel is used when it succeeded). Probes run concurrently, each under
``CollectOptions.probe_timeout_s``. Inside ``--root`` (an image, not the live
system) interpreters cannot be run, so the domain is Unavailable.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor

from gpudoctor.collect import CollectContext, CollectOptions, Collector
from gpudoctor.facts import Unavailable
from gpudoctor.facts.targets import TargetFacts, TargetsFacts
from gpudoctor.probe import probe_target, target_python_version, timed_out
from gpudoctor.system import System


def active_env_pythons(env: Mapping[str, str]) -> list[str]:
    """Interpreters of the activated venv / conda env that are not the one running gpudoctor."""
    # venv interpreters are symlinks to one base interpreter: compare prefixes, not resolved paths
    own_prefix = os.path.realpath(sys.prefix)
    found: list[str] = []
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        prefix = env.get(var)
        if not prefix or os.path.realpath(prefix) == own_prefix:
            continue
        for name in ("python", "python3"):
            candidate = os.path.join(prefix, "bin", name)
            if os.path.exists(candidate):
                if candidate not in found:
                    found.append(candidate)
                break
    return found


_EARLY: dict[tuple, Future] = {}
_EARLY_LOCK = threading.Lock()


def interpreter_identity(python: str) -> str:
    """One name for every spelling of one interpreter: ``venv/bin/python`` and ``venv/bin/python3``
    (both links to the same base interpreter, in the same directory, so the same ``pyvenv.cfg`` and
    prefix) are one target to probe, not two ``import torch``. The directory is compared resolved but
    not replaced by the link target's: a venv's interpreter links to the base one, which is another
    environment. A bare name (looked up on PATH) is its own identity."""
    if os.sep not in python:
        return python
    return os.path.join(os.path.realpath(os.path.dirname(python)), os.path.basename(os.path.realpath(python)))


def _key(python: str, env: Mapping[str, str], level: str = "full") -> tuple[str, str, tuple[tuple[str, str], ...]]:
    return interpreter_identity(python), level, tuple(sorted(env.items()))


def default_specs(ctx: CollectContext) -> list[tuple[str, str, str]]:
    """(label, python, kind) of the terminal-side targets: every --python, else the
    current interpreter plus the activated environment's when it is another one."""
    if ctx.options.pythons:
        return [(p, p, "python") for p in ctx.options.pythons]
    specs = [("current", sys.executable, "current")]
    return specs + [(p, p, "active-env") for p in active_env_pythons(ctx.system.env)]


def start_early(system: System, options: CollectOptions) -> None:
    """Start the terminal-side probes now, in the background; the collector picks them up.

    The CLI calls this before loading plug-ins so the probe (about a second of
    ``import torch``) overlaps with start-up. Futures nobody collects are
    left to :func:`gpudoctor.system.kill_running_commands`.
    """
    if not system.files.is_live:
        return
    ctx = CollectContext(system, options)
    pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="early-probe")
    with _EARLY_LOCK:
        for _label, python, _kind in default_specs(ctx):
            key = _key(python, system.env, options.probe_level)
            if key not in _EARLY:
                _EARLY[key] = pool.submit(
                    probe_target,
                    system,
                    python,
                    env=dict(system.env),
                    timeout_s=options.probe_timeout_s,
                    level=options.probe_level,
                    deep=options.deep,
                )
    pool.shutdown(wait=False)


class ProbeCache:
    """Runs each distinct (interpreter, environment) probe once, concurrently.

    ``submit`` returns a future; a kernel that runs the terminal's interpreter
    with the terminal's environment shares the terminal's probe instead of
    importing torch a second time, even when it spells the interpreter
    another way (:func:`interpreter_identity`).
    """

    def __init__(self, ctx: CollectContext, workers: int = 4):
        self._ctx = ctx
        self._pool = ThreadPoolExecutor(max_workers=workers)
        self._futures: dict[tuple, Future] = {}
        self._lock = threading.Lock()

    def submit(self, python: str, env: Mapping[str, str] | None = None) -> Future:
        env = dict(self._ctx.system.env if env is None else env)
        level = self._ctx.options.probe_level
        key = _key(python, env, level)
        with self._lock:
            fut = self._futures.get(key)
            if fut is None:
                with _EARLY_LOCK:
                    fut = _EARLY.pop(key, None)
                    if fut is None and level == "light":  # a full probe already under way serves light checks too
                        fut = _EARLY.pop(_key(python, env, "full"), None)
            if fut is None:
                fut = self._pool.submit(
                    probe_target,
                    self._ctx.system,
                    python,
                    env=env,
                    timeout_s=self._ctx.options.probe_timeout_s,
                    level=level,
                    deep=self._ctx.options.deep,
                )
            self._futures[key] = fut
            return fut

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def failed_version(system: System, python: str, probe, env: Mapping[str, str] | None = None) -> str:
    """The target's ``major.minor`` when its probe failed (for ``TargetFacts.python_version``), else "".

    Not asked when the probe was killed at its timeout: the interpreter hangs, and asking would add
    up to 10 s past ``--probe-timeout``."""
    if not isinstance(probe, Unavailable) or (os.sep in python and not os.path.exists(python)) or timed_out(probe):
        return ""
    return target_python_version(system, python, env)


def collect(ctx: CollectContext):
    if not ctx.system.files.is_live:
        return Unavailable(f"interpreters inside --root {ctx.system.files.root} cannot be run from here")
    specs = default_specs(ctx)
    cache = ProbeCache(ctx)
    try:
        # start the terminal's probes first: they run while the Jupyter facts are still being collected
        futures = [cache.submit(python) for _label, python, _kind in specs]
        kernels = []
        if ctx.options.kernels:  # the gate leaves kernels out: not even their modules are imported
            from gpudoctor.collect.kernel_targets import kernel_targets  # Jupyter kernels as targets

            kernels = kernel_targets(ctx, cache.submit)
        found = [
            TargetFacts(
                label=label,
                python=python,
                kind=kind,
                probe=fut.result(),
                python_version=failed_version(ctx.system, python, fut.result()),
            )
            for (label, python, kind), fut in zip(specs, futures)
        ]
    finally:
        cache.close()
    return TargetsFacts(tuple(found + kernels))


COLLECTOR = Collector(domain="targets", collect=collect, requires=("jupyter",), timeout_s=180.0, runs_probes=True)
