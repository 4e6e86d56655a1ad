"""Collector for the ``uv`` domain: which index uv resolves against, and where that was set.

Discovery (uv docs, "Configuration files" / "Environment variables"):
``UV_CONFIG_FILE`` replaces all files; ``UV_NO_CONFIG`` disables them;
otherwise the project file (nearest ``uv.toml`` or ``pyproject.toml`` with
``[tool.uv]`` from the working directory up; live system only), the user
file ``$XDG_CONFIG_HOME/uv/uv.toml`` (``~/.config/uv/uv.toml``) and the first
system file of ``$XDG_CONFIG_DIRS/uv/uv.toml`` (``/etc/xdg/uv/uv.toml``) and
``/etc/uv/uv.toml``. Precedence: environment (``UV_DEFAULT_INDEX``, then the
deprecated ``UV_INDEX_URL``) > project > user > system. Index keys:
``[[index]]`` tables with ``url`` and ``default = true``, legacy
``index-url`` / ``extra-index-url``, and ``[pip] index-url``, which only ``uv pip`` reads
(uv's settings reference, "pip": ignored outside the ``uv pip`` namespace) and which wins there
over the top-level keys (uv's ``PipSettings::combine`` prefers ``tool.uv.pip.index-url`` over
``tool.uv.index-url``).
"""

from __future__ import annotations

import os
import sys
from pathlib import PurePosixPath
from typing import Any

from gpudoctor.collect import CollectContext, Collector, find_tool
from gpudoctor.facts.mirrors import UvFacts, UvIndex

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PYPI = "https://pypi.org/simple"


def _indexes(table: dict[str, Any], origin: str) -> list[UvIndex]:
    out: list[UvIndex] = []
    for entry in table.get("index", []) or []:
        if isinstance(entry, dict) and isinstance(entry.get("url"), str):
            out.append(UvIndex(entry["url"], bool(entry.get("default", False)), origin, "index"))
    if isinstance(table.get("index-url"), str):
        out.append(UvIndex(table["index-url"], True, origin, "index-url"))
    for url in table.get("extra-index-url", []) or []:
        if isinstance(url, str):
            out.append(UvIndex(url, False, origin, "extra-index-url"))
    pip = table.get("pip")
    if isinstance(pip, dict) and isinstance(pip.get("index-url"), str):
        out.append(UvIndex(pip["index-url"], True, origin, "pip.index-url"))
    return out


def user_config_path(env, home: str) -> str:
    """``$XDG_CONFIG_HOME/uv/uv.toml`` or ``~/.config/uv/uv.toml``."""
    base = env.get("XDG_CONFIG_HOME") or f"{home}/.config"
    return f"{base}/uv/uv.toml"


def system_candidates(env) -> list[str]:
    """System ``uv.toml`` files in uv's order (the first that exists is read)."""
    system_dirs = [p for p in (env.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":") if p]
    return [f"{p}/uv/uv.toml" for p in system_dirs] + ["/etc/uv/uv.toml"]


def find_binary(files, env, home: str) -> str:
    """Path of the ``uv`` executable inside the root (``$PATH``, the active venv's or conda env's
    ``bin``, ``~/.local/bin``, ``~/.cargo/bin``), or ""."""
    envs = [f"{env[v]}/bin" for v in ("VIRTUAL_ENV", "CONDA_PREFIX") if env.get(v)]
    return find_tool(files, env, "uv", [*envs, f"{home}/.local/bin", f"{home}/.cargo/bin"])


def collect_uv(ctx: CollectContext) -> UvFacts:
    files, env, home = ctx.system.files, ctx.system.env, ctx.system.home
    texts: dict[str, str] = {}
    ordered: list[tuple[str, dict[str, Any]]] = []  # highest precedence first
    problems: list[str] = []

    def load(path: str, pyproject: bool = False) -> dict[str, Any] | None:
        text = files.read_text_or_none(path)
        if text is None:
            return None
        texts[path] = text
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            problems.append(f"{path}: not valid TOML ({exc})")
            return None
        if pyproject:
            return ((doc.get("tool") or {}).get("uv")) if isinstance(doc.get("tool"), dict) else None
        if "tool" in doc:  # uv.toml takes its settings at the top level; uv rejects unknown fields
            problems.append(
                f"{path}: has a `[tool...]` table (`[tool.uv]`, `[[tool.uv.index]]`), the pyproject.toml form; "
                f'uv stops with "Failed to parse `uv.toml`: unknown field `tool`". In uv.toml the settings go '
                f"at the top level (`[[index]]`, `index-url = ...`)"
            )
            return None
        return doc

    user = user_config_path(env, home)
    no_config = bool(env.get("UV_NO_CONFIG"))
    if env.get("UV_CONFIG_FILE"):
        doc = load(env["UV_CONFIG_FILE"])
        if doc is not None:
            ordered.append((env["UV_CONFIG_FILE"], doc))
    elif not no_config:
        if files.is_live:
            cur = PurePosixPath(os.getcwd())
            for d in [cur, *cur.parents]:
                doc = load(str(d / "uv.toml"))
                if doc is None:
                    doc = load(str(d / "pyproject.toml"), pyproject=True)
                    if doc is None:
                        continue
                    ordered.append((str(d / "pyproject.toml"), doc))
                else:
                    ordered.append((str(d / "uv.toml"), doc))
                break
        doc = load(user)
        if doc is not None:
            ordered.append((user, doc))
        for path in system_candidates(env):
            doc = load(path)
            if doc is not None:
                ordered.append((path, doc))
            if path in texts:  # uv reads the first system file that exists, even one it then fails on
                break
    indexes: list[UvIndex] = []
    for var in ("UV_DEFAULT_INDEX", "UV_INDEX_URL"):
        if env.get(var):
            indexes.append(UvIndex(env[var].strip(), True, var, var))
    for var in ("UV_INDEX", "UV_EXTRA_INDEX_URL"):
        for url in (env.get(var) or "").split():
            indexes.append(
                UvIndex(
                    url.split("=", 1)[-1] if "=" in url and "://" not in url.split("=", 1)[0] else url, False, var, var
                )
            )
    for origin, doc in ordered:
        indexes.extend(_indexes(doc, origin))
    # `[pip] index-url` is read by `uv pip` only, where it wins over the top-level settings of every
    # file; the project commands (uv add, lock, sync, run) never see it. The variables reach both.
    default = next((i for i in indexes if i.default and not i.key.startswith("pip.")), None)
    pip_default = next(
        (i for i in indexes if i.default and i.key in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "pip.index-url")), None
    )
    pip_differs = pip_default is not None and pip_default is not default
    return UvFacts(
        indexes=tuple(indexes),
        default_index=default.url if default else PYPI,
        default_origin=default.origin if default else "built-in",
        pip_default_index=pip_default.url if pip_default is not None and pip_differs else "",
        pip_default_origin=pip_default.origin if pip_default is not None and pip_differs else "",
        files=texts,
        user_config=user,
        no_config=no_config,
        system_config=next((p for p in system_candidates(env) if files.is_file(p)), "/etc/uv/uv.toml"),
        binary=find_binary(files, env, home),
        problems=tuple(problems),
        http_timeout=env.get("UV_HTTP_TIMEOUT", "") or env.get("UV_REQUEST_TIMEOUT", ""),
    )


COLLECTOR = Collector(domain="uv", collect=collect_uv, timeout_s=10.0)
