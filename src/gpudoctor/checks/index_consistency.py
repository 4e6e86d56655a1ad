"""Check ``index.consistency``: are pip, uv, conda and pixi pointed at the same mirror?

Each tool reads only its own configuration (pip-apt-config.md, mirrors.md §3):

- uv never reads ``pip.conf`` (astral-sh/uv #1859); its index comes from
  ``UV_DEFAULT_INDEX``/``UV_INDEX_URL``, a project ``uv.toml``/``[tool.uv]``,
  ``~/.config/uv/uv.toml`` or ``/etc/uv/uv.toml``;
- pip never reads ``uv.toml``;
- conda's named channels (``conda-forge``, ``pytorch``, ``-c NAME`` on the
  command line) resolve through ``channel_alias`` / ``custom_channels``, so a
  mirror set only in ``channels`` URLs or ``default_channels`` does not cover
  them; and the reverse, named channels on a mirror (``channel_alias``)
  while ``defaults`` still expands to repo.anaconda.com -> ``warn`` with the
  ``default_channels`` block;
- pixi reads neither ``.condarc`` nor ``pip.conf`` (prefix-dev/pixi #756, #2312): a named conda
  channel on a mirror that pixi's ``[mirrors]`` does not cover -> ``warn`` with the ``[mirrors]``
  block; pip's mirror without a ``[pypi-config] index-url`` -> ``info``;
- a uv default index uv cannot use (no ``/simple``, quoted, no scheme) ->
  ``fail`` with the URL meant; pip's index in an ``[[index]]`` without
  ``default = true`` -> ``info``; a uv.toml uv refuses -> ``fail`` (same cause
  as ``uv.mirror``).

When one tool is pointed at a mirror and another tool on the same machine is
not, the other one goes to the public host — often blocked or slow on a
network that needed the mirror in the first place. Verdict: ``warn``, decided
offline (no probe), with the other tool's fix offered (``info`` instead when
uv is not installed: no ``uv`` executable and no uv configuration): ``uv.index-url`` (the
same index, at the same scope as the pip setting), ``pip.index-url``, or
``conda.channels`` (``custom_channels`` for the named channels, on the
mirror's ``cloud`` base). ``ok`` when every configured tool agrees; ``skip``
when no tool uses a mirror.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from gpudoctor.checks._indexes import index_url_problem
from gpudoctor.facts import Facts
from gpudoctor.facts.mirrors import CondaChannel, CondaFacts, PixiFacts, UvFacts
from gpudoctor.facts.pip import PipFacts
from gpudoctor.model import Check, Command, Finding, Status
from gpudoctor.sources import conda as model

CHECK_ID = "index.consistency"
#: Hosts of the public package indexes: a tool using one of them is "not on a mirror".
PUBLIC_PYPI = ("pypi.org", "pypi.python.org", "files.pythonhosted.org")
PUBLIC_CONDA = ("anaconda.com", "anaconda.org")
#: Named channels every anaconda mirror with a ``cloud`` tree carries (TUNA/BFSU/SJTU docs list them).
COMMON_NAMED = ("conda-forge", "pytorch")
#: pip scope -> the uv file of the same scope.
SCOPE_FOR_UV = {"global": "global", "user": "user", "site": "user", "env": "user", "env_var": "env"}


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def _public(url: str, hosts: tuple[str, ...]) -> bool:
    h = _host(url)
    return any(h == p or h.endswith("." + p) for p in hosts)


def pip_index(pip: Any) -> tuple[str, str, str, int] | None:
    """(url, source, variant, line) of pip's index-url when it is a mirror, else None."""
    if not isinstance(pip, PipFacts):
        return None
    s = pip.effective.get("index-url")
    if s is None or not s.value.strip():
        return None
    url = s.value.strip()
    shape = index_url_problem(url)
    if shape is not None:  # pip.config reports it; compare (and give uv) the URL that was meant
        if not shape[1]:
            return None
        url = shape[1]
    if _public(url, PUBLIC_PYPI):
        return None
    return url, s.source, s.variant, s.line


def uv_index(uv: Any) -> tuple[str, str] | None:
    """(url, origin) of uv's default index when it is a mirror, else None."""
    if not isinstance(uv, UvFacts) or uv.default_origin == "built-in" or _public(uv.default_index, PUBLIC_PYPI):
        return None
    return uv.default_index, uv.default_origin


def uv_pip_index(uv: Any) -> tuple[str, str] | None:
    """(url, origin) of ``uv pip``'s own default index (a ``[pip] index-url``) when it is a mirror."""
    if not isinstance(uv, UvFacts) or not uv.pip_default_index or _public(uv.pip_default_index, PUBLIC_PYPI):
        return None
    return uv.pip_default_index, uv.pip_default_origin


def conda_cloud_base(conda: CondaFacts) -> str | None:
    """The mirror's ``cloud`` base (where named channels live), from a mirrored ``defaults``/channel URL.

    Anaconda mirrors (TUNA, BFSU, SJTU, USTC ...) serve ``<root>/pkgs/main``
    and ``<root>/cloud/<name>``: ``https://m/anaconda/pkgs/main`` ->
    ``https://m/anaconda/cloud``. None when no mirrored URL has that layout.
    """
    urls = [u for u in conda.default_channels if not _public(u, PUBLIC_CONDA)]
    urls += [c.url for c in conda.channels if c.via == "url" and not _public(c.url, PUBLIC_CONDA)]
    for u in urls:
        parts = urlsplit(u.rstrip("/") + "/")
        for marker in ("/pkgs/", "/cloud/"):
            idx = parts.path.find(marker)
            if idx >= 0:
                return f"{parts.scheme}://{parts.netloc}{parts.path[:idx]}/cloud"
    return None


def _uv_finding(pip: tuple[str, str, str, int], uv: UvFacts) -> Finding:
    url, source, variant, line = pip
    scope = SCOPE_FOR_UV.get(variant, "user")
    where = f"{source} line {line}" if line else source
    target = {"global": "/etc/uv/uv.toml", "user": uv.user_config or "~/.config/uv/uv.toml"}.get(scope, "")
    if uv.pip_default_index and uv.pip_default_index.rstrip("/") == url.rstrip("/"):
        project = (
            "the public default index"
            if uv.default_origin == "built-in"
            else f"{uv.default_index} ({uv.default_origin})"
        )
        return Finding(
            check=CHECK_ID,
            status=Status.INFO,
            summary=(
                f"`uv pip` uses pip's index {url} ({uv.pip_default_origin}), but uv's project commands "
                f"(uv add, lock, sync, run) use {project}: `[pip] index-url` is read by `uv pip` only"
            ),
            explanation=(
                f"`{uv.pip_default_origin}` sets `index-url` in its `[pip]` table, which uv reads for `uv pip` "
                f"commands only (uv's settings reference: ignored outside the `uv pip` namespace). `uv pip install` "
                f"therefore agrees with pip ({where}), while `uv add`, `uv lock`, `uv sync` and `uv run` resolve "
                f"against {project}. If you use those, give uv the index at the top level as well"
                + (f" (`{target}`)" if target else "")
                + f":\n\n"
                f'    [[index]]\n    url = "{url}"\n    default = true\n\n'
                f"`gpudoctor fix uv.index-url` writes it."
            ),
            evidence={
                "tool": "uv",
                "index_url": url,
                "scope": scope,
                "uv_default": uv.default_index,
                "uv_origin": uv.default_origin,
                "uv_pip_default": uv.pip_default_index,
                "uv_pip_origin": uv.pip_default_origin,
            },
            fixes=("uv.index-url",),
        )
    now = (
        f"uses the public default index ({uv.default_index})"
        if uv.default_origin == "built-in"
        else f"uses {uv.default_index} (from {uv.default_origin})"
    )
    summary = (
        (
            f"uv has no index configured and falls back to the public default index, while pip uses {url} "
            f"({where}): uv never reads pip.conf"
        )
        if uv.default_origin == "built-in"
        else f"uv {now}, while pip uses {url} ({where}): uv never reads pip.conf"
    )
    export = f"export UV_DEFAULT_INDEX={url}"
    same = [i for i in uv.indexes if not i.default and i.url.rstrip("/") == url.rstrip("/")]
    if uv.default_origin == "built-in" and same:
        # [[index]] without default = true: asked first, PyPI still the default (uv docs, "Indexes")
        return Finding(
            check=CHECK_ID,
            status=Status.INFO,
            summary=(
                f"uv asks pip's index {url} first ({same[0].origin}), but keeps the public index as its default: "
                f"the [[index]] has no `default = true`"
            ),
            explanation=(
                f"`{same[0].origin}` lists `{url}` as an extra `[[index]]`, so uv asks it first and uses the "
                f"public default index only for packages the mirror lacks — those downloads bypass the mirror "
                f"(and fail where the public index is blocked). To make the mirror replace the public index, "
                f"add `default = true` to that table:\n\n"
                f'    [[index]]\n    url = "{url}"\n    default = true\n\n'
                f"`gpudoctor fix uv.index-url` writes it; or `{export}`."
            ),
            evidence={
                "tool": "uv",
                "index_url": url,
                "uv_origin": same[0].origin,
                "scope": "user"
                if same[0].origin == uv.user_config
                else "global"
                if same[0].origin.startswith("/etc/")
                else scope,
            },
            fixes=("uv.index-url",),
        )
    if uv.problems:
        summary = f"uv cannot use its configuration, while pip uses {url} ({where}): {uv.problems[0]}"
        return Finding(
            check=CHECK_ID,
            status=Status.FAIL,
            summary=summary.split(". In uv.toml")[0],
            explanation=(
                f"{uv.problems[0]}.\n\npip uses `{url}` ({where}); uv never reads pip.conf, and the uv file meant "
                f"to give it that index is refused. Move the settings to the top level of the file:\n\n"
                f'    [[index]]\n    url = "{url}"\n    default = true\n\n'
                f"(`[tool.uv]` belongs in a project's pyproject.toml), or `{export}`."
            ),
            evidence={"tool": "uv", "index_url": url, "problems": list(uv.problems)},
            caused_by=("uv.mirror",),
            commands=(Command(export, "give uv pip's index meanwhile (in the shell profile to keep it)"),),
        )
    expl = (
        f"pip on this machine is deliberately pointed at `{url}` ({where}), but uv {now}: uv does not read "
        f"any pip configuration file (its own sources are `UV_DEFAULT_INDEX`, a project `uv.toml` or "
        f"`[tool.uv]`, `~/.config/uv/uv.toml`, `/etc/uv/uv.toml`). `uv pip install` therefore goes to the "
        f"public index — blocked or slow where a mirror was needed.\n\n"
        f"Give uv the same index at the same scope as the pip setting" + (f" (`{target}`)" if target else "") + ":\n\n"
        f'    [[index]]\n    url = "{url}"\n    default = true\n\n'
        f"`gpudoctor fix uv.index-url` writes exactly that; or `{export}` in the shell profile. "
        f"Do not edit pip.conf: it is already right."
    )
    installed = bool(uv.binary) or bool(uv.files)
    if not installed:
        summary = (
            f"uv is not installed here; if you install it, it will not use pip's index {url}: uv never reads pip.conf"
        )
        expl = (
            "No `uv` executable was found on PATH, in the active environment, `~/.local/bin` or "
            "`~/.cargo/bin`, so nothing goes wrong yet.\n\n" + expl
        )
    return Finding(
        check=CHECK_ID,
        status=Status.WARN if installed else Status.INFO,
        summary=summary,
        explanation=expl,
        evidence={
            "tool": "uv",
            "uv_binary": uv.binary,
            "index_url": url,
            "scope": scope,
            "pip_source": source,
            "pip_line": line,
            "uv_default": uv.default_index,
            "uv_origin": uv.default_origin,
        },
        fixes=("uv.index-url",),
    )


def _pip_finding(uv: tuple[str, str], pip: PipFacts) -> Finding:
    url, origin = uv
    scope = "global" if origin.startswith("/etc/") else "user"
    s = pip.effective.get("index-url")
    now = s.value if s is not None else "https://pypi.org/simple"
    return Finding(
        check=CHECK_ID,
        status=Status.WARN,
        summary=f"pip uses the public index {now}, while uv uses {url} ({origin}): pip never reads uv.toml",
        explanation=(
            f"uv is pointed at `{url}` ({origin}), but pip uses `{now}`: pip reads only pip.conf files "
            f"and `PIP_*` variables. Give pip the same index: `gpudoctor fix pip.index-url --index-url "
            f"{url} --scope {scope}` (or `pip config --{'global' if scope == 'global' else 'user'} set "
            f"global.index-url {url}`)."
        ),
        evidence={"tool": "pip", "index_url": url, "scope": scope, "uv_origin": origin},
        fixes=("pip.index-url",),
    )


def _catalogue_conda_mirror(host: str) -> str:
    """Name of the catalogue mirror (``data/mirrors.toml``) whose conda trees live on ``host``, or ""."""
    from gpudoctor.data import load_table

    for row in load_table("mirrors").get("mirror", []):
        for key in ("conda_pkgs", "conda_cloud"):
            if row.get(key) and _host(row[key]) == host:
                return str(row["name"])
    return ""


def _conda_defaults_public(conda: CondaFacts) -> list[Finding]:
    """Named channels on a mirror while ``defaults`` still expands to repo.anaconda.com."""
    named_mirror = [
        c for c in conda.channels if c.via in ("channel_alias", "custom_channels") and not _public(c.url, PUBLIC_CONDA)
    ]
    public_defaults = [c for c in conda.channels if c.via == "default_channels" and _public(c.url, PUBLIC_CONDA)]
    if not named_mirror or not public_defaults:
        return []
    base = named_mirror[0].url.rstrip("/").rsplit("/", 1)[0]  # <root>/cloud
    root = base[: -len("/cloud")] if base.endswith("/cloud") else ""
    host = _host(named_mirror[0].url)
    name = _catalogue_conda_mirror(host)
    yaml = "    default_channels:\n" + "".join(f"      - {root}/pkgs/{t}\n" for t in ("main", "r")) if root else ""
    todo = (
        f"Point `defaults` at the same mirror in `~/.condarc`:\n\n{yaml}\n"
        if yaml
        else "Set `default_channels` in `~/.condarc` to the mirror's `pkgs/main` and `pkgs/r` URLs. "
    )
    if name:
        todo += f"`gpudoctor fix conda.channels --mirror {name}` writes both blocks."
    return [
        Finding(
            check=CHECK_ID,
            status=Status.WARN,
            summary=(
                f"conda's named channels use the mirror {host}, but `defaults` still goes to "
                f"{_host(public_defaults[0].url)}: channel_alias does not cover defaults"
            ),
            explanation=(
                f"`{named_mirror[0].name}` resolves to `{named_mirror[0].url}` (via {named_mirror[0].via}), but "
                f"`defaults` expands to `default_channels` — "
                + ", ".join(f"`{c.url}`" for c in public_defaults)
                + ' — which `channel_alias` and `custom_channels` never change (conda docs, "Mirroring '
                f"channels\"). Those downloads bypass the mirror (slow or blocked, and subject to Anaconda's "
                f"terms of service).\n\n{todo}\n\nOr drop `defaults` from `channels` if you do not need it."
            ),
            evidence={"tool": "conda", "mirror": named_mirror[0].url, "defaults": [c.url for c in public_defaults]},
            fixes=("conda.channels",) if name else (),
            commands=tuple(
                Command(
                    f"conda config --add default_channels {root}/pkgs/{t}", "send defaults to the mirror", "changes"
                )
                for t in ("r", "main")  # --add prepends: main ends up first
            )
            if root
            else (),
        )
    ]


def _conda_mirrored_names(conda: Any) -> dict[str, tuple[str, str]]:
    """Named channels conda would fetch from a mirror -> (URL, the setting that sends it there):
    those its channel lists name through ``channel_alias``/``custom_channels``, every
    ``custom_channels`` entry, and ``conda-forge`` (pixi's default channel) under a mirrored
    ``channel_alias``."""
    if not isinstance(conda, CondaFacts):
        return {}
    names: dict[str, tuple[str, str]] = {}
    for c in (*conda.channels, *conda.named):
        if c.via in ("channel_alias", "custom_channels") and "://" not in c.name:
            names.setdefault(c.name, (c.url, c.setting or c.origin))
    for name, base in conda.custom_channels.items():
        names.setdefault(name, (f"{base.rstrip('/')}/{name}", "custom_channels"))
    if conda.channel_alias and not _public(conda.channel_alias, PUBLIC_CONDA):
        alias = conda.channel_alias.rstrip("/")
        names.setdefault("conda-forge", (f"{alias}/conda-forge", f"channel_alias, {conda.channel_alias_origin}"))
    return {n: v for n, v in names.items() if not _public(v[0], PUBLIC_CONDA)}


def _pixi_findings(pixi: Any, conda: Any, pip: tuple[str, str, str, int] | None) -> list[Finding]:
    """pixi reads neither ``.condarc`` nor ``pip.conf`` (prefix-dev/pixi #756, #2312): a named conda
    channel conda fetches from a mirror, or pip's mirror, that pixi's ``[mirrors]`` /
    ``[pypi-config]`` do not cover goes to the public host when pixi resolves. Only where pixi is
    installed or configured."""
    if not isinstance(pixi, PixiFacts) or not (pixi.binary or pixi.files):
        return []
    home_file = "~/.pixi/config.toml (or $PIXI_HOME/config.toml)"
    commands = (
        Command("pixi config list mirrors", "the mirrors pixi uses now"),
        Command("pixi config edit --global", "add the [mirrors] block to pixi's global config.toml", "changes"),
    )
    out: list[Finding] = []
    gaps = [(n, url, where) for n, (url, where) in _conda_mirrored_names(conda).items()]
    gaps = [g for g in gaps if pixi.mirror_for(f"https://conda.anaconda.org/{g[0]}") is None]
    if gaps:
        name, url, where = gaps[0]
        block = "\n".join(f'    "https://conda.anaconda.org/{n}" = ["{u}"]' for n, u, _ in gaps[:12])
        out.append(
            Finding(
                check=CHECK_ID,
                status=Status.WARN,
                summary=(
                    f"conda fetches `{name}` from the mirror {url} ({where}), but pixi goes to "
                    f"https://conda.anaconda.org: pixi never reads .condarc"
                ),
                explanation=(
                    "pixi resolves conda channels by itself and reads no `.condarc` (`channel_alias`, "
                    "`custom_channels` and `default_channels` have no effect on it; prefix-dev/pixi #756, #2312). "
                    "A mirror reaches pixi only through the `[mirrors]` table of its own `config.toml`, so "
                    + ", ".join(f"`{n}`" for n, _, _ in gaps[:12])
                    + " go to the public host when pixi resolves, blocked or slow where the mirror was needed. In "
                    f"{home_file}:\n\n    [mirrors]\n{block}\n\n(`pixi config edit --global` opens it). The lock "
                    "file keeps the public URLs; pixi rewrites them when it downloads."
                ),
                evidence={
                    "tool": "pixi",
                    "channels": [n for n, _, _ in gaps],
                    "conda_urls": [u for _, u, _ in gaps],
                    "pixi_mirrors": dict(pixi.mirrors),
                    "pixi_binary": pixi.binary,
                },
                commands=commands,
            )
        )
    pypi_covered = bool(pixi.pypi_index_url) or pixi.mirror_for("https://pypi.org/simple") is not None
    if pip is not None and not pypi_covered:
        url, source, _variant, line = pip
        where = f"{source} line {line}" if line else source
        out.append(
            Finding(
                check=CHECK_ID,
                status=Status.INFO,
                summary=f"pip uses {url} ({where}), but pixi's PyPI dependencies come from pypi.org: pixi never reads pip.conf",
                explanation=(
                    f"pixi installs `[pypi-dependencies]` itself and reads no pip configuration. To use pip's index, "
                    f'in {home_file}:\n\n    [pypi-config]\n    index-url = "{url}"\n\n'
                    "Nothing goes wrong for a workspace without PyPI dependencies."
                ),
                evidence={"tool": "pixi", "index_url": url, "pixi_binary": pixi.binary},
                commands=commands[1:],
            )
        )
    return out


def _conda_findings(conda: CondaFacts) -> list[Finding]:
    out = _conda_defaults_public(conda)
    return out + _conda_named_public(conda)


def _where(c: CondaChannel) -> str:
    return {"": "", "built-in": "conda's default"}.get(c.origin, c.origin) + (
        f" via {c.tool}" if c.tool != "conda" else ""
    )


def _conda_named_public(conda: CondaFacts) -> list[Finding]:
    everything = (*conda.channels, *conda.named)
    mirrored = [c for c in everything if not _public(c.url, PUBLIC_CONDA)]
    mirrored_defaults = [u for u in conda.default_channels if not _public(u, PUBLIC_CONDA)]
    if not mirrored and not mirrored_defaults:
        return []
    named_public = [
        c
        for c in everything
        if c.via in ("channel_alias", "custom_channels", "custom_multichannels", "url")
        and c.name != "defaults"
        and _public(c.url, PUBLIC_CONDA)
    ]
    alias_public = _public(conda.channel_alias, PUBLIC_CONDA)
    if not alias_public and not named_public:
        return []
    cloud = conda_cloud_base(conda)
    settings = model.merge([])
    channel_names = [
        (model.channel_name(c.url, settings) or c.name) if c.via == "url" else c.name for c in named_public
    ]
    names = list(dict.fromkeys(channel_names + (list(COMMON_NAMED) if alias_public else [])))
    names = [n for n in names if n not in conda.custom_channels or n in channel_names]
    if not names:
        return []
    mirror = (mirrored_defaults or [c.url for c in mirrored])[0]
    in_list = list(dict.fromkeys(c.name for c in named_public))
    by_alias = all(c.via == "channel_alias" and c.origin in conda.files and c.tool == "conda" for c in named_public)
    listing = "\n".join(
        f"- `{c.name}`"
        + (f" ({_where(c)})" if _where(c) else "")
        + f" -> `{c.url}` via {c.via}"
        + (f" (set in {c.setting})" if c.setting and c.setting != "built-in" else "")
        for c in named_public[:12]
    )
    summary = (
        (
            f"conda's named channels ({', '.join(in_list)}) bypass the mirror {_host(mirror)}: they resolve "
            f"through channel_alias {conda.channel_alias}"
        )
        if in_list and by_alias
        else (
            f"conda channels bypass the mirror {_host(mirror)}: "
            + "; ".join(
                f"{c.name} -> {_host(c.url)}" + (f" ({_where(c)})" if _where(c) else "") for c in named_public[:4]
            )
        )
        if in_list
        else (
            f"conda's defaults use the mirror {_host(mirror)}, but `-c conda-forge`/`-c pytorch` would go to "
            f"{conda.channel_alias}: no custom_channels or channel_alias points at the mirror"
        )
    )
    todo = (
        (
            "Map the named channels to the mirror's `cloud` tree in `~/.condarc`:\n\n    custom_channels:\n"
            + "".join(f"      {n}: {cloud}\n" for n in names)
            + "\n`gpudoctor fix conda.channels` writes exactly that (or `--mirror NAME|URL`)."
        )
        if cloud
        else (
            "The mirror's layout for named channels is not known from here: set `custom_channels` (name -> the "
            "mirror's base for named channels) or `channel_alias` in `~/.condarc` by hand, or pick a catalogue "
            "mirror: `gpudoctor fix conda.channels --mirror NAME`."
        )
    )
    return [
        Finding(
            check=CHECK_ID,
            status=Status.WARN,
            summary=summary,
            explanation=(
                f"A mirror set in `channels` URLs or `default_channels` covers `defaults` only: conda "
                f"resolves every named channel (`conda-forge`, `pytorch`, `-c NAME` on the command line) "
                f"through `channel_alias` (now `{conda.channel_alias}`) unless `custom_channels` names it. "
                f"Those downloads bypass the mirror."
                + (f"\n\nWhat conda fetches outside the mirror:\n\n{listing}" if listing else "")
                + f"\n\n{todo}"
            ),
            evidence={
                "tool": "conda",
                "mirror": mirror,
                "channel_alias": conda.channel_alias,
                "named": names,
                "cloud": cloud or "",
            },
            fixes=("conda.channels",) if cloud else (),
        )
    ]


def evaluate(facts: Facts) -> list[Finding]:
    from gpudoctor.checks import SkipCheck

    pip, uv, conda = facts.get("pip"), facts.get("uv"), facts.get("conda")
    p, u = pip_index(pip), uv_index(uv)
    out: list[Finding] = []
    shape = index_url_problem(uv.default_index) if isinstance(uv, UvFacts) and uv.default_origin != "built-in" else None
    if shape is not None and isinstance(uv, UvFacts):
        problem, suggested = shape
        problem = problem.replace("pip.conf is INI, not TOML, so the quotes", "the quotes")
        env = uv.default_origin in ("UV_DEFAULT_INDEX", "UV_INDEX_URL")
        out.append(
            Finding(
                check=CHECK_ID,
                status=Status.FAIL,
                summary=f"uv cannot use its default index {uv.default_index}: {problem.split(':')[0]}",
                explanation=(
                    f"uv's default index is `{uv.default_index}` (from {uv.default_origin}): "
                    f"{problem.replace('pip asks', 'uv asks')}. Every `uv pip install`/`uv sync` ends in "
                    f'"not found in the package registry".\n\nFix: '
                    + (
                        f"`export {uv.default_origin}={suggested}` where it is set."
                        if env
                        else f'`gpudoctor fix uv.index-url` sets `url = "{suggested}"` in {uv.default_origin}.'
                    )
                ),
                evidence={
                    "tool": "uv",
                    "index_url": suggested,
                    "uv_default": uv.default_index,
                    "uv_origin": uv.default_origin,
                },
                fixes=() if env or not suggested else ("uv.index-url",),
                commands=(Command(f"export {uv.default_origin}={suggested}", "the index URL uv can use"),)
                if env and suggested
                else (),
            )
        )
        u = (suggested, uv.default_origin) if suggested and not _public(suggested, PUBLIC_PYPI) else None
    if p and isinstance(uv, UvFacts) and u is None:
        out.append(_uv_finding(p, uv))
    u_any = u or uv_pip_index(uv)  # a mirror only `uv pip` uses still leaves pip on the public index
    if (
        u_any
        and isinstance(pip, PipFacts)
        and p is None
        and "index-url" not in pip.env
        and not pip.effective.get("no-index")
    ):
        out.append(_pip_finding(u_any, pip))
    if isinstance(conda, CondaFacts):
        out += _conda_findings(conda)
    out += _pixi_findings(facts.get("pixi"), conda, p)
    if out:
        return out
    using = {k: v for k, v in (("pip", p and p[0]), ("uv", u and u[0])) if v}
    if isinstance(conda, CondaFacts) and any(not _public(c.url, PUBLIC_CONDA) for c in conda.channels):
        using["conda"] = next(c.url for c in conda.channels if not _public(c.url, PUBLIC_CONDA))
    if not using:
        raise SkipCheck("no tool is pointed at a mirror (pip, uv and conda use their public defaults)")
    return [
        Finding(
            check=CHECK_ID,
            status=Status.OK,
            summary="the tools pointed at a mirror agree: " + ", ".join(f"{k} -> {_host(v)}" for k, v in using.items()),
            evidence=dict(using),
        )
    ]


CHECK = Check(
    id=CHECK_ID,
    title="pip, uv, conda and pixi use the same mirror (each reads only its own configuration)",
    needs=("pip", "uv", "conda", "pixi"),
    evaluate=evaluate,
)
