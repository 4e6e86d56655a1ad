"""Collector for the ``pip`` domain: the files pip reads, in pip's order, and the effective values.

Order and rules (pip ``_internal/configuration.py``, pip 23.2; reference
pip-apt-config.md §1.1), later overriding earlier:

1. global: each ``$XDG_CONFIG_DIRS`` entry (default ``/etc/xdg``) + ``/pip/pip.conf``, then ``/etc/pip.conf``;
2. user: ``~/.pip/pip.conf`` (legacy), then ``$XDG_CONFIG_HOME/pip/pip.conf``
   (default ``~/.config/pip/pip.conf``) — skipped when ``PIP_CONFIG_FILE``
   names an existing file;
3. base: ``<sys.base_prefix>/pip.conf`` — the interpreter a venv was created
   from (pip ``configuration.py`` ``kinds.BASE``, between user and site in
   ``OVERRIDE_ORDER``); read from the venv's ``pyvenv.cfg`` (``home = <bin>``)
   so it works on image roots too;
4. site: ``<prefix>/pip.conf`` of the interpreter running pip;
5. env: the file named by ``PIP_CONFIG_FILE`` (``/dev/null`` there disables every file);
5. ``PIP_*`` environment variables override every file.

Within those, ``pip install`` takes ``[install]`` over ``[global]`` whatever
file they come from, and ignores empty values.

The site prefix is a choice, because the doctor is not the interpreter that
runs pip: the first ``--python`` (its ``bin/``'s parent, i.e. the venv), else
``$VIRTUAL_ENV``, else ``$CONDA_PREFIX``, else on the live system the
prefix of the interpreter running gpudoctor (``sys.prefix``: pip installed
next to gpudoctor reads that venv's ``pip.conf``), else ``/usr``
(Debian/Ubuntu's system ``sys.prefix``, for image roots).
"""

from __future__ import annotations

import sys
from pathlib import PurePosixPath

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts.pip import PipConfigFile, PipFacts, PipParseError, PipSetting, PipTargetView
from gpudoctor.sources import pipconf

#: PIP_* variables recorded in the facts (all PIP_* count for ``effective``).
RELEVANT_ENV = (
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_TRUSTED_HOST",
    "PIP_CONFIG_FILE",
    "PIP_NO_INDEX",
    "PIP_FIND_LINKS",
)
#: pip ignores these PIP_* names (``ENV_NAMES_IGNORED``).
_IGNORED_ENV = ("version", "help")
DEVNULL = "/dev/null"


def candidate_files(env: dict[str, str], home: str, site_prefix: str, base_prefix: str = "") -> list[tuple[str, str]]:
    """``(variant, path)`` for every file pip considers, in load order (before existence checks)."""
    out: list[tuple[str, str]] = []
    xdg_dirs = env.get("XDG_CONFIG_DIRS", "").strip() or "/etc/xdg"
    for d in xdg_dirs.split(":"):
        if d:
            out.append(("global", str(PurePosixPath(d.rstrip("/") or "/", "pip", "pip.conf"))))
    out.append(("global", "/etc/pip.conf"))
    out.append(("user", str(PurePosixPath(home, ".pip", "pip.conf"))))
    xdg_home = env.get("XDG_CONFIG_HOME", "").strip() or str(PurePosixPath(home, ".config"))
    out.append(("user", str(PurePosixPath(xdg_home, "pip", "pip.conf"))))
    if base_prefix and base_prefix.rstrip("/") != site_prefix.rstrip("/"):
        out.append(("base", str(PurePosixPath(base_prefix, "pip.conf"))))
    out.append(("site", str(PurePosixPath(site_prefix, "pip.conf"))))
    if env.get("PIP_CONFIG_FILE"):
        out.append(("env", env["PIP_CONFIG_FILE"]))
    return out


def site_prefix(ctx: CollectContext) -> tuple[str, str]:
    """The prefix whose ``pip.conf`` is the site file, and where the choice came from."""
    if ctx.options.pythons:
        py = PurePosixPath(ctx.options.pythons[0])
        return str(py.parent.parent), "--python"
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        if ctx.system.env.get(var):
            return ctx.system.env[var], var
    if ctx.system.files.is_live:
        return sys.prefix, "sys.prefix"
    return "/usr", "default"


def base_prefix(ctx: CollectContext, prefix: str) -> str:
    """``sys.base_prefix`` of the interpreter whose site prefix is ``prefix``: the ``home`` key of a
    venv's ``pyvenv.cfg`` (the base interpreter's bin directory), else the live ``sys.base_prefix``
    when ``prefix`` is this interpreter's; "" for a prefix that is no venv (a conda env, /usr)."""
    text = ctx.system.files.read_text_or_none(str(PurePosixPath(prefix, "pyvenv.cfg")))
    if text is not None:
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip().lower() == "home" and value.strip():
                return str(PurePosixPath(value.strip()).parent)
    if ctx.system.files.is_live and prefix == sys.prefix and sys.base_prefix != sys.prefix:
        return sys.base_prefix
    return ""


#: ``PipConfigFile.note`` of a pip.conf path that is a directory (planners refuse to touch it, saying so).
NOTE_DIRECTORY = "a directory, not a file; pip cannot read it"


def _read_file(ctx: CollectContext, variant: str, path: str, loaded_allowed: bool, skip_note: str) -> PipConfigFile:
    files = ctx.system.files
    target = None
    real = path
    try:  # resolve links inside the root: an absolute link in an image root must not reach the host
        real = files.realpath(path)
        target = real if real != path else None
    except OSError as exc:
        return PipConfigFile(
            path, variant, True, False, f"a symlink loop ({exc.strerror or exc}); pip cannot read it", None
        )
    if not files.is_file(real):
        exists = files.exists(real)
        if files.is_dir(real):
            note = NOTE_DIRECTORY
        else:
            note = "not a regular file; pip cannot read it" if exists else ("" if loaded_allowed else skip_note)
        return PipConfigFile(path, variant, exists, False, note, target)
    try:
        raw = files.host_path(real).read_bytes()
    except OSError as exc:
        return PipConfigFile(
            path, variant, True, False, f"cannot be read ({exc.strerror or exc}); pip skips it silently", target
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        error: PipParseError | None = PipParseError(
            0, "encoding", f"not valid UTF-8 (byte {exc.start}); pip cannot load it"
        )
        return PipConfigFile(
            path, variant, True, loaded_allowed, "" if loaded_allowed else skip_note, target, None, {}, {}, error
        )
    values, problem = pipconf.parse(text)
    lines: dict[str, int] = {}
    if problem is None:
        for e in pipconf.scan(text).entries:
            lines[f"{e.section}.{e.key}"] = e.start + 1
    error = PipParseError(problem.line, problem.kind, problem.message, problem.text) if problem else None
    return PipConfigFile(
        path, variant, True, loaded_allowed, "" if loaded_allowed else skip_note, target, text, values, lines, error
    )


def _exists(ctx: CollectContext, path: str) -> bool:
    try:
        return ctx.system.files.exists(ctx.system.files.realpath(path))
    except OSError:
        return False


def effective_settings(files: tuple[PipConfigFile, ...], env: dict[str, str]) -> dict[str, PipSetting]:
    """pip install's view: ``[global]`` then ``[install]`` from every loaded file (later files win
    within a section), then ``PIP_*`` variables; empty values are ignored, as pip does."""
    out: dict[str, PipSetting] = {}
    for section in ("global", "install"):
        for f in files:
            if not f.loaded or f.error is not None:
                continue
            for sk, value in f.values.items():
                sect, _, key = sk.partition(".")
                if sect == section and value:
                    out[key] = PipSetting(key, value, f.path, section, f.variant, f.lines.get(sk, 0))
    for name, value in env.items():
        if not name.startswith("PIP_") or not value or name == "PIP_CONFIG_FILE":
            continue
        key = pipconf.normalize_name(name[4:])
        if key in _IGNORED_ENV:
            continue
        out[key] = PipSetting(key, value, name, ":env:", "env_var", 0)
    return out


def collect(ctx: CollectContext) -> PipFacts:
    env = dict(ctx.system.env)
    home = ctx.system.home
    prefix, prefix_from = site_prefix(ctx)
    base = base_prefix(ctx, prefix)
    config_file = env.get("PIP_CONFIG_FILE") or None
    devnull = config_file == DEVNULL
    env_file_exists = config_file is not None and not devnull and _exists(ctx, config_file)
    out: list[PipConfigFile] = []
    for variant, path in candidate_files(env, home, prefix, base):
        if variant == "env" and devnull:
            continue
        allowed, note = True, ""
        if devnull:
            allowed, note = False, "PIP_CONFIG_FILE=/dev/null: pip loads no configuration file at all"
        elif variant == "user" and env_file_exists:
            allowed, note = False, f"PIP_CONFIG_FILE={config_file} exists, so pip skips the user files"
        out.append(_read_file(ctx, variant, path, allowed, note))
    files = tuple(out)
    # pip names its file pip.ini only on Windows (pip utils/appdirs.py, configuration.py CONFIG_BASENAME)
    windows_named = tuple(
        dict.fromkeys(
            f.path[: -len("pip.conf")] + "pip.ini"
            for f in files
            if f.path.endswith("/pip.conf") and _exists(ctx, f.path[: -len("pip.conf")] + "pip.ini")
        )
    )
    views: list[PipTargetView] = []
    for py in ctx.options.pythons[1:]:  # the first --python is the main view above
        tprefix = str(PurePosixPath(py).parent.parent)
        tbase = base_prefix(ctx, tprefix)
        own = []
        for variant, path in candidate_files(env, home, tprefix, tbase):
            if variant in ("base", "site"):
                own.append(
                    _read_file(ctx, variant, path, not devnull, "" if not devnull else "PIP_CONFIG_FILE=/dev/null")
                )
        shared = [f for f in files if f.variant not in ("base", "site")]
        ordered = (
            [f for f in shared if f.variant in ("global", "user")] + own + [f for f in shared if f.variant == "env"]
        )
        views.append(PipTargetView(py, tprefix, tbase, tuple(own), effective_settings(tuple(ordered), env)))
    recorded = {k: env[k] for k in RELEVANT_ENV if k in env}
    return PipFacts(
        files=files,
        env=recorded,
        effective=effective_settings(files, env),
        site_prefix=prefix,
        site_prefix_from=prefix_from,
        home=home,
        windows_named=windows_named,
        base_prefix=base,
        targets=tuple(views),
    )


COLLECTOR = Collector(domain="pip", collect=collect, timeout_s=10.0)
