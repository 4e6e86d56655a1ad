"""Collector for the ``conda`` domain: every channel a user names, resolved as conda resolves it.

The model (search path, merge, resolution) is :mod:`gpudoctor.sources.conda`;
this module only reads: the condarc files conda reads (``condarc.d``
directories included), the channel variables, the ``.mambarc`` files of
mamba/micromamba, an ``environment.yml`` (the working directory's on the live
system, or ``extra["conda_env_files"]``: ``(name, text)`` pairs) and the
``-c NAME`` options of conda/mamba/micromamba commands in a build file
(``--dockerfile``). YAML is read with PyYAML (MIT).
"""

from __future__ import annotations

import os
from typing import Any

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts import Unavailable
from gpudoctor.facts.mirrors import CondaChannel, CondaFacts
from gpudoctor.sources import conda as model

# kept for callers of the old names
DEFAULT_CHANNELS = model.DEFAULT_CHANNELS
CHANNEL_ALIAS = model.CHANNEL_ALIAS
ENV_FILE_NAMES = ("environment.yml", "environment.yaml")


def _load(path: str, text: str) -> dict[str, Any] | str:
    """The parsed document, or why conda cannot read it."""
    import yaml  # on first use: most machines have no .condarc, and every `check` runs this collector

    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        return f"{path} is not valid YAML: {str(exc).splitlines()[0]}"
    except RecursionError:
        return f"{path} is not valid YAML: nested too deeply"
    if not isinstance(doc, dict):
        return f"{path}: its top level is a {type(doc).__name__}, not a mapping of settings; conda cannot read it"
    for key in model.MAPS:
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            hint = (
                " (write `name: url` lines under it, without `- `)"
                if isinstance(doc[key], list) and all(isinstance(v, dict) for v in doc[key])
                else ""
            )
            return (
                f"{path}: {key} is a {type(doc[key]).__name__}, not a mapping{hint}; conda refuses it "
                f"(InvalidTypeError: Valid types: dict)"
            )
    for key in model.SEQUENCES:
        if doc.get(key) is not None and not isinstance(doc[key], list):
            return f"{path}: {key} is a {type(doc[key]).__name__}, not a list of channels; conda refuses it"
    if doc.get("channel_alias") is not None and not isinstance(doc["channel_alias"], str):
        return f"{path}: channel_alias is a {type(doc['channel_alias']).__name__}, not a URL; conda refuses it"
    return doc


def _expand(files: Any, paths: list[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        if p.endswith("/"):
            d = p.rstrip("/")
            try:
                names = sorted(files.listdir(d)) if files.is_dir(d) else []
            except OSError:
                names = []
            out += [f"{d}/{n}" for n in names if n.endswith((".yml", ".yaml"))]
        else:
            out.append(p)
    return out


def collect_conda(ctx: CollectContext) -> CondaFacts | Unavailable:
    files, env, home = ctx.system.files, ctx.system.env, ctx.system.home
    root = model.root_prefix(env, home, files.is_dir)
    conda_paths = _expand(files, model.search_path(env, home, root))
    mamba_paths = _expand(files, model.search_path(env, home, root, mamba=True))
    texts: dict[str, str] = {}
    docs: dict[str, dict[str, Any]] = {}
    for path in dict.fromkeys(conda_paths + mamba_paths):
        text = files.read_text_or_none(path)
        if text is None:
            continue
        doc = _load(path, text)
        if isinstance(doc, str):
            return Unavailable(doc)
        texts[path] = text
        docs[path] = doc
    conda_sources = [model.file_source(p, docs[p], texts[p]) for p in conda_paths if p in docs]
    envsrc = model.env_source(env)
    if envsrc is not None:
        conda_sources.append(envsrc)
    env_files = _env_files(ctx)
    build = _build_channels(ctx)
    if not conda_sources and not env_files and not build:
        return Unavailable("no .condarc found (conda is not configured here)")
    settings = model.merge(conda_sources)
    channels: list[CondaChannel] = []
    for name, origin in settings.channels:
        channels.extend(model.resolve(name, settings, origin))
    named: list[CondaChannel] = []
    for origin, names in env_files:
        for n in names:
            named.extend(model.resolve(n, settings, origin))
    mamba_files = [p for p in mamba_paths if p in docs and model.mamba_only(p)]
    mamba_env = model.env_source(env, model.MAMBA_ENV_KEYS)
    mamba_settings = settings
    if mamba_files or mamba_env is not None:
        msrc = [model.file_source(p, docs[p], texts[p]) for p in mamba_paths if p in docs]
        msrc += [s for s in (envsrc, mamba_env) if s is not None]
        mamba_settings = model.merge(msrc)
        known = {(c.name, c.url) for c in channels}
        for name, origin in mamba_settings.channels:
            named.extend(
                c
                for c in model.resolve(name, mamba_settings, origin, tool="micromamba")
                if (c.name, c.url) not in known
            )
    for origin, tool, names in build:
        s = mamba_settings if tool != "conda" else settings
        for n in names:
            named.extend(model.resolve(n, s, origin, tool=tool))
    seen: set[tuple[str, str, str]] = set()
    named_unique = []
    for c in named:
        if (c.name, c.url, c.origin) not in seen:
            seen.add((c.name, c.url, c.origin))
            named_unique.append(c)
    return CondaFacts(
        files=texts,
        channels=tuple(channels),
        default_channels=tuple(u for u, _ in settings.default_channels),
        custom_channels=settings.custom_urls(),
        channel_alias=settings.channel_alias[0],
        user_condarc=f"{home}/.condarc",
        named=tuple(named_unique),
        root_prefix=root,
        prefix=env.get("CONDA_PREFIX", ""),
        env={k: env[k] for k in (*model.ENV_KEYS, *model.MAMBA_ENV_KEYS) if env.get(k)},
        multichannels={k: v for k, (v, _) in settings.custom_multichannels.items()},
        channel_alias_origin=settings.channel_alias[1],
    )


def _env_files(ctx: CollectContext) -> list[tuple[str, list[str]]]:
    """``(origin, channel names)`` of the environment files in view."""
    found: list[tuple[str, str]] = []
    given = ctx.options.extra.get("conda_env_files") or ()
    for entry in given:
        if isinstance(entry, str):  # a path inside the root
            text = ctx.system.files.read_text_or_none(entry)
            if text is not None:
                found.append((entry, text))
        else:
            found.append(entry)
    if not given and ctx.system.files.is_live:
        for fname in ENV_FILE_NAMES:
            path = os.path.join(os.getcwd(), fname)
            try:
                with open(path, encoding="utf-8") as fh:
                    found.append((path, fh.read()))
            except (OSError, UnicodeDecodeError):
                continue
    out: list[tuple[str, list[str]]] = []
    if not found:
        return out
    import yaml

    for name, text in found:
        try:
            doc = yaml.safe_load(text)
        except (yaml.YAMLError, RecursionError):
            continue
        names = model.env_file_channels(doc)
        if names:
            out.append((name, names))
    return out


def _build_channels(ctx: CollectContext) -> list[tuple[str, str, list[str]]]:
    """``(origin, tool, -c names)`` of conda/mamba/micromamba commands in the build file, and of the
    commands given in ``extra["conda_commands"]`` (argv lists: what the user ran; origin ``command line``)."""
    out: list[tuple[str, str, list[str]]] = []
    for argv in ctx.options.extra.get("conda_commands") or ():
        found = model.command_channels([str(a) for a in argv])
        if found is not None:
            out.append(("command line", found[0], found[1]))
    dockerfile = ctx.options.extra.get("dockerfile")
    if not dockerfile:
        return out
    from gpudoctor.sources.dockerfile import commands

    name, text = dockerfile
    for cmd in commands(name, text).commands:
        found = model.command_channels(cmd.argv)
        if found is not None:
            tool, names, _override = found
            out.append((cmd.origin, tool, names))
    return out


COLLECTOR = Collector(domain="conda", collect=collect_conda, timeout_s=10.0)
