"""Shared logic of the ``pip.mirror``, ``uv.mirror``, ``conda.mirror`` and ``apt.mirror`` checks.

Verdicts: the configured index does not answer at all (timeout, refused,
DNS, TLS) or answers with an error or the wrong content -> ``fail``; it
answers but slowly — median time to first byte above :data:`SLOW_TTFB_MS`, or
a body too slow to be checked (status ``slow``) -> ``warn`` "usable but
slow" with the measured figures and, with a ranking, the faster mirror; with a
ranking, a healthy candidate at least 2x and 200 ms faster in median than the
configured index -> ``warn`` with the ranked table; ``ok`` otherwise. No network at all (every probe failed before reaching a server)
or ``--offline`` -> ``skip`` with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpudoctor import urls
from gpudoctor.checks import SkipCheck, require
from gpudoctor.facts import Facts
from gpudoctor.facts.mirrors import MirrorProbe, MirrorsFacts
from gpudoctor.mirrors.probe import network_absent
from gpudoctor.model import Check, Command, Finding, Status

#: Median time to first byte above which an index that works is "usable but slow", ms. pip and uv fetch one
#: simple page per project while resolving (a 100-package environment is 100+ requests, plus one per
#: download), and apt one index file per suite and component, so 1 s per request adds minutes to every
#: install; a nearby mirror or CDN answers in tens of ms. Below it, latency alone is not worth a warning.
SLOW_TTFB_MS = 1000.0
#: A candidate must be at least this many times faster (median) ...
SPEEDUP_FACTOR = 2.0
#: ... and at least this many ms faster, to be worth a warning.
SPEEDUP_MIN_MS = 200.0

FIX_IDS = {"pip": "pip.index-url", "uv": "uv.index-url", "conda": "conda.channels", "apt": "apt.mirror"}
WHAT = {"pip": "pip index", "uv": "uv index", "conda": "conda channel", "apt": "apt source"}
WHATS = {"pip": "pip indexes", "uv": "uv indexes", "conda": "conda channels", "apt": "apt sources"}
#: the tool's own command that reads (and reports errors in) its configuration files
CONFIG_SHOW = {
    "pip": Command("python -m pip config debug", "the pip configuration files, in the order pip reads them"),
    "uv": Command("uv pip list", "uv reads its configuration on every command: its own error for the file"),
    "conda": Command("conda config --show-sources", "conda's configuration files and its error for the broken one"),
    "apt": Command("apt-config dump", "apt's configuration and its error for the broken file"),
}


def probe_command(p: MirrorProbe) -> Command:
    """``curl`` the index as the probe did: what it answers from here, and how fast."""
    return Command(
        f"curl -sS -o /dev/null -w '%{{http_code}} %{{time_starttransfer}}s\\n' {p.probe_url}",
        "what the index answers from here (HTTP status, time to first byte)",
    )


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def _host(url: str) -> str:
    """``host[:port]`` of ``url``, never its credentials."""
    return urls.parse(url).hostport or url


def ranking_table(rows: Sequence[MirrorProbe], limit: int = 15) -> str:
    """Markdown table: mirror, median ms, throughput, status, freshness, why skipped."""
    lines = ["| mirror | median ms | throughput | status | freshness | why skipped |", "|---|---:|---:|---|---|---|"]
    for r in list(rows)[:limit]:
        tput = (
            "-"
            if r.throughput_kib_s is None
            else f"{r.throughput_kib_s / 1024:.1f} MiB/s"
            if r.throughput_kib_s >= 1024
            else f"{r.throughput_kib_s:.0f} KiB/s"
        )
        fresh = "-"
        if r.lag_hours is not None:
            fresh = f"{r.lag_hours:.0f} h behind" if r.lag_hours >= 1 else "current"
        elif r.release_date:
            fresh = r.release_date[:16].replace("T", " ")
        why = r.reason.replace("|", "/") if not r.healthy else ""
        name = f"{r.name}{' (official)' if r.official else ''}"
        lines.append(f"| {name} `{_host(r.base_url)}` | {_ms(r.median_ms)} | {tput} | {r.status} | {fresh} | {why} |")
    return "\n".join(lines)


def faster_candidate(current: MirrorProbe, ranking: Sequence[MirrorProbe]) -> MirrorProbe | None:
    """The best healthy candidate that beats ``current`` by 2x and 200 ms in median, or None."""
    if current.median_ms is None:
        return None
    for cand in ranking:
        if cand.status != "ok" or cand.median_ms is None:
            continue
        if urls.same_base(cand.base_url, current.base_url):
            continue
        if (
            cand.median_ms * SPEEDUP_FACTOR <= current.median_ms
            and current.median_ms - cand.median_ms >= SPEEDUP_MIN_MS
        ):
            return cand
        return None  # ranking is sorted: if the fastest does not qualify, none does
    return None


def best_healthy(ranking: Sequence[MirrorProbe]) -> MirrorProbe | None:
    return next((r for r in ranking if r.status == "ok"), None)


def config_problem(facts: Facts, eco: str) -> str | None:
    """Why the ``eco`` configuration files could not be read (invalid YAML/TOML, unreadable),
    or None: the conda domain is Unavailable with that reason, uv lists ``problems``."""
    from gpudoctor.facts import Unavailable

    cfg = facts.get(eco)
    if isinstance(cfg, Unavailable):
        reason = cfg.reason
        if any(w in reason for w in ("not valid", "cannot be read", "not a mapping", "symlink loop")):
            return reason
        return None
    problems = getattr(cfg, "problems", ())
    return problems[0] if problems else None


def evaluate_ecosystem(check: Check, facts: Facts, eco: str, not_configured: str) -> list[Finding]:
    """Findings of the ``<eco>.mirror`` check (see module docstring)."""
    mirrors = require(facts, MirrorsFacts)
    conf = [p for p in mirrors.configured if p.ecosystem == eco]
    ranking = tuple(mirrors.rankings.get(eco, ()))
    broken = config_problem(facts, eco)
    if broken and not conf:  # an unreadable or invalid file is not "not configured"
        # uv refuses a user/system/--config-file uv.toml it cannot parse ("error: Failed to parse `uv.toml`")
        # and only warns about a pyproject.toml ("during settings discovery ... skipping"; astral-sh/uv #6009)
        fatal = eco == "uv" and broken.split(":", 1)[0].endswith("uv.toml")
        lead = broken.split(". ", 1)[0]
        rest = broken[len(lead) :].lstrip(". ").strip()  # what the summary does not already say
        syntax = "TOML" if eco == "uv" else "YAML" if eco == "conda" else "INI"
        return [
            check.finding(
                Status.FAIL if fatal else Status.WARN,
                f"the {eco} configuration cannot be read: {lead}",
                (f"{rest}\n\n" if rest else "")
                + (
                    "uv stops every command on this file (`error: Failed to parse`), so nothing is installed "
                    "until it is fixed. "
                    if fatal
                    else f"{eco} itself fails on (or silently skips) this file, so the index it uses is not the "
                    "one you configured. "
                )
                + f"Fix its {syntax} syntax where the error above points, then run `gpudoctor check {check.id}` "
                "again.",
                evidence={"problem": broken},
                commands=(CONFIG_SHOW[eco], Command(f"gpudoctor check {check.id}", "check again after the edit")),
            )
        ]
    if mirrors.offline:
        if not conf:
            raise SkipCheck(not_configured)
        listed = ", ".join(p.base_url for p in conf[:3]) + (", ..." if len(conf) > 3 else "")
        raise SkipCheck(f"--offline: the configured {WHAT[eco]} ({listed}) was not probed")
    if not conf and not ranking:
        raise SkipCheck(not_configured)
    unprobed = [p for p in conf if p.status == "offline"]
    if unprobed and all(p.status in ("offline", "local") for p in conf) and not any(r.median_ms for r in ranking):
        raise SkipCheck(
            f"the configured {WHAT[eco]} {_host(unprobed[0].base_url)} was not probed ({unprobed[0].reason})"
        )
    conf = [p for p in conf if p.status != "offline"]
    if network_absent(conf + list(ranking)):
        first = (conf + list(ranking))[0]
        raise SkipCheck(f"no network: every probe failed before reaching a server ({first.reason})")
    fix = FIX_IDS[eco]
    best = best_healthy(ranking)
    table = (
        f"\n\nRanking (probed concurrently, budget {mirrors.budget_s:g} s, catalogue {mirrors.catalogue_origin}):\n\n"
        f"{ranking_table(ranking)}"
        if ranking
        else ""
    )
    evidence = {
        "configured": [
            {
                "url": p.base_url,
                "status": p.status,
                "median_ms": p.median_ms,
                "connect_ms": p.connect_ms,
                "reason": p.reason,
            }
            for p in conf
        ]
    }
    if ranking:
        evidence["ranking"] = [
            {"name": r.name, "url": r.base_url, "status": r.status, "median_ms": r.median_ms} for r in ranking
        ]
    bad = [p for p in conf if not p.healthy and p.status != "slow"]
    if bad:
        third_party = (
            "  (a third-party repository: the mirror switch does not touch it; check its URL and key, or disable it)"
        )
        lines = "\n".join(
            f"- `{p.probe_url}`: **{p.status}** — {p.reason}" + (third_party if p.archive == "other" else "")
            for p in bad
        )
        if all(p.archive == "other" for p in bad):
            return [
                check.finding(
                    Status.FAIL,
                    f"the {WHAT[eco]} {_host(bad[0].base_url)} is failing: {bad[0].status} ({bad[0].reason})",
                    f"`apt-get update` will report errors for it.\n\n{lines}",
                    evidence=evidence,
                    commands=(
                        Command("sudo apt-get update", "apt's own error for that repository", "root"),
                        probe_command(bad[0]),
                    ),
                )
            ]
        if best is not None:
            todo = (
                f"Switch to the fastest healthy mirror ({best.name}, {_ms(best.median_ms)} ms): "
                f"`gpudoctor fix {fix} --mirror fastest` (or `--mirror NAME|URL`)."
            )
        elif ranking:
            todo = (
                "No catalogue mirror answered correctly either; check the proxy/firewall, or add a mirror you "
                "can reach with `--catalogue FILE`."
            )
        else:
            todo = (
                f"Compare with the known mirrors: `gpudoctor check --rank-mirrors {check.id}`, then "
                f"`gpudoctor fix {fix} --mirror fastest`."
            )
        missing = [p for p in bad if eco == "conda" and p.http_status == 404]
        if missing:
            return [_conda_missing(check, facts, missing, evidence)]
        head = bad[0]
        if eco in ("pip", "uv") and head.status == "timeout":
            limit, origin, retries = pip_timeout(facts) if eco == "pip" else uv_timeout(facts)
            waited = _waited_s(head.reason)
            past = waited is not None and waited >= limit
            return [
                check.finding(
                    Status.FAIL,
                    f"the configured {eco} index {_host(head.base_url)} stalls: no answer within "
                    + (f"{waited:g} s, " if waited is not None else "the probe's time, ")
                    + (
                        f"past {eco}'s timeout of {limit:g} s: every install fails"
                        if past
                        else f"and {eco} waits {limit:g} s per request ({retries} retries) before every install fails"
                    ),
                    f"{eco} waits {TIMEOUT_NAME[eco]} = {limit:g} s ({origin}) for each response and retries "
                    f"{retries} times; an index that does not answer makes every install end in a read timeout / "
                    f"connection error and then in no matching distribution.\n\n{lines}\n\n{todo}{table}",
                    evidence={
                        **evidence,
                        f"{eco}_timeout_s": limit,
                        f"{eco}_timeout_from": origin,
                        "waited_s": waited,
                    },
                    fixes=(fix,) if best is not None or not ranking else (),
                    commands=(probe_command(head),),
                )
            ]
        return [
            check.finding(
                Status.FAIL,
                f"the configured {WHAT[eco]} {_host(head.base_url)} is failing: {head.status} ({head.reason})",
                f"Installs will stall or fail: the {WHAT[eco]} this machine is configured to use does not serve what "
                f"is needed.\n\n{lines}\n\n{todo}{table}",
                evidence=evidence,
                fixes=(fix,) if best is not None or not ranking else (),
                commands=(probe_command(head),),
            )
        ]
    slow = [p for p in conf if p.status == "slow" or (p.status == "ok" and (p.median_ms or 0.0) > SLOW_TTFB_MS)]
    if slow:
        worst = max(slow, key=lambda p: (p.status == "slow", p.median_ms or 0.0))
        figures = "\n".join(
            f"- `{p.probe_url}`: time to first byte {', '.join(f'{x:.0f}' for x in p.samples_ms) or '-'} ms "
            f"(median {_ms(p.median_ms)} ms), connect {_ms(p.connect_ms)} ms"
            + (f", {p.throughput_kib_s:.0f} KiB/s" if p.throughput_kib_s is not None else "")
            + (f" — {p.reason}" if p.reason else "")
            for p in slow
        )
        faster = next(
            (
                r
                for r in ranking
                if r.status == "ok"
                and r.median_ms is not None
                and not urls.same_base(r.base_url, worst.base_url)
                and r.median_ms < (worst.median_ms or float("inf"))
            ),
            None,
        )
        if faster is not None:
            todo = (
                f"Faster from here: {faster.name} (`{_host(faster.base_url)}`, median {_ms(faster.median_ms)} ms). "
                f"Switch: `gpudoctor fix {fix} --mirror {faster.name}`."
            )
        elif ranking:
            todo = "No catalogue mirror answered faster from here."
        else:
            todo = (
                f"Compare with the known mirrors: `gpudoctor check --rank-mirrors {check.id}`, then "
                f"`gpudoctor fix {fix} --mirror fastest`."
            )
        if eco == "pip":
            todo += (
                " To keep installs from aborting meanwhile, raise pip's socket timeout and retries: "
                "`gpudoctor fix pip.index-url --set timeout=60 --set retries=10`."
            )
        what = (
            "its body came too slowly to check"
            if worst.status == "slow"
            else f"median time to first byte {_ms(worst.median_ms)} ms"
        )
        if eco in ("pip", "uv") and worst.median_ms is not None:
            limit, origin, retries = pip_timeout(facts) if eco == "pip" else uv_timeout(facts)
            if worst.median_ms / 1000.0 >= limit:
                return [
                    check.finding(
                        Status.FAIL,
                        f"the configured {eco} index {_host(worst.base_url)} answers in {worst.median_ms / 1000.0:.1f} s, "
                        f"past {eco}'s timeout of {limit:g} s ({origin}): every install fails"
                        + (f"; {faster.name} answers in {_ms(faster.median_ms)} ms" if faster is not None else ""),
                        f"{eco} gives up on a response after {TIMEOUT_NAME[eco]} = {limit:g} s ({origin}) and retries "
                        f"{retries} times, so every request to this index ends in a read timeout and every install "
                        f"fails, although the index works.\n\n{figures}\n\n{todo}",
                        evidence={**evidence, f"{eco}_timeout_s": limit, f"{eco}_timeout_from": origin},
                        fixes=(fix,),
                    )
                ]
        return [
            check.finding(
                Status.WARN,
                f"the configured {WHAT[eco]} {_host(worst.base_url)} is usable but slow: {what}"
                + (f"; {faster.name} answers in {_ms(faster.median_ms)} ms" if faster is not None else ""),
                f"It answers, so installs work, but every request waits (threshold: {SLOW_TTFB_MS:.0f} ms to the "
                f"first byte; pip and uv make one request per package while resolving).\n\n{figures}\n\n{todo}{table}",
                evidence={**evidence, "slow_threshold_ms": SLOW_TTFB_MS},
                fixes=(fix,) if faster is not None or eco == "pip" else (),
                commands=(probe_command(worst),),
            )
        ]
    timed = [p for p in conf if p.median_ms is not None]
    if timed:
        slowest = max(timed, key=lambda p: p.median_ms or 0.0)
        cand = faster_candidate(slowest, ranking)
        if cand is not None:
            return [
                check.finding(
                    Status.WARN,
                    f"{cand.name} answers in {_ms(cand.median_ms)} ms, the configured {WHAT[eco]} "
                    f"{_host(slowest.base_url)} in {_ms(slowest.median_ms)} ms",
                    f"Every package download pays this latency. A healthy mirror is at least "
                    f"{SPEEDUP_FACTOR:g}x and {SPEEDUP_MIN_MS:.0f} ms faster from here.\n\n"
                    f"Switch: `gpudoctor fix {fix} --mirror {cand.name}` (or `--mirror fastest`).{table}",
                    evidence=evidence,
                    fixes=(fix,),
                )
            ]
        summary = f"the configured {WHAT[eco]} {_host(slowest.base_url)} answers in {_ms(slowest.median_ms)} ms"
        if len(conf) > 1:
            summary = (
                f"{len(conf)} configured {WHATS[eco]} answer; slowest {_host(slowest.base_url)} "
                f"in {_ms(slowest.median_ms)} ms"
            )
        hint = "" if ranking else f"\n\nCompare with known mirrors: `gpudoctor check --rank-mirrors {check.id}`."
        return [
            check.finding(
                Status.OK,
                summary,
                f"No healthy mirror is {SPEEDUP_FACTOR:g}x and {SPEEDUP_MIN_MS:.0f} ms faster.{hint}{table}",
                evidence=evidence,
            )
        ]
    if conf:  # local indexes only
        return [
            check.finding(
                Status.OK,
                f"the configured {WHAT[eco]} is local ({conf[0].base_url}): nothing to probe",
                evidence=evidence,
            )
        ]
    if best is not None:
        return [
            check.finding(
                Status.INFO,
                f"no {WHAT[eco]} configured; fastest mirror from here: {best.name} ({_ms(best.median_ms)} ms)",
                f"To use it: `gpudoctor fix {fix} --mirror {best.name}`.{table}",
                evidence=evidence,
                fixes=(fix,),
            )
        ]
    return [
        check.finding(
            Status.WARN,
            f"no catalogue mirror for {eco} answered correctly",
            f"Every candidate failed.{table}",
            evidence=evidence,
            commands=tuple(probe_command(r) for r in ranking[:1]),
        )
    ]


def _conda_missing(
    check: Check, facts: Facts, missing: Sequence[MirrorProbe], evidence: Mapping[str, object]
) -> Finding:
    """Channels the configured conda mirror answers 404 for: it does not carry them."""
    from gpudoctor.facts.mirrors import CondaFacts

    conda = facts.get("conda")
    chans = [*conda.channels, *conda.named] if isinstance(conda, CondaFacts) else []
    rows = []
    names: list[str] = []
    for p in missing:
        mine = [c for c in chans if urls.same_base(c.url, p.base_url)]
        name = mine[0].name if mine else p.base_url.rstrip("/").rsplit("/", 1)[-1]
        names.append(name)
        how = (
            f" (named in {mine[0].origin}, resolved via {mine[0].via}"
            + (f" set in {mine[0].setting}" if mine[0].setting and mine[0].setting != "built-in" else "")
            + ")"
            if mine
            else ""
        )
        rows.append(f"- `{name}`{how}: `{p.probe_url}` -> HTTP 404")
    names = list(dict.fromkeys(names))
    host = _host(missing[0].base_url)
    public = "\n".join(f"      {n}: https://conda.anaconda.org" for n in names)
    return check.finding(
        Status.FAIL,
        f"the conda mirror {host} does not carry {', '.join(f'`{n}`' for n in names)}: HTTP 404 for "
        f"{missing[0].probe_url}",
        "conda stops every install that uses "
        + ("this channel" if len(names) == 1 else "these channels")
        + " with `UnavailableInvalidChannel: HTTP 404 NOT FOUND for channel ...` (or mamba's "
        "`Could not resolve`): the mirror answers, but has no copy of it. Mirrors carry a chosen set of channels "
        "(their `cloud` tree), and `channel_alias` sends every other name there too.\n\n"
        + "\n".join(rows)
        + "\n\nEither send just "
        + ("that channel" if len(names) == 1 else "those channels")
        + " to a host that has "
        + ("it" if len(names) == 1 else "them")
        + " (this bypasses the mirror for "
        + ("it" if len(names) == 1 else "them")
        + f"), in `~/.condarc`:\n\n    custom_channels:\n{public}\n\nor switch to a mirror that carries "
        "it: `gpudoctor fix conda.channels --mirror NAME|URL`, or remove the channel where it is named.",
        evidence={**evidence, "missing": names},
        fixes=("conda.channels",),
    )


#: pip's own defaults (pip ``cli/cmdoptions.py``: ``--timeout`` 15 s, ``--retries`` 5)
PIP_TIMEOUT_S = 15.0
PIP_RETRIES = 5


def pip_timeout(facts: Facts) -> tuple[float, str, int]:
    """(seconds, where it is set, retries) pip uses per request: ``timeout`` (alias ``default-timeout``)
    from the effective pip configuration, else pip's default of 15 s."""
    from gpudoctor.facts.pip import PipFacts

    pip = facts.get("pip")
    limit, origin, retries = PIP_TIMEOUT_S, "pip's default", PIP_RETRIES
    if isinstance(pip, PipFacts):
        for key in ("default-timeout", "timeout"):
            s = pip.effective.get(key)
            if s is not None:
                try:
                    limit, origin = float(s.value), f"{key} in {s.source}"
                except ValueError:
                    pass
        r = pip.effective.get("retries")
        if r is not None and r.value.strip().isdigit():
            retries = int(r.value)
    return limit, origin, retries


#: how each tool names its per-request timeout
TIMEOUT_NAME = {"pip": "`timeout`", "uv": "`UV_HTTP_TIMEOUT`"}

#: uv's read timeout (uv docs, environment variables: ``UV_HTTP_TIMEOUT``, default 30 s) and retries (3)
UV_TIMEOUT_S = 30.0
UV_RETRIES = 3


def uv_timeout(facts: Facts) -> tuple[float, str, int]:
    """(seconds, where it is set, retries) uv waits per request: ``UV_HTTP_TIMEOUT`` else 30 s."""
    from gpudoctor.facts.mirrors import UvFacts

    uv = facts.get("uv")
    if isinstance(uv, UvFacts) and uv.http_timeout.strip():
        try:
            return float(uv.http_timeout), "UV_HTTP_TIMEOUT", UV_RETRIES
        except ValueError:
            pass
    return UV_TIMEOUT_S, "uv's default", UV_RETRIES


def _waited_s(reason: str) -> float | None:
    """Seconds a probe waited, from its timeout reason ("no response within 3 s")."""
    import re

    m = re.search(r"within ([0-9.]+) s|([0-9.]+) s were left", reason)
    if not m:
        return None
    return float(m.group(1) or m.group(2))
