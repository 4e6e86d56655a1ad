"""Fix ``apt.mirror``: point the distro's apt sources at another mirror, in place.

Rewrites only the URIs of enabled distro archive entries (``/debian``,
``/debian-security``, ``/ubuntu``, ``/ubuntu-ports``) in ``sources.list``,
``sources.list.d/*.list`` and deb822 ``*.sources`` files; suites, components,
options, ``Signed-By``, comments, field order, disabled stanzas and
third-party repositories stay as they are. The security archive moves only
to a mirror that carries it (else it stays official). ``http://`` needs
``--allow-insecure``; an https mirror in an image without ca-certificates is
refused. Afterwards ``apt-get update`` is printed, never run.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from gpudoctor.checks.apt_sources import is_official, official_domains
from gpudoctor.facts import Facts
from gpudoctor.facts.mirrors import AptFacts, MirrorsFacts
from gpudoctor.fixes._mirror_choice import APT_ARCHIVES, choose, truthy
from gpudoctor.fixes._verify import verified_edit
from gpudoctor.model import FileEdit, Finding, Fix, FixPlan, FixRefused
from gpudoctor.sources.apt import cache_https_form, proxy_for
from gpudoctor.sources.aptsources import (
    SourcesError,
    classify_uri,
    distro_archive,
    is_distro_source,
    replace_base,
    rewrite_deb822,
    rewrite_one_line,
)

NOTES = (
    "Run `apt-get update` now (gpudoctor does not run it).",
    "If `apt-get update` then reports 'Hash Sum mismatch' or 'File has unexpected size', old lists from the previous "
    "mirror are in the way: `rm -rf /var/lib/apt/lists/*` and run `apt-get update` again.",
)


#: archives that carry security updates: moved only to a URL a probe verified for the suite
SECURITY = frozenset({"debian_security", "ubuntu_security"})


def verified_suite(facts: Facts, url: str, suites: tuple[str, ...]) -> bool:
    """True when a successful mirror probe fetched ``<url>/dists/<suite>/InRelease`` for every
    one of ``suites`` (the probe checks the InRelease names that suite)."""
    mirrors = facts.get("mirrors")
    if not isinstance(mirrors, MirrorsFacts):
        return False
    probes = list(mirrors.configured) + [p for rows in mirrors.rankings.values() for p in rows]
    base = url.rstrip("/")
    ok = {p.probe_url for p in probes if p.status == "ok" and p.base_url.rstrip("/") == base}
    return bool(suites) and all(any(f"{base}/dists/{s}/" in u for u in ok) for s in suites)


def sources_meaning(old, new, mapper) -> str | None:
    """None when the parsed ``new`` sources are the parsed ``old`` ones with exactly the URIs
    ``mapper`` rewrites changed (types, suites, components, enabled state kept)."""
    if old is None:
        return None
    # two URIs of one stanza moved to the same mirror are written once (apt would fetch it twice)
    want = [
        (t, tuple(dict.fromkeys(mapper(u, s, c, e) or u for u in uris)), s, c, e)
        for (t, uris, s, c, e) in old["sources"]
    ]
    got = [(t, tuple(uris), s, c, e) for (t, uris, s, c, e) in new["sources"]]
    if got != want:
        return "the sources would differ from the old ones in more than the rewritten URIs"
    return None


def plan(facts: Facts, finding: Finding, options: Mapping[str, str]) -> FixPlan | None:
    apt = facts.get("apt")
    if not isinstance(apt, AptFacts):
        return None
    scope = (options.get("scope") or "").strip()
    if scope in ("user", "site"):
        raise FixRefused(
            f"apt reads only the system's sources (/etc/apt/sources.list, /etc/apt/sources.list.d/); "
            f"there is no {scope} file to edit. Rerun with --scope global, or without --scope"
        )
    distro = [s for s in apt.sources if s.enabled and is_distro_source(s)]
    if not distro:
        return None
    current = tuple(u for s in distro for u in s.uris)
    label, urls = choose(facts, "apt", options, APT_ARCHIVES, exclude=current)
    if any(u.startswith("https://") for u in urls.values()) and not apt.ca_certificates:
        raise FixRefused(
            "this system has no CA certificates (/etc/ssl/certs/ca-certificates.crt is missing), so apt "
            "cannot use an https mirror: install ca-certificates first, or choose an http:// mirror "
            "with --allow-insecure"
        )
    conf = {k: (v, apt.proxy_conf_origin.get(k, "")) for k, v in apt.proxy_conf.items()}
    for new_url in sorted({u for u in urls.values() if u.startswith("https://")}):
        choice = proxy_for(new_url, conf, apt.proxy_env)
        answer = apt.tunnels.get(choice.proxy, "")
        if choice.proxy and (answer.startswith("denied") or (choice.cache and not answer)):
            raise FixRefused(
                f"apt would reach {new_url} through the proxy {choice.proxy} ({choice.origin}), which "
                + (
                    f"refuses https tunnels ({answer.removeprefix('denied: ')})"
                    if answer
                    else "is apt-cacher-ng: it refuses https tunnels unless PassThroughPattern allows them"
                )
                + f"; nothing was written. Use the mirror's http:// URL through the cache "
                f"(`--mirror {cache_https_form(new_url, choice.proxy)}`), or let https go direct "
                f'(`Acquire::https::Proxy "DIRECT";`) first'
            )
    primary = [a for a in (classify_uri(u) for u in current) if a in ("debian", "ubuntu", "ubuntu_ports")]
    if primary and primary[0] not in urls:
        raise FixRefused(f"mirror {label} has no {primary[0].replace('_', '-')} archive")

    left_alone: list[str] = []
    named = (options.get("security-mirror") or "").strip().rstrip("/")

    def security_ok(url: str, suites: tuple[str, ...]) -> bool:
        # named by the user (--set security-mirror=URL), or verified by a probe for these suites
        return (bool(named) and url.rstrip("/") == named) or verified_suite(facts, url, suites)

    def mapper(uri: str, suites: tuple[str, ...], components: tuple[str, ...], enabled: bool) -> str | None:
        if not enabled:
            return None
        arch = distro_archive(uri, components)
        if arch is None or arch not in urls:
            return None
        if arch in SECURITY and not security_ok(urls[arch], suites):
            note = f"{uri} ({' '.join(suites)})"
            if note not in left_alone:
                left_alone.append(note)
            return None
        return replace_base(uri, urls[arch])

    insecure_ok = truthy(options.get("allow-insecure", "")) or truthy(options.get("allow_insecure", ""))
    official = official_domains()

    def final(uri: str, suites: tuple[str, ...], components: tuple[str, ...], enabled: bool) -> str | None:
        """The URI after this fix: the mirror's, or, without CA certificates, an official archive's
        own http:// form (the archive is signed; only the transport changes)."""
        new = mapper(uri, suites, components, enabled)
        if new is not None or apt.ca_certificates or not enabled or not uri.startswith("https://"):
            return new
        if insecure_ok and distro_archive(uri, components) and is_official(urlsplit(uri).hostname or "", official):
            return "http://" + uri[len("https://") :]
        return None

    if not apt.ca_certificates:
        stuck = [
            f"{s.file}:{s.line} ({u})"
            for s in apt.sources
            if s.enabled
            for u in s.uris
            if u.startswith("https://") and not (final(u, s.suites, s.components, True) or u).startswith("http://")
        ]
        if stuck:
            raise FixRefused(
                "this system has no CA certificates (/etc/ssl/certs/ca-certificates.crt is missing), and after "
                f"this fix apt would still fetch over https, which it cannot verify: {', '.join(stuck[:4])}. "
                "Nothing was written. Install the certificates first (`apt-get update && apt-get install -y "
                "ca-certificates` while those sources are http://), or move them by hand; "
                + (
                    "an official archive goes to its own http:// URL with --allow-insecure"
                    if not insecure_ok
                    else "a third-party or non-official https source cannot be switched to http by this fix"
                )
            )

    edits: list[FileEdit] = []
    for f in apt.files:
        if f.ignored or not any(s.file == f.path for s in distro):
            continue
        try:
            new = rewrite_deb822(f.text, final) if f.format == "deb822" else rewrite_one_line(f.text, final)
        except SourcesError as exc:
            raise FixRefused(f"{f.path}: {exc}; fix it by hand first") from None
        kind = "apt-deb822" if f.format == "deb822" else "apt-list"
        manual = (
            f"in {f.path}, replace the archive URIs: "
            + "; ".join(
                f"{u} -> {urls[distro_archive(u, s.components)]}"
                for s in distro
                if s.file == f.path
                for u in s.uris
                if distro_archive(u, s.components) in urls
                and (
                    distro_archive(u, s.components) not in SECURITY
                    or security_ok(urls[distro_archive(u, s.components)], s.suites)
                )
            )
            + " (and nothing else)"
        )
        edits.append(
            verified_edit(
                f.path, f.text, new, manual, kind=kind, meaning=lambda a, b, kind=kind: sources_meaning(a, b, final)
            )
        )
    kept = sorted({u for s in distro for u in s.uris if classify_uri(u) not in urls})
    kept_official = [u for u in kept if is_official(urlsplit(u).hostname or "", official)]
    kept_other = [u for u in kept if u not in kept_official]
    plain = sorted(
        {
            u
            for s in distro
            for u in s.uris
            if mapper(u, s.suites, s.components, s.enabled) is None
            and (final(u, s.suites, s.components, s.enabled) or "").startswith("http://")
        }
    )
    desc = f"point apt at {label}: rewrite the archive URIs in {', '.join(e.path for e in edits if e.changes_anything) or 'no file (already there)'}"
    given = "://" in (options.get("mirror") or "")
    why = (
        (
            "--mirror URL is used as given for the main archive; the security archive moves only with "
            "`--set security-mirror=URL` (check first that the mirror carries it: "
            "`curl -fsI URL/dists/<codename>-security/InRelease`)"
        )
        if given
        else "the mirror has no copy"
    )
    notes = NOTES + ((f"Kept on the official host ({why}): {', '.join(kept_official)}",) if kept_official else ())
    if kept_other:
        notes += (f"Left where they are ({why}; not an official host): {', '.join(kept_other)}",)
    if plain and not apt.ca_certificates:
        notes += (
            "Without CA certificates apt cannot verify https, so these official archives now use their own "
            f"http:// URL (the archive's signature still protects the packages): {', '.join(plain)}. "
            "Install `ca-certificates` and switch back to https if you want.",
        )
    if left_alone:
        notes += (
            f"The security archive was left alone: no probe verified that {label} serves "
            f"{', '.join(left_alone)} (security updates must not stop); rank mirrors with "
            f"`gpudoctor mirrors` and rerun, or edit it by hand once you have checked the mirror.",
        )
    moves = {
        f"uri:{u.rstrip('/')}": n.rstrip("/")
        for s in distro
        if any(e.path == s.file for e in edits)
        for u in s.uris
        if (n := final(u, s.suites, s.components, s.enabled)) and n.rstrip("/") != u.rstrip("/")
    }
    return FixPlan(
        fix="apt.mirror",
        description=desc,
        edits=tuple(edits),
        addresses=("apt.mirror", "apt.sources"),
        notes=notes,
        intent=moves,
    )


def verify(facts: Facts, plan: FixPlan) -> str | None:
    """Re-read every sources file apt reads (``sources.list``, ``sources.list.d/*.list`` and
    ``*.sources``, in apt's order, ignored names skipped) and say which enabled entry still points
    apt at an archive URI the plan moved, or that apt does not read the moved entries."""
    apt = facts.get("apt")
    if not isinstance(apt, AptFacts):
        return f"apt's sources could not be read again ({getattr(apt, 'reason', 'not collected')})"
    enabled = [(s, u.rstrip("/")) for s in apt.sources if s.enabled for u in s.uris]
    for s, u in enabled:
        if f"uri:{u}" in plan.intent:
            return f"{s.file}:{s.line} still wins: apt still fetches {u} there"
    now = {u for _, u in enabled}
    gone = sorted({n for n in plan.intent.values() if n not in now})
    if gone:
        return f"apt reads no enabled entry with {gone[0]} (is {', '.join(e.path for e in plan.edits)} read by apt?)"
    return None


FIX = Fix(
    id="apt.mirror",
    title="Switch apt's distro sources (one-line and deb822) to a faster mirror",
    addresses=("apt.mirror", "apt.sources"),
    plan=plan,
    verify=verify,
)
