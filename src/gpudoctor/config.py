"""Configuration files and environment variables for the commands' options.

Every option of ``gpudoctor check`` and ``gpudoctor gate`` can also come
from a ``GPUDOCTOR_<OPTION>`` environment variable (``--require-gpus`` is
``GPUDOCTOR_REQUIRE_GPUS``, ``--skip`` is ``GPUDOCTOR_SKIP``, several ids
separated by spaces) and from a TOML file. Precedence, highest first:

1. the command line;
2. ``GPUDOCTOR_*`` environment variables;
3. the project file: ``./gpudoctor.toml``, else ``[tool.gpudoctor]`` in ``./pyproject.toml``;
4. the user file: ``$XDG_CONFIG_HOME/gpudoctor/gpudoctor.toml`` (platformdirs' user config dir);
5. ``/etc/gpudoctor.toml``;
6. the built-in default.

``GPUDOCTOR_CONFIG=PATH`` names one file to use instead of 3-5 (``GPUDOCTOR_CONFIG=``
empty: no file at all). In a file, top-level keys apply to every command and a
``[check]`` or ``[gate]`` table to that command; keys are the long option
names (``require-gpus`` or ``require_gpus``)::

    probe-timeout = 15
    [gate]
    require-gpus = 8
    min-gpu-memory-gib = 79
    skip = ["dataloader.shm"]
    status-file = "/run/gpudoctor/status.json"
    [check]
    skip = ["apt.mirror"]
    strict = true

Values are merged per key: a project file's ``[gate] require-gpus`` overrides
``/etc``'s, while ``/etc``'s other keys still apply.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from gpudoctor.records import frozen_dataclass

__all__ = [
    "ENV_PREFIX",
    "SYSTEM_FILE",
    "Config",
    "ConfigError",
    "ConfigSource",
    "ConfiguredCommand",
    "FiniteFloatRange",
    "config_paths",
    "load_config",
]

ENV_PREFIX = "GPUDOCTOR"
SYSTEM_FILE = "/etc/gpudoctor.toml"
COMMANDS = ("check", "gate")


class ConfigError(click.UsageError):
    """A config file cannot be read or holds an unknown key or a bad value; the message names the file."""


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that also refuses NaN and the infinities (``nan`` compares false with every
    bound, so a plain range let ``--timeout nan`` through to a crash or a wait that never ends)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, bool):
            self.fail(f"{value!r} is not a number", param, ctx)
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return rv


@frozen_dataclass
class ConfigSource:
    """One file that was read: its path, kind (project/user/system/explicit) and table."""

    path: str
    kind: str
    data: Mapping[str, Any]


@frozen_dataclass
class Config:
    """The merged files, lowest precedence first in ``sources``."""

    sources: tuple[ConfigSource, ...] = ()

    def section(self, command: str) -> dict[str, tuple[Any, str, bool]]:
        """Option name (python form, ``require_gpus``) -> (value, file, from the command's table)
        for ``command``, files merged by precedence."""
        out: dict[str, tuple[Any, str, bool]] = {}
        for src in self.sources:  # lowest first: later ones override
            for key, value in src.data.items():
                if not isinstance(value, dict):
                    out[_norm(key)] = (value, src.path, False)
            table = src.data.get(command)
            if isinstance(table, dict):
                for key, value in table.items():
                    out[_norm(key)] = (value, src.path, True)
        return out

    def values(self, command: str) -> dict[str, Any]:
        """Option name -> value for ``command`` (see :meth:`section`)."""
        return {k: v for k, (v, _p, _t) in self.section(command).items()}


def _norm(key: str) -> str:
    return key.replace("-", "_")


def _user_file(env: Mapping[str, str]) -> Path:
    xdg = env.get("XDG_CONFIG_HOME")
    if xdg:
        return Path(xdg) / "gpudoctor" / "gpudoctor.toml"
    import platformdirs

    return Path(platformdirs.user_config_dir("gpudoctor")) / "gpudoctor.toml"


def config_paths(cwd: str | None = None, env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(path, kind) of the files consulted, highest precedence first (whether or not they exist)."""
    env = os.environ if env is None else env
    explicit = env.get(f"{ENV_PREFIX}_CONFIG")
    if explicit is not None:
        return [(explicit, "explicit")] if explicit else []
    here = Path(cwd or os.getcwd())
    project = here / "gpudoctor.toml"
    paths = [(str(project), "project")] if project.is_file() else [(str(here / "pyproject.toml"), "pyproject")]
    return paths + [(str(_user_file(env)), "user"), (SYSTEM_FILE, "system")]


def _read(path: str, kind: str) -> ConfigSource | None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        if kind == "explicit":
            raise ConfigError(f"GPUDOCTOR_CONFIG={path}: no such file") from None
        return None
    except (IsADirectoryError, PermissionError) as exc:
        if kind in ("user", "system") and isinstance(exc, PermissionError):
            return None  # another user's or root's file we may not read: not our configuration
        raise ConfigError(f"config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path}: not valid TOML ({exc})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path}: not UTF-8 text") from None
    if kind == "pyproject":
        data = data.get("tool", {}).get("gpudoctor")
        if not isinstance(data, dict):
            return None
    return ConfigSource(path, kind, data)


def load_config(cwd: str | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Read every config file that exists. Raises :class:`ConfigError` for an unreadable or invalid one."""
    sources = [s for s in (_read(p, k) for p, k in config_paths(cwd, env)) if s is not None]
    for src in sources:
        for key, value in src.data.items():
            if isinstance(value, dict) and key not in COMMANDS:
                raise ConfigError(
                    f"config file {src.path}: unknown table [{key}] (known: {', '.join(f'[{c}]' for c in COMMANDS)})"
                )
    return Config(tuple(reversed(sources)))


def _long_name(p: click.Option) -> str:
    """The option's documented name in python form: ``--format`` -> ``format`` (its parameter may be
    ``fmt``), ``--checks`` -> ``checks``."""
    longs = [o for o in p.opts if o.startswith("--")]
    return _norm(longs[0][2:]) if longs else str(p.name)


def _config_value(p: click.Option, key: str, value: Any, path: str) -> Any:
    """``value`` from config file ``path`` for option ``p``, checked for its type and range as the
    command line would be; :class:`ConfigError` naming the file and the key otherwise. TOML has
    booleans, NaN and infinities: ``require-gpus = true`` or ``timeout = nan`` are refused, never cast."""
    name = key.replace("_", "-")

    def bad(why: str) -> ConfigError:
        shown = str(value).lower() if isinstance(value, bool) else repr(value)
        return ConfigError(f"config file {path}: {name} = {shown}: {why}")

    if p.multiple:
        items = value.split() if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise bad("expected a list of strings")
        return items
    if p.is_flag:
        if not isinstance(value, bool):
            raise bad("expected true or false")
        return value
    if isinstance(p.type, click.types.IntParamType):
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("expected an integer")
    elif isinstance(p.type, click.types.FloatParamType):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad("expected a number")
        if not math.isfinite(value):
            raise bad("expected a finite number")
    elif not isinstance(value, str):
        raise bad("expected a string")
    try:
        return p.type.convert(value, p, None)
    except click.BadParameter as exc:
        raise bad(exc.format_message()) from None


class ConfiguredCommand(click.Command):
    """A click command whose options also come from ``GPUDOCTOR_*`` variables and the config files.

    Every option reads ``GPUDOCTOR_<LONG_OPTION_NAME>`` (``--format`` is ``GPUDOCTOR_FORMAT``,
    ``--require-gpus`` is ``GPUDOCTOR_REQUIRE_GPUS``; the parameter's own name, where it differs,
    still works); the files become the command's ``default_map``, after a check that every key
    names one of its options (its long name, or the parameter's name) and every value has the
    option's type and range (an unknown key or a bad value is a usage error naming the file).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for p in self.params:
            if isinstance(p, click.Option) and p.envvar is None and p.name:
                names = dict.fromkeys([f"{ENV_PREFIX}_{_long_name(p).upper()}", f"{ENV_PREFIX}_{p.name.upper()}"])
                p.envvar = list(names) if len(names) > 1 else next(iter(names))

    def make_context(self, info_name, args, parent=None, **extra):
        extra.setdefault("auto_envvar_prefix", ENV_PREFIX)
        if "default_map" not in extra and not (
            parent is not None and parent.default_map and self.name in parent.default_map
        ):
            config = load_config()
            options = [p for p in self.params if isinstance(p, click.Option) and p.name]
            known = {**{str(p.name): p for p in options}, **{_long_name(p): p for p in options}}
            table = {}
            for key, (value, path, in_table) in config.section(self.name or "").items():
                if key not in known:
                    if not in_table:
                        continue  # a top-level key for another command
                    raise ConfigError(
                        f"config file {path}: unknown option {key.replace('_', '-')!r} for "
                        f"`gpudoctor {self.name}` (known: "
                        f"{', '.join(sorted({_long_name(p).replace('_', '-') for p in options}))})"
                    )
                p = known[key]
                table[str(p.name)] = _config_value(p, key, value, path)
            extra["default_map"] = table
        return super().make_context(info_name, args, parent=parent, **extra)
