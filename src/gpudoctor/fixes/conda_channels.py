"""Fix ``conda.channels``: make every channel conda fetches resolve to the mirror, in the files that say otherwise.

Planned on the model the checks use (:mod:`gpudoctor.sources.conda`), so the
check passes after it:

- ``defaults``: ``default_channels`` (``<mirror>/pkgs/main`` and ``/r``) in
  ``~/.condarc`` *and* in every other condarc whose ``default_channels`` list
  leaves the mirror (conda concatenates those lists across files: a mirror
  list in one file does not remove the public URLs of another);
- named channels (``conda-forge``, ``-c nvidia``, an ``environment.yml``'s):
  ``custom_channels`` (name -> ``<mirror>/cloud``) in ``~/.condarc``, and in
  the file of higher precedence that maps the same name elsewhere;
- a channel written as a URL on a host being left (the public host, or the
  failing/slow host of the finding): that entry becomes the channel's name in
  the file that lists it, so it resolves through ``custom_channels``.

Comments, order and every other key stay. Channels named where no file can
be edited (``CONDA_CHANNELS``, ``-c URL`` in a build file) are named in the
plan's notes. Before returning, the planner re-resolves every channel on the
edited texts and refuses if one would still leave the mirror.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpudoctor.facts import Facts
from gpudoctor.facts.mirrors import CondaChannel, CondaFacts
from gpudoctor.fixes._mirror_choice import choose
from gpudoctor.fixes._verify import verified_edit
from gpudoctor.model import FileEdit, Finding, Fix, FixPlan, FixRefused
from gpudoctor.sources import conda as model
from gpudoctor.sources.conda import replace_blocks  # noqa: F401  (kept importable from here)


def blocks_meaning(old: dict[str, Any] | None, new: dict[str, Any], blocks: dict[str, list[str]]) -> str | None:
    """None when ``new`` (parsed .condarc) holds exactly ``blocks`` and every other top-level
    key of ``old`` unchanged."""
    import yaml

    for key, lines in blocks.items():
        want = yaml.safe_load("\n".join(lines))[key]
        if new.get(key) != want:
            return f"{key} would be {new.get(key)!r}, not {want!r}"
    rest_old = {k: v for k, v in (old or {}).items() if k not in blocks}
    rest_new = {k: v for k, v in new.items() if k not in blocks}
    if rest_old != rest_new:
        return "other settings would change too"
    return None


def _moving_hosts(finding: Finding | None, conda: CondaFacts) -> set[str]:
    """``host[:port]`` of what the fix moves away from (Anaconda's public hosts always count): the
    configured channels a ``conda.mirror`` finding reports failing or slow; planning on request
    (no warning), the hosts of ``default_channels``, ``custom_channels`` and ``channel_alias``."""
    from gpudoctor.checks._mirrors import SLOW_TTFB_MS

    if finding is not None and finding.check == "conda.mirror" and finding.status.severity >= 3:
        rows = [r for r in finding.evidence.get("configured", []) or [] if isinstance(r, dict)]
        return {
            model.netloc(str(r.get("url", "")))
            for r in rows
            if r.get("status") != "ok" or float(r.get("median_ms") or 0.0) > SLOW_TTFB_MS
        }
    if finding is None or finding.status.severity < 3:
        urls = [*conda.default_channels, *conda.custom_channels.values(), conda.channel_alias]
        return {model.netloc(u) for u in urls}
    return set()


def _leaves(url: str, moving: set[str], new_hosts: set[str]) -> bool:
    n = model.netloc(url)
    return n not in new_hosts and (model.public(url) or n in moving)


def _settings_of(texts: Mapping[str, str], env: Mapping[str, str]) -> model.Settings:
    sources = []
    for path, text in texts.items():
        if model.mamba_only(path):
            continue
        doc = model.yaml_load(text) or {}
        if isinstance(doc, dict):
            sources.append(model.file_source(path, doc, text))
    envsrc = model.env_source(env)
    if envsrc is not None:
        sources.append(envsrc)
    return model.merge(sources)


def scope_file(conda: CondaFacts, scope: str) -> str:
    """The condarc ``--scope`` names, as ``conda config`` writes it: ``user`` ``~/.condarc``
    (``--file ~/.condarc``), ``site`` the active environment's (``--env``: ``$CONDA_PREFIX/.condarc``),
    ``global`` the base install's (``--system``: ``$CONDA_ROOT/.condarc``, else ``/etc/conda/.condarc``)."""
    if scope == "user":
        return conda.user_condarc
    if scope == "site":
        if not conda.prefix:
            raise FixRefused("--scope site edits the active environment's .condarc, but no CONDA_PREFIX is set")
        return f"{conda.prefix.rstrip('/')}/.condarc"
    return f"{conda.root_prefix.rstrip('/')}/.condarc" if conda.root_prefix else "/etc/conda/.condarc"


def _keep_scope(
    texts: dict[str, str], blocks: dict[str, dict[str, list[str]]], conda: CondaFacts, only: str, notes: list[str]
) -> None:
    """Drop every edit outside the ``--scope`` file ``only`` (each named in ``notes``)."""
    for path in [p for p in texts if p != only and texts[p] != conda.files.get(p)]:
        texts[path] = conda.files[path]
        notes.append(f"{path} names channels off the mirror too; not edited (--scope): edit it by hand")
    for path in [p for p in blocks if p != only]:
        keys = ", ".join(blocks.pop(path))
        notes.append(f"{path} also sets {keys}; not edited (--scope): edit it by hand, or rerun without --scope")


def plan(facts: Facts, finding: Finding, options: Mapping[str, str]) -> FixPlan | None:
    conda = facts.get("conda")
    if not isinstance(conda, CondaFacts):
        reason = getattr(conda, "reason", "")
        if "not valid YAML" in reason or "not a mapping" in reason:
            raise FixRefused(
                f"{reason}. gpudoctor does not rewrite it; fix it by hand so that its top level is a "
                f"mapping of settings, e.g.\nchannels:\n  - defaults\ndefault_channels:\n"
                f"  - https://MIRROR/pkgs/main"
            )
        return None
    if (
        finding is not None
        and finding.check == "conda.mirror"
        and (finding.evidence.get("cloud") or finding.evidence.get("public"))
        and not options.get("mirror")
    ):
        return _plan_catalogue(conda, finding, (options.get("scope") or "").strip())
    evidence = finding.evidence if finding is not None and finding.check == "index.consistency" else {}
    extra_named: list[str] = []
    if evidence.get("cloud") and not options.get("mirror"):
        # index.consistency: defaults already use the mirror; add its cloud tree for the named channels
        label, urls = "the mirror's cloud tree", {"conda_cloud": str(evidence["cloud"])}
        extra_named = [str(n) for n in evidence.get("named", [])]
    else:
        label, urls = choose(
            facts, "conda", options, ("conda_pkgs", "conda_cloud"), exclude=tuple(c.url for c in conda.channels)
        )
    new_hosts = {model.netloc(u) for u in urls.values()}
    moving = _moving_hosts(finding, conda)
    everything = list(conda.channels) + list(conda.named)
    settings = _settings_of(conda.files, conda.env)
    texts = dict(conda.files)
    scope = (options.get("scope") or "").strip()
    user = scope_file(conda, scope) if scope else conda.user_condarc  # the file every new setting goes to
    notes: list[str] = []

    # 1. channel URLs on a host being left -> the channel's name, in the file that lists them
    renamed: list[str] = []
    for c in everything:
        if c.via != "url" or not _leaves(c.url, moving, new_hosts) or "conda_cloud" not in urls:
            continue
        name = model.channel_name(c.url, settings)
        if not name:
            continue
        if c.origin in texts and not model.mamba_only(c.origin):
            texts[c.origin] = model.replace_list_item(texts[c.origin], "channels", c.name, name)
        elif c.origin.endswith((".yml", ".yaml")):
            notes.append(f"In {c.origin}, replace the channel `{c.name}` with `{name}` (now on the mirror).")
        else:
            notes.append(f"{c.origin} names the channel `{c.name}`: use `{name}` instead (now on the mirror).")
        renamed.append(name)

    # 2. named channels -> custom_channels on the mirror's cloud tree
    named = [c.name for c in everything if c.via in ("channel_alias", "custom_channels") and c.name != "defaults"]
    named += extra_named + renamed
    if "conda_cloud" in urls and conda.channel_alias and model.public(conda.channel_alias):
        named += [n for n in ("conda-forge", "pytorch") if n not in conda.custom_channels]
    named = [
        n
        for n in model.unique(named)
        if "conda_cloud" in urls
        and (n not in settings.custom_channels or _leaves(settings.custom_channels[n][0], moving, new_hosts))
        and (n in renamed or n in extra_named or _leaves(model.resolve(n, settings)[0].url, moving, new_hosts))
    ]
    edits_blocks: dict[str, dict[str, list[str]]] = {}
    if named:
        user_doc = model.yaml_load(texts.get(user, "") or "") or {}
        mapping = {str(k): str(v) for k, v in (user_doc.get("custom_channels") or {}).items()}
        for n in named:
            mapping[n] = urls["conda_cloud"]
        edits_blocks.setdefault(user, {})["custom_channels"] = ["custom_channels:"] + [
            f"  {n}: {u}" for n, u in mapping.items()
        ]
        for n in named:  # a file of higher precedence mapping the same name elsewhere wins over ~/.condarc
            origin = settings.custom_channels.get(n, ("", ""))[1]
            if origin and origin != user and origin in texts:
                doc = model.yaml_load(texts[origin]) or {}
                other = {str(k): str(v) for k, v in (doc.get("custom_channels") or {}).items()}
                other[n] = urls["conda_cloud"]
                edits_blocks.setdefault(origin, {})["custom_channels"] = ["custom_channels:"] + [
                    f"  {k}: {u}" for k, u in other.items()
                ]

    # 3. defaults -> default_channels, in ~/.condarc and every file whose list leaves the mirror
    uses_defaults = any(c.via == "default_channels" for c in everything)
    if "conda_pkgs" in urls and (uses_defaults or not evidence):
        leaving = [o for u, o in settings.default_channels if _leaves(u, moving, new_hosts)]
        block = ["default_channels:"] + [f"  - {urls['conda_pkgs']}/{c}" for c in ("main", "r")]
        for origin in leaving:
            target = user if origin == model.BUILT_IN or scope else origin  # --scope: only its file
            if target in texts or target == user:
                edits_blocks.setdefault(target, {})["default_channels"] = block
            for _, origin in settings.default_channels:
                if origin == "environment":
                    notes.append("CONDA_DEFAULT_CHANNELS overrides every file: unset it or point it at the mirror.")
                    break

    if scope:
        _keep_scope(texts, edits_blocks, conda, user, notes)
    for path, blocks in edits_blocks.items():
        texts[path] = model.replace_blocks(texts.get(path, "") or "", blocks)
    if all(texts.get(p) == conda.files.get(p) for p in texts):
        return None

    # 4. the result, re-resolved: nothing editable may still leave the mirror
    after = _settings_of(texts, conda.env)
    still: list[CondaChannel] = []
    for name, origin in after.channels:
        still += [c for c in model.resolve(name, after, origin) if _leaves(c.url, moving, new_hosts)]
    for c in conda.named:
        if c.origin in texts or c.via == "url":
            continue
        still += [x for x in model.resolve(c.name, after, c.origin) if _leaves(x.url, moving, new_hosts)]
    fixable_elsewhere = {c.origin for c in still if c.origin not in texts}
    stuck = [c for c in still if c.origin in texts or c.origin == model.BUILT_IN]
    if stuck and scope:  # the user chose the file: write it, and the result says what still wins
        notes.append(
            "after this fix conda still fetches "
            + ", ".join(f"`{c.name}` from {c.url} (set in {c.setting or c.origin})" for c in stuck[:4])
        )
    elif stuck:
        raise FixRefused(
            "after this fix conda would still fetch "
            + ", ".join(f"`{c.name}` from {c.url} ({c.via}, set in {c.setting or c.origin})" for c in stuck[:4])
            + "; nothing was written. Edit those settings by hand."
        )
    for origin in sorted(fixable_elsewhere):
        if origin == "environment":
            notes.append("CONDA_CHANNELS names channels off the mirror: unset it or use channel names.")

    edits: list[FileEdit] = []
    for path, new in texts.items():
        old = conda.files.get(path)
        if old == new:
            continue
        blocks = edits_blocks.get(path, {})
        manual = f"in {path}, set:\n" + "\n".join(line for b in blocks.values() for line in b)
        meaning = (lambda a, b, blocks=blocks: blocks_meaning(a, b, blocks)) if blocks else None
        if any(c.origin == path for c in everything if c.via == "url"):
            meaning = None  # the channels list changes too; the re-resolution above checked the result
        edits.append(verified_edit(path, old, new, manual, meaning=meaning, kind="condarc"))
    where = ", ".join(e.path for e in edits)
    return FixPlan(
        fix="conda.channels",
        description=f"redirect conda channels to {label} in {where}",
        edits=tuple(edits),
        addresses=("conda.mirror", "index.consistency"),
        notes=("Clear conda's cached indexes so the new channels are read: `conda clean -i`.", *notes),
        intent={"leaving": " ".join(sorted(moving)), "mirror-hosts": " ".join(sorted(new_hosts))},
    )


def _meaning_of(blocks: dict[str, list[str]]) -> Callable[[Any, Any], str | None]:
    return lambda old, new: blocks_meaning(old, new, blocks)


def _plan_catalogue(conda: CondaFacts, finding: Finding, scope: str = "") -> FixPlan | None:
    """``conda.mirror``'s catalogue findings: channels outside the mirror's ``cloud`` tree go into it;
    channels the mirror does not carry go to their own host (the only place that has them)."""
    ev = finding.evidence
    cloud = str(ev.get("cloud") or "")
    away = {str(n) for n in (ev.get("missing") or [])} | {str(n) for n in (ev.get("public") or [])}
    names = [str(n) for n in ev.get("channels", [])]
    user = scope_file(conda, scope) if scope else conda.user_condarc
    texts = dict(conda.files)
    user_doc = model.yaml_load(texts.get(user, "") or "") or {}
    mapping = {str(k): str(v) for k, v in (user_doc.get("custom_channels") or {}).items()}
    for n in names:
        mapping[n.split("/")[0]] = model.CHANNEL_ALIAS if n.split("/")[0] in away else cloud
    blocks: dict[str, dict[str, list[str]]] = {
        user: {"custom_channels": ["custom_channels:"] + [f"  {k}: {v}" for k, v in mapping.items()]}
    }
    alias_origin = str(ev.get("alias_origin") or "")
    if cloud and alias_origin:
        target = alias_origin if alias_origin in texts and not model.mamba_only(alias_origin) and not scope else user
        blocks.setdefault(target, {})["channel_alias"] = [f"channel_alias: {cloud}"]
    edits: list[FileEdit] = []
    for path, b in blocks.items():
        old = texts.get(path)
        new = model.replace_blocks(old or "", b)
        if new == old:
            continue
        manual = f"in {path}, set:\n" + "\n".join(line for lines in b.values() for line in lines)
        edits.append(verified_edit(path, old, new, manual, meaning=_meaning_of(b), kind="condarc"))
    if not edits:
        return None
    notes = ["Clear conda's cached indexes so the new channels are read: `conda clean -i`."]
    gone = sorted(n for n in {x.split("/")[0] for x in names} if n in away)
    if gone:
        notes.append(
            f"{', '.join(gone)}: not on the mirror, so now fetched from {model.CHANNEL_ALIAS} (outside the mirror)."
        )
    return FixPlan(
        fix="conda.channels",
        description=f"map {', '.join(dict.fromkeys(n.split('/')[0] for n in names))} in {', '.join(e.path for e in edits)}",
        edits=tuple(edits),
        addresses=("conda.mirror", "index.consistency"),
        notes=tuple(notes),
        intent={f"channel:{n.split('/')[0]}": v for n, v in mapping.items() if n in {x.split("/")[0] for x in names}},
    )


def verify(facts: Facts, plan: FixPlan) -> str | None:
    """Re-resolve every channel conda fetches from the condarc files as conda merges them (the
    search path from ``/etc/conda`` to ``$CONDA_PREFIX`` and ``$CONDARC``, ``#!final``, the
    ``CONDA_*`` variables over every file) and say which setting still sends a channel off the mirror."""
    conda = facts.get("conda")
    if not isinstance(conda, CondaFacts):
        return f"conda's configuration could not be read again ({getattr(conda, 'reason', 'not collected')})"
    seen = [c for c in (*conda.channels, *conda.named) if c.tool == "conda" and (c.via != "url" or c in conda.channels)]
    leaving = set(plan.intent.get("leaving", "").split())
    mirror = set(plan.intent.get("mirror-hosts", "").split())
    for c in seen:
        if ("leaving" in plan.intent and _leaves(c.url, leaving, mirror)) or any(
            key == f"channel:{c.name.split('/')[0]}" and c.via != "url" and not c.url.startswith(base.rstrip("/"))
            for key, base in plan.intent.items()
        ):
            return f"{c.setting or c.origin} still wins: `{c.name}` resolves to {c.url} ({c.via})"
    return None


FIX = Fix(
    id="conda.channels",
    title="Redirect conda's defaults and named channels to a faster mirror",
    addresses=("conda.mirror", "index.consistency"),
    plan=plan,
    verify=verify,
)
