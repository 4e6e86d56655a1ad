"""Facts about pip's configuration: every file pip reads, in pip's order, and the effective values.

Source: pip ``_internal/configuration.py`` (``iter_config_files``,
``_load_config_files``, ``_get_environ_vars``) and
``_internal/cli/parser.py`` (``_get_ordered_configuration_items``), checked
against pip 23.2; summarised in shared/reference/pip-apt-config.md §1.
"""

from __future__ import annotations

from dataclasses import field

from gpudoctor.facts.base import domain
from gpudoctor.records import frozen_dataclass


@frozen_dataclass
class PipParseError:
    """Why pip cannot read a file (pip then aborts every command).

    Attributes:
        line: 1-based line number (0: the whole file, e.g. its encoding).
        kind: ``no-section-header``, ``syntax``, ``duplicate-section``,
            ``duplicate-option`` or ``encoding``.
        message: one line in operator terms.
        text: the offending line as written.
    """

    line: int
    kind: str
    message: str
    text: str = ""


@frozen_dataclass
class PipConfigFile:
    """One file pip looks at.

    Attributes:
        path: path inside the root (``/etc/pip.conf``, ``/home/u/.config/pip/pip.conf``).
        variant: pip's name for its place in the order: ``global``, ``user``,
            ``base`` (``sys.base_prefix``: the interpreter a venv was made from), ``site``
            or ``env`` (the file named by ``PIP_CONFIG_FILE``).
        exists: the file exists.
        loaded: pip reads it (False when it does not exist or cannot be
            opened, for user files when ``PIP_CONFIG_FILE`` names an existing
            file, and for every file when ``PIP_CONFIG_FILE=/dev/null``).
        note: why a file that exists is not loaded ("" otherwise).
        target: the symlink's target inside the root when ``path`` is a link, else None.
        text: the file's full text (UTF-8; None when absent or unreadable);
            fix planners edit this exact text.
        values: ``section.key`` -> value as pip reads them (names normalised,
            e.g. ``global.index-url``); empty when the file has an error.
        lines: ``section.key`` -> 1-based line where the key is set.
        error: the parse error, if pip cannot read the file.
    """

    path: str
    variant: str
    exists: bool
    loaded: bool
    note: str = ""
    target: str | None = None
    text: str | None = None
    values: dict[str, str] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    error: PipParseError | None = None


@frozen_dataclass
class PipSetting:
    """The effective value of one option for ``pip install``, and who set it.

    Attributes:
        key: normalised option name (``index-url``).
        value: the value pip uses.
        source: the file path (inside the root) or the environment variable
            (``PIP_INDEX_URL``) that set it.
        section: ``global``, ``install`` or ``:env:`` (environment).
        variant: ``global``/``user``/``site``/``env`` for files, ``env_var`` for variables.
        line: 1-based line in the file (0 for variables).
    """

    key: str
    value: str
    source: str
    section: str
    variant: str
    line: int = 0


@frozen_dataclass
class PipTargetView:
    """What ``pip install`` run by one more target interpreter (``--python`` after the first) reads.

    Attributes:
        python: the interpreter (path inside the root).
        site_prefix: its ``sys.prefix`` (the interpreter's ``bin/`` parent).
        base_prefix: its ``sys.base_prefix`` when it is a venv (``pyvenv.cfg`` ``home``), else "".
        files: the ``base``/``site`` files it reads besides the shared global, user and env files.
        effective: its ``pip install`` view, as :attr:`PipFacts.effective`.
    """

    python: str
    site_prefix: str
    base_prefix: str
    files: tuple[PipConfigFile, ...]
    effective: dict[str, PipSetting]


@domain("pip")
@frozen_dataclass
class PipFacts:
    """pip's configuration as ``pip install`` would see it.

    Attributes:
        files: every candidate file in pip's load order (later overrides
            earlier): global (``$XDG_CONFIG_DIRS``/pip/pip.conf, /etc/pip.conf),
            user (~/.pip/pip.conf, ``$XDG_CONFIG_HOME``/pip/pip.conf), site
            (``<prefix>/pip.conf``), env (``$PIP_CONFIG_FILE``).
        env: the ``PIP_*`` variables that matter here (``PIP_INDEX_URL``,
            ``PIP_EXTRA_INDEX_URL``, ``PIP_TRUSTED_HOST``, ``PIP_CONFIG_FILE``,
            ``PIP_NO_INDEX``, ``PIP_FIND_LINKS``), as set.
        effective: normalised key -> :class:`PipSetting` for ``pip install``
            (environment > ``[install]`` > ``[global]``; later files win).
        site_prefix: the interpreter prefix whose ``pip.conf`` is the site
            file, and how it was chosen (``site_prefix_from``: ``--python``,
            ``VIRTUAL_ENV``, ``CONDA_PREFIX`` or ``default``).
        home: the home directory used for user files.
        targets: the same view for every further ``--python`` target (its own base and site files).
        base_prefix: the ``sys.base_prefix`` of that interpreter (a venv's ``pyvenv.cfg`` ``home``,
            ``sys.base_prefix`` on the live system); "" when it is the site prefix itself.
        windows_named: ``pip.ini`` files next to a candidate ``pip.conf`` (the
            Windows file name; pip on Linux never reads them), paths inside the root.
    """

    files: tuple[PipConfigFile, ...]
    env: dict[str, str]
    effective: dict[str, PipSetting]
    site_prefix: str
    site_prefix_from: str
    home: str
    windows_named: tuple[str, ...] = ()
    base_prefix: str = ""
    targets: tuple[PipTargetView, ...] = ()

    def file(self, path: str) -> PipConfigFile | None:
        """The file entry for ``path`` (inside the root; a further target's own files too), or None."""
        for f in self.all_files():
            if f.path == path:
                return f
        return None

    def all_files(self) -> tuple[PipConfigFile, ...]:
        """Every file of every target's view, each once (the main view's first)."""
        seen = {f.path for f in self.files}
        extra: list[PipConfigFile] = []
        for t in self.targets:
            for f in t.files:
                if f.path not in seen:
                    seen.add(f.path)
                    extra.append(f)
        return self.files + tuple(extra)

    def files_of(self, variant: str) -> tuple[PipConfigFile, ...]:
        """Candidate files of one variant, in load order."""
        return tuple(f for f in self.files if f.variant == variant)
