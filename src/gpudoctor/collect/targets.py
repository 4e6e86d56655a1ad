"""Collector for the ``targets`` domain: probe each target interpreter once.

Targets: every ``--python PATH`` if any were given, else the interpreter
running gpudoctor (``sys.executable``); then one target per Python Jupyter
kernel (kind ``kernel``, label ``kernel:NAME``), run with the environment
Jupyter gives that kernel (with ``--deep``, the probe run inside the real
kernel is used when it succeeded). Probes run concurrently, each under
``CollectOptions.probe_timeout_s``. Inside ``--root`` (an image, not the live
system) interpreters cannot be run, so the domain is Unavailable.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts import Unavailable
from gpudoctor.facts.targets import TargetFacts, TargetsFacts
from gpudoctor.probe import probe_target


def collect(ctx: CollectContext):
    if not ctx.system.files.is_live:
        return Unavailable(f"interpreters inside --root {ctx.system.files.root} cannot be run from here")
    if ctx.options.pythons:
        specs = [(p, p, "python") for p in ctx.options.pythons]
    else:
        specs = [("current", sys.executable, "current")]
    timeout = ctx.options.probe_timeout_s
    with ThreadPoolExecutor(max_workers=max(1, min(4, len(specs)))) as pool:
        probes = list(pool.map(lambda s: probe_target(ctx.system, s[1], timeout_s=timeout), specs))
    found = [TargetFacts(label=label, python=python, kind=kind, probe=probe)
             for (label, python, kind), probe in zip(specs, probes)]
    from gpudoctor.collect.kernel_targets import kernel_targets  # Jupyter kernels as targets
    found += kernel_targets(ctx)
    return TargetsFacts(tuple(found))


COLLECTOR = Collector(domain="targets", collect=collect, requires=("jupyter",), timeout_s=180.0)
