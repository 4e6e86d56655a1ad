"""Collector for the ``pixi`` domain: the ``config.toml`` files pixi reads, and where pixi is.

Order, lowest priority first (pixi's configuration reference, "The configuration of pixi
itself"): ``/etc/pixi/config.toml``, ``~/.config/pixi/config.toml``,
``$XDG_CONFIG_HOME/pixi/config.toml``, ``~/.pixi/config.toml``, ``$PIXI_HOME/config.toml``. A
workspace's own ``.pixi/config.toml`` is not read (gpudoctor does not look for the workspace).
Keys read: ``[mirrors]`` (snake_case and kebab-case spell it the same) and ``[pypi-config]``
``index-url`` (``pypi_config`` in pixi <= 0.20).
"""

from __future__ import annotations

import sys
from typing import Any

from gpudoctor.collect import CollectContext, Collector, find_tool
from gpudoctor.facts.mirrors import PixiFacts

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def config_paths(env, home: str) -> list[str]:
    """pixi's config files, lowest priority first (duplicates once, at their highest place)."""
    paths = ["/etc/pixi/config.toml", f"{home}/.config/pixi/config.toml"]
    if env.get("XDG_CONFIG_HOME"):
        paths.append(f"{env['XDG_CONFIG_HOME']}/pixi/config.toml")
    paths.append(f"{home}/.pixi/config.toml")
    if env.get("PIXI_HOME"):
        paths.append(f"{env['PIXI_HOME'].rstrip('/')}/config.toml")
    return list(reversed(dict.fromkeys(reversed(paths))))


def find_binary(files, env, home: str) -> str:
    """Path of the ``pixi`` executable inside the root (``$PATH``, ``$PIXI_HOME/bin``,
    ``~/.pixi/bin``, where pixi's installer puts it), or ""."""
    pixi_home = [f"{env['PIXI_HOME'].rstrip('/')}/bin"] if env.get("PIXI_HOME") else []
    return find_tool(files, env, "pixi", [*pixi_home, f"{home}/.pixi/bin"])


def collect_pixi(ctx: CollectContext) -> PixiFacts:
    files, env, home = ctx.system.files, ctx.system.env, ctx.system.home
    texts: dict[str, str] = {}
    mirrors: dict[str, tuple[str, ...]] = {}
    origins: dict[str, str] = {}
    index, index_origin = "", ""
    problems: list[str] = []
    for path in config_paths(env, home):
        text = files.read_text_or_none(path)
        if text is None:
            continue
        texts[path] = text
        try:
            doc: dict[str, Any] = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            problems.append(f"{path}: not valid TOML ({exc})")
            continue
        table = doc.get("mirrors")
        if isinstance(table, dict):
            for key, urls in table.items():
                if isinstance(urls, list) and all(isinstance(u, str) for u in urls):
                    mirrors[str(key)] = tuple(urls)
                    origins[str(key)] = path
        pypi = doc.get("pypi-config", doc.get("pypi_config"))
        url = pypi.get("index-url", pypi.get("index_url")) if isinstance(pypi, dict) else None
        if isinstance(url, str):
            index, index_origin = url, path
    return PixiFacts(
        files=texts,
        mirrors=mirrors,
        mirror_origins=origins,
        pypi_index_url=index,
        pypi_origin=index_origin,
        binary=find_binary(files, env, home),
        problems=tuple(problems),
    )


COLLECTOR = Collector(domain="pixi", collect=collect_pixi, timeout_s=10.0)
