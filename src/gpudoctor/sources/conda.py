"""conda (and mamba/micromamba) channels, modelled the way conda resolves them.

Reading (pure: the collector hands in file texts):

- **Search path** (conda ``base/constants.py`` ``SEARCH_PATH``, Linux; later
  = higher precedence): ``/etc/conda/{.condarc,condarc,condarc.d/}``,
  ``/var/lib/conda/{...}``, ``$CONDA_ROOT/{...}`` (the base install: the
  ``CONDA_ROOT`` variable, else the install ``$CONDA_EXE`` lives in),
  ``$XDG_CONFIG_HOME/conda/{...}``, ``~/.config/conda/{...}``,
  ``~/.conda/{...}``, ``~/.condarc``, ``$CONDA_PREFIX/{...}``, ``$CONDARC``;
  a ``condarc.d/`` directory contributes its ``*.yml``/``*.yaml`` files in
  name order. mamba 2 / micromamba (libmamba ``compute_default_rc_sources``)
  read the same files plus ``.mambarc`` next to the system and root ones,
  ``~/.config/mamba/{.mambarc,mambarc,mambarc.d/}``, ``~/.mamba/...``,
  ``~/.mambarc``, ``$MAMBARC`` and ``$CONDA_PREFIX/.mambarc``; their root is
  ``$MAMBA_ROOT_PREFIX``.
- **Merging** (conda ``common/configuration.py``): a sequence
  (``channels``, ``default_channels``) is the concatenation of every file's
  list, the highest-precedence file first, duplicates dropped — so a
  ``channels`` list in ``~/.condarc`` does *not* replace the one in
  ``/etc/conda/.condarc``, it goes in front of it; a map (``custom_channels``,
  ``custom_multichannels``) is merged key by key, later files winning; a
  scalar (``channel_alias``) is the last file's value. A key marked
  ``#!final`` stops files of higher precedence from changing it. Environment
  variables (``CONDA_CHANNELS``, comma separated; ``CONDA_DEFAULT_CHANNELS``;
  ``CONDA_CHANNEL_ALIAS``) rank above every file.
- **Resolution** (conda ``models/channel.py``): ``defaults`` and each
  ``custom_multichannels`` name expand to their members; a URL is fetched as
  written; a name found in ``custom_channels`` (longest ``/``-prefix, e.g.
  ``pytorch/label/nightly`` under ``pytorch``) is ``<base>/<name>``; every
  other name is ``<channel_alias>/<name>``.

Editing: :func:`replace_blocks` (top-level keys) and :func:`replace_list_item`
(one entry of a list), both line editors that keep every other byte.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any
from urllib.parse import urlsplit

from gpudoctor.facts.mirrors import CondaChannel
from gpudoctor.records import frozen_dataclass

CHANNEL_ALIAS = "https://conda.anaconda.org"
DEFAULT_CHANNELS = ("https://repo.anaconda.com/pkgs/main", "https://repo.anaconda.com/pkgs/r")
#: domains of Anaconda's public hosts (repo.anaconda.com, conda.anaconda.org)
PUBLIC_HOSTS = ("anaconda.com", "anaconda.org")
BUILT_IN = "built-in"
SEQUENCES = ("channels", "default_channels")
MAPS = ("custom_channels", "custom_multichannels")
SCALARS = ("channel_alias",)
#: environment variables conda reads for these keys (sequences are comma separated)
ENV_KEYS = {
    "CONDA_CHANNELS": "channels",
    "CONDA_DEFAULT_CHANNELS": "default_channels",
    "CONDA_CHANNEL_ALIAS": "channel_alias",
}
MAMBA_ENV_KEYS = {"MAMBA_CHANNELS": "channels", "MAMBA_CHANNEL_ALIAS": "channel_alias"}
#: common base installs, tried when neither CONDA_ROOT nor CONDA_EXE says where conda lives
ROOT_CANDIDATES = ("/opt/conda", "/opt/miniconda3", "/opt/miniforge3", "/opt/anaconda3", "/usr/local/miniconda3")
HOME_ROOTS = ("miniconda3", "miniforge3", "anaconda3", "mambaforge")
_FINAL = re.compile(r"^(?P<key>[A-Za-z_][A-Za-z0-9_]*)\s*:.*#!final\s*$")
_TOP = re.compile(r"^(?P<key>[A-Za-z_][A-Za-z0-9_]*)\s*:")


def public(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return any(host == d or host.endswith("." + d) for d in PUBLIC_HOSTS)


def host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def netloc(url: str) -> str:
    """``host[:port]`` in lower case (two mirrors on one host differ by port)."""
    return urlsplit(url).netloc.rsplit("@", 1)[-1].lower()


# --------------------------------------------------------------------------- where


def root_prefix(env: Mapping[str, str], home: str, is_dir: Callable[[str], bool]) -> str:
    """The base install whose ``.condarc`` conda reads as ``$CONDA_ROOT``; "" when none is found."""
    if env.get("CONDA_ROOT"):
        return env["CONDA_ROOT"]
    exe = env.get("CONDA_EXE") or env.get("_CONDA_EXE")
    if exe:
        return posixpath.dirname(posixpath.dirname(exe))
    for cand in (*ROOT_CANDIDATES, *(f"{home}/{d}" for d in HOME_ROOTS)):
        if is_dir(f"{cand}/conda-meta"):
            return cand
    return ""


def search_path(env: Mapping[str, str], home: str, root: str = "", mamba: bool = False) -> list[str]:
    """Files conda (``mamba=True``: micromamba) reads, lowest precedence first; ``.../condarc.d/``
    entries are directories."""

    def trio(d: str) -> list[str]:
        return [f"{d}/.condarc", f"{d}/condarc", f"{d}/condarc.d/"]

    out: list[str] = []
    for d in ("/etc/conda", "/var/lib/conda"):
        out += trio(d) + ([f"{d}/.mambarc"] if mamba else [])
    root = (env.get("MAMBA_ROOT_PREFIX") or root) if mamba else root
    if root:
        out += trio(root) + ([f"{root}/.mambarc"] if mamba else [])
    if env.get("XDG_CONFIG_HOME"):
        out += trio(f"{env['XDG_CONFIG_HOME']}/conda")
    out += trio(f"{home}/.config/conda") + trio(f"{home}/.conda") + [f"{home}/.condarc"]
    prefix = env.get("CONDA_PREFIX", "")
    if mamba:
        cfg = env.get("XDG_CONFIG_HOME") or f"{home}/.config"
        out += [f"{cfg}/mamba/.mambarc", f"{cfg}/mamba/mambarc", f"{cfg}/mamba/mambarc.d/"]
        out += [f"{home}/.mamba/.mambarc", f"{home}/.mamba/mambarc", f"{home}/.mamba/mambarc.d/", f"{home}/.mambarc"]
        if env.get("CONDARC"):
            out.append(env["CONDARC"])
        if env.get("MAMBARC"):
            out.append(env["MAMBARC"])
        if prefix:
            out += trio(prefix) + [f"{prefix}/.mambarc"]
    else:
        if prefix:
            out += trio(prefix)
        if env.get("CONDARC"):
            out.append(env["CONDARC"])
    seen: set[str] = set()
    kept: list[str] = []
    for p in out:  # a location listed twice counts once, at its lowest precedence (conda's IndexSet)
        if p not in seen:
            seen.add(p)
            kept.append(p)
    return kept


def mamba_only(path: str) -> bool:
    return "mambarc" in posixpath.basename(path.rstrip("/")) or "/mambarc.d/" in path or "/.mamba/" in path


# --------------------------------------------------------------------------- merge


@frozen_dataclass
class Source:
    """One configuration source: a file (path) or the environment (``CONDA_CHANNELS`` ...)."""

    path: str
    doc: Mapping[str, Any]
    final: frozenset[str] = frozenset()
    origins: Mapping[str, str] = field(default_factory=dict)  # key -> variable name (environment source)

    def origin(self, key: str) -> str:
        return self.origins.get(key, self.path)


def file_source(path: str, doc: Mapping[str, Any], text: str) -> Source:
    final = frozenset(m.group("key") for m in (_FINAL.match(line) for line in text.splitlines()) if m)
    return Source(path, doc, final)


def env_source(env: Mapping[str, str], keys: Mapping[str, str] = ENV_KEYS) -> Source | None:
    doc: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for var, key in keys.items():
        value = env.get(var, "").strip()
        if not value:
            continue
        doc[key] = [v.strip() for v in value.split(",") if v.strip()] if key in SEQUENCES else value
        origins[key] = var
    return Source("environment", doc, frozenset(), origins) if doc else None


@frozen_dataclass
class Settings:
    """The merged channel settings, each value with the source that gave it."""

    channels: tuple[tuple[str, str], ...]
    default_channels: tuple[tuple[str, str], ...]
    custom_channels: dict[str, tuple[str, str]]
    custom_multichannels: dict[str, tuple[tuple[str, ...], str]]
    channel_alias: tuple[str, str]

    def custom_urls(self) -> dict[str, str]:
        return {k: v for k, (v, _) in self.custom_channels.items()}


def _relevant(sources: Sequence[Source], key: str) -> list[Source]:
    having = [s for s in sources if s.doc.get(key) not in (None, "", [], {})]
    for i, s in enumerate(having):
        if key in s.final:
            return having[: i + 1]
    return having


def _as_list(value: Any) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if v is not None]
    return [str(value)]


def merge(sources: Sequence[Source]) -> Settings:
    """conda's merge of ``sources`` (lowest precedence first); see the module docstring."""
    seqs: dict[str, list[tuple[str, str]]] = {}
    for key in SEQUENCES:
        out: list[tuple[str, str]] = []
        seen: set[str] = set()
        for s in reversed(_relevant(sources, key)):
            for v in _as_list(s.doc[key]):
                if v not in seen:
                    seen.add(v)
                    out.append((v, s.origin(key)))
        seqs[key] = out
    custom: dict[str, tuple[str, str]] = {}
    for s in _relevant(sources, "custom_channels"):
        value = s.doc["custom_channels"]
        if isinstance(value, Mapping):
            custom.update({str(k): (str(v), s.origin("custom_channels")) for k, v in value.items()})
    multi: dict[str, tuple[tuple[str, ...], str]] = {}
    for s in _relevant(sources, "custom_multichannels"):
        value = s.doc["custom_multichannels"]
        if isinstance(value, Mapping):
            multi.update({str(k): (tuple(_as_list(v)), s.origin("custom_multichannels")) for k, v in value.items()})
    alias_src = _relevant(sources, "channel_alias")
    alias = (str(alias_src[-1].doc["channel_alias"]), alias_src[-1].origin("channel_alias")) if alias_src else None
    return Settings(
        channels=tuple(seqs["channels"]) or (("defaults", BUILT_IN),),
        default_channels=tuple(seqs["default_channels"]) or tuple((u, BUILT_IN) for u in DEFAULT_CHANNELS),
        custom_channels=custom,
        custom_multichannels=multi,
        channel_alias=alias or (CHANNEL_ALIAS, BUILT_IN),
    )


# --------------------------------------------------------------------------- resolve


def _custom_match(name: str, custom: Mapping[str, tuple[str, str]]) -> str | None:
    parts = name.split("/")
    for n in range(len(parts), 0, -1):
        key = "/".join(parts[:n])
        if key in custom:
            return key
    return None


def resolve(name: str, s: Settings, origin: str = "", tool: str = "conda", _depth: int = 0) -> list[CondaChannel]:
    """The URLs conda fetches for channel ``name`` (as written by the user at ``origin``)."""
    name = name.strip()
    if name == "defaults" or (name in s.custom_multichannels and _depth < 4):
        members = (
            [(u, o) for u, o in s.default_channels]
            if name == "defaults"
            else [(m, s.custom_multichannels[name][1]) for m in s.custom_multichannels[name][0]]
        )
        out: list[CondaChannel] = []
        for member, set_by in members:
            if "://" in member:
                via = "default_channels" if name == "defaults" else "custom_multichannels"
                out.append(CondaChannel(name, member.rstrip("/"), via, origin=origin, setting=set_by, tool=tool))
            else:
                out += resolve(member, s, origin, tool, _depth + 1)
        return out
    if "://" in name:
        return [CondaChannel(name, name.rstrip("/"), "url", origin=origin, tool=tool)]
    key = _custom_match(name, s.custom_channels)
    if key is not None:
        base, set_by = s.custom_channels[key]
        url = f"{base.rstrip('/')}/{name}"
        return [CondaChannel(name, url, "custom_channels", origin=origin, setting=set_by, tool=tool)]
    alias, set_by = s.channel_alias
    return [
        CondaChannel(name, f"{alias.rstrip('/')}/{name}", "channel_alias", origin=origin, setting=set_by, tool=tool)
    ]


def channel_name(url: str, s: Settings) -> str | None:
    """The channel name a URL stands for (``https://conda.anaconda.org/conda-forge`` -> ``conda-forge``,
    ``https://m.example.org/anaconda/cloud/pytorch/`` -> ``pytorch``), or None for ``pkgs/...`` trees."""
    path = urlsplit(url.rstrip("/")).path
    for base in [s.channel_alias[0], CHANNEL_ALIAS, *(b for b, _ in s.custom_channels.values())]:
        b = base.rstrip("/")
        if url.rstrip("/").startswith(b + "/"):
            return url.rstrip("/")[len(b) + 1 :]
    if "/pkgs/" in path + "/":
        return None
    if "/cloud/" in path:
        return path.split("/cloud/", 1)[1]
    return path.strip("/").rsplit("/", 1)[-1] or None


# --------------------------------------------------------------------------- other places channels are named


def env_file_channels(doc: Any) -> list[str]:
    """``channels`` of an ``environment.yml`` document (``nodefaults`` dropped: it only removes ``defaults``)."""
    if not isinstance(doc, Mapping):
        return []
    return [c for c in _as_list(doc.get("channels") or []) if c != "nodefaults"]


CONDA_TOOLS = ("conda", "mamba", "micromamba")


def command_channels(argv: Sequence[str]) -> tuple[str, list[str], bool] | None:
    """``(tool, channels, override)`` for a conda/mamba/micromamba install/create/update/env command
    (``-c NAME``, ``--channel NAME``, ``--channel=NAME``, ``-cNAME``; ``--override-channels``)."""
    if not argv:
        return None
    tool = posixpath.basename(argv[0])
    if tool not in CONDA_TOOLS:
        return None
    chans: list[str] = []
    override = False
    it = iter(range(1, len(argv)))
    for i in it:
        a = argv[i]
        if a in ("-c", "--channel") and i + 1 < len(argv):
            chans.append(argv[i + 1])
            next(it, None)
        elif a.startswith("--channel="):
            chans.append(a.split("=", 1)[1])
        elif a.startswith("-c") and len(a) > 2 and not a.startswith("--"):
            chans.append(a[2:])
        elif a == "--override-channels":
            override = True
    return (tool, chans, override) if chans else None


# --------------------------------------------------------------------------- editing


def replace_blocks(text: str, blocks: Mapping[str, list[str]]) -> str:
    """``text`` with the top-level YAML keys in ``blocks`` replaced by the given lines (appended if absent)."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    skipping = False
    done: set[str] = set()
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


def replace_list_item(text: str, key: str, old: str, new: str) -> str:
    """``text`` with the entry ``old`` of the top-level list ``key`` replaced by ``new`` (block or flow
    style, quoted or not, with or without a trailing slash); every other byte kept."""
    lines = text.splitlines(keepends=True)
    pat = re.compile(r"(?P<pre>(?:^|[\s\[,'\"]))" + re.escape(old.rstrip("/")) + r"/?(?P<post>(?=[\s\],'\"#]|$))")
    inside = False
    for i, line in enumerate(lines):
        m = _TOP.match(line)
        if m:
            inside = m.group("key") == key
            if inside:
                head, _, rest = line.partition(":")
                lines[i] = head + ":" + pat.sub(lambda x: x.group("pre") + new, rest)
            continue
        if inside:
            lines[i] = pat.sub(lambda x: x.group("pre") + new, line)
    return "".join(lines)


def yaml_load(text: str) -> Any:
    import yaml

    return yaml.safe_load(text)


def unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
