"""Check ``pip.config``: can pip read its configuration, and is the index it uses safe and effective?

Verdicts (pip ``_internal/configuration.py`` and ``network/session.py``):

- a file pip loads but cannot parse -> ``fail``: pip aborts *every* command
  with "Configuration file could not be loaded" (pypa/pip #4892);
- an ``http://`` index (``index-url`` or ``extra-index-url``) whose host is not
  in ``trusted-host`` -> ``fail``: pip ignores that index ("not a trusted or
  secure host"); localhost and 127.0.0.0/8 count as secure, as in pip's
  ``SECURE_ORIGINS``. With ``trusted-host`` -> ``warn``: packages travel
  unencrypted and unauthenticated;
- credentials in an index URL -> ``warn`` (stored in clear text); the value is
  redacted in every output;
- an index set by a ``PIP_*`` variable -> ``info`` naming it (it overrides
  every file, so edits to pip.conf seem to do nothing);
- ``PIP_CONFIG_FILE`` naming a missing file -> ``warn`` (pip silently ignores it);
- an index URL pip cannot use as a PEP 503 simple index -> ``fail`` for
  ``index-url`` (every project page is a 404: "No matching distribution
  found"), ``warn`` for an ``extra-index-url``: a value in quotes (pip.conf is
  INI, the quotes become part of the URL), a host name without ``http(s)://``
  (pip takes it for a local directory), or a known mirror's or PyPI's URL
  without its ``/simple`` path (the catalogue in ``data/mirrors.toml`` gives
  the right one);
- a ``trusted-host`` entry written as a URL (``http://host``): pip reads it as
  the host ``http`` and trusts nothing, so the plain-http index it was meant
  for is still ignored (pip ``network/session.py`` ``add_trusted_host`` ->
  ``parse_netloc``);
- an index or network setting pip never reads -> ``warn``: under a section
  that is neither ``[global]`` nor a pip command (``[pip]``, ``[globals]``,
  ``[Global]``: pip matches section names exactly,
  ``configuration.py`` ``_get_ordered_configuration_items``), or under a key
  pip has no option for (``index``, ``trusted-hosts``: pip skips unknown keys
  silently, ``cli/parser.py`` ``_update_defaults``);
- an ``extra-index-url`` on a private host next to the public PyPI ->
  ``info``: pip merges the candidates of every index and takes the highest
  version, so a public package with an internal package's name wins
  ("dependency confusion", A. Birsan 2021; pip docs, ``--extra-index-url``).
  Public extra indexes (PyTorch's, NVIDIA's) are not flagged.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from gpudoctor.checks import require
from gpudoctor.checks._indexes import PYPI_HOSTS, index_url_problem
from gpudoctor.facts import Facts
from gpudoctor.facts.pip import PipConfigFile, PipFacts, PipSetting
from gpudoctor.model import Check, Finding, Status
from gpudoctor.redact import redact_text
from gpudoctor.sources import pipconf

FIX_ID = "pip.index-url"
DEFAULT_INDEX = "https://pypi.org/simple"
_INDEX_ENV = {
    "index-url": "PIP_INDEX_URL",
    "extra-index-url": "PIP_EXTRA_INDEX_URL",
    "trusted-host": "PIP_TRUSTED_HOST",
}
_SHORT = {
    "no-section-header": "no section header",
    "syntax": "not a `key = value` line",
    "duplicate-section": "duplicate section",
    "duplicate-option": "option set twice",
    "encoding": "not valid UTF-8",
}


def show_path(path: str, home: str) -> str:
    """``path`` with the home directory written as ``~``."""
    home = home.rstrip("/")
    if home and (path == home or path.startswith(home + "/")):
        return "~" + path[len(home) :]
    return path


def _source(s: PipSetting, home: str) -> str:
    if s.variant == "env_var":
        return f"the environment variable {s.source}"
    where = show_path(s.source, home)
    return f"{where} line {s.line} ([{s.section}])" if s.line else f"{where} ([{s.section}])"


def is_secure_http_host(host: str) -> bool:
    """localhost, 127.0.0.0/8 and ::1 are secure origins for pip even over http."""
    if host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip in ipaddress.ip_network("127.0.0.0/8") or ip == ipaddress.ip_address("::1")


def host_port(url: str) -> tuple[str, int | None]:
    """(host, port or None) of ``url``; a malformed port counts as none."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return parts.hostname or "", port


def trusted(url: str, trusted_hosts: list[str]) -> bool:
    """pip's trusted-host match: ``host`` (any port) or ``host:port`` (that port)."""
    host, port = host_port(url)
    for entry in trusted_hosts:
        h, _, p = entry.partition(":")
        if h.lower() == host.lower() and (not p or (port is not None and p == str(port))):
            return True
    return False


def indexes(pip: PipFacts) -> list[tuple[str, str, PipSetting]]:
    """``(kind, url, setting)`` for index-url and every extra-index-url, in pip's order."""
    out = []
    eff = pip.effective
    if "index-url" in eff:
        out.append(("index-url", eff["index-url"].value.strip(), eff["index-url"]))
    if "extra-index-url" in eff:
        for url in eff["extra-index-url"].value.split():
            out.append(("extra-index-url", url, eff["extra-index-url"]))
    return out


#: Sections pip reads: ``[global]`` and one per command (pip 23.2 ``commands_dict``).
PIP_SECTIONS = frozenset(
    "global cache check completion config debug download freeze hash help index inspect install list lock "
    "search show uninstall wheel".split()
)
#: Settings that decide where pip downloads from; one of them in the wrong place is worth a warning.
NETWORK_KEYS = (
    "index-url",
    "extra-index-url",
    "trusted-host",
    "find-links",
    "no-index",
    "timeout",
    "default-timeout",
    "retries",
    "proxy",
    "cert",
    "client-cert",
)
#: Keys people write for a network setting that pip has no option for (pip reads ``index`` only in
#: ``pip search``), mapped to the option meant.
MISSPELT = {
    "index": "index-url",
    "indexurl": "index-url",
    "index-urls": "index-url",
    "url": "index-url",
    "mirror": "index-url",
    "registry": "index-url",
    "extra-index": "extra-index-url",
    "extra-index-urls": "extra-index-url",
    "extra-url": "extra-index-url",
    "trusted-hosts": "trusted-host",
    "trust-host": "trusted-host",
    "trusted": "trusted-host",
    "trustedhost": "trusted-host",
    "find-link": "find-links",
}


#: Public package indexes: an extra index there carries no dependency-confusion risk of its own.
PUBLIC_EXTRA_HOSTS = (
    "pypi.org",
    "download.pytorch.org",
    "pypi.nvidia.com",
    "pypi.ngc.nvidia.com",
    "data.pyg.org",
    "www.piwheels.org",
)


def private_extra_indexes(pip: PipFacts) -> list[str]:
    """``extra-index-url`` entries on private hosts while ``index-url`` is the public PyPI (or unset)."""
    eff = pip.effective
    main = eff["index-url"].value.strip() if "index-url" in eff else DEFAULT_INDEX
    if (urlsplit(main).hostname or "").lower() not in PYPI_HOSTS:
        return []
    out = []
    for kind, url, _ in indexes(pip):
        host = (urlsplit(url).hostname or "").lower()
        if (
            kind == "extra-index-url"
            and host
            and not any(host == h or host.endswith("." + h) for h in PUBLIC_EXTRA_HOSTS)
        ):
            if not is_secure_http_host(host):
                out.append(url)
    return out


def ignored_settings(f: PipConfigFile) -> list[tuple[str, str, str, str]]:
    """``(section, key, meant, why)`` for every network setting in ``f`` that pip never reads."""
    out = []
    for sk in f.values:
        section, _, key = sk.partition(".")
        meant = MISSPELT.get(key, key if key in NETWORK_KEYS else "")
        if not meant:
            continue
        if section not in PIP_SECTIONS:
            out.append((section, key, meant, "pip reads only `[global]` and per-command sections such as `[install]`"))
        elif key != meant:
            out.append((section, key, meant, f"`pip install` has no option `{key}`; the option is `{meant}`"))
    return out


def trusted_host_urls(trusted_hosts: list[str]) -> list[str]:
    """``trusted-host`` entries written with a scheme (``http://host``): pip trusts the host ``http`` instead."""
    return [e for e in trusted_hosts if "://" in e]


def repairable(f: PipConfigFile, home: str = "") -> str | None:
    """The repair description when the parse error of ``f`` has one unambiguous repair, else None."""
    if f.error is None or f.text is None:
        return None
    try:
        return pipconf.repair_header(f.text, show_path(f.path, home))[1]
    except pipconf.Unrepairable:
        return None


def _targets_disagree(pip: PipFacts, eff: dict[str, PipSetting]) -> list[Finding]:
    """Further ``--python`` targets whose own base/site file gives ``pip install`` another index."""
    main = eff.get("index-url")
    main_url = main.value if main is not None else DEFAULT_INDEX
    rows = []
    for t in pip.targets:
        s = t.effective.get("index-url")
        url = s.value if s is not None else DEFAULT_INDEX
        if url.rstrip("/") != main_url.rstrip("/"):
            where = show_path(s.source, pip.home) if s is not None else "pip's default"
            rows.append((t, url, where))
    if not rows:
        return []
    t, url, where = rows[0]
    return [
        CHECK.finding(
            Status.INFO,
            f"pip run by {t.python} uses {redact_text(url)} ({where}), not {redact_text(main_url)}: "
            f"each interpreter reads its own site file",
            "pip reads `<sys.base_prefix>/pip.conf` and `<sys.prefix>/pip.conf` of the interpreter that runs it, "
            "so interpreters on one machine can use different indexes:\n\n"
            + "\n".join(f"- `{x.python}` (prefix `{x.site_prefix}`): `{redact_text(u)}` from {w}" for x, u, w in rows)
            + f"\n\nThe first target uses `{redact_text(main_url)}`. If that is not intended, set the index in the "
            "file named, or at user/global scope: `pip config --user set global.index-url URL`.",
            evidence={"targets": {x.python: u for x, u, _ in rows}, "main": main_url},
        )
    ]


def _parse_failures(pip: PipFacts) -> list[Finding]:
    out = []
    for f in pip.files:
        if not (f.loaded and f.error is not None):
            continue
        err = f.error
        shown = show_path(f.path, pip.home)
        where = f"{shown}, line {err.line}" if err.line else shown
        summary = f"pip configuration cannot be parsed ({where}: {_SHORT.get(err.kind, err.kind)})"
        repair = repairable(f, pip.home)
        problem = pipconf.ParseProblem(err.line, err.kind, err.message, err.text)
        link = f" (a symlink to `{f.target}`)" if f.target else ""
        lines = [
            f"pip reads `{shown}`{link} ({f.variant} configuration) before every command and cannot parse it, "
            f"so **every pip command aborts** with `Configuration file could not be loaded`. pip itself is "
            f"installed fine; only this file is broken.",
            "",
            f"- line {err.line}: `{redact_text(err.text)}` — {err.message}" if err.line else f"- {err.message}",
            "",
        ]
        if repair:
            lines.append(
                f"Repair: {repair} (with a backup): `gpudoctor fix {FIX_ID}`. Then `pip config list` must succeed."
            )
        else:
            lines.append(
                f"Edit it by hand: {pipconf.manual_instructions(problem, shown)}. Or move it aside: "
                f"`mv {f.path} {f.path}.broken`."
            )
        out.append(
            Finding(
                check=CHECK.id,
                status=Status.FAIL,
                summary=summary,
                explanation="\n".join(lines),
                evidence={
                    "file": f.path,
                    "variant": f.variant,
                    "line": err.line,
                    "problem": err.kind,
                    "text": err.text,
                    "symlink_target": f.target,
                },
                fixes=(FIX_ID,) if repair else (),
            )
        )
    return out


def evaluate(facts: Facts) -> list[Finding]:
    pip = require(facts, PipFacts)
    failures = _parse_failures(pip)
    if failures:
        return failures
    findings: list[Finding] = []
    eff = pip.effective
    trusted_hosts = eff["trusted-host"].value.split() if "trusted-host" in eff else []
    for kind, url, setting in indexes(pip):
        parts = urlsplit(url)
        shown = redact_text(url)
        src = _source(setting, pip.home)
        evidence = {"option": kind, "url": url, "set_by": setting.source, "trusted-host": trusted_hosts}
        shape = index_url_problem(url)
        if shape is not None:
            problem, suggested = shape
            fixable = kind == "index-url" and setting.variant != "env_var" and bool(suggested)
            where_to = (
                f"`gpudoctor fix {FIX_ID}` sets `index-url = {suggested}` in that file"
                if fixable
                else f"change it to `{suggested}`"
                if suggested
                else "correct it"
            )
            if setting.variant == "env_var" and suggested:
                where_to = f"`export {setting.source}={suggested}` (and correct it where it is set)"
            findings.append(
                CHECK.finding(
                    Status.FAIL if kind == "index-url" else Status.WARN,
                    f"pip cannot use the {kind} {shown}: {problem.split(':')[0]}",
                    f"`{kind}` is `{shown}`, set by {src}: {problem}. "
                    + (
                        "Every `pip install` then ends in `No matching distribution found`."
                        if kind == "index-url"
                        else "pip finds nothing on that index, so packages meant to come from it come from "
                        "the other indexes or are not found."
                    )
                    + f"\n\nFix: {where_to}; then `pip download --no-deps -d /tmp/x six` must succeed.",
                    evidence={**evidence, "problem": problem, "suggested_index_url": suggested},
                    fixes=(FIX_ID,) if fixable else (),
                )
            )
            continue
        if parts.scheme == "http" and not is_secure_http_host(parts.hostname or ""):
            as_urls = [e for e in trusted_host_urls(trusted_hosts) if host_port(e)[0] == (parts.hostname or "")]
            if as_urls and not trusted(url, trusted_hosts):
                host = parts.netloc.rpartition("@")[2]
                findings.append(
                    CHECK.finding(
                        Status.FAIL,
                        f"pip ignores the index {shown}: trusted-host {as_urls[0]} is a URL, pip wants the host "
                        f"name {host}",
                        f"`{kind}` is `{shown}` (plain http), set by {src}, and `trusted-host` has "
                        f"`{as_urls[0]}`. pip reads a trusted-host entry as `host[:port]`: with the scheme in "
                        f'front it trusts a host called `http` and still prints "The repository located at '
                        f'{parts.hostname} is not a trusted or secure host and is being ignored".\n\n'
                        f"Write the host name only: `trusted-host = {host}` "
                        f"(`gpudoctor fix {FIX_ID} --allow-insecure` adds it), or better switch to the mirror's "
                        f"https URL.",
                        evidence={**evidence, "trusted_host_urls": as_urls},
                        fixes=(FIX_ID,),
                    )
                )
            elif trusted(url, trusted_hosts):
                findings.append(
                    CHECK.finding(
                        Status.WARN,
                        f"pip uses the plain-http index {shown} (trusted-host): packages travel unencrypted",
                        f"`{kind}` is `{shown}`, set by {src}, and `{parts.hostname}` is listed in `trusted-host`. pip "
                        f"accepts it, but packages and index pages travel unencrypted and unauthenticated, so anyone "
                        f"on the path can swap a wheel.\n\nIf the mirror serves https, switch: "
                        f"`gpudoctor fix {FIX_ID} --index-url https://{parts.netloc.rpartition('@')[2]}{parts.path}`.",
                        evidence=evidence,
                    )
                )
            else:
                findings.append(
                    CHECK.finding(
                        Status.FAIL,
                        f"pip ignores the index {shown}: plain http without a matching trusted-host",
                        f"`{kind}` is `{shown}`, set by {src}. pip refuses plain-http indexes whose host is not in "
                        f'`trusted-host` and prints "The repository located at {parts.hostname} is not a trusted or '
                        f'secure host and is being ignored", so installs fail or silently come from elsewhere.\n\n'
                        f"- use the mirror's https URL: `gpudoctor fix {FIX_ID} --index-url https://...`, or\n"
                        f"- trust it explicitly (packages stay unencrypted): `gpudoctor fix {FIX_ID} --allow-insecure`.",
                        evidence=evidence,
                        fixes=(FIX_ID,),
                    )
                )
        if parts.username or parts.password:
            findings.append(
                CHECK.finding(
                    Status.WARN,
                    f"credentials are stored in clear text in the {kind} {shown}",
                    f"The `{kind}` set by {src} carries a user name and password inside the URL. Anyone who can read "
                    f"that file or environment (backups, `pip config list`, CI logs, `ps e`) sees them.\n\nRemove them "
                    f"from the URL and let pip ask `keyring` (`pip install keyring`, then `keyring set "
                    f"{parts.hostname} USER`) or read `~/.netrc` (`machine {parts.hostname} login USER password ...`, "
                    f"mode 600).",
                    evidence=evidence,
                )
            )
    for key, var in _INDEX_ENV.items():
        if var not in pip.env or not pip.env[var]:
            continue
        overridden = [
            (f, sk)
            for f in pip.files
            if f.loaded and f.error is None
            for sk in f.values
            if sk.partition(".")[2] == key and sk.partition(".")[0] in ("global", "install")
        ]
        if overridden:
            files = ", ".join(sorted({show_path(f.path, pip.home) for f, _ in overridden}))
            summary = f"{var} is set and overrides {key} from {files}"
            extra = (
                f" It wins over `{key}` in {files}, so edits to those files seem to do nothing. To let the "
                f"files decide, remove it from your shell profile, Dockerfile `ENV` or CI settings "
                f"(`unset {var}` for this shell)."
            )
        else:
            summary = f"{key} is set by the environment variable {var}"
            extra = f" It overrides every pip.conf; `unset {var}` to use the files instead."
        findings.append(
            CHECK.finding(
                Status.INFO,
                summary,
                f"`{var}={redact_text(pip.env[var])}` is in the environment.{extra}",
                evidence={"variable": var, "value": pip.env[var]},
            )
        )
    cfg = pip.env.get("PIP_CONFIG_FILE")
    if cfg and cfg != "/dev/null":
        env_file = next((f for f in pip.files if f.variant == "env"), None)
        if env_file is not None and not env_file.exists:
            findings.append(
                CHECK.finding(
                    Status.WARN,
                    f"PIP_CONFIG_FILE names {cfg}, which does not exist: pip ignores it silently",
                    f"`PIP_CONFIG_FILE={cfg}` is set but there is no such file, so none of the settings you meant "
                    f"to give pip are used (and the user files are read instead). Point it at the right file or "
                    f"`unset PIP_CONFIG_FILE`.",
                    evidence={"PIP_CONFIG_FILE": cfg},
                )
            )
    for f in pip.all_files():
        if not f.loaded or f.error is not None:
            continue
        ignored = ignored_settings(f)
        if not ignored:
            continue
        shown_file = show_path(f.path, pip.home)
        section, key, meant, _why = ignored[0]
        lines = [f"- line {f.lines.get(f'{s}.{k}', 0)}: `[{s}]` `{k}` — {why}" for s, k, m, why in ignored]
        scope = {"global": "global", "user": "user", "site": "site"}.get(f.variant, "user")
        commands = [
            f"pip config --{scope} set global.{m} '{redact_text(f.values[f'{s}.{k}'])}'" for s, k, m, _ in ignored
        ]
        # the index the user meant, not the one pip uses: every install goes elsewhere
        lost = [
            (s, k, m)
            for s, k, m, _ in ignored
            if m in ("index-url", "extra-index-url")
            and f.values[f"{s}.{k}"].strip()
            and (m not in eff or f.values[f"{s}.{k}"].strip() not in eff[m].value.split())
        ]
        moves = [
            {"section": s, "key": k, "meant": m, "value": f.values[f"{s}.{k}"].strip()}
            for s, k, m, _ in ignored
            if "\n" not in f.values[f"{s}.{k}"].strip()
        ]
        now = f"`{eff['index-url'].value}`" if "index-url" in eff else f"the default index {DEFAULT_INDEX}"
        findings.append(
            CHECK.finding(
                Status.FAIL if lost else Status.WARN,
                f"pip never reads `{key}` in [{section}] of {shown_file}: "
                + (
                    "no such section for pip (use [global])"
                    if section not in PIP_SECTIONS
                    else f"the option is `{meant}`"
                )
                + (f"; pip uses {now.strip('`')} instead" if lost else ""),
                f"pip skips settings it does not recognise without a word, so these lines in `{shown_file}` do "
                f"nothing and pip keeps using {now}"
                + (" — every install goes to that index, not to the one written here" if lost else "")
                + ":\n\n"
                + "\n".join(lines)
                + "\n\nMove them under `[global]` with the right name and delete the old lines, e.g.:\n\n"
                + "\n".join(f"    {c}" for c in commands)
                + f"\n\nThen `pip config list` must show `global.{meant}`. `gpudoctor fix {FIX_ID}` moves them "
                f"in `{shown_file}` itself.",
                evidence={
                    "file": f.path,
                    "ignored": [f"[{s}] {k} -> {m}" for s, k, m, _ in ignored],
                    "moves": moves,
                },
                fixes=(FIX_ID,) if moves else (),
            )
        )
    findings += _targets_disagree(pip, eff)
    private = private_extra_indexes(pip)
    if private:
        shown = ", ".join(redact_text(u) for u in private)
        src = _source(eff["extra-index-url"], pip.home)
        findings.append(
            CHECK.finding(
                Status.INFO,
                f"pip merges the public PyPI with the private index {shown}: a public package with an internal "
                f"name would win",
                f"`extra-index-url` ({src}) adds `{shown}` next to PyPI. pip does not prefer either index: it "
                f"collects the candidates of all of them and installs the highest version, so anyone who "
                f"uploads a package with one of your internal names and a higher version to PyPI gets it "
                f'installed ("dependency confusion").\n\nSafer: serve both through one index (an '
                f"Artifactory/Nexus/devpi group that proxies PyPI) and make it the only `index-url`; or pin "
                f"internal packages with hashes (`pip install --require-hashes -r requirements.txt`); uv "
                f"instead stops at the first index that has a package.",
                evidence={"extra_index_urls": private, "set_by": eff["extra-index-url"].source},
            )
        )
    for ini in pip.windows_named:
        shown_ini = show_path(ini, pip.home)
        conf = ini[: -len("pip.ini")] + "pip.conf"
        conf_file = pip.file(conf)
        findings.append(
            CHECK.finding(
                Status.WARN,
                f"pip never reads {shown_ini}: on Linux its file is pip.conf (pip.ini is the Windows name)",
                f"`{shown_ini}` sits where pip looks, but pip on Linux and macOS reads only `pip.conf`, so none of "
                f"its settings (index-url, trusted-host, ...) are used. Rename it: `mv {ini} {conf}`"
                + (
                    " (a pip.conf is already there: merge the two by hand)"
                    if conf_file is not None and conf_file.exists
                    else ""
                )
                + ", then `pip config list` shows its settings.",
                evidence={"file": ini, "meant": conf},
            )
        )
    unreadable = [
        f
        for f in pip.files
        if f.exists
        and not f.loaded
        and f.text is None
        and f.note.startswith(("cannot be read", "a symlink loop", "not a regular file"))
    ]
    for f in unreadable:
        shown = show_path(f.path, pip.home)
        findings.append(
            CHECK.finding(
                Status.WARN,
                f"pip cannot read {shown}: {f.note.split(';')[0]}; its settings are silently ignored",
                f"`{shown}` exists but {f.note}. pip does not say so: every setting in it (index-url, "
                f"trusted-host, ...) is ignored. Check it with `ls -l {shown}` and make it a readable regular file "
                f"(`chmod a+r {shown}`), or remove it if it is not meant to be used.",
                evidence={"file": f.path, "note": f.note},
            )
        )
    if not any(f.status >= Status.WARN for f in findings):
        loaded = [show_path(f.path, pip.home) for f in pip.files if f.loaded]
        if "index-url" in eff:
            s = eff["index-url"]
            summary = f"pip reads its configuration; index-url {redact_text(s.value)} from {_source(s, pip.home)}"
        else:
            summary = f"pip reads its configuration; it uses the default index {DEFAULT_INDEX}"
        skipped = [f"{show_path(f.path, pip.home)}: {f.note}" for f in pip.files if f.exists and not f.loaded]
        findings.insert(
            0,
            CHECK.finding(
                Status.OK,
                summary,
                evidence={
                    "files_loaded": loaded or ["(none)"],
                    "files_skipped": skipped,
                    "effective": {k: f"{v.value}  ({v.source})" for k, v in sorted(eff.items())},
                },
            ),
        )
    return findings


CHECK = Check(
    id="pip.config",
    title="pip configuration readable, its index secure and effective",
    needs=("pip",),
    evaluate=evaluate,
)
