"""``LD_LIBRARY_PATH`` as a conda environment's activation sets it.

``conda activate`` sources every ``$CONDA_PREFIX/etc/conda/activate.d/*.sh``
in name order (conda's activator, ``_get_activate_scripts``). Guides for
TensorFlow (2.11-2.13 pip guide, and the TF 2.16 workaround in
tensorflow/tensorflow#63362) and many projects put an
``export LD_LIBRARY_PATH=...`` line there, so the environment a user runs a
job in differs from the one an interpreter started directly (a Jupyter
kernel, ``gpudoctor --python``) gets.

This module replays those assignments without running a shell: plain
``NAME=value`` / ``export NAME=value`` lines with ``$NAME``, ``${NAME}`` and
``${NAME:+:$NAME}`` expansions, and the guides' one command substitution
``$(dirname $(python -c "import nvidia.X; print(nvidia.X.__file__)"))``
(the ``nvidia/X`` directory of the environment's site-packages). A line
with any other command substitution is left out (its value is unknown), so
the model never invents a directory.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from gpudoctor.collect.loader import split_path_list
from gpudoctor.records import frozen_dataclass
from gpudoctor.system import Files

__all__ = ["Activation", "activate_d_scripts", "replay"]

_ASSIGN = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_NVIDIA_FILE = re.compile(
    r"""\$\(\s*dirname\s+\$\(\s*python3?\s+-c\s+['"]?\s*import\s+nvidia\.([A-Za-z0-9_]+)\s*;\s*"""
    r"""print\(\s*nvidia\.\1\.__file__\s*\)\s*;?\s*['"]?\s*\)\s*\)"""
)
_CONDITIONAL = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):\+((?:[^{}]|\$\{[^{}]*\})*)\}")
_BRACED = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PLAIN = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


@frozen_dataclass
class Activation:
    """The result of replaying the activation scripts.

    Attributes:
        ld_library_path: the entries after activation.
        origins: per entry, the script that added it, or ``environment``.
        scripts: the scripts that changed ``LD_LIBRARY_PATH``.
    """

    ld_library_path: tuple[str, ...]
    origins: tuple[str, ...]
    scripts: tuple[str, ...]


def activate_d_scripts(files: Files, prefix: str) -> list[str]:
    """The ``*.sh`` activation scripts of the conda environment at ``prefix``, in the order conda sources them."""
    d = f"{prefix.rstrip('/')}/etc/conda/activate.d"
    if not prefix or not files.is_dir(d):
        return []
    try:
        return [f"{d}/{n}" for n in sorted(files.listdir(d)) if n.endswith(".sh")]
    except OSError:
        return []


def _unquote(value: str) -> str:
    value = value.strip()
    if ";" in value and not value.startswith(("'", '"')) and "$(" not in value:
        value = value.split(";", 1)[0].strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value.replace('"', "")


def _expand(value: str, names: Mapping[str, str], site: str | None) -> str | None:
    if site:
        value = _NVIDIA_FILE.sub(lambda m: f"{site}/nvidia/{m.group(1)}", value)
    if "$(" in value or "`" in value:
        return None

    def cond(m: re.Match[str]) -> str:
        return _expand(m.group(2), names, site) or "" if names.get(m.group(1)) else ""

    value = _CONDITIONAL.sub(cond, value)
    value = _BRACED.sub(lambda m: names.get(m.group(1), ""), value)
    return _PLAIN.sub(lambda m: names.get(m.group(1), ""), value)


def _run(files: Files, scripts: Sequence[str], names: dict[str, str], site: str | None) -> dict[str, str]:
    """Replay ``scripts`` over ``names``; returns entry -> the script that last added it."""
    added: dict[str, str] = {}
    for script in scripts:
        text = files.read_text_or_none(script) or ""
        for raw in text.splitlines():
            line = raw.split(" #", 1)[0].strip()
            m = _ASSIGN.match(line)
            if not m:
                continue
            value = _expand(_unquote(m.group(2)), names, site)
            if value is None:
                continue
            if m.group(1) == "LD_LIBRARY_PATH":
                before = set(split_path_list(names.get("LD_LIBRARY_PATH", "")))
                for entry in split_path_list(value):
                    if entry and entry not in before:
                        added[entry] = script
            names[m.group(1)] = value
    return added


def replay(
    files: Files, prefix: str, env: Mapping[str, str], site: str | None, already_active: bool
) -> Activation | None:
    """``LD_LIBRARY_PATH`` after activating the conda environment at ``prefix`` on top of ``env``.

    ``already_active``: ``env`` is the activated environment's (its ``CONDA_PREFIX`` is ``prefix``): the
    scripts already ran, so they only name the origin of the entries they add. None when no script of
    that environment touches ``LD_LIBRARY_PATH``.
    """
    scripts = activate_d_scripts(files, prefix)
    if not scripts:
        return None
    current = env.get("LD_LIBRARY_PATH", "")
    base = {"CONDA_PREFIX": prefix, "LD_LIBRARY_PATH": "" if already_active else current}
    after = dict(base)
    added = _run(files, scripts, after, site)
    if not added:
        return None
    entries = split_path_list(current if already_active else after.get("LD_LIBRARY_PATH", ""))
    origins = tuple(added.get(e, "environment") for e in entries)
    return Activation(tuple(entries), origins, tuple(dict.fromkeys(added.values())))
