"""Collector for the ``apt`` domain: every apt source, one-line and deb822.

Reads, inside ``--root``: ``/etc/apt/sources.list`` and
``/etc/apt/sources.list.d/*`` in apt's order (sources.list first, then the
parts sorted by name; names apt ignores are recorded as ignored), the
distro id and codename from the ``os`` facts, and whether a CA bundle exists
(``/etc/ssl/certs/ca-certificates.crt``). With ``--dockerfile FILE`` (text
passed in ``CollectOptions.extra["dockerfile"]`` as ``(name, text)``), the
``sed -i`` mirror rewrites in it are checked against the files in the root.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts import Unavailable
from gpudoctor.facts.host import OsFacts
from gpudoctor.facts.mirrors import (
    AptFacts,
    AptRewrite,
    AptSource,
    AptSourceFile,
    SourceEdit,
)
from gpudoctor.sources import apt as aptmodel
from gpudoctor.sources.aptsources import VALID_PART_NAME, parse_deb822, parse_one_line, rewrite_of
from gpudoctor.sources.buildwrites import Overlay, replay
from gpudoctor.sources.dockerfile import commands

SOURCES_LIST = "/etc/apt/sources.list"
SOURCES_PARTS = "/etc/apt/sources.list.d"
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


DPKG_STATUS = "/var/lib/dpkg/status"


def dpkg_architecture(status: str) -> str:
    """The native Debian architecture (``arm64``, ``amd64``) of a root, from the ``dpkg`` package's
    stanza in ``/var/lib/dpkg/status`` (dpkg is always the native build); "" when not found."""
    in_dpkg = False
    for line in status.splitlines():
        if line.startswith("Package:"):
            in_dpkg = line.split(":", 1)[1].strip() == "dpkg"
        elif in_dpkg and line.startswith("Architecture:"):
            return line.split(":", 1)[1].strip()
    return ""


def collect_apt(ctx: CollectContext) -> AptFacts | Unavailable:
    files = ctx.system.files
    if not files.is_dir("/etc/apt"):
        return Unavailable("there is no /etc/apt: not a Debian/Ubuntu system (apt checks do not apply)")
    os_facts = ctx.facts.get("os")
    distro_id = codename = machine = ""
    if isinstance(os_facts, OsFacts):
        distro_id, codename, machine = os_facts.id, os_facts.codename, os_facts.machine
    if not machine:  # an image root: its own architecture is the one its dpkg package was built for
        machine = dpkg_architecture(files.read_text_or_none(DPKG_STATUS) or "")
    found: list[AptSourceFile] = []
    sources = []
    present = files.is_file(SOURCES_LIST)
    if present:
        text = files.read_text(SOURCES_LIST)
        entries, problems = parse_one_line(SOURCES_LIST, text)
        sources.extend(entries)
        found.append(AptSourceFile(SOURCES_LIST, "one-line", text, note="; ".join(problems)))
    names: list[str] = []
    if files.is_dir(SOURCES_PARTS):
        try:
            names = files.listdir(SOURCES_PARTS)
        except OSError:
            names = []
    for name in names:
        path = f"{SOURCES_PARTS}/{name}"
        if not files.is_file(path):
            continue
        fmt = "deb822" if name.endswith(".sources") else "one-line"
        part = files.read_text_or_none(path)
        if part is None:
            found.append(AptSourceFile(path, fmt, "", ignored=True, note="cannot be read"))
            continue
        if not VALID_PART_NAME.match(name):
            found.append(
                AptSourceFile(
                    path,
                    fmt,
                    part,
                    ignored=True,
                    note="apt ignores it: names must end in .list or .sources and use only "
                    "letters, digits, '_', '-' and '.'",
                )
            )
            continue
        entries, problems = (parse_deb822 if fmt == "deb822" else parse_one_line)(path, part)
        sources.extend(entries)
        found.append(AptSourceFile(path, fmt, part, note="; ".join(problems)))
    rewrites: tuple[AptRewrite, ...] = ()
    build_edits: tuple[SourceEdit, ...] = ()
    built: tuple[AptSource, ...] = ()
    build_file = ""
    dockerfile: tuple | None = ctx.options.extra.get("dockerfile")
    if dockerfile:
        build_file, text = dockerfile
        edits, overlay = replay(commands(build_file, text), files.read_text_or_none, lambda d: _listdir(files, d))
        build_edits = tuple(e for e in edits if e.tool == "apt")
        rewrites = tuple(rewrite_of(e) for e in build_edits if e.action == "sed")
        built = tuple(sources_after(overlay))
    keyrings = [
        k
        for src in sources
        if src.enabled
        for k in (src.options.get("signed-by") or "").replace(",", " ").split()
        if k.startswith("/") and "BEGIN" not in (src.options.get("signed-by") or "")
    ]
    # only where the keyring's directory exists: a partial root (a copy of /etc alone) says nothing
    missing = tuple(
        k for k in dict.fromkeys(keyrings) if files.is_dir(k.rsplit("/", 1)[0] or "/") and not files.exists(k)
    )
    conf, conf_origin, proxy_env = _proxy_settings(ctx)
    tunnels: dict[str, str] = {}
    if not ctx.options.offline:
        merged = {k: (v, conf_origin[k]) for k, v in conf.items()}
        for src in sources:
            for uri in src.uris if src.enabled else ():
                if not uri.startswith("https://"):
                    continue
                choice = aptmodel.proxy_for(uri, merged, proxy_env)
                if choice.proxy and choice.proxy not in tunnels:
                    tunnels[choice.proxy] = connect_probe(choice.proxy, urlsplit(uri).hostname or "", 443)
    return AptFacts(
        distro_id=distro_id,
        codename=codename,
        machine=machine,
        sources_list_present=present,
        files=tuple(found),
        sources=tuple(sources),
        ca_certificates=files.exists(CA_BUNDLE),
        missing_keyrings=missing,
        rewrites=rewrites,
        build_file=build_file,
        build_edits=build_edits,
        built_sources=built,
        proxy_conf=conf,
        proxy_conf_origin=conf_origin,
        proxy_env=proxy_env,
        tunnels=tunnels,
    )


PROXY_ENV = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")


def _proxy_settings(ctx: CollectContext) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """apt's ``Acquire::*::Proxy*`` settings (value and file per key) and the proxy variables."""
    files = ctx.system.files
    texts: list[tuple[str, str]] = []
    text = files.read_text_or_none(aptmodel.APT_CONF)
    if text is not None:
        texts.append((aptmodel.APT_CONF, text))
    for name in sorted(_listdir(files, aptmodel.APT_CONF_D)):
        if aptmodel.conf_part_read(name):
            t = files.read_text_or_none(f"{aptmodel.APT_CONF_D}/{name}")
            if t is not None:
                texts.append((f"{aptmodel.APT_CONF_D}/{name}", t))
    merged = aptmodel.merge_conf(texts)
    proxy = {k: v for k, v in merged.items() if k.startswith("acquire::") and "::proxy" in k}
    env = {k: ctx.system.env[k] for k in PROXY_ENV if ctx.system.env.get(k)}
    return {k: v for k, (v, _) in proxy.items()}, {k: p for k, (_, p) in proxy.items()}, env


def connect_probe(proxy: str, host: str, port: int, timeout_s: float = 3.0) -> str:
    """Ask ``proxy`` for a ``CONNECT host:port`` tunnel (what apt does for an https source through a
    proxy): ``ok`` on a 2xx answer, ``denied: <status line>`` otherwise, ``error: ...`` when the proxy
    cannot be reached. Loopback only under ``GPUDOCTOR_LOOPBACK_ONLY``."""

    from gpudoctor.mirrors.netguard import NetPolicy, Refused
    from gpudoctor.mirrors.probe import blocked

    url = proxy if "://" in proxy else f"http://{proxy}"
    why = blocked(url)
    if why:
        return f"error: {why}"
    parts = urlsplit(url)
    try:
        # the proxy's address is checked like a mirror's (never link-local or metadata; loopback-only in tests)
        with NetPolicy.from_env().connect(parts.hostname or "", parts.port or 80, timeout_s) as sock:
            sock.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
            line = sock.makefile("rb").readline(512).decode("latin-1").strip()
    except (OSError, ValueError, Refused) as exc:
        return f"error: {exc}"
    fields = line.split(" ", 2)
    if len(fields) >= 2 and fields[1].startswith("2"):
        return "ok"
    return f"denied: {line or 'no answer'}"


def _listdir(files, directory: str) -> list[str]:
    try:
        return files.listdir(directory) if files.is_dir(directory) else []
    except OSError:
        return []


def sources_after(overlay: Overlay) -> list[AptSource]:
    """Entries apt reads from the overlay's files (sources.list, then valid sources.list.d parts by name)."""
    out: list[AptSource] = []
    text = overlay.read(SOURCES_LIST)
    if text is not None:
        out.extend(parse_one_line(SOURCES_LIST, text)[0])
    names = set(overlay.glob(SOURCES_PARTS + "/*")) - {SOURCES_PARTS + "/*"}
    for path in sorted(names):
        name = path.rsplit("/", 1)[-1]
        text = overlay.read(path)
        if text is None or not VALID_PART_NAME.match(name):
            continue
        out.extend((parse_deb822 if name.endswith(".sources") else parse_one_line)(path, text)[0])
    return out


COLLECTOR = Collector(domain="apt", collect=collect_apt, requires=("os",), timeout_s=10.0)
