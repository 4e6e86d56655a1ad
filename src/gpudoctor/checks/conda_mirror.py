"""Check ``conda.mirror``: is the configured conda index reachable, healthy and not needlessly slow?

Reads the ``mirrors`` facts (probes of the configured indexes; rankings of
catalogue mirrors with ``--rank-mirrors``). Thresholds and verdicts:
:mod:`gpudoctor.checks._mirrors`.

Without probing (``--offline``, or before it), the catalogue already knows two
ways a channel on a known mirror ends in ``UnavailableInvalidChannel ... 404``
(reports: tuna/issues #1084, #2110; nianticlabs/acezero #28):

- a named channel resolving on the mirror's host but outside its ``conda_cloud``
  tree (``channel_alias: https://m/anaconda`` instead of ``.../anaconda/cloud``);
- a named channel the mirror does not carry (``conda_missing`` in
  ``data/mirrors.toml``, e.g. ``nvidia`` on TUNA: its licence forbids
  redistribution).

Both are ``fail`` with the ``.condarc`` lines that end it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from gpudoctor.checks import SkipCheck
from gpudoctor.checks._mirrors import evaluate_ecosystem
from gpudoctor.facts import Facts
from gpudoctor.facts.mirrors import CatalogueMirror, CondaChannel, CondaFacts, MirrorsFacts
from gpudoctor.model import Check, Finding, Status

NOT_CONFIGURED = "conda is not configured here (no .condarc)"


def _catalogue(facts: Facts) -> tuple[CatalogueMirror, ...]:
    mirrors = facts.get("mirrors")
    if isinstance(mirrors, MirrorsFacts) and mirrors.catalogue:
        return mirrors.catalogue
    from gpudoctor.mirrors.catalogue import builtin

    return builtin().mirrors


def _where(c: CondaChannel) -> str:
    return f" (named in {c.origin})" if c.origin and c.origin != "built-in" else ""


def catalogue_findings(facts: Facts) -> list[Finding]:
    """Channels on a catalogue mirror that the mirror cannot serve (see the module docstring)."""
    conda = facts.get("conda")
    if not isinstance(conda, CondaFacts):
        return []
    rows = [m for m in _catalogue(facts) if m.urls.get("conda_cloud") and not m.official]
    wrong_tree: list[tuple[CondaChannel, CatalogueMirror]] = []
    missing: list[tuple[CondaChannel, CatalogueMirror]] = []
    for c in (*conda.channels, *conda.named):
        if c.via not in ("channel_alias", "custom_channels"):
            continue
        host = (urlsplit(c.url).hostname or "").lower()
        for m in rows:
            cloud = m.urls["conda_cloud"].rstrip("/")
            if (urlsplit(cloud).hostname or "").lower() != host:
                continue
            name = c.name.split("/")[0]
            if not c.url.split("://", 1)[-1].startswith(cloud.split("://", 1)[-1] + "/"):
                wrong_tree.append((c, m))
            elif name in m.conda_missing:
                missing.append((c, m))
            break
    out: list[Finding] = []
    if wrong_tree:
        c, m = wrong_tree[0]
        cloud = m.urls["conda_cloud"]
        names = list(dict.fromkeys(x.name for x, _ in wrong_tree))
        gone = [n for n in names if n.split("/")[0] in m.conda_missing]
        base = c.url[: -len(c.name) - 1] if c.url.endswith("/" + c.name) else conda.channel_alias
        out.append(
            CHECK.finding(
                Status.FAIL,
                f"conda channel `{c.name}`{_where(c)} resolves to {c.url}, outside {m.name}'s channel tree "
                f"{cloud}: the mirror answers 404",
                f"{m.name} serves named channels under `{cloud}/<name>`, but `{base}` "
                f"({c.via}, set in {c.setting or 'conda'}) puts "
                + ", ".join(f"`{n}`" for n in names)
                + " directly under the mirror's root, where nothing is. conda stops with "
                "`UnavailableInvalidChannel: HTTP 404 NOT FOUND for channel ...`:\n\n"
                + "\n".join(f"- `{x.name}`{_where(x)} -> `{x.url}`" for x, _ in wrong_tree[:12])
                + f"\n\nIn `{conda.user_condarc}`:\n\n"
                f"    channel_alias: {cloud}\n\n(or `custom_channels:` with `NAME: {cloud}` per channel); "
                f"`gpudoctor fix conda.channels` writes it."
                + (
                    " Not on the mirror at all ("
                    + m.source.split(";")[-1].strip()
                    + "): "
                    + ", ".join(f"`{n}`" for n in gone)
                    + f"; the fix maps {'it' if len(gone) == 1 else 'them'} to https://conda.anaconda.org instead."
                    if gone
                    else ""
                ),
                evidence={
                    "channels": names,
                    "mirror": m.name,
                    "cloud": cloud,
                    "resolved": [x.url for x, _ in wrong_tree],
                    "missing": gone,
                    "alias_origin": c.setting if c.via == "channel_alias" else "",
                },
                fixes=("conda.channels",),
            )
        )
    if missing:
        c, m = missing[0]
        names = list(dict.fromkeys(x.name for x, _ in missing))
        public = "\n".join(f"      {n}: https://conda.anaconda.org" for n in names)
        out.append(
            CHECK.finding(
                Status.FAIL,
                f"the conda mirror {m.name} does not carry "
                + ", ".join(f"`{n}`" for n in names)
                + f"{_where(c)}: `{c.url}` answers 404",
                f"{m.name} has no copy of " + ", ".join(f"`{n}`" for n in names) + f" ({m.source}), yet conda "
                f"sends it there ({c.via}, set in {c.setting or 'conda'}): every install that names it stops with "
                "`UnavailableInvalidChannel: HTTP 404 NOT FOUND for channel ...`.\n\nSend just that channel to "
                f"its own host (the rest stays on the mirror), in `{conda.user_condarc}`:\n\n    custom_channels:\n{public}\n\n"
                "(`gpudoctor fix conda.channels` writes it), or drop the channel where it is named.",
                evidence={
                    "channels": names,
                    "mirror": m.name,
                    "resolved": [x.url for x, _ in missing],
                    "public": names,
                },
                fixes=("conda.channels",),
            )
        )
    return out


def evaluate(facts: Facts) -> list[Finding]:
    known = catalogue_findings(facts)
    try:
        probed = evaluate_ecosystem(CHECK, facts, "conda", NOT_CONFIGURED)
    except SkipCheck:
        if known:
            return known
        raise
    if known and not any(f.status >= Status.FAIL for f in probed):
        return known + probed
    return probed


CHECK = Check(
    id="conda.mirror",
    title="conda channels reachable and not needlessly slow",
    needs=("mirrors",),
    evaluate=evaluate,
)
