"""Collector for the ``conda`` domain: channels in conda's search order, resolved to URLs.

Search path (conda ``SEARCH_PATH``, Linux; later files override earlier):
``/etc/conda/.condarc``, ``/etc/conda/condarc``, ``/var/lib/conda/.condarc``,
``/var/lib/conda/condarc``, ``$CONDA_ROOT/.condarc``,
``$XDG_CONFIG_HOME/conda/.condarc``, ``~/.config/conda/.condarc``,
``~/.conda/.condarc``, ``~/.condarc``, ``$CONDA_PREFIX/.condarc``, ``$CONDARC``.
Keys (conda docs, "Settings"): ``channels`` (``defaults`` expands to
``default_channels``), ``default_channels`` (upstream
``https://repo.anaconda.com/pkgs/main`` and ``/r``), ``custom_channels``
(name -> base URL), ``channel_alias`` (default ``https://conda.anaconda.org``).
YAML is read with PyYAML (MIT).
"""

from __future__ import annotations

from typing import Any

import yaml

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts import Unavailable
from gpudoctor.facts.mirrors import CondaChannel, CondaFacts

DEFAULT_CHANNELS = ("https://repo.anaconda.com/pkgs/main", "https://repo.anaconda.com/pkgs/r")
CHANNEL_ALIAS = "https://conda.anaconda.org"


def search_path(env, home: str) -> list[str]:
    """condarc files conda reads, earliest (lowest precedence) first."""
    paths = ["/etc/conda/.condarc", "/etc/conda/condarc", "/var/lib/conda/.condarc", "/var/lib/conda/condarc"]
    if env.get("CONDA_ROOT"):
        paths += [f"{env['CONDA_ROOT']}/.condarc", f"{env['CONDA_ROOT']}/condarc"]
    xdg = env.get("XDG_CONFIG_HOME") or f"{home}/.config"
    paths += [f"{xdg}/conda/.condarc", f"{xdg}/conda/condarc"]
    if f"{home}/.config" != xdg:
        paths += [f"{home}/.config/conda/.condarc"]
    paths += [f"{home}/.conda/.condarc", f"{home}/.conda/condarc", f"{home}/.condarc"]
    if env.get("CONDA_PREFIX"):
        paths += [f"{env['CONDA_PREFIX']}/.condarc", f"{env['CONDA_PREFIX']}/condarc"]
    if env.get("CONDARC"):
        paths.append(env["CONDARC"])
    return list(dict.fromkeys(paths))


def resolve(name: str, default_channels, custom: dict[str, str], alias: str) -> list[CondaChannel]:
    """URLs conda fetches for channel ``name``."""
    if name == "defaults":
        return [CondaChannel(name, u.rstrip("/"), "default_channels") for u in default_channels]
    if "://" in name:
        return [CondaChannel(name, name.rstrip("/"), "url")]
    if name in custom:
        return [CondaChannel(name, f"{custom[name].rstrip('/')}/{name}", "custom_channels")]
    return [CondaChannel(name, f"{alias.rstrip('/')}/{name}", "channel_alias")]


def collect_conda(ctx: CollectContext) -> CondaFacts | Unavailable:
    files, env, home = ctx.system.files, ctx.system.env, ctx.system.home
    texts: dict[str, str] = {}
    merged: dict[str, Any] = {}
    for path in search_path(env, home):
        text = files.read_text_or_none(path)
        if text is None:
            continue
        texts[path] = text
        try:
            doc = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            return Unavailable(f"{path} is not valid YAML: {str(exc).splitlines()[0]}")
        except RecursionError:
            return Unavailable(f"{path} is not valid YAML: nested too deeply")
        if not isinstance(doc, dict):
            return Unavailable(
                f"{path}: its top level is a {type(doc).__name__}, not a mapping of settings; conda cannot read it"
            )
        merged.update(doc)
    if not texts:
        return Unavailable("no .condarc found (conda is not configured here)")
    default_channels = tuple(str(u) for u in (merged.get("default_channels") or DEFAULT_CHANNELS))
    custom = {str(k): str(v) for k, v in (merged.get("custom_channels") or {}).items()}
    alias = str(merged.get("channel_alias") or CHANNEL_ALIAS)
    names = merged.get("channels") or ["defaults"]
    channels: list[CondaChannel] = []
    for name in names:
        channels.extend(resolve(str(name), default_channels, custom, alias))
    return CondaFacts(
        files=texts,
        channels=tuple(channels),
        default_channels=default_channels,
        custom_channels=custom,
        channel_alias=alias,
        user_condarc=f"{home}/.condarc",
    )


COLLECTOR = Collector(domain="conda", collect=collect_conda, timeout_s=10.0)
