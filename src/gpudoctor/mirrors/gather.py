"""Which indexes to probe, and one concurrent probe run producing :class:`MirrorsFacts`.

- Configured indexes (always, unless offline): uv's default index when set
  explicitly, pip's index-url when the ``pip`` facts are available, every
  conda channel, and every enabled http(s) apt source (first suite of each
  URI). These are hosts the machine contacts anyway.
- Candidates (only when ranking is asked for): every catalogue row that
  offers the ecosystem's archive, official rows included (they are the
  freshness reference for apt).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from gpudoctor.facts import Unavailable
from gpudoctor.facts.mirrors import (
    AptFacts,
    CondaFacts,
    MirrorProbe,
    MirrorsFacts,
    UvFacts,
)
from gpudoctor.mirrors.catalogue import Catalogue
from gpudoctor.mirrors.probe import (
    DEFAULT_BUDGET_S,
    DEFAULT_TIMEOUT_S,
    ProbeTarget,
    probe_all,
    rank,
)
from gpudoctor.sources.aptsources import classify_uri, distro_archive, is_distro_source

__all__ = ["ECOSYSTEMS", "apt_archive", "candidate_targets", "configured_targets", "measure", "pip_index_urls"]

ECOSYSTEMS = ("pip", "uv", "conda", "apt")
PORTS_MACHINES = ("aarch64", "arm64", "armv7l", "armhf", "ppc64le", "ppc64el", "s390x", "riscv64")


def pip_index_urls(pip_facts: Any) -> list[str]:
    """pip's effective ``index-url`` plus ``extra-index-url`` values from the ``pip`` facts.

    Uses ``PipFacts.effective`` (key -> setting with ``.value``); without an
    ``index-url`` setting pip uses PyPI (``https://pypi.org/simple``). Returns
    [] when the pip facts are missing or ``no-index`` is set.
    """
    if pip_facts is None or isinstance(pip_facts, Unavailable):
        return []
    effective = getattr(pip_facts, "effective", None)
    if not isinstance(effective, dict):
        return []

    def value(key: str) -> str:
        setting = effective.get(key)
        return str(getattr(setting, "value", setting) or "") if setting is not None else ""

    if value("no-index").lower() in ("1", "true", "yes", "on"):
        return []
    urls = [value("index-url") or "https://pypi.org/simple"]
    urls += value("extra-index-url").split()
    return list(dict.fromkeys(u for u in urls if u))


def apt_archive(apt: AptFacts | None) -> tuple[str | None, str]:
    """(catalogue archive key, suite) the apt ranking should use, from distro and sources."""
    if apt is None:
        return None, ""
    distro_sources = [s for s in apt.sources if s.enabled and is_distro_source(s)]
    suite = apt.codename or next((s.suites[0] for s in distro_sources if s.suites), "")
    archives = [classify_uri(u) for s in distro_sources for u in s.uris]
    if "ubuntu_ports" in archives:
        return "ubuntu_ports", suite
    if apt.distro_id == "ubuntu" or "ubuntu" in archives:
        return ("ubuntu_ports" if apt.machine in PORTS_MACHINES else "ubuntu"), suite
    if apt.distro_id == "debian" or "debian" in archives:
        return "debian", suite.split("-")[0]
    return None, suite


def configured_targets(uv: Any, conda: Any, apt: Any, pip: Any, catalogue: Catalogue) -> list[ProbeTarget]:
    """Probe targets for the indexes this machine is configured to use."""
    out: list[ProbeTarget] = []
    for url in pip_index_urls(pip):
        out.append(
            ProbeTarget("configured", "pip", "pypi", url, "pypi", project=catalogue.pypi_project, role="configured")
        )
    if isinstance(uv, UvFacts) and uv.default_origin != "built-in":
        out.append(
            ProbeTarget(
                "configured", "uv", "pypi", uv.default_index, "pypi", project=catalogue.pypi_project, role="configured"
            )
        )
    if isinstance(uv, UvFacts) and uv.pip_default_index:  # `uv pip`'s own ([pip] index-url)
        out.append(
            ProbeTarget(
                "configured",
                "uv",
                "pypi",
                uv.pip_default_index,
                "pypi",
                project=catalogue.pypi_project,
                role="configured",
            )
        )
    if isinstance(conda, CondaFacts):
        probed: set[str] = set()
        for ch in (*conda.channels, *conda.named):  # named: environment.yml, -c in a build file, mamba
            if ch.url.rstrip("/") in probed:
                continue
            probed.add(ch.url.rstrip("/"))
            out.append(
                ProbeTarget(
                    "configured", "conda", "conda", ch.url, "conda", subdir=catalogue.conda_subdir, role="configured"
                )
            )
    if isinstance(apt, AptFacts):
        seen = set()
        for src in apt.sources:
            if not src.enabled:
                continue
            for uri in src.uris:
                if not uri.startswith(("http://", "https://")) or not src.suites or src.suites[0].endswith("/"):
                    continue
                if uri.rstrip("/") in seen:
                    continue
                seen.add(uri.rstrip("/"))
                out.append(
                    ProbeTarget(
                        "configured",
                        "apt",
                        distro_archive(uri, src.components) or "other",
                        uri.rstrip("/"),
                        "apt",
                        suite=src.suites[0],
                        role="configured",
                    )
                )
    return out


def candidate_targets(
    catalogue: Catalogue, ecosystems: Iterable[str], apt: Any = None, conda: Any = None
) -> tuple[list[ProbeTarget], dict[str, str]]:
    """(targets, skipped) for ranking ``ecosystems``; ``skipped`` maps an ecosystem to why it was not ranked."""
    out: list[ProbeTarget] = []
    skipped: dict[str, str] = {}
    eco = set(ecosystems)
    if eco & {"pip", "uv"}:
        for m in catalogue.for_archive("pypi"):
            out.append(
                ProbeTarget(
                    m.name, "pypi", "pypi", m.urls["pypi"], "pypi", project=catalogue.pypi_project, official=m.official
                )
            )
    if "conda" in eco:
        uses_defaults = not isinstance(conda, CondaFacts) or any(c.via == "default_channels" for c in conda.channels)
        archive, channel = ("conda_pkgs", "main") if uses_defaults else ("conda_cloud", "conda-forge")
        for m in catalogue.for_archive(archive):
            out.append(
                ProbeTarget(
                    m.name,
                    "conda",
                    archive,
                    f"{m.urls[archive]}/{channel}",
                    "conda",
                    subdir=catalogue.conda_subdir,
                    official=m.official,
                )
            )
    if "apt" in eco:
        apt_arch, suite = apt_archive(apt if isinstance(apt, AptFacts) else None)
        if apt_arch is None or not suite:
            skipped["apt"] = (
                "the distribution or its codename is unknown (no Debian/Ubuntu os-release and no distro apt sources)"
            )
        else:
            for m in catalogue.for_archive(apt_arch):
                out.append(
                    ProbeTarget(m.name, "apt", apt_arch, m.urls[apt_arch], "apt", suite=suite, official=m.official)
                )
    return out, skipped


def measure(
    configured: Sequence[ProbeTarget],
    candidates: Sequence[ProbeTarget],
    catalogue: Catalogue,
    ecosystems: Sequence[str] = (),
    offline: bool = False,
    ranked: bool = False,
    budget_s: float = DEFAULT_BUDGET_S,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_start: Callable[[ProbeTarget], None] | None = None,
    on_result: Callable[[MirrorProbe], None] | None = None,
) -> MirrorsFacts:
    """Probe configured and candidate targets in one concurrent run; rank the candidates per ecosystem."""
    start = time.monotonic()
    results = probe_all(
        list(configured) + list(candidates),
        budget_s=budget_s,
        timeout_s=min(timeout_s, budget_s),
        offline=offline,
        on_start=on_start,
        on_result=on_result,
        max_lag_hours=catalogue.apt_max_lag_hours,
    )
    conf, cand = results[: len(configured)], results[len(configured) :]
    rankings: dict[str, tuple[MirrorProbe, ...]] = {}
    for e in ecosystems:
        if e in ("pip", "uv"):
            rows = [replace(r, ecosystem=e) for r in cand if r.ecosystem == "pypi"]
        else:
            rows = [r for r in cand if r.ecosystem == e]
        if rows:
            rankings[e] = rank(rows)
    conf = [replace(r, ecosystem=r.ecosystem) for r in conf]
    return MirrorsFacts(
        offline=offline,
        ranked=ranked,
        budget_s=budget_s,
        catalogue_origin=catalogue.origin,
        catalogue=catalogue.mirrors,
        configured=tuple(conf),
        rankings=rankings,
        wall_ms=(time.monotonic() - start) * 1000.0,
    )
