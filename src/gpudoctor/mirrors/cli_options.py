"""Command-line options for mirror probing, shared by ``gpudoctor check`` and ``gpudoctor mirrors``.

Kept free of :mod:`gpudoctor.cli` imports so :mod:`gpudoctor.cli.check` can apply the
decorator to ``check`` at definition time. The values travel to collectors
in ``CollectOptions.extra``: ``catalogue`` (a loaded Catalogue),
``rank_mirrors``, ``mirror_budget_s``, ``dockerfile`` (``(name, text)``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gpudoctor.config import FiniteFloatRange
from gpudoctor.mirrors import DEFAULT_BUDGET_S


def default_catalogue_file() -> str | None:
    """The user's catalogue file when no ``--catalogue`` is given: ``$GPUDOCTOR_CATALOGUE``, else
    ``<user config dir>/gpudoctor/mirrors.toml`` (``~/.config/gpudoctor/mirrors.toml``) if it exists."""
    import os

    env = os.environ.get("GPUDOCTOR_CATALOGUE")
    if env:
        return env
    from platformdirs import user_config_dir

    path = Path(user_config_dir("gpudoctor"), "mirrors.toml")
    try:
        return str(path) if path.is_file() else None
    except OSError:  # an unreadable home (another user's, 0700): no user catalogue
        return None


def load_catalogue_option(path: str | None):
    """The catalogue for ``--catalogue FILE`` (else the user's file, else built-in); usage error when malformed."""
    from gpudoctor.mirrors.catalogue import CatalogueError, load

    path = path or default_catalogue_file()
    try:
        return load(path)
    except CatalogueError as exc:
        raise click.UsageError(f"--catalogue {exc}") from None


def mirror_check_options(fn):
    """``--rank-mirrors``, ``--catalogue FILE``, ``--mirror-budget SECONDS``, ``--dockerfile FILE``."""
    fn = click.option(
        "--dockerfile",
        metavar="FILE",
        help="Also check the apt mirror rewrites (sed -i ...) in this Dockerfile or script "
        "against the sources in --root.",
    )(fn)
    fn = click.option(
        "--mirror-budget",
        default=DEFAULT_BUDGET_S,
        show_default=True,
        metavar="SECONDS",
        type=FiniteFloatRange(min=0.1, max=120),
        help="Overall time budget for mirror probes.",
    )(fn)
    fn = click.option(
        "--catalogue",
        metavar="FILE",
        help="Mirror catalogue TOML adding to (or, with replace = true, replacing) the built-in one.",
    )(fn)
    fn = click.option(
        "--rank-mirrors",
        is_flag=True,
        help="Also probe the catalogue's mirrors (network) and rank them, so mirror fixes can be offered.",
    )(fn)
    return fn


def mirror_extra(
    rank_mirrors: bool = False,
    catalogue: str | None = None,
    mirror_budget: float = DEFAULT_BUDGET_S,
    dockerfile: str | None = None,
) -> dict[str, Any]:
    """``CollectOptions.extra`` entries for the mirror options; usage errors for unreadable files."""
    extra: dict[str, Any] = {"rank_mirrors": rank_mirrors, "mirror_budget_s": mirror_budget}
    extra["catalogue"] = load_catalogue_option(catalogue)
    if dockerfile:
        try:
            # a Dockerfile is text in whatever encoding its author used: undecodable bytes become U+FFFD
            from gpudoctor.inputs import InputError, read_user_file

            try:
                text = read_user_file(dockerfile, lenient=True)  # Latin-1 Dockerfiles are read too
            except InputError as exc:
                raise click.UsageError(f"--dockerfile {exc}") from None
            extra["dockerfile"] = (Path(dockerfile).name, text)
        except OSError as exc:
            raise click.UsageError(f"--dockerfile {dockerfile}: {exc.strerror or exc}") from None
    return extra


#: Mirror fix id -> the ecosystem whose ranking it needs.
FIX_ECOSYSTEMS = {"apt.mirror": "apt", "uv.index-url": "uv", "conda.channels": "conda", "pip.index-url": "pip"}


def fix_mirror_extra(
    mirror: str | None,
    ids,
    offline: bool,
    rank_mirrors: bool = False,
    catalogue: str | None = None,
    mirror_budget: float = DEFAULT_BUDGET_S,
    dockerfile: str | None = None,
) -> dict[str, Any]:
    """``CollectOptions.extra`` for ``gpudoctor fix``.

    Ranks (probes the catalogue) when ``--mirror fastest`` or ``--rank-mirrors``
    asks for it, or when a mirror fix (apt.mirror, uv.index-url,
    conda.channels) is named without ``--mirror`` (fastest is their default);
    only for the ecosystems of the named fixes (all of them when none is
    named). Never with ``--offline``.
    """
    choice = (mirror or "").strip()
    named_switch = any(i in FIX_ECOSYSTEMS and i != "pip.index-url" for i in ids)
    rank = (rank_mirrors or choice == "fastest" or (not choice and named_switch)) and not offline
    extra = mirror_extra(rank, catalogue, mirror_budget, dockerfile)
    wanted = tuple(dict.fromkeys(FIX_ECOSYSTEMS[i] for i in ids if i in FIX_ECOSYSTEMS))
    if rank and wanted:
        extra["rank_ecosystems"] = wanted
    return extra


def resolve_pip_mirror(options: dict[str, str], facts: Any, extra: dict[str, Any], offline: bool, fix_ids) -> None:
    """Give ``pip.index-url`` (which takes URLs only) a URL for ``--mirror fastest|NAME``, in place.

    Only when ``pip.index-url`` is among ``fix_ids``, no ``--index-url`` was
    given and the mirror is not already a URL. ``fastest`` uses the pip
    ranking in ``facts`` or probes the catalogue's PyPI mirrors now (within
    the mirror budget). Raises ``click.UsageError`` for an unknown name, or
    for ``fastest`` with ``--offline`` or no healthy mirror.
    """
    mirror = (options.get("mirror") or "").strip()
    if "pip.index-url" not in fix_ids or not mirror or options.get("index-url") or "://" in mirror:
        return
    from gpudoctor.facts.mirrors import MirrorsFacts
    from gpudoctor.mirrors.catalogue import builtin

    cat = extra.get("catalogue") or builtin()
    if mirror != "fastest":
        row = cat.by_name(mirror)
        if row is None or "pypi" not in row.urls:
            names = ", ".join(m.name for m in cat.for_archive("pypi"))
            raise click.UsageError(f"--mirror {mirror}: no PyPI mirror of that name in the catalogue; known: {names}")
        options["index-url"] = row.urls["pypi"]
        return
    mirrors = facts.get("mirrors") if hasattr(facts, "get") else None
    ranking = mirrors.rankings.get("pip", ()) if isinstance(mirrors, MirrorsFacts) else ()
    if not ranking:
        if offline:
            raise click.UsageError("--mirror fastest probes the catalogue's mirrors: drop --offline, or name one")
        from gpudoctor.mirrors.gather import candidate_targets
        from gpudoctor.mirrors.probe import probe_all, rank

        targets, _ = candidate_targets(cat, ["pip"])
        ranking = rank(probe_all(targets, budget_s=float(extra.get("mirror_budget_s") or DEFAULT_BUDGET_S)))
    best = next((r for r in ranking if r.status == "ok"), None)
    if best is None:
        raise click.UsageError("--mirror fastest: no PyPI mirror of the catalogue answered correctly")
    options["index-url"] = best.base_url


def resolve_apt_security(
    options: dict[str, str], facts: Any, extra: dict[str, Any], offline: bool, fix_ids
) -> str | None:
    """Verify Debian's security archive next to ``--mirror URL`` before ``apt.mirror`` rewrites it, in place.

    Only for ``apt.mirror`` with a ``--mirror`` URL whose path ends in
    ``/debian`` and no ``--set security-mirror``: the sibling
    ``<root>/debian-security`` is probed (``dists/<codename>-security/InRelease``);
    when it answers with the right suite, ``options["security-mirror"]`` is set.
    Returns a one-line note when it could not be verified (None otherwise).
    """
    mirror = (options.get("mirror") or "").strip().rstrip("/")
    if "apt.mirror" not in fix_ids or "://" not in mirror or options.get("security-mirror"):
        return None
    if not mirror.endswith("/debian"):
        return None
    from gpudoctor.facts.mirrors import AptFacts

    apt = facts.get("apt") if hasattr(facts, "get") else None
    if not isinstance(apt, AptFacts) or not any(
        "debian-security" in u or "security.debian.org" in u for s in apt.sources for u in s.uris
    ):
        return None
    sibling = mirror + "-security"
    if offline:
        return f"--offline: {sibling} was not verified, so the security archive stays official"
    from gpudoctor.mirrors.probe import ProbeTarget, probe_all

    suite = f"{apt.codename or 'stable'}-security"
    (res,) = probe_all(
        [ProbeTarget("security", "apt", "debian_security", sibling, "apt", suite=suite)],
        budget_s=float(extra.get("mirror_budget_s") or DEFAULT_BUDGET_S),
    )
    if res.status == "ok":
        options["security-mirror"] = sibling
        return None
    return f"{sibling} does not serve {suite} ({res.status}: {res.reason}); the security archive stays official"


def selected_mirror_ecosystems(check_ids) -> tuple:
    """Ecosystems whose ``<eco>.mirror`` check is among ``check_ids``: the only configured indexes
    ``gpudoctor check`` probes (``CollectOptions.extra["mirror_ecosystems"]``)."""
    ids = set(check_ids)
    return tuple(e for e in ("pip", "uv", "conda", "apt") if f"{e}.mirror" in ids)
