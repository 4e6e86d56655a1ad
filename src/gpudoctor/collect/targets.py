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
from concurrent.futures import ThreadPoolExecutor
from typing import List, Mapping, Tuple

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts import Unavailable
from gpudoctor.facts.targets import TargetFacts, TargetsFacts
from gpudoctor.probe import probe_target


def active_env_pythons(env: Mapping[str, str]) -> List[str]:
    """Interpreters of the activated venv / conda env that are not the one running gpudoctor."""
    # venv interpreters are symlinks to one base interpreter: compare prefixes, not resolved paths
    own_prefix = os.path.realpath(sys.prefix)
    found: List[str] = []
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


def collect(ctx: CollectContext):
    if not ctx.system.files.is_live:
        return Unavailable(f"interpreters inside --root {ctx.system.files.root} cannot be run from here")
    if ctx.options.pythons:
        specs = [(p, p, "python") for p in ctx.options.pythons]
    else:
        specs: List[Tuple[str, str, str]] = [("current", sys.executable, "current")]
        specs += [(p, p, "active-env") for p in active_env_pythons(ctx.system.env)]
    timeout = ctx.options.probe_timeout_s
    with ThreadPoolExecutor(max_workers=max(1, min(4, len(specs)))) as pool:
        probes = list(pool.map(lambda s: probe_target(ctx.system, s[1], timeout_s=timeout), specs))
    found = [TargetFacts(label=label, python=python, kind=kind, probe=probe)
             for (label, python, kind), probe in zip(specs, probes)]
    from gpudoctor.collect.kernel_targets import kernel_targets  # Jupyter kernels as targets
    found += kernel_targets(ctx)
    return TargetsFacts(tuple(found))


COLLECTOR = Collector(domain="targets", collect=collect, requires=("jupyter",), timeout_s=180.0)
