"""Check ``apt.sources``: do apt's source files say what the operator thinks they say?

Faults found (sources.list(5); Debian 12 / Ubuntu 24.04 moved the distro
sources to deb822 ``.sources`` files):

- a mirror rewrite (``sed -i`` in a Dockerfile, ``--dockerfile FILE``) that
  edits a file which does not exist -> ``fail``; one whose pattern matches
  nothing -> ``warn``;
- ``sources.list`` switched to a mirror while the deb822 files apt also reads
  still point at the official archive (the rewrite left the real sources
  untouched) -> ``fail``;
- an https source in an image without ca-certificates -> ``fail``;
- a distro suite that does not match the OS codename -> ``fail``;
- the same type/URI/suite/component listed twice -> ``warn``;
- a Debian suite on the wrong archive or in the wrong form -> ``fail`` (apt
  gets 404, "does not have a Release file"): ``<codename>/updates`` for
  bullseye and later (the security suite is ``<codename>-security`` since
  Debian 11), ``<codename>-security`` under ``/debian`` instead of
  ``/debian-security``, or a non-security suite under ``/debian-security``
  (``data/apt_releases.toml``, ``[[security]]``);
- a release removed from the regular archive and its mirrors (Debian buster
  and older, Ubuntu interim releases past their end of life) still fetched
  from there -> ``fail`` with the archive host (``[[archived]]``);
- an Ubuntu source on the wrong tree for this machine's architecture
  (``/ubuntu`` carries only amd64 and i386, ``/ubuntu-ports`` every other
  architecture: apt gets 404 for ``binary-arm64/Packages``; tuna/issues #595,
  a Jetson Nano) -> ``fail``; entries limited with ``arch=`` are left alone;
- a ``Signed-By`` keyring file that does not exist -> ``fail``: apt cannot
  check that repository ("NO_PUBKEY" / "is not signed") and refuses it;
- lines or stanzas apt cannot parse -> ``warn``.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from gpudoctor.checks import SkipCheck, require
from gpudoctor.data import load_table
from gpudoctor.facts import Facts
from gpudoctor.facts.mirrors import AptFacts, AptSource
from gpudoctor.model import Check, Command, Finding, Status
from gpudoctor.sources.apt import ProxyChoice, cache_https_form, proxy_for
from gpudoctor.sources.aptsources import classify_uri, is_distro_source
from gpudoctor.words import noun, verb

APT_UPDATE = "apt-get update"
#: re-read the sources after an edit (as root: in an image build, a ``RUN`` line)
UPDATE = Command(APT_UPDATE, "fetch the indexes again from the corrected sources", "root")
#: apt reads every source file for it and prints its own error for a malformed one
POLICY = Command("apt-cache policy", "the sources apt reads, and its own error for a malformed entry")
#: Debian and Ubuntu release codenames (Debian wiki "DebianReleases", Ubuntu wiki "Releases").
KNOWN_CODENAMES = {
    "buster",
    "bullseye",
    "bookworm",
    "trixie",
    "forky",
    "sid",
    "bionic",
    "focal",
    "jammy",
    "lunar",
    "mantic",
    "noble",
    "oracular",
    "plucky",
    "questing",
}


def official_domains() -> set[str]:
    """Domains of the official archives in the built-in catalogue (``debian.org``,
    ``ubuntu.com``): every host under them is the project's own archive or CDN."""
    domains = set()
    for row in load_table("mirrors").get("mirror", []):
        if row.get("official"):
            for key in ("debian", "debian_security", "ubuntu", "ubuntu_ports"):
                host = urlsplit(row.get(key, "")).hostname or ""
                if host:
                    domains.add(".".join(host.split(".")[-2:]))
    return domains


def is_official(host: str, official: set[str]) -> bool:
    """``host`` is one of ``official`` domains or a host under one of them."""
    return any(host == d or host.endswith("." + d) for d in official)


def _host(uri: str) -> str:
    return urlsplit(uri).hostname or uri


def _describe(src: AptSource) -> str:
    return f"{src.file}:{src.line}"


def _uri_kind(uri: str) -> str:
    """``debian``, ``debian_security`` or "" from the URI path (a host root, as ``security.debian.org/``, is "")."""
    path = urlsplit(uri).path.rstrip("/")
    if path.endswith("/debian-security"):
        return "debian_security"
    return "debian" if path.endswith("/debian") else ""


def _sed(old: str, new: str, file: str) -> str:
    return f"sed -i 's|{old}|{new}|' {file}"


def _edits(texts: list[str], purpose: str) -> tuple[Command, ...]:
    """The ``sed`` edits of files under /etc/apt (root), comments left out, then ``apt-get update``."""
    cmds = [Command(t, purpose, "root") for t in dict.fromkeys(texts) if not t.startswith("#")]
    return (*cmds, UPDATE) if cmds else ()


def _layout_findings(apt: AptFacts) -> list[Finding]:
    """Debian security-suite layout and archived releases (see the module docstring)."""
    table = load_table("apt_releases")
    security = {r["codename"]: r["suite"] for r in table.get("security", [])}
    archived = {r["codename"]: r for r in table.get("archived", [])}
    out: list[Finding] = []
    gone: list[tuple[AptSource, str, str]] = []
    wrong: list[tuple[AptSource, str, str, str]] = []  # source, uri, suite, what to write instead
    for src in (s for s in apt.sources if s.enabled and is_distro_source(s)):
        for uri in src.uris:
            host = _host(uri)
            kind = _uri_kind(uri)
            for suite in src.suites:
                cn = suite.split("/")[0].split("-")[0]
                row = archived.get(cn)
                if row is not None and host not in {_host(row["archive"]), _host(row.get("archive_security", ""))}:
                    gone.append((src, uri, suite))
                    continue
                if cn not in security:
                    continue
                good = security[cn]
                if suite == f"{cn}/updates" and good != suite:
                    wrong.append((src, uri, suite, f"suite `{good}` (Debian 11 renamed the security suite)"))
                elif suite.endswith("-security") and kind == "debian":
                    base = uri.rstrip("/")
                    wrong.append((src, uri, suite, f"URI `{base}-security` (the security archive is separate)"))
                elif kind == "debian_security" and suite not in (good, f"{cn}-security", f"{cn}/updates"):
                    if suite == cn:
                        wrong.append((src, uri, suite, f"suite `{good}` (the security archive has no other suite)"))
                    else:  # bookworm-updates, -backports: the regular archive's suites
                        base = uri.rstrip("/")[: -len("-security")]
                        wrong.append((src, uri, suite, f"URI `{base}` (`{suite}` is a suite of the regular archive)"))
    if gone:
        src, uri, suite = gone[0]
        cn = suite.split("/")[0].split("-")[0]
        row = archived[cn]
        names = sorted({g[2].split("/")[0].split("-")[0] for g in gone})
        lines = []
        moves = []
        for s, u, st in gone:
            r = archived[st.split("/")[0].split("-")[0]]
            target = r.get("archive_security", r["archive"]) if _uri_kind(u) == "debian_security" else r["archive"]
            lines.append(f"- `{_describe(s)}`: `{u}` `{st}` -> `{target}`")
            moves.append(_sed(u.rstrip("/"), target.rstrip("/"), s.file))
        sec = row.get("archive_security")
        explanation = (
            f"{', '.join(names)} reached its end of life and was removed from `{_host(uri)}` and the other regular "
            f"mirrors, so `{APT_UPDATE}` fails with \"The repository '{uri} {suite} Release' does not have a "
            f'Release file" (404). Its packages now live on `{_host(row["archive"])}` only:\n\n'
            + "\n".join(lines[:8])
            + "\n\nPoint the entries there (same signing keys; if apt then says a Release file has expired, "
            "add `Check-Valid-Until: no` to the deb822 stanza or `[check-valid-until=no]` to the one-line "
            "entry), e.g. for a one-line file:\n\n"
            f"    deb {row['archive']} {cn} main\n"
            + (f"    deb {sec} {security.get(cn, cn + '/updates')} main\n" if sec else "")
            + "\nBetter: move the image to a supported release (change the base image tag)."
        )
        out.append(
            Finding(
                check="apt.sources",
                status=Status.FAIL,
                summary=f"apt fetches {cn} from {_host(uri)}, which no longer carries it: the release moved to "
                f"{_host(row['archive'])}",
                explanation=explanation,
                evidence={"archived": names, "entries": [f"{_describe(s)} {u} {st}" for s, u, st in gone[:20]]},
                commands=_edits(moves[:8], "point the entry at the archive that still carries the release"),
                doc_url="https://www.debian.org/distrib/archive"
                if row["distro"] == "debian"
                else "https://help.ubuntu.com/community/EOLUpgrades",
            )
        )
    if wrong:
        src, uri, suite, instead = wrong[0]
        lines = [f"- `{_describe(s)}`: `{u}` `{st}` -> {i}" for s, u, st, i in wrong[:8]]
        cmds = []
        for s, u, st, i in wrong[:8]:
            if i.startswith("suite `"):
                good = i.split("`")[1]
                if s.format == "one-line":
                    cmds.append(f"sed -i '{s.line}s|{st}|{good}|' {s.file}")
                elif "/" in st:  # `<codename>/updates` appears nowhere else
                    cmds.append(_sed(st, good, s.file))
                else:
                    cmds.append(f"# {s.file}, stanza at line {s.line} (URIs: {u}): Suites: {good}")
            else:
                new_uri = i.split("`")[1]
                cmds.append(
                    f"# {s.file} line {s.line}: {s.types[0]} {new_uri} {st} {' '.join(s.components)}"
                    if s.format == "one-line"
                    else f"# {s.file}: move `{st}` out of this stanza into its own, with `URIs: {new_uri}`"
                )
        out.append(
            Finding(
                check="apt.sources",
                status=Status.FAIL,
                summary=f"apt asks {_host(uri)} for the Debian security suite in a form it does not serve: "
                f"{suite} on {uri}",
                explanation=(
                    "Debian serves security updates from a separate archive, `<host>/debian-security`, whose "
                    "suite is `<codename>-security` since Debian 11 (bullseye; buster and older used "
                    f"`<codename>/updates`). Any other combination is a 404, and `{APT_UPDATE}` stops with "
                    '"does not have a Release file" — or, with `-security` lines missing, the image gets no '
                    "security updates.\n\n"
                    + "\n".join(lines)
                    + "\n\nCorrect them:\n\n"
                    + "\n".join(f"    {c}" for c in dict.fromkeys(cmds))
                    + f"\n\nthen `{APT_UPDATE}`."
                ),
                evidence={"entries": [f"{_describe(s)} {u} {st}" for s, u, st, _ in wrong[:20]]},
                commands=_edits(cmds, "correct the security suite of the entry"),
                doc_url="https://www.debian.org/releases/bullseye/amd64/release-notes/ch-information.en.html#security-archive",
            )
        )
    return out


#: ``uname -m`` -> Debian architecture name (dpkg-architecture's table for the common CPUs).
DPKG_ARCH = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "i686": "i386",
    "i386": "i386",
    "aarch64": "arm64",
    "arm64": "arm64",
    "armv7l": "armhf",
    "armhf": "armhf",
    "ppc64le": "ppc64el",
    "ppc64el": "ppc64el",
    "s390x": "s390x",
    "riscv64": "riscv64",
}
#: Architectures Ubuntu's main archive (``/ubuntu``) carries; all others live in ``/ubuntu-ports``.
UBUNTU_MAIN_ARCHES = ("amd64", "i386")


def _ports_findings(apt: AptFacts) -> list[Finding]:
    arch = DPKG_ARCH.get(apt.machine, "")
    if apt.distro_id != "ubuntu" or not arch:
        return []
    want = "ubuntu" if arch in UBUNTU_MAIN_ARCHES else "ubuntu_ports"
    wrong: list[tuple[AptSource, str, str]] = []
    for src in (s for s in apt.sources if s.enabled and is_distro_source(s)):
        limited = (src.options.get("arch") or src.options.get("architectures") or "").replace(",", " ").split()
        if limited and arch not in limited:
            continue  # a foreign-architecture entry (dpkg --add-architecture)
        for uri in src.uris:
            kind = classify_uri(uri)
            if kind in ("ubuntu", "ubuntu_ports") and kind != want:
                base = uri.rstrip("/")
                if want == "ubuntu_ports":
                    new = (
                        "http://ports.ubuntu.com/ubuntu-ports"
                        if _host(uri) in ("archive.ubuntu.com", "security.ubuntu.com")
                        or _host(uri).endswith(".archive.ubuntu.com")
                        else base + "-ports"
                    )
                else:
                    new = (
                        "http://archive.ubuntu.com/ubuntu"
                        if _host(uri) == "ports.ubuntu.com"
                        else base[: -len("-ports")]
                    )
                wrong.append((src, uri, new + ("/" if uri.endswith("/") else "")))
    if not wrong:
        return []
    src, uri, new = wrong[0]
    cmds = list(dict.fromkeys(f"sed -i 's|{u}|{n}|g' {s.file}" for s, u, n in wrong))
    tree = "ubuntu-ports" if want == "ubuntu_ports" else "ubuntu"
    return [
        Finding(
            check="apt.sources",
            status=Status.FAIL,
            summary=f"apt source {uri} has no {arch} packages: this {arch} machine needs the /{tree} tree",
            explanation=(
                f"Ubuntu's main archive (`/ubuntu`) carries only amd64 and i386; every other architecture "
                f"(arm64 — Jetson, Grace, Graviton — armhf, ppc64el, s390x, riscv64) is in `/ubuntu-ports`, on "
                f'`ports.ubuntu.com` and on every mirror. Here `{APT_UPDATE}` fails with "Failed to fetch '
                f'{uri.rstrip("/")}/dists/.../binary-{arch}/Packages 404 Not Found" — typically after copying '
                f"an amd64 mirror guide.\n\n"
                + "\n".join(f"- `{_describe(s)}`: `{u}` -> `{n}`" for s, u, n in wrong[:8])
                + "\n\nSwitch them:\n\n"
                + "\n".join(f"    {c}" for c in cmds)
                + f"\n\nthen `{APT_UPDATE}`."
            ),
            evidence={"architecture": arch, "entries": [f"{_describe(s)} {u}" for s, u, _ in wrong[:20]]},
            commands=_edits(cmds, f"point the entry at the /{tree} tree"),
        )
    ]


def _rewrite_findings(apt: AptFacts) -> list[Finding]:
    out: list[Finding] = []
    absent = [r for r in apt.rewrites if not r.target_exists]
    active = [f for f in apt.files if not f.ignored and f.path.endswith(".sources")]
    active_distro = [s for s in apt.sources if s.enabled and s.format == "deb822" and is_distro_source(s)]
    if absent:
        targets = sorted({r.target for r in absent})
        pointing = sorted({u for s in active_distro for u in s.uris})
        where = ", ".join(f"`{f.path}`" for f in active) or "no deb822 file either"
        new_host = absent[0].replacement.split("/")[0]
        old_hosts = sorted({_host(u) for u in pointing}) or [absent[0].pattern.split("/")[0]]
        deb822 = active[0].path if active else "/etc/apt/sources.list.d/debian.sources"
        sed = " && ".join(f"sed -i 's|{h}|{new_host}|g' {deb822}" for h in old_hosts)
        scheme = urlsplit(pointing[0]).scheme if pointing else "http"
        summary = (
            f"mirror rewrite targets {', '.join(targets)}, which does not exist; apt reads "
            f"{', '.join(f.path.rsplit('/', 1)[-1] for f in active) or 'no sources'}"
            + (
                f" (still pointing to {', '.join(f'{urlsplit(u).scheme}://{_host(u)}' for u in pointing[:1])})"
                if pointing
                else ""
            )
        )
        cmds = "\n".join(f"- `{r.origin}`: `{r.command}`" for r in absent)
        expl = (
            f"The build edits {', '.join(f'`{t}`' for t in targets)}, but that file is not in this image: "
            f"since Debian 12 and Ubuntu 24.04 the distribution's apt sources are deb822 files in "
            f"`/etc/apt/sources.list.d/` ({where}). `sed` exits 2 and the build stops; where it is ignored, "
            f"apt keeps using the original hosts.\n\n{cmds}\n\n"
            f"Edit the deb822 file instead (one substitution covers both `/debian` and `/debian-security`):\n\n"
            f"    {sed}\n\n"
            f"A Dockerfile that works on both layouts tests which file exists:\n\n"
            f"    if [ -f {deb822} ]; then {sed}; else sed -i 's|{old_hosts[0]}|{new_host}|g' "
            f"/etc/apt/sources.list; fi\n\n"
            f"Or let gpudoctor edit the image root: `gpudoctor fix apt.mirror --root DIR --mirror "
            f"{scheme}://{new_host}/{'ubuntu' if apt.distro_id == 'ubuntu' else 'debian'}`"
            f"{' --allow-insecure' if scheme == 'http' else ''}, then `{APT_UPDATE}`."
        )
        out.append(
            Finding(
                check="apt.sources",
                status=Status.FAIL,
                summary=summary,
                explanation=expl,
                evidence={
                    "rewrites": [r.command for r in absent],
                    "absent": targets,
                    "active_files": [f.path for f in active],
                    "uris": pointing,
                },
                fixes=("apt.mirror",),
            )
        )
    not_in_effect = _not_in_effect(apt, official_domains())
    out += not_in_effect
    no_match = [r for r in apt.rewrites if r.target_exists and not r.matches]
    official = official_domains()
    if not_in_effect or (
        apt.build_file
        and apt.built_sources
        and not any(
            s.enabled and is_distro_source(s) and any(is_official(_host(u), official) for u in s.uris)
            for s in apt.built_sources
        )
    ):
        no_match = []  # reported above, or harmless: after the build apt reads only the mirror
    if no_match:
        lines = "\n".join(f"- `{r.origin}`: `{r.pattern}` does not occur in `{r.target}`" for r in no_match)
        out.append(
            Finding(
                check="apt.sources",
                status=Status.WARN,
                summary=f"mirror rewrite pattern {no_match[0].pattern!r} matches nothing in {no_match[0].target}",
                explanation=f"The `sed` command succeeds but changes nothing, so apt keeps using the "
                f"original host.\n\n{lines}\n\nLook at the URIs actually in the file "
                f"(`grep -r URIs /etc/apt/sources.list.d/`) and match those.",
                evidence={"rewrites": [r.command for r in no_match]},
                fixes=("apt.mirror",),
            )
        )
    return out


def _mirror_host(text: str) -> str:
    """Host (with port) named in a sed replacement or URL: ``http://m:3142/ubuntu`` -> ``m:3142``."""
    text = text.strip()
    if "://" in text:
        parts = urlsplit(text)
        return parts.netloc.rsplit("@", 1)[-1]
    return text.split("/", 1)[0]


def _not_in_effect(apt: AptFacts, official: set[str]) -> list[Finding]:
    """The build meant to switch apt to a mirror, but after its edits apt still reads official hosts."""
    if not apt.build_file or any(not e.target_exists and e.action == "sed" for e in apt.build_edits):
        return []  # no build file, or the build stops at a sed on a missing file (reported as fail)
    intended: list[str] = []
    for e in apt.build_edits:
        if e.action == "sed" and e.replacement:
            host = _mirror_host(e.replacement)
            if host and not is_official(host.split(":")[0], official):
                intended.append(e.replacement)
        elif e.action in ("write", "append", "copy", "cp") and e.content:
            for m in re.finditer(r"\b(?:https?|ftp)://[^\s\]]+", e.content):
                if not is_official(urlsplit(m.group(0)).hostname or "", official):
                    intended.append(m.group(0))
    if not intended:
        return []
    still = [
        s
        for s in apt.built_sources
        if s.enabled and is_distro_source(s) and any(is_official(_host(u), official) for u in s.uris)
    ]
    if not still:
        return []
    files = sorted({s.file for s in still})
    hosts = sorted({_host(u) for s in still for u in s.uris if is_official(_host(u), official)})
    mirror = intended[0]
    noop = [e for e in apt.build_edits if e.action == "sed" and e.target_exists and not e.changed]
    empty_targets = sorted({e.path for e in noop if not any(s.enabled for s in apt.built_sources if s.file == e.path)})
    if empty_targets:
        why = (
            f"the rewrite edits {', '.join(empty_targets)}, which has no active entries "
            f"(only comments), so `sed` succeeds and changes nothing"
        )
    elif noop:
        why = f"the rewrite's pattern `{noop[0].pattern}` matches nothing in {noop[0].path}"
    else:
        why = "the build edits other files than the ones apt reads for these archives"
    summary = (
        f"configured apt mirror {mirror} is not in effect: {why.split(', so')[0]}; "
        f"{', '.join(files)} still point{'s' if len(files) == 1 else ''} to {', '.join(hosts)}"
    )
    subs = [e for e in noop if e.pattern] or [e for e in apt.build_edits if e.action == "sed" and e.pattern]
    script = "; ".join(dict.fromkeys(f"s|{e.pattern}|{e.replacement}|g" for e in subs))
    targets = list(dict.fromkeys([e.path for e in noop] + files))
    lines = "\n".join(dict.fromkeys(f"- `{e.origin}`: `{e.command}`" for e in (noop or apt.build_edits)))
    expl = (
        f"The build means apt to use `{mirror}`, but {why}. apt reads the deb822 "
        f"{noun(len(files), 'file')} {', '.join(f'`{f}`' for f in files)} (Debian 12 and Ubuntu 24.04 "
        f"moved the distribution's sources there), and {verb(len(files), 'it', 'they')} still "
        f"{verb(len(files), 'names', 'name')} {', '.join(f'`{h}`' for h in hosts)}: every `apt-get update` goes to "
        f"the public archive.\n\n{lines}\n\n"
    )
    if script:
        expl += (
            "Apply the rewrite to whichever of the files exists:\n\n"
            f'    for f in {" ".join(targets)}; do [ -f "$f" ] && sed -i "{script}" "$f"; done\n\n'
            "(deb822 `URIs:` often end in `/`; a pattern without the trailing slash still matches.) "
        )
    expl += (
        f"Or let gpudoctor edit the image root: `gpudoctor fix apt.mirror --root DIR --mirror {mirror}"
        f"{' --allow-insecure' if mirror.startswith('http://') else ''}`, then `{APT_UPDATE}`."
    )
    return [
        Finding(
            check="apt.sources",
            status=Status.WARN,
            summary=summary,
            explanation=expl,
            evidence={
                "mirror": mirror,
                "still_official": files,
                "hosts": hosts,
                "noop_rewrites": [e.command for e in noop],
            },
            fixes=("apt.mirror",),
        )
    ]


def _untouched_findings(apt: AptFacts, official: set[str]) -> list[Finding]:
    enabled = [s for s in apt.sources if s.enabled]
    by_archive: dict[str, dict[str, set[str]]] = {}
    for s in enabled:
        if not is_distro_source(s):
            continue
        for u in s.uris:
            arch = classify_uri(u)
            if arch:
                by_archive.setdefault(arch, {}).setdefault(s.format, set()).add(_host(u))
    for formats in by_archive.values():
        one, d822 = formats.get("one-line", set()), formats.get("deb822", set())
        switched = sorted(h for h in one if not is_official(h, official))
        untouched = sorted(h for h in d822 if is_official(h, official))
        if switched and untouched:
            mirror, still = switched[0], untouched[0]
            files = sorted({s.file for s in enabled if s.format == "deb822" and any(_host(u) == still for u in s.uris)})
            return [
                Finding(
                    check="apt.sources",
                    status=Status.FAIL,
                    summary=f"sources.list was switched to {mirror}, but {', '.join(files)} still points at {still}",
                    explanation=(
                        f"The mirror rewrite edited the one-line `sources.list`, while apt also reads the "
                        f"deb822 {noun(len(files), 'file')} {', '.join(f'`{f}`' for f in files)}, which still "
                        f"{verb(len(files), 'uses', 'use')} `{still}`: apt "
                        f"fetches every index from both hosts and the slow one still dominates.\n\n"
                        f"Rewrite the deb822 file too: `gpudoctor fix apt.mirror --mirror "
                        f"{urlsplit(next(u for s in enabled for u in s.uris if _host(u) == mirror)).scheme}://"
                        f"{mirror}/...` (or `sed -i 's|{still}|{mirror}|g' {files[0]}`), and remove the "
                        f"duplicate lines from `/etc/apt/sources.list`; then `{APT_UPDATE}`."
                    ),
                    evidence={"one_line_hosts": sorted(one), "deb822_hosts": sorted(d822)},
                    fixes=("apt.mirror",),
                )
            ]
    return []


def https_through_proxies(apt: AptFacts) -> list[tuple[AptSource, str, ProxyChoice]]:
    """(source, https URI, the proxy apt uses for it) for every enabled https source that goes through a proxy."""
    conf = {k: (v, apt.proxy_conf_origin.get(k, "")) for k, v in apt.proxy_conf.items()}
    out = []
    for s in apt.sources:
        for u in s.uris if s.enabled else ():
            if u.startswith("https://"):
                choice = proxy_for(u, conf, apt.proxy_env)
                if choice.proxy:
                    out.append((s, u, choice))
    return out


def _proxy_findings(apt: AptFacts) -> list[Finding]:
    """https sources sent through a proxy that does not (or, for apt-cacher-ng, by default does not) tunnel."""
    rows = https_through_proxies(apt)
    denied = [r for r in rows if apt.tunnels.get(r[2].proxy, "").startswith("denied")]
    cache = [r for r in rows if r[2].cache and r[2].proxy not in apt.tunnels]
    bad = denied or cache
    if not bad:
        return []
    s0, u0, c0 = bad[0]
    hosts = sorted({urlsplit(u).hostname or "" for _, u, _ in bad})
    answer = apt.tunnels.get(c0.proxy, "")
    forms = "\n".join(f"    {u}  ->  {cache_https_form(u, c.proxy)}" for _, u, c in bad[:6])
    direct = "\n".join(f'    Acquire::https::Proxy::{h} "DIRECT";' for h in hosts[:6])
    direct_cmd = Command(
        "printf '%s\\n' "
        + " ".join(f"'Acquire::https::Proxy::{h} \"DIRECT\";'" for h in hosts[:6])
        + " > /etc/apt/apt.conf.d/99https-direct",
        "let apt fetch these https sources directly, past the proxy (option 2)",
        "root",
    )
    lines = "\n".join(f"- `{_describe(s)}` `{u}` via `{c.proxy}` ({c.origin})" for s, u, c in bad[:8])
    if denied:
        summary = (
            f"apt sends https sources through the proxy {c0.proxy}, which refuses to tunnel them "
            f"({answer.removeprefix('denied: ')}): apt-get update fails for {', '.join(hosts[:3])}"
        )
        status = Status.FAIL
        lead = (
            f"apt reaches an https archive through a proxy with a `CONNECT` tunnel. Asked for one, "
            f"`{c0.proxy}` answered `{answer.removeprefix('denied: ')}`, so `apt-get update` reports "
            f'"Invalid response from proxy: ... 403 CONNECT denied" / "Received HTTP code 403 from proxy after '
            f'CONNECT" for these sources and skips them.'
        )
    else:
        summary = (
            f"apt sends https sources through the apt-cacher-ng proxy {c0.proxy} ({c0.origin}), which refuses "
            f"https tunnels unless its PassThroughPattern allows them"
        )
        status = Status.WARN
        lead = (
            f"`{c0.proxy}` listens on apt-cacher-ng's port. apt sends an https source through it as a "
            f"`CONNECT` tunnel (an `Acquire::http::Proxy` carries https too unless `Acquire::https::Proxy` says "
            f"otherwise), and apt-cacher-ng denies tunnels by default: `apt-get update` then fails with "
            f'"403 CONNECT denied (ask the admin to allow HTTPS tunnels)". (Not probed: --offline.)'
        )
    return [
        Finding(
            check="apt.sources",
            status=status,
            summary=summary,
            explanation=(
                f"{lead}\n\n{lines}\n\nAny one of these ends it:\n\n"
                f"1. fetch through the cache without a tunnel, with apt-cacher-ng's own form of the URI:\n\n"
                f"{forms}\n\n"
                f"2. let https go direct where the network allows it, in `/etc/apt/apt.conf.d/99https-direct`:\n\n"
                f"{direct}\n\n"
                f"3. allow tunnels on the cache (`/etc/apt-cacher-ng/acng.conf`): `PassThroughPattern: ^(.*):443$`."
            ),
            evidence={
                "proxy": c0.proxy,
                "origin": c0.origin,
                "tunnel": answer or "not probed",
                "sources": [f"{_describe(s)} {u}" for s, u, _ in bad],
            },
            commands=(direct_cmd, UPDATE),
        )
    ]


def evaluate(facts: Facts) -> list[Finding]:
    apt = require(facts, AptFacts)
    findings: list[Finding] = []
    findings += _rewrite_findings(apt)
    findings += _untouched_findings(apt, official_domains())
    findings += _layout_findings(apt)
    findings += _ports_findings(apt)
    findings += _proxy_findings(apt)
    if apt.missing_keyrings:
        users = [
            s
            for s in apt.sources
            if s.enabled
            and any(k in apt.missing_keyrings for k in (s.options.get("signed-by") or "").replace(",", " ").split())
        ]
        keyring = apt.missing_keyrings[0]
        distro_key = keyring.endswith(("debian-archive-keyring.gpg", "ubuntu-archive-keyring.gpg"))
        key_pkg = keyring.rsplit("/", 1)[-1].removesuffix(".gpg")
        install = (
            f"`apt-get install --reinstall {keyring.rsplit('/', 1)[-1].removesuffix('.gpg')}` (from a source that still "
            f"works), or copy the keyring into the image before this file"
            if distro_key
            else "install the repository's keyring package or download its key into that path as its vendor "
            "documents (NVIDIA's CUDA repo: `cuda-keyring`), before `apt-get update`"
        )
        findings.append(
            Finding(
                check="apt.sources",
                status=Status.FAIL,
                summary=f"apt source {_describe(users[0]) if users else ''} is signed by {keyring}, which does not exist: "
                f"apt refuses the repository",
                explanation=(
                    "`Signed-By` names the only keys apt accepts for that repository. The file is missing, so "
                    f'`{APT_UPDATE}` reports `NO_PUBKEY` / "The repository ... is not signed" and ignores (or, '
                    f"with apt 2.x, refuses) it:\n\n"
                    + "\n".join(
                        f"- `{_describe(s)}` ({' '.join(s.uris)}): `{s.options.get('signed-by')}`" for s in users[:8]
                    )
                    + f"\n\nFix: {install}. Missing: "
                    + ", ".join(f"`{k}`" for k in apt.missing_keyrings)
                    + "."
                ),
                evidence={"missing_keyrings": list(apt.missing_keyrings), "sources": [_describe(s) for s in users]},
                commands=(
                    Command(f"apt-get install --reinstall {key_pkg}", "put the distribution's keyring back", "root"),
                )
                if distro_key
                else (),
            )
        )
    enabled = [s for s in apt.sources if s.enabled]
    https = [s for s in enabled if any(u.startswith("https://") for u in s.uris)]
    if https and not apt.ca_certificates:
        where = ", ".join(sorted({_describe(s) for s in https})[:4])
        findings.append(
            Finding(
                check="apt.sources",
                status=Status.FAIL,
                summary="https apt sources, but ca-certificates is not installed: apt cannot verify the mirror",
                explanation=(
                    f"{where} use https, and `/etc/ssl/certs/ca-certificates.crt` does not exist, so "
                    f"`apt-get update` fails with 'No system certificates available' / certificate errors "
                    f"(slim images leave ca-certificates out).\n\nInstall it over http first, then switch: "
                    f"`apt-get update && apt-get install -y ca-certificates` with an http:// mirror "
                    f"(`gpudoctor fix apt.mirror --mirror URL --allow-insecure`), or keep http sources "
                    f"(the archive is signed; https only hides which packages you fetch)."
                ),
                evidence={"https_sources": [_describe(s) for s in https]},
                fixes=("apt.mirror",),
            )
        )
    if apt.codename:
        wrong = []
        for s in enabled:
            if not is_distro_source(s):
                continue
            for suite in s.suites:
                base = suite.split("/")[0].split("-")[0]
                if base in KNOWN_CODENAMES and base != apt.codename and base != "sid":
                    wrong.append((s, suite))
        if wrong:
            s, suite = wrong[0]
            seds = [
                f"sed -i '{x.line}s/\\b{y.split('/')[0].split('-')[0]}\\b/{apt.codename}/g' {x.file}"
                if x.format == "one-line"
                else f"sed -i '/^Suites:/s/\\b{y.split('/')[0].split('-')[0]}\\b/{apt.codename}/g' {x.file}"
                for x, y in wrong
            ]
            findings.append(
                Finding(
                    check="apt.sources",
                    status=Status.FAIL,
                    summary=f"apt suite {suite!r} in {_describe(s)} does not match this system's release ({apt.codename})",
                    explanation=(
                        f"Mixing releases pulls libraries built for another {apt.distro_id or 'distribution'} "
                        f"release and breaks dependencies on the next upgrade.\n\n"
                        + "\n".join(f"- `{_describe(x)}`: suite `{y}`" for x, y in wrong)
                        + f"\n\nReplace `{suite.split('-')[0]}` with `{apt.codename}` in those entries, then "
                        f"`{APT_UPDATE}`."
                    ),
                    evidence={"codename": apt.codename, "suites": [y for _, y in wrong]},
                    commands=_edits(seds[:8], f"use this system's release, {apt.codename}"),
                )
            )
    seen: dict[tuple[str, str, str, str], AptSource] = {}
    dups: list[tuple[AptSource, AptSource, str]] = []
    for s in enabled:
        for t in s.types:
            for u in s.uris:
                for suite in s.suites:
                    for comp in s.components or ("",):
                        key = (t, u.rstrip("/"), suite, comp)
                        if key in seen and seen[key] is not s:
                            dups.append((seen[key], s, f"{t} {u} {suite} {comp}".strip()))
                        else:
                            seen.setdefault(key, s)
    if dups:
        a, b, what = dups[0]
        one = b if b.format == "one-line" else a if a.format == "one-line" else None
        findings.append(
            Finding(
                check="apt.sources",
                status=Status.WARN,
                summary=f"apt source listed twice: {what} ({_describe(a)} and {_describe(b)})",
                explanation=(
                    "apt prints 'Target ... is configured multiple times' and downloads the indexes twice. "
                    "Typical after converting to deb822 without removing the old line (or running `apt "
                    "modernize-sources`). Remove one of them:\n\n"
                    + "\n".join(f"- `{x.file}:{x.line}` = `{y.file}:{y.line}`: {w}" for x, y, w in dups[:8])
                ),
                evidence={"duplicates": [w for _, _, w in dups[:50]], "duplicate_count": len(dups)},
                commands=(
                    *(
                        (Command(f"sed -i '{one.line}s/^/# /' {one.file}", "comment out the one-line copy", "root"),)
                        if one is not None
                        else ()
                    ),
                    POLICY,
                ),
            )
        )
    broken = [f for f in apt.files if f.note and not f.ignored]
    if broken:
        findings.append(
            Finding(
                check="apt.sources",
                status=Status.FAIL,
                summary=f"apt cannot read part of {broken[0].path}",
                explanation="\n".join(f"- {f.note}" for f in broken) + "\n\napt refuses a malformed entry with "
                '"E: Malformed entry ... The list of sources could not be read" and then does nothing '
                "(`apt-get update` and every install fail). Fix them by hand (gpudoctor does not guess "
                "what was meant), then run `apt-get update`.",
                evidence={"files": [f.path for f in broken]},
                commands=(POLICY,),
            )
        )
    if findings:
        return sorted(findings, key=lambda f: -f.status.severity)
    if not enabled:
        raise (
            SkipCheck("no enabled apt sources")
            if not apt.files
            else SkipCheck("every apt source is disabled (Enabled: no) or commented out")
        )
    files = sorted({s.file for s in enabled})
    formats = sorted({s.format for s in enabled})
    return [
        Finding(
            check="apt.sources",
            status=Status.OK,
            summary=(
                f"{len(enabled)} apt source{'s' if len(enabled) != 1 else ''} in {len(files)} "
                f"file{'s' if len(files) != 1 else ''} ({', '.join(formats)}) "
                f"look{'s' if len(enabled) == 1 else ''} consistent"
            ),
            evidence={"files": files, "codename": apt.codename},
        )
    ]


CHECK = Check(
    id="apt.sources",
    title="apt sources consistent (deb822 vs sources.list, suites, https, duplicates)",
    needs=("apt",),
    evaluate=evaluate,
)
