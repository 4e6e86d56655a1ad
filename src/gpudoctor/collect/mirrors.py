"""Collector for the ``mirrors`` domain: latency/health of configured indexes, and rankings on request.

Options (``CollectOptions``): ``offline`` probes nothing; ``extra``:
``catalogue`` (a :class:`~gpudoctor.mirrors.catalogue.Catalogue`, from
``--catalogue FILE``), ``rank_mirrors`` (bool, ``--rank-mirrors``),
``rank_ecosystems`` (subset of pip/uv/conda/apt), ``mirror_budget_s``
(overall budget, default 5 s), ``mirror_timeout_s`` (per request, default 3 s),
``mirror_ecosystems`` (when set: probe only the configured indexes of these
ecosystems — ``gpudoctor check`` passes those whose ``<eco>.mirror`` check
was selected).
"""

from __future__ import annotations

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts.mirrors import MirrorsFacts
from gpudoctor.mirrors import catalogue as catalogue_mod
from gpudoctor.mirrors.gather import (
    ECOSYSTEMS,
    candidate_targets,
    configured_targets,
    measure,
)
from gpudoctor.mirrors.probe import DEFAULT_BUDGET_S, DEFAULT_TIMEOUT_S, ProbeTarget


def collect_mirrors(ctx: CollectContext) -> MirrorsFacts:
    extra = ctx.options.extra
    cat = extra.get("catalogue") or catalogue_mod.builtin()
    facts = ctx.facts
    configured = configured_targets(facts.get("uv"), facts.get("conda"), facts.get("apt"), facts.get("pip"), cat)
    wanted = extra.get("mirror_ecosystems")
    if wanted is not None:  # `check` probes only the indexes whose <eco>.mirror check was selected
        configured = [t for t in configured if t.ecosystem in wanted]
    ranked = bool(extra.get("rank_mirrors"))
    ecosystems = tuple(extra.get("rank_ecosystems") or ECOSYSTEMS) if ranked else ()
    candidates: list[ProbeTarget] = []
    if ranked:
        candidates, _skipped = candidate_targets(cat, ecosystems, facts.get("apt"), facts.get("conda"))
    return measure(
        configured,
        candidates,
        cat,
        ecosystems,
        offline=ctx.options.offline,
        ranked=ranked,
        budget_s=float(extra.get("mirror_budget_s") or DEFAULT_BUDGET_S),
        timeout_s=float(extra.get("mirror_timeout_s") or DEFAULT_TIMEOUT_S),
    )


COLLECTOR = Collector(domain="mirrors", collect=collect_mirrors, requires=("apt", "uv", "conda", "pip"), timeout_s=30.0)
