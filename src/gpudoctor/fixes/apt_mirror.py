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

from gpudoctor.facts import Facts
from gpudoctor.facts.mirrors import AptFacts
from gpudoctor.fixes._mirror_choice import APT_ARCHIVES, choose
from gpudoctor.mirrors.aptsources import (
    SourcesError,
    classify_uri,
    distro_archive,
    is_distro_source,
    replace_base,
    rewrite_deb822,
    rewrite_one_line,
)
from gpudoctor.model import FileEdit, Finding, Fix, FixPlan, FixRefused

NOTES = (
    "Run `apt-get update` now (gpudoctor does not run it).",
    "If `apt-get update` then reports 'Hash Sum mismatch' or 'File has unexpected size', old lists from the previous "
    "mirror are in the way: `rm -rf /var/lib/apt/lists/*` and run `apt-get update` again.",
)


def plan(facts: Facts, finding: Finding, options: Mapping[str, str]) -> FixPlan | None:
    apt = facts.get("apt")
    if not isinstance(apt, AptFacts):
        return None
    distro = [s for s in apt.sources if s.enabled and is_distro_source(s)]
    if not distro:
        return None
    current = tuple(u for s in distro for u in s.uris)
    label, urls = choose(facts, "apt", options, APT_ARCHIVES, exclude=current)
    if any(u.startswith("https://") for u in urls.values()) and not apt.ca_certificates:
        raise FixRefused("this system has no CA certificates (/etc/ssl/certs/ca-certificates.crt is missing), so apt "
                         "cannot use an https mirror: install ca-certificates first, or choose an http:// mirror "
                         "with --allow-insecure")
    primary = [a for a in (classify_uri(u) for u in current) if a in ("debian", "ubuntu", "ubuntu_ports")]
    if primary and primary[0] not in urls:
        raise FixRefused(f"mirror {label} has no {primary[0].replace('_', '-')} archive")

    def mapper(uri: str, suites: tuple[str, ...], components: tuple[str, ...], enabled: bool) -> str | None:
        if not enabled:
            return None
        arch = distro_archive(uri, components)
        if arch is None or arch not in urls:
            return None
        return replace_base(uri, urls[arch])

    edits: list[FileEdit] = []
    for f in apt.files:
        if f.ignored or not any(s.file == f.path for s in distro):
            continue
        try:
            new = rewrite_deb822(f.text, mapper) if f.format == "deb822" else rewrite_one_line(f.text, mapper)
        except SourcesError as exc:
            raise FixRefused(f"{f.path}: {exc}; fix it by hand first") from None
        edits.append(FileEdit(path=f.path, old_text=f.text, new_text=new))
    kept = sorted({u for s in distro for u in s.uris if classify_uri(u) not in urls})
    desc = f"point apt at {label}: rewrite the archive URIs in {', '.join(e.path for e in edits if e.changes_anything) or 'no file (already there)'}"
    given = "://" in (options.get("mirror") or "")
    why = ("--mirror URL is used as given for the main archive; the security archive moves only with "
           "`--set security-mirror=URL` (check first that the mirror carries it: "
           "`curl -fsI URL/dists/<codename>-security/InRelease`)") if given else "the mirror has no copy"
    notes = NOTES + ((f"Kept on the official host ({why}): {', '.join(kept)}",) if kept else ())
    return FixPlan(fix="apt.mirror", description=desc, edits=tuple(edits), addresses=("apt.mirror", "apt.sources"),
                   notes=notes)


FIX = Fix(id="apt.mirror", title="Switch apt's distro sources (one-line and deb822) to a faster mirror",
          addresses=("apt.mirror", "apt.sources"), plan=plan)
