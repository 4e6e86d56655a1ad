"""Fix ``conda.channels``: redirect ``defaults`` and named channels to a mirror in ``~/.condarc``.

Writes ``default_channels`` (``<mirror>/pkgs/main`` and ``/r``) and
``custom_channels`` (each named channel in ``channels`` -> ``<mirror>/cloud``)
— the two independent bases conda resolves (conda docs, "Mirroring
channels"). ``channels`` and its order, comments and every other key stay;
only those two top-level blocks are replaced (or added at the end).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gpudoctor.facts import Facts
from gpudoctor.facts.mirrors import CondaFacts
from gpudoctor.fixes._mirror_choice import choose
from gpudoctor.fixes._verify import verified_edit
from gpudoctor.model import Finding, Fix, FixPlan, FixRefused

_TOP = re.compile(r"^(?P<key>[A-Za-z_][A-Za-z0-9_]*)\s*:")


def replace_blocks(text: str, blocks: dict[str, list[str]]) -> str:
    """``text`` with the top-level YAML keys in ``blocks`` replaced by the given lines (appended if absent)."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    skipping = False
    done = set()
    for line in lines:
        m = _TOP.match(line)
        if m:
            skipping = False
            if m.group("key") in blocks:
                if m.group("key") not in done:
                    out.extend(x + "\n" for x in blocks[m.group("key")])
                    done.add(m.group("key"))
                skipping = True
                continue
        elif skipping and (line.startswith((" ", "\t", "-")) or not line.strip()):
            if not line.strip():
                out.append(line)
                skipping = False
            continue
        else:
            skipping = False
        out.append(line)
    result = "".join(out)
    rest = [k for k in blocks if k not in done]
    if rest:
        if result and not result.endswith("\n"):
            result += "\n"
        for k in rest:
            result += "".join(x + "\n" for x in blocks[k])
    return result


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
    blocks: dict[str, list[str]] = {}
    if "conda_pkgs" in urls:
        blocks["default_channels"] = ["default_channels:"] + [f"  - {urls['conda_pkgs']}/{c}" for c in ("main", "r")]
    named = [c.name for c in conda.channels if c.via in ("channel_alias", "custom_channels")] + extra_named
    if "conda_cloud" in urls and named:
        mapping = dict(conda.custom_channels)  # entries already there stay
        for n in dict.fromkeys(named):
            mapping[n] = urls["conda_cloud"]
        blocks["custom_channels"] = ["custom_channels:"] + [f"  {n}: {u}" for n, u in mapping.items()]
    if not blocks:
        return None
    path = conda.user_condarc
    old = conda.files.get(path)
    new = replace_blocks(old or "", blocks)
    manual = f"in {path}, set these top-level keys:\n" + "\n".join(line for b in blocks.values() for line in b)
    edit = verified_edit(path, old, new, manual, meaning=lambda a, b: blocks_meaning(a, b, blocks), kind="condarc")
    return FixPlan(
        fix="conda.channels",
        description=f"redirect conda channels to {label} in {path}",
        edits=(edit,),
        addresses=("conda.mirror", "index.consistency"),
        notes=("Clear conda's cached indexes so the new channels are read: `conda clean -i`.",),
    )


FIX = Fix(
    id="conda.channels",
    title="Redirect conda's defaults and named channels to a faster mirror",
    addresses=("conda.mirror", "index.consistency"),
    plan=plan,
)
