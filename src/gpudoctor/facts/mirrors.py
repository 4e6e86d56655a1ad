"""Facts about package-index configuration (apt, uv, conda) and mirror latency probes.

Domains:

- ``apt``: every apt source entry, one-line (``sources.list``, ``*.list``) and
  deb822 (``*.sources``), with the file texts the fix planners edit
  (sources.list(5), apt 2.4-2.9).
- ``uv``: the default index uv uses and where it was set (uv docs,
  "Configuration files" and "Environment variables").
- ``conda``: channels in conda's search order, ``default_channels``,
  ``custom_channels`` and ``channel_alias`` (conda docs, "Settings").
- ``mirrors``: latency/health probes of the configured indexes and, when
  asked for (``--rank-mirrors``, ``gpudoctor mirrors``), of catalogue candidates.
"""

from __future__ import annotations

from dataclasses import field

from gpudoctor.facts.base import domain
from gpudoctor.records import frozen_dataclass

# --------------------------------------------------------------------------- apt


@frozen_dataclass
class AptSource:
    """One apt source: a one-line ``deb``/``deb-src`` line or one deb822 stanza.

    Attributes:
        file: path inside the root, e.g. ``/etc/apt/sources.list.d/debian.sources``.
        format: ``one-line`` or ``deb822``.
        line: 1-based line of the entry (first line of the stanza for deb822).
        stanza: 0-based stanza index in a deb822 file (-1 for one-line).
        types: ``deb`` and/or ``deb-src``.
        uris: archive base URIs.
        suites: e.g. ``bookworm``, ``bookworm-updates``; a path ending in ``/`` is a flat repo.
        components: e.g. ``main``, ``contrib``.
        options: other fields/options, lower-case keys (``signed-by``, ``arch``, ``trusted``).
        enabled: False for ``Enabled: no`` stanzas (apt ignores them).
    """

    file: str
    format: str
    line: int
    stanza: int
    types: tuple[str, ...]
    uris: tuple[str, ...]
    suites: tuple[str, ...]
    components: tuple[str, ...] = ()
    options: dict[str, str] = field(default_factory=dict)
    enabled: bool = True


@frozen_dataclass
class AptSourceFile:
    """A file apt reads (or would ignore), with its text for the fix planners.

    Attributes:
        path: path inside the root.
        format: ``one-line`` or ``deb822``.
        text: the whole file as read.
        ignored: True when apt ignores it (bad name or extension).
        note: why it is ignored, or a parse problem ("" when fine).
    """

    path: str
    format: str
    text: str
    ignored: bool = False
    note: str = ""


@frozen_dataclass
class AptRewrite:
    """A mirror rewrite found in a build file (Dockerfile ``RUN sed -i ...``).

    Attributes:
        origin: ``<file>:<line>`` of the command.
        command: the command as written (one line).
        target: the apt file it edits (path inside the image).
        pattern: the text it replaces (the ``s|old|new|`` old part, unescaped).
        replacement: the new text.
        target_exists: whether ``target`` exists in the inspected root.
        matches: whether ``pattern`` occurs in the target's text (False if absent).
    """

    origin: str
    command: str
    target: str
    pattern: str
    replacement: str
    target_exists: bool
    matches: bool


@frozen_dataclass
class SourceEdit:
    """A build-file command that edits a file apt, pip, uv or conda may read (``--dockerfile``).

    Found by replaying the build's commands on the inspected root's files
    (:mod:`gpudoctor.sources.buildwrites`).

    Attributes:
        origin: ``<file>:<line>`` of the instruction.
        command: the simple command, re-quoted on one line.
        tool: ``apt``, ``pip``, ``uv`` or ``conda``.
        path: the file it edits (inside the image).
        action: ``sed``, ``write``, ``append``, ``copy``, ``cp``, ``mv`` or ``remove``.
        target_exists: whether the file existed when the command ran.
        changed: whether the command changes the file (``sed``: its pattern matched).
        content: the file's text after the command, when known (None: unknown
            or removed, e.g. ``COPY`` from the build context).
        pattern: ``sed``: the text it replaces (escapes removed).
        replacement: ``sed``: the new text.
        read: whether ``tool`` reads this path in the image (None: not judged).
        reads_instead: where ``tool`` reads that scope's configuration, when ``read`` is False.
    """

    origin: str
    command: str
    tool: str
    path: str
    action: str
    target_exists: bool
    changed: bool
    content: str | None = None
    pattern: str = ""
    replacement: str = ""
    read: bool | None = None
    reads_instead: str = ""


@domain("apt")
@frozen_dataclass
class AptFacts:
    """apt sources of the system or image root.

    Attributes:
        distro_id: ``debian``/``ubuntu``/... from the ``os`` facts ("" unknown).
        codename: e.g. ``bookworm``, ``noble`` ("" unknown).
        machine: ``uname -m`` when live; for an image root the Debian architecture of
            its ``dpkg`` package (``arm64``, ``amd64``), "" when unknown.
        sources_list_present: whether ``/etc/apt/sources.list`` exists.
        files: every sources file found, in apt's reading order.
        sources: every entry of the files apt reads.
        ca_certificates: whether a system CA bundle exists
            (``/etc/ssl/certs/ca-certificates.crt``); without it apt cannot use https.
        rewrites: mirror rewrites found in a build file given with ``--dockerfile``.
        build_file: name of that build file ("" when none was given).
        build_edits: every edit of an apt source file the build makes, in order.
        built_sources: the sources apt reads after the build (the build's edits
            replayed on the root's files); empty without ``--dockerfile``.
        missing_keyrings: keyring files named by ``Signed-By`` / ``signed-by=`` of
            an enabled source that do not exist in a directory that does (paths
            inside the root; a root without that directory is a partial copy and says nothing).
        proxy_conf: lower-cased ``Acquire::*::Proxy*`` key -> value, from ``apt.conf`` and
            ``apt.conf.d`` in apt's reading order (later wins).
        proxy_conf_origin: the same keys -> the file that set them.
        proxy_env: ``http_proxy``/``https_proxy``/``no_proxy`` (either case) as apt's environment has them.
        tunnels: proxy URL -> the answer to a ``CONNECT`` through it (``ok``, ``denied: HTTP 403 ...``,
            ``error: ...``); probed only online, for proxies that https sources go through.
    """

    distro_id: str
    codename: str
    machine: str
    sources_list_present: bool
    files: tuple[AptSourceFile, ...]
    sources: tuple[AptSource, ...]
    ca_certificates: bool
    rewrites: tuple[AptRewrite, ...] = ()
    build_file: str = ""
    build_edits: tuple[SourceEdit, ...] = ()
    built_sources: tuple[AptSource, ...] = ()
    missing_keyrings: tuple[str, ...] = ()
    proxy_conf: dict[str, str] = field(default_factory=dict)
    proxy_conf_origin: dict[str, str] = field(default_factory=dict)
    proxy_env: dict[str, str] = field(default_factory=dict)
    tunnels: dict[str, str] = field(default_factory=dict)


@domain("build")
@frozen_dataclass
class BuildFacts:
    """What a build file (``--dockerfile FILE``) does to package-source files, replayed on the root.

    Attributes:
        file: the build file's name.
        edits: every edit of an apt/pip/uv/conda configuration file, in build
            order, pip/uv/conda ones judged (``read``, ``reads_instead``).
        env: the image's ``ENV`` values set in the file.
        home: the image user's home used to judge user-scope paths.
        notes: what could not be read (a non-POSIX ``SHELL``, unbalanced quotes).
    """

    file: str
    edits: tuple[SourceEdit, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    home: str = "/root"
    notes: tuple[str, ...] = ()


# --------------------------------------------------------------------------- uv


@frozen_dataclass
class UvIndex:
    """One index uv will use.

    Attributes:
        url: the index URL.
        default: True for the default index (replaces PyPI).
        origin: where it was set: ``UV_DEFAULT_INDEX``, ``/home/u/.config/uv/uv.toml``, ...
        key: the setting: ``index``, ``index-url``, ``extra-index-url``, env var name.
    """

    url: str
    default: bool
    origin: str
    key: str


@domain("uv")
@frozen_dataclass
class UvFacts:
    """uv's index configuration (files in uv's discovery order, then environment).

    Attributes:
        indexes: every index found; the effective default is :attr:`default_index`.
        default_index: the URL uv's project commands (``uv add``, ``lock``, ``sync``, ``run``)
            resolve against by default (PyPI when unset); ``[pip] index-url`` is not theirs.
        default_origin: where that came from (``built-in`` when unset).
        pip_default_index: the default index of ``uv pip`` when it differs from
            :attr:`default_index` (a ``[pip] index-url``, which ``uv pip`` prefers); "" when the same.
        pip_default_origin: where that came from ("" when the same).
        files: config files found (path -> text), for the fix planner.
        user_config: the user-level ``uv.toml`` path (created by the fix when absent).
        no_config: ``UV_NO_CONFIG`` is set (files are ignored).
        system_config: the system ``uv.toml`` uv reads (the first existing of
            ``$XDG_CONFIG_DIRS/uv/uv.toml`` and ``/etc/uv/uv.toml``; the latter when none exists).
        binary: the ``uv`` executable found (``$PATH``, the active venv's ``bin``,
            ``~/.local/bin``, ``~/.cargo/bin``, inside the root); "" when uv is not installed.
        problems: config files uv cannot read (``<path>: not valid TOML (...)``): such a
            file is not "not configured".
    """

    indexes: tuple[UvIndex, ...]
    default_index: str
    default_origin: str
    files: dict[str, str] = field(default_factory=dict)
    user_config: str = ""
    no_config: bool = False
    system_config: str = ""
    binary: str = ""
    problems: tuple[str, ...] = ()
    http_timeout: str = ""
    pip_default_index: str = ""
    pip_default_origin: str = ""


# --------------------------------------------------------------------------- conda


@frozen_dataclass
class CondaChannel:
    """One channel in conda's search order, resolved to its URL.

    Attributes:
        name: as written (``defaults``, ``conda-forge``, ``https://...``).
        url: the base URL conda fetches (``<url>/<subdir>/repodata.json``).
        via: how it was resolved: ``url``, ``default_channels``, ``custom_channels``, ``channel_alias``,
            ``custom_multichannels``.
        origin: where the channel was named: a condarc path, ``CONDA_CHANNELS``, an
            ``environment.yml``, ``<build file>:<line>`` (``-c NAME``), ``built-in``.
        setting: the file (or variable) that set what it resolved through (the
            ``default_channels``/``custom_channels`` entry, ``channel_alias``); ``built-in``
            for conda's own default, "" for a URL.
        tool: ``conda``, or ``mamba``/``micromamba`` for channels only they see.
    """

    name: str
    url: str
    via: str
    origin: str = ""
    setting: str = ""
    tool: str = "conda"


@domain("conda")
@frozen_dataclass
class CondaFacts:
    """conda channel configuration merged from the ``.condarc`` search path.

    Attributes:
        files: condarc files read (path -> text), earlier to later (later wins).
        channels: resolved channels in search order.
        default_channels: what ``defaults`` expands to.
        custom_channels: channel name -> base URL.
        channel_alias: base URL for other named channels.
        user_condarc: ``~/.condarc`` (the file the fix edits).
        named: channels named outside the condarc ``channels`` lists (an ``environment.yml``,
            ``-c NAME`` in a build file, channels only mamba/micromamba see), resolved the same way.
        root_prefix: the base install read as ``$CONDA_ROOT`` ("" when none was found).
        env: the channel variables set (``CONDA_CHANNELS``, ``CONDA_CHANNEL_ALIAS``, ...).
        multichannels: ``custom_multichannels`` (name -> members).
        channel_alias_origin: the file (or variable) that set ``channel_alias``; ``built-in``.
        prefix: the active environment (``$CONDA_PREFIX``, whose ``.condarc`` is ``conda config
            --env``'s file); "" when none is active.
    """

    files: dict[str, str]
    channels: tuple[CondaChannel, ...]
    default_channels: tuple[str, ...]
    custom_channels: dict[str, str]
    channel_alias: str
    user_condarc: str
    named: tuple[CondaChannel, ...] = ()
    root_prefix: str = ""
    env: dict[str, str] = field(default_factory=dict)
    multichannels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    channel_alias_origin: str = "built-in"
    prefix: str = ""


# --------------------------------------------------------------------------- pixi


@domain("pixi")
@frozen_dataclass
class PixiFacts:
    """pixi's own configuration: the ``config.toml`` files pixi reads. pixi reads neither
    ``.condarc`` nor ``pip.conf``: a conda mirror reaches it only through ``[mirrors]``
    (prefix-dev/pixi #756, #2312: ``channel_alias`` has no pixi equivalent), a PyPI index only
    through ``[pypi-config]``.

    Files, lowest priority first (pixi's configuration reference): ``/etc/pixi/config.toml``,
    ``~/.config/pixi/config.toml``, ``$XDG_CONFIG_HOME/pixi/config.toml``,
    ``~/.pixi/config.toml``, ``$PIXI_HOME/config.toml``; a later file's value wins.

    Attributes:
        files: config files read (path -> text), lowest priority first.
        mirrors: ``[mirrors]``: URL prefix -> mirror URLs, merged (a later file wins per key).
        mirror_origins: ``[mirrors]`` key -> the file that set it.
        pypi_index_url: ``[pypi-config] index-url`` ("" when unset).
        pypi_origin: the file that set it ("" when unset).
        binary: the ``pixi`` executable found inside the root ("" when none).
        problems: files pixi cannot read (``<path>: not valid TOML (...)``).
    """

    files: dict[str, str] = field(default_factory=dict)
    mirrors: dict[str, tuple[str, ...]] = field(default_factory=dict)
    mirror_origins: dict[str, str] = field(default_factory=dict)
    pypi_index_url: str = ""
    pypi_origin: str = ""
    binary: str = ""
    problems: tuple[str, ...] = ()

    def mirror_for(self, url: str) -> tuple[str, str] | None:
        """(mirror URL, origin) pixi fetches ``url`` from, by the longest ``[mirrors]`` key that is a
        prefix of it (trailing slashes ignored); None when pixi fetches ``url`` itself."""
        want = url.rstrip("/") + "/"
        keys = [k for k in self.mirrors if want.startswith(k.rstrip("/") + "/") and self.mirrors[k]]
        if not keys:
            return None
        key = max(keys, key=len)
        return self.mirrors[key][0], self.mirror_origins.get(key, "")


# --------------------------------------------------------------------------- mirrors


@frozen_dataclass
class CatalogueMirror:
    """A catalogue row (``data/mirrors.toml`` or ``--catalogue FILE``).

    Attributes:
        name: short id (``--mirror NAME``).
        operator: who runs it.
        region: ``global`` or a country code.
        official: True for the upstream archive.
        urls: archive -> base URL; archives are ``pypi``, ``conda_pkgs``,
            ``conda_cloud``, ``debian``, ``debian_security``, ``ubuntu``, ``ubuntu_ports``.
        source: where the URLs come from.
        conda_missing: named channels the mirror's ``conda_cloud`` tree is known not to carry
            (e.g. ``nvidia``, whose licence forbids redistribution), from the source given.
    """

    name: str
    operator: str
    region: str
    official: bool
    urls: dict[str, str]
    source: str = ""
    conda_missing: tuple[str, ...] = ()


@frozen_dataclass
class MirrorProbe:
    """One probed index (configured or candidate), measured from this machine.

    Attributes:
        name: catalogue name, or ``configured``.
        ecosystem: ``pip``, ``uv``, ``conda`` or ``apt``.
        archive: catalogue archive key (``pypi``, ``debian``, ...).
        base_url: the index/archive base.
        probe_url: the request that was timed.
        role: ``configured`` or ``candidate``.
        official: True for the upstream archive.
        status: ``ok``, ``local`` (file:// index, not probed), ``offline``,
            ``http-error``, ``timeout``, ``tls-error``, ``dns-error``,
            ``no-network``, ``connect-error``, ``slow`` (answered, but the body
            came too slowly to be checked: usable, not failing), ``invalid`` (served, but not
            what is needed), ``stale`` (apt: older than the official archive), ``refused``
            (the URL, a redirect target or a resolved address is one the prober never contacts:
            link-local, cloud metadata, not http(s), or not loopback under ``GPUDOCTOR_LOOPBACK_ONLY``).
        reason: why it is not ``ok``, in operator terms ("" when ok).
        http_status: last HTTP status, or None.
        connect_ms: DNS + TCP connect + TLS handshake, ms.
        samples_ms: time to first byte of each request, ms.
        median_ms: median of ``samples_ms``, ms.
        throughput_kib_s: body bytes / transfer time of the largest read, KiB/s.
        release_date: apt: the InRelease ``Date:`` (ISO 8601), "" otherwise.
        lag_hours: apt: hours behind the official archive's InRelease, or None.
    """

    name: str
    ecosystem: str
    archive: str
    base_url: str
    probe_url: str
    role: str
    official: bool
    status: str
    reason: str = ""
    http_status: int | None = None
    connect_ms: float | None = None
    samples_ms: tuple[float, ...] = ()
    median_ms: float | None = None
    throughput_kib_s: float | None = None
    release_date: str = ""
    lag_hours: float | None = None

    @property
    def healthy(self) -> bool:
        """Serving what is needed (``ok``) or a local index."""
        return self.status in ("ok", "local")


@domain("mirrors")
@frozen_dataclass
class MirrorsFacts:
    """Mirror probes: configured indexes always (unless offline), candidates when ranking.

    Attributes:
        offline: ``--offline``: nothing was probed.
        ranked: candidates were ranked (``--rank-mirrors``).
        budget_s: overall time budget of one probe run, seconds.
        catalogue_origin: ``built-in`` or the catalogue file used.
        catalogue: catalogue rows (for ``--mirror NAME`` in the fix planners).
        configured: probes of the indexes this machine is configured to use.
        rankings: ecosystem -> candidates, fastest healthy first.
        wall_ms: wall time of the probe runs, ms.
    """

    offline: bool
    ranked: bool
    budget_s: float
    catalogue_origin: str
    catalogue: tuple[CatalogueMirror, ...]
    configured: tuple[MirrorProbe, ...]
    rankings: dict[str, tuple[MirrorProbe, ...]]
    wall_ms: float = 0.0
