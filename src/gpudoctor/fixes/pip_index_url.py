"""Fix ``pip.index-url``: set pip's ``index-url`` in the right pip.conf, repairing an unreadable file first.

What it plans (pure; :mod:`gpudoctor.apply` writes):

1. every pip.conf pip loads but cannot parse is repaired when the repair is
   unambiguous (:func:`gpudoctor.sources.pipconf.repair_header`: a damaged or missing
   ``[global]`` header above key lines); any other parse error refuses the
   fix with the exact line to edit by hand;
2. with ``options["index-url"]`` (or a ``mirror`` option that is already a
   URL — callers such as ``--mirror fastest`` resolve names to a URL first),
   ``index-url`` is set in the file of the chosen scope
   (``options["scope"]``: ``user``, ``site`` or ``global``; default: the file
   that sets the effective index-url now, else the user file
   ``$XDG_CONFIG_HOME/pip/pip.conf``), keeping every comment, the order of
   keys and the other sections (:func:`gpudoctor.sources.pipconf.set_option`);
3. an ``http://`` index needs ``options["allow-insecure"]``, which also adds
   its host to ``trusted-host`` in the same file (nothing else is touched
   unless asked). With ``allow-insecure`` alone, the hosts of the plain-http
   indexes pip ignores today are added to ``trusted-host``.

When something with higher precedence (a ``PIP_*`` variable, a later file,
an ``[install]`` section elsewhere) would still win, the plan says so in its
notes with the command to run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from urllib.parse import urlsplit

from gpudoctor.checks.pip_config import (
    host_port,
    indexes,
    is_secure_http_host,
    show_path,
    trusted,
)
from gpudoctor.collect.pip import NOTE_DIRECTORY, effective_settings
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.pip import PipConfigFile, PipFacts, PipSetting
from gpudoctor.fixes._verify import verified_edit
from gpudoctor.model import Finding, Fix, FixPlan, FixRefused, Status
from gpudoctor.sources import pipconf

FIX_ID = "pip.index-url"
_TRUE = ("1", "true", "yes", "on")


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in _TRUE


def _url_option(options: Mapping[str, str]) -> str | None:
    url = options.get("index-url")
    if not url and options.get("mirror", "").startswith(("http://", "https://")):
        url = options["mirror"]
    if url is None:
        return None
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in url):
        raise FixRefused(f"--index-url {url!r} is not an http(s) URL such as https://mirror.example.org/simple")
    return url


def host_entry(url: str) -> str:
    """The ``trusted-host`` entry for ``url``: ``host`` or ``host:port`` when the URL names a port."""
    host, port = host_port(url)
    return f"{host}:{port}" if port else host


def target_file(pip: PipFacts, scope: str | None) -> tuple[PipConfigFile, list[str]]:
    """The file to edit for ``scope`` (None: the file setting index-url now, else user) and notes.

    Raises :class:`FixRefused` when pip reads no file at all (``PIP_CONFIG_FILE=/dev/null``).
    """
    notes: list[str] = []
    if pip.env.get("PIP_CONFIG_FILE") == "/dev/null":
        raise FixRefused(
            "PIP_CONFIG_FILE=/dev/null makes pip ignore every pip.conf; `unset PIP_CONFIG_FILE` "
            "first, or pass the index on the command line (pip install --index-url URL)"
        )

    def setting_index(f: PipConfigFile) -> bool:
        return any(sk.partition(".")[2] == "index-url" for sk in f.values)

    eff = pip.effective.get("index-url")
    if scope is None:
        if eff is not None and eff.variant != "env_var":
            f = pip.file(eff.source)
            if f is not None:
                return f, notes
        env_file = next((f for f in pip.files if f.variant == "env" and f.loaded), None)
        if env_file is not None:
            return env_file, notes
        scope = "user"
    candidates = pip.files_of(scope)
    if not candidates:
        raise FixRefused(f"pip has no {scope} configuration file here")
    setters = [f for f in candidates if f.loaded and setting_index(f)]
    chosen = setters[-1] if setters else candidates[-1]
    if not chosen.loaded and chosen.note:
        notes.append(f"note: pip does not read {chosen.path} now: {chosen.note}")
    return chosen, notes


def _repairs(
    pip: PipFacts, scope: str | None = None, notes: list[str] | None = None
) -> tuple[dict[str, tuple[str | None, str]], list[str]]:
    """Repairs of every file pip loads but cannot parse; with ``scope``, only that scope's files
    (the others are named in ``notes``: ``--scope`` never edits another scope's file)."""
    texts: dict[str, tuple[str | None, str]] = {}
    descriptions: list[str] = []
    for f in pip.files:
        if not (f.loaded and f.error is not None):
            continue
        if scope and f.variant != scope:
            if notes is not None:
                notes.append(
                    f"{show_path(f.path, pip.home)} cannot be read by pip ({f.error.message}); not repaired "
                    f"(--scope {scope}): rerun with --scope {f.variant}, or edit it by hand"
                )
            continue
        shown = show_path(f.path, pip.home)
        if f.text is None:
            raise FixRefused(
                pipconf.manual_instructions(
                    pipconf.ParseProblem(f.error.line, f.error.kind, f.error.message, f.error.text), shown
                )
            )
        try:
            new, description = pipconf.repair_header(f.text, shown)
        except pipconf.Unrepairable as exc:
            raise FixRefused(str(exc)) from None
        texts[f.path] = (f.text, new)
        descriptions.append(description)
    return texts, descriptions


def _current(pip: PipFacts, texts: dict[str, tuple[str | None, str]], f: PipConfigFile) -> str | None:
    if f.path in texts:
        return texts[f.path][1]
    if f.exists and f.text is None:
        if f.note == NOTE_DIRECTORY:
            raise FixRefused(
                f"{f.path} is a directory, not a file, so pip cannot read it and gpudoctor will not "
                f"replace it; look inside (ls -la {f.path}), move it aside (mv {f.path} "
                f"{f.path}.dir), then rerun"
            )
        if f.note.startswith("cannot be read"):
            raise FixRefused(f"{f.path} exists but gpudoctor cannot read it ({f.note}); fix its permissions first")
        raise FixRefused(
            f"{f.path} exists but is not a regular file ({f.note or 'a device, socket or pipe?'}); "
            f"move it aside, then rerun"
        )
    return f.text


def _trust(pip: PipFacts, texts: dict[str, tuple[str | None, str]], f: PipConfigFile, hosts: list[str]) -> None:
    text = _current(pip, texts, f)
    values, _ = pipconf.parse(text or "")
    existing = values.get("global.trusted-host", "").split()
    wanted = {h.partition(":")[0].lower() for h in hosts}
    # an entry written as a URL (``http://host``) trusts nothing (pip reads the host ``http``): replace it
    kept = [e for e in existing if not ("://" in e and (host_port(e)[0] or "").lower() in wanted)]
    merged = kept + [h for h in hosts if h not in kept]
    if merged != existing:
        new = pipconf.set_option(text, "trusted-host", " ".join(merged))
        texts[f.path] = (texts[f.path][0] if f.path in texts else f.text, new)


def _simulate(pip: PipFacts, texts: dict[str, tuple[str | None, str]]) -> dict[str, PipSetting]:
    files = []
    for f in pip.files:
        if f.path in texts:
            values, problem = pipconf.parse(texts[f.path][1])
            lines = {f"{e.section}.{e.key}": e.start + 1 for e in pipconf.scan(texts[f.path][1]).entries}
            loaded = f.loaded or (not f.exists and not f.note)
            f = replace(
                f, exists=True, loaded=loaded, values=values, lines=lines, error=None if problem is None else f.error
            )
        files.append(f)
    env = dict(pip.env)
    return effective_settings(tuple(files), env)


#: the options this fix sets; any other option must keep its value
SET_OPTIONS = ("index-url", "extra-index-url", "trusted-host", "timeout", "retries")


def pip_meaning(old: Mapping[str, str] | None, new: Mapping[str, str]) -> str | None:
    """None when the parsed ``new`` pip.conf keeps every option of ``old`` except those this
    fix sets (``old`` None: a created or repaired file)."""
    if old is None:
        return None
    for key, value in old.items():
        if key.split(".", 1)[-1] in SET_OPTIONS:
            continue
        if new.get(key) != value:
            return f"option {key} would change from {value!r} to {new.get(key)!r}"
    extra = [k for k in new if k not in old and k.split(".", 1)[-1] not in SET_OPTIONS]
    if extra:
        return f"option {extra[0]} would appear"
    return None


#: pip options this fix also sets when asked (``--set timeout=60 --set retries=10``), with their checks.
NETWORK_OPTIONS: dict[str, tuple[str, Callable[[str], bool]]] = {
    "timeout": ("seconds > 0", lambda v: float(v) > 0),
    "retries": ("a whole number >= 0", lambda v: int(v) >= 0),
}


def _network_options(
    pip: PipFacts,
    texts: dict[str, tuple[str | None, str]],
    descriptions: list[str],
    notes: list[str],
    options: Mapping[str, str],
) -> None:
    """Set pip's ``timeout`` (seconds, default 15) and ``retries`` (default 5) in the chosen scope's file.

    For a usable but slow index (pip docs, "pip install --timeout/--retries"):
    a longer socket timeout and more retries keep installs from aborting.
    Raises :class:`FixRefused` for a value pip would reject.
    """
    for key, (what, ok) in NETWORK_OPTIONS.items():
        value = (options.get(key) or "").strip()
        if not value:
            continue
        try:
            valid = ok(value)
        except ValueError:
            valid = False
        if not valid:
            raise FixRefused(f"--set {key}={value}: expected {what}")
        f, scope_notes = target_file(pip, options.get("scope") or None)
        notes += [n for n in scope_notes if n not in notes]
        old_text = texts[f.path][0] if f.path in texts else f.text
        texts[f.path] = (old_text, pipconf.set_option(_current(pip, texts, f), key, value))
        descriptions.append(f"set {key} = {value} in {show_path(f.path, pip.home)}")


def _move_ignored(
    pip: PipFacts, texts: dict[str, tuple[str | None, str]], descriptions: list[str], finding: Finding
) -> None:
    """Settings under a section or key pip never reads, moved to ``[global]`` under the right name,
    in that same file (``pip.config``'s ``moves`` evidence)."""
    f = pip.file(str(finding.evidence.get("file", "")))
    if f is None or not f.loaded or f.error is not None:
        return
    old_text = texts[f.path][0] if f.path in texts else f.text
    text = _current(pip, texts, f) or ""
    for m in finding.evidence["moves"]:
        text = pipconf.remove_option(text, str(m["section"]), str(m["key"]))
        text = pipconf.set_option(text, str(m["meant"]), str(m["value"]))
        descriptions.append(
            f"move [{m['section']}] {m['key']} to [global] {m['meant']} in {show_path(f.path, pip.home)}"
        )
    texts[f.path] = (old_text, text)


def plan(facts: Facts, finding: Finding, options: Mapping[str, str]) -> FixPlan | None:
    pip = facts.of(PipFacts)
    if isinstance(pip, Unavailable):
        return None
    scope_given = (options.get("scope") or "").strip() or None  # --scope as the user gave it
    if (
        finding is not None
        and finding.check == "index.consistency"
        and finding.evidence.get("index_url")
        and not options.get("index-url")
        and "://" not in (options.get("mirror") or "")
    ):
        # the same index uv uses, at the same scope
        options = {
            **options,
            "index-url": str(finding.evidence["index_url"]),
            "scope": options.get("scope") or str(finding.evidence.get("scope") or "user"),
        }
    if (
        finding is not None
        and finding.check == "pip.config"
        and finding.evidence.get("suggested_index_url")
        and finding.evidence.get("option") == "index-url"
        and not options.get("index-url")
        and "://" not in (options.get("mirror") or "")
    ):
        # the index URL pip cannot use, corrected (quotes, scheme, the /simple path)
        options = {**options, "index-url": str(finding.evidence["suggested_index_url"])}
    notes: list[str] = []
    texts, descriptions = _repairs(pip, scope_given, notes)
    moves_file = pip.file(str(finding.evidence.get("file", ""))) if finding is not None else None
    if (
        finding is not None
        and finding.check == "pip.config"
        and finding.evidence.get("moves")
        and (scope_given is None or (moves_file is not None and moves_file.variant == scope_given))
    ):
        _move_ignored(pip, texts, descriptions, finding)
    _network_options(pip, texts, descriptions, notes, options)
    url = _url_option(options)
    insecure = _truthy(options.get("allow-insecure"))
    trusted_now: list[str] = []  # the plain-http index URLs this plan makes pip trust
    if url:
        f, scope_notes = target_file(pip, options.get("scope") or None)
        notes += scope_notes
        old_text = texts[f.path][0] if f.path in texts else f.text
        new = pipconf.set_option(_current(pip, texts, f), "index-url", url)
        texts[f.path] = (old_text, new)
        descriptions.append(f"set index-url = {url} in {show_path(f.path, pip.home)}")
        parts = urlsplit(url)
        if parts.scheme == "http" and not is_secure_http_host(parts.hostname or ""):
            eff = pip.effective.get("trusted-host")
            if not trusted(url, eff.value.split() if eff else []):
                if not insecure:
                    raise FixRefused(
                        f"{url} is plain http: pip ignores it unless its host is trusted. Use the "
                        f"mirror's https URL, or add --allow-insecure to also set trusted-host"
                    )
                _trust(pip, texts, f, [host_entry(url)])
                trusted_now.append(url)
                descriptions.append(f"trust {host_entry(url)} (trusted-host)")
        after = _simulate(pip, texts).get("index-url")
        if after is None or after.value.strip() != url:
            winner = after.source if after else "?"
            if after is not None and after.variant == "env_var":
                notes.append(
                    f"{winner} is set in the environment and still overrides pip.conf: "
                    f"unset {winner} (shell profile, Dockerfile ENV, CI settings)"
                )
            elif after is not None:
                scope = after.variant if after.variant in ("user", "site", "global") else None
                hint = f" --scope {scope}" if scope else ""
                notes.append(
                    f"index-url in {show_path(winner, pip.home)} ([{after.section}]) still wins: "
                    f"gpudoctor fix {FIX_ID} --index-url {url}{hint}"
                )
    elif insecure:
        eff = pip.effective.get("trusted-host")
        current = eff.value.split() if eff else []
        scope = options.get("scope") or None
        scoped: PipConfigFile | None = None
        if scope is not None:  # every edit goes to the chosen scope's file
            scoped, scope_notes = target_file(pip, scope)
            notes += scope_notes
        for _kind, idx_url, setting in indexes(pip):
            parts = urlsplit(idx_url)
            if parts.scheme != "http" or is_secure_http_host(parts.hostname or "") or trusted(idx_url, current):
                continue
            if setting.variant == "env_var" and scoped is None:
                raise FixRefused(
                    f"{idx_url} comes from {setting.source}; trust it there: "
                    f"export PIP_TRUSTED_HOST={host_entry(idx_url)}"
                )
            cf = scoped or pip.file(setting.source)
            if cf is None:  # pragma: no cover - effective settings name known files
                continue
            _trust(pip, texts, cf, [host_entry(idx_url)])
            trusted_now.append(idx_url)
            descriptions.append(f"trust {host_entry(idx_url)} (trusted-host) in {show_path(cf.path, pip.home)}")
        if scoped is not None and trusted_now:
            after = _simulate(pip, texts).get("trusted-host")
            hosts = after.value.split() if after else []
            if any(not trusted(u, hosts) for u in trusted_now) and after is not None:
                where = after.source if after.variant == "env_var" else show_path(after.source, pip.home)
                notes.append(
                    f"trusted-host in {where} still wins over the {scope} file: add the host there too, "
                    f"or rerun without --scope"
                )
    elif not texts:
        if finding.status >= Status.WARN and finding.evidence.get("option") in ("index-url", "extra-index-url"):
            raise FixRefused(
                f"choose how: `gpudoctor fix {FIX_ID} --index-url https://...` (the mirror's https "
                f"URL) or `gpudoctor fix {FIX_ID} --allow-insecure` (trust the plain-http host)"
            )
        if finding.status <= Status.OK or not finding.fixes:
            raise FixRefused(
                f"nothing to repair; to set the index give it: "
                f"gpudoctor fix {FIX_ID} --index-url https://mirror.example.org/simple"
            )
        return None
    moved = {
        f"{m['section']}.{pipconf.normalize_name(str(m['key']))}"
        for m in (finding.evidence.get("moves") or [] if finding is not None and finding.check == "pip.config" else [])
    }
    moved_meaning = (
        None
        if not moved
        else lambda o, n: pip_meaning(
            None if o is None else {k: v for k, v in o.items() if k not in moved},
            {k: v for k, v in n.items() if k not in moved},
        )
    )
    moved_file = str(finding.evidence.get("file", "")) if moved and finding is not None else ""
    edits = tuple(
        verified_edit(
            path,
            old,
            new,
            f"in {path}, under [global], set the options this plan names: {'; '.join(descriptions)}",
            meaning=moved_meaning if path == moved_file and moved_meaning is not None else pip_meaning,
            repairs=True,
        )
        for path, (old, new) in texts.items()
    )
    intent: dict[str, str] = {}
    if url:
        intent["index-url"] = url
    if trusted_now:
        intent["trusted-host"] = " ".join(dict.fromkeys(host_entry(u) for u in trusted_now))
    for key in NETWORK_OPTIONS:
        if (options.get(key) or "").strip():
            intent[key] = options[key].strip()
    return FixPlan(
        fix=FIX_ID,
        description="; ".join(descriptions) or "nothing to change",
        edits=edits,
        addresses=("pip.config", "index.consistency"),
        notes=tuple(notes),
        intent=intent,
    )


def verify(facts: Facts, plan: FixPlan) -> str | None:
    """Re-read pip's configuration as ``pip install`` resolves it (global < user < site files,
    ``PIP_CONFIG_FILE``, ``[install]`` over ``[global]``, ``PIP_*`` variables over every file) and
    say what still wins over the plan's ``index-url``/``trusted-host``/``timeout``/``retries``."""
    pip = facts.of(PipFacts)
    if isinstance(pip, Unavailable):
        return f"pip's configuration could not be read again ({pip.reason})"
    edited = {e.path for e in plan.edits}
    for f in pip.files:
        if f.loaded and f.error is not None:
            where = f", line {f.error.line}" if f.error.line else ""
            return f"{show_path(f.path, pip.home)} still stops pip ({f.error.message}{where})"
        if f.path in edited and f.exists and not f.loaded and f.note:
            return f"pip does not read {show_path(f.path, pip.home)}: {f.note}"

    def winner(s: PipSetting) -> str:
        return s.source if s.variant == "env_var" else show_path(s.source, pip.home)

    for key, want in plan.intent.items():
        got = pip.effective.get(key)
        if key == "trusted-host":
            hosts = got.value.split() if got else []
            missing = [h for h in want.split() if not trusted(f"http://{h}/", hosts)]
            if missing:
                where = f"{winner(got)} still wins (trusted-host = {got.value})" if got else "pip trusts no host"
                return f"{where}: {', '.join(missing)} is not trusted"
            continue
        if got is None:
            return f"pip reads no {key} from any file or variable (the edited file is not read)"
        if got.value.strip() != want:
            return f"{winner(got)} still wins ({key} = {got.value.strip()}, [{got.section}])"
    return None


FIX = Fix(
    id=FIX_ID,
    title="set pip's index-url (and timeout/retries when asked) in pip.conf, keeping comments; "
    "repair a damaged global section header",
    addresses=("pip.config", "index.consistency"),
    plan=plan,
    verify=verify,
)
