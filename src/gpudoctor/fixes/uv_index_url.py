"""Fix ``uv.index-url``: make uv's default index a faster mirror.

Edits the file the current default came from (project ``uv.toml`` /
``pyproject.toml`` ``[tool.uv]``, user or system ``uv.toml``); with nothing
configured, creates or extends the user file ``~/.config/uv/uv.toml`` with
an ``[[index]] url = ... default = true`` table (uv docs, "Indexes"). Only
the URL value changes in an existing file; comments and order stay. When
``UV_DEFAULT_INDEX``/``UV_INDEX_URL`` is set in the environment it wins over
every file, so the plan is refused with the exact ``export`` to type.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gpudoctor.facts import Facts
from gpudoctor.facts.mirrors import UvFacts
from gpudoctor.fixes._mirror_choice import choose
from gpudoctor.fixes._verify import NotParsable, parse_as, verified_edit
from gpudoctor.model import Finding, Fix, FixPlan, FixRefused

_HEADER = re.compile(r"^\s*\[")
_URL = re.compile(r"^(?P<head>\s*url\s*=\s*)(?P<q>[\"'])(?P<v>[^\"']*)(?P=q)")
_LEGACY = re.compile(r"^(?P<head>\s*index-url\s*=\s*)(?P<q>[\"'])(?P<v>[^\"']*)(?P=q)")
_DEFAULT = re.compile(r"^\s*default\s*=\s*true\b")


def _header(line: str) -> str:
    """A TOML table header without its trailing comment: ``[[index]]  # x`` -> ``[[index]]``."""
    return line.split("#", 1)[0].strip()


def set_default_index(text: str, url: str, pyproject: bool = False) -> str:
    """``text`` (uv.toml or pyproject.toml) with the default index set to ``url``; other lines kept."""
    lines = text.splitlines(keepends=True)
    index_header = "[[tool.uv.index]]" if pyproject else "[[index]]"
    blocks: list[list[int]] = []  # line indexes per block; block 0 = before any header
    cur: list[int] = []
    for i, line in enumerate(lines):
        if _HEADER.match(line):
            blocks.append(cur)
            cur = [i]
        else:
            cur.append(i)
    blocks.append(cur)
    for block in blocks:
        if not block or _header(lines[block[0]]) != index_header:
            continue
        if any(_DEFAULT.match(lines[i]) for i in block):
            for i in block:
                m = _URL.match(lines[i])
                if m:
                    lines[i] = m.group("head") + m.group("q") + url + m.group("q") + lines[i][m.end() :]
                    return "".join(lines)
    for block in blocks:  # an [[index]] with this URL but no `default = true` (asked first, not the default)
        if not block or _header(lines[block[0]]) != index_header:
            continue
        for i in block:
            m = _URL.match(lines[i])
            if m and m.group("v").rstrip("/") == url.rstrip("/"):
                end = lines[i] if lines[i].endswith("\n") else lines[i] + "\n"
                lines[i] = end + "default = true\n"
                return "".join(lines)
    legacy_scope = "[tool.uv]" if pyproject else None
    for block in blocks:
        header = _header(lines[block[0]]) if block and _HEADER.match(lines[block[0]]) else None
        if header != legacy_scope:
            continue
        for i in block:
            m = _LEGACY.match(lines[i])
            if m:
                lines[i] = m.group("head") + m.group("q") + url + m.group("q") + lines[i][m.end() :]
                return "".join(lines)
    out = "".join(lines)
    if out and not out.endswith("\n"):
        out += "\n"
    sep = "\n" if out.strip() else ""
    return f'{out}{sep}{index_header}\nurl = "{url}"\ndefault = true\n'


def _uv_table(doc: dict[str, Any], pyproject: bool) -> dict[str, Any]:
    if not pyproject:
        return doc
    tool = doc.get("tool", {})
    return tool.get("uv", {}) if isinstance(tool, dict) and isinstance(tool.get("uv", {}), dict) else {}


def default_index(doc: dict[str, Any], pyproject: bool = False) -> str | None:
    """The default index URL a parsed uv.toml / pyproject.toml names (uv docs, "Indexes"):
    the ``[[index]]`` with ``default = true``, else the legacy ``index-url``; None when neither."""
    table = _uv_table(doc, pyproject)
    indexes = table.get("index", [])
    if isinstance(indexes, list):
        for entry in indexes:
            if isinstance(entry, dict) and entry.get("default") is True:
                return entry.get("url")
    legacy = table.get("index-url")
    return legacy if isinstance(legacy, str) else None


def _without_default(doc: dict[str, Any] | None, pyproject: bool, url: str = "") -> dict[str, Any]:
    import copy

    doc = copy.deepcopy(doc or {})
    table = _uv_table(doc, pyproject)
    indexes = table.get("index")
    if isinstance(indexes, list):
        table["index"] = [
            e
            for e in indexes
            if not (
                isinstance(e, dict)
                and (e.get("default") is True or (url and str(e.get("url", "")).rstrip("/") == url.rstrip("/")))
            )
        ]
        if not table["index"]:
            del table["index"]
    table.pop("index-url", None)
    if pyproject and not table and isinstance(doc.get("tool"), dict):  # a [tool.uv] made only for the index
        doc["tool"].pop("uv", None)
        if not doc["tool"]:
            doc.pop("tool")
    return doc


def default_index_meaning(old: dict[str, Any] | None, new: dict[str, Any], url: str, pyproject: bool) -> str | None:
    """None when ``new`` has ``url`` as its default index and nothing else changed from ``old``."""
    got = default_index(new, pyproject)
    if got != url:
        return f"its default index would be {got!r}, not {url!r}"
    if _without_default(old, pyproject, url) != _without_default(new, pyproject, url):
        return "other settings would change too"
    return None


def _inline_indexes(text: str, pyproject: bool) -> str:
    """The key line of an inline ``index = [...]`` array in ``text`` (uv.toml top level, or
    pyproject.toml ``[tool.uv]``), "" when the indexes are ``[[index]]`` tables or absent."""
    try:
        doc = parse_as("toml", text)
    except NotParsable:
        return ""
    if not isinstance(_uv_table(doc, pyproject).get("index"), list):
        return ""
    header = "[[tool.uv.index]]" if pyproject else "[[index]]"
    if any(_header(line) == header for line in text.splitlines()):
        return ""
    return next((ln.strip() for ln in text.splitlines() if re.match(r"\s*index\s*=", ln)), "index = [...]")


def fatal_problems(uv: UvFacts) -> list[str]:
    """The problems of files uv stops on: a ``uv.toml`` it cannot parse is fatal ("Failed to parse
    `uv.toml`"); an unreadable pyproject.toml is only skipped with a warning (astral-sh/uv #6009)."""
    return [p for p in uv.problems if p.split(": ", 1)[0].endswith("uv.toml")]


def verify(facts: Facts, plan: FixPlan) -> str | None:
    """Re-read uv's configuration as uv resolves it (``UV_DEFAULT_INDEX``/``UV_INDEX_URL`` > project
    ``uv.toml``/``[tool.uv]`` > user ``uv.toml`` > system ``uv.toml``; ``UV_CONFIG_FILE`` replaces the
    files, ``UV_NO_CONFIG`` drops them) and say what still wins over the plan's default index."""
    uv = facts.get("uv")
    if not isinstance(uv, UvFacts):
        return f"uv's configuration could not be read again ({getattr(uv, 'reason', 'not collected')})"
    fatal = fatal_problems(uv)
    if fatal:
        path, _, why = fatal[0].partition(": ")
        return f"{path} still fails: uv stops on it ({why})"
    want = plan.intent.get("default-index", "")
    if not want or uv.default_index.rstrip("/") == want.rstrip("/"):
        return None
    unread = [e.path for e in plan.edits if e.path not in uv.files]
    if uv.default_origin == "built-in" or unread:
        why = "UV_NO_CONFIG is set" if uv.no_config else "UV_CONFIG_FILE names another file, or uv looks elsewhere"
        shown = ", ".join(unread or [e.path for e in plan.edits])
        return f"uv does not read {shown} ({why}); its default index is still {uv.default_index}"
    return f"{uv.default_origin} still wins (default index {uv.default_index})"


def plan(facts: Facts, finding: Finding, options: Mapping[str, str]) -> FixPlan | None:
    uv = facts.get("uv")
    if not isinstance(uv, UvFacts):
        return None
    evidence = finding.evidence if finding is not None and finding.check == "index.consistency" else {}
    scope = (options.get("scope") or evidence.get("scope") or "").strip()
    if evidence.get("index_url") and not options.get("mirror"):
        # the same index pip uses (index.consistency): no ranking, no catalogue
        label, url = "pip's index", str(evidence["index_url"])
        if url.startswith("http://") and not _insecure_ok(options):
            raise FixRefused(
                f"pip's index {url} is plain http://; pass --allow-insecure to give uv the same index, "
                f"or use the mirror's https URL with --mirror URL"
            )
    else:
        label, urls = choose(facts, "uv", options, ("pypi",), exclude=(uv.default_index,))
        url = urls["pypi"]
    if uv.default_origin in ("UV_DEFAULT_INDEX", "UV_INDEX_URL") or scope == "env":
        raise FixRefused(
            f"{uv.default_origin if uv.default_origin != 'built-in' else 'the pip index'} is set in the "
            f"environment; set uv's there too: `export UV_DEFAULT_INDEX={url}` (shell profile, "
            f"Dockerfile ENV, CI settings)"
        )
    given = (options.get("scope") or "").strip()  # --scope: the user's word, honoured exactly
    if given == "site":
        raise FixRefused(
            "uv has no site (per-environment) configuration file: use --scope user "
            f"({uv.user_config}) or --scope global ({uv.system_config or '/etc/uv/uv.toml'}), or set the "
            "index in the project's uv.toml / pyproject.toml [tool.uv] by hand"
        )
    if given == "global" or (scope == "global" and uv.default_origin not in uv.files):
        path = uv.system_config or "/etc/uv/uv.toml"
    elif given == "user" or (scope == "user" and uv.default_origin not in uv.files):
        path = uv.user_config
    else:
        path = uv.default_origin if uv.default_origin in uv.files else uv.user_config
    stops = [p for p in fatal_problems(uv) if not p.startswith(f"{path}:")]
    if stops:
        raise FixRefused(
            f"uv stops on {stops[0]} before it reads any index, so a default index in {path} would not "
            f"be used; nothing was written. Fix that file first (or remove it), then rerun"
        )
    own = [p for p in fatal_problems(uv) if p.startswith(f"{path}:")]
    if own:
        raise FixRefused(f"{own[0]}; gpudoctor does not move settings between tables: nothing was written")
    old = uv.files.get(path)
    pyproject = path.endswith("pyproject.toml")
    inline = _inline_indexes(old or "", pyproject)
    if inline:
        raise FixRefused(
            f"{path} lists its indexes as an inline array (`{inline}`); gpudoctor edits only "
            f"`{'[[tool.uv.index]]' if pyproject else '[[index]]'}` tables, so nothing was written. Edit it "
            f'by hand: in that array, give the default entry url = "{url}" and `default = true`'
        )
    new = set_default_index(old or "", url, pyproject=pyproject)
    header = "[[tool.uv.index]]" if pyproject else "[[index]]"
    manual = (
        f'in {path}, make the index marked `default = true` use url = "{url}" (or add a table '
        f'`{header}` with `url = "{url}"` and `default = true`)'
    )
    edit = verified_edit(path, old, new, manual, meaning=lambda a, b: default_index_meaning(a, b, url, pyproject))
    return FixPlan(
        fix="uv.index-url",
        description=f"make {label} ({url}) uv's default index in {path}",
        edits=(edit,),
        addresses=("uv.mirror", "index.consistency"),
        notes=("Check with `uv pip install --dry-run six` (uv logs the index it uses with -v).",),
        intent={"default-index": url},
    )


def _insecure_ok(options: Mapping[str, str]) -> bool:
    return any(
        str(options.get(k, "")).strip().lower() in ("1", "true", "yes", "on")
        for k in ("allow-insecure", "allow_insecure")
    )


FIX = Fix(
    id="uv.index-url",
    title="Set uv's default index (a faster mirror, or the index pip uses)",
    addresses=("uv.mirror", "index.consistency"),
    plan=plan,
    verify=verify,
)
