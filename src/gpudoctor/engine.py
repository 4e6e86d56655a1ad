"""The engine: collect what the selected checks need, then evaluate them.

- Collection: only the domains the selected checks declare in ``needs`` (plus
  what those collectors ``require``), in dependency waves, the collectors of
  a wave in parallel threads, each under its own timeout. A collector that
  raises or overruns makes its domain Unavailable and adds an ``error``
  finding (``collect.<domain>``) with the traceback in the evidence.
- Evaluation: checks in a stable order (registry order), each timed; a
  :class:`~gpudoctor.checks.SkipCheck` becomes ``skip``, any other exception
  an ``error`` finding; the rest still run.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, TextIO

from gpudoctor import __version__, causes
from gpudoctor.areas import area_for
from gpudoctor.checks import SkipCheck
from gpudoctor.collect import CollectContext, CollectOptions, Collector, all_collectors
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.inputs import check_timeout_from_env, collect_timeout_scale_from_env
from gpudoctor.model import Check, Finding, Status
from gpudoctor.plugin_guard import guarded
from gpudoctor.plugin_guard import run_with_timeout as _run_with_timeout
from gpudoctor.records import frozen_dataclass
from gpudoctor.redact import redact_value
from gpudoctor.system import System

__all__ = [
    "Report",
    "Progress",
    "SelectionError",
    "select_checks",
    "collect_facts",
    "needed_domains",
    "probe_level",
    "evaluate",
    "run",
    "REPORT_SCHEMA_VERSION",
]

#: Version of the ``--format json`` report document.
REPORT_SCHEMA_VERSION = 3
#: exit code of a run that judged nothing (every check skipped): "unknown", never OK
EXIT_UNKNOWN = 4


class SelectionError(ValueError):
    """An id given on the command line matches no check (a usage error)."""


class Progress:
    """Receives start/finish events for long work; the default does nothing.

    The console renderer implements it with a spinner listing running names.
    """

    def started(self, name: str) -> None:  # pragma: no cover - trivial
        pass

    def finished(self, name: str) -> None:  # pragma: no cover - trivial
        pass


@frozen_dataclass
class Report:
    """Findings plus the facts they were drawn from.

    Attributes:
        findings: in check order; plug-in and collector errors first.
        facts: the facts snapshot used.
        duration_ms: wall time of collection plus evaluation, in ms.
        hostname: the node that ran the checks (``socket.gethostname()``; "" when unknown),
            so reports from a fleet can be merged (``gpudoctor report merge``).
        replayed: the facts came from a snapshot (``check --facts``), not from collecting now.
        machine_id: ``/etc/machine-id`` of the node ("" when unreadable): with the hostname and
            ``time`` it tells a fleet's nodes apart (two nodes may share a hostname).
        time: when the run finished (UTC, ISO 8601 to the second; "" when unknown).
    """

    findings: tuple[Finding, ...]
    facts: Facts
    duration_ms: float = 0.0
    hostname: str = ""
    replayed: bool = False
    machine_id: str = ""
    time: str = ""

    @property
    def worst(self) -> Status:
        """The most severe status among the findings (``ok`` when there are none)."""
        return Status.worst([f.status for f in self.findings])

    @property
    def judged(self) -> bool:
        """Whether any check reached a verdict: a finding that is not ``skip``. A run where every
        check was not applicable (an empty or foreign snapshot, a selection that does not apply
        here) judged nothing, and must not read as healthy."""
        return any(f.status is not Status.SKIP for f in self.findings)

    @property
    def verdict(self) -> Status:
        """The overall verdict: ``ok`` unless something warned, failed or errored
        (``info`` and ``skip`` need no action, so a healthy machine reads ``ok``); ``skip``
        when nothing was judged (:attr:`judged`; shown and written as "unknown")."""
        worst = self.worst
        if worst < Status.WARN and not self.judged:
            return Status.SKIP
        return worst if worst >= Status.WARN else Status.OK

    @property
    def verdict_word(self) -> str:
        """The verdict as written in reports: ``unknown`` when nothing was judged, else the status."""
        verdict = self.verdict
        return "unknown" if verdict is Status.SKIP else verdict.value

    def counts(self) -> dict[str, int]:
        """Status value -> number of findings (every status present, zeros included)."""
        out = {s.value: 0 for s in Status}
        for f in self.findings:
            out[f.status.value] += 1
        return out

    def exit_code(self, strict: bool = False) -> int:
        """1 on ``fail`` (or ``warn`` with ``strict``); else 3 when a check, collector
        or plug-in broke (an ``error`` finding: the verdict is incomplete, so a CI job
        or health probe must not read it as healthy); else 4 when nothing was judged
        (:attr:`judged`: every check skipped, an empty snapshot); else 0."""
        statuses = {f.status for f in self.findings}
        if Status.FAIL in statuses:
            return 1
        if strict and Status.WARN in statuses:
            return 1
        if Status.ERROR in statuses:
            return 3
        if not self.judged:
            return EXIT_UNKNOWN
        return 0

    def to_json(self, include_facts: bool = False) -> dict[str, Any]:
        """The report document (``report.schema.json``), secrets redacted."""
        doc: dict[str, Any] = {
            "schema_version": REPORT_SCHEMA_VERSION,
            "gpudoctor_version": __version__,
            "hostname": self.hostname,
            "machine_id": self.machine_id,
            "time": self.time,
            "status": self.verdict_word,
            "counts": self.counts(),
            "duration_ms": round(self.duration_ms, 3),
            "findings": [f.to_json() for f in self.findings],
        }
        if include_facts:
            doc["facts"] = self.facts.to_json(redact=False)
        redacted: dict[str, Any] = redact_value(doc)
        return redacted


def machine_id() -> str:
    """This machine's id (``/etc/machine-id``, else ``/var/lib/dbus/machine-id``; systemd's
    machine-id(5)), "" when neither is readable."""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            with open(path, encoding="ascii", errors="replace") as fh:
                value = fh.read(64).strip()
        except OSError:
            continue
        if value:
            return value
    return ""


def utc_now() -> str:
    """Now, UTC, ISO 8601 to the second."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def select_checks(
    checks: Mapping[str, Check],
    ids: Sequence[str] = (),
    skip: Sequence[str] = (),
    unloaded: Mapping[str, str] | None = None,
) -> list[Check]:
    """Checks chosen by id or id prefix (``cuda`` selects ``cuda.driver``, ``cuda.arch``).

    Empty ``ids`` selects all. Raises :class:`SelectionError` for an id or
    prefix that matches nothing, naming the known ids, or, when it names a check that is
    registered but failed to load (``unloaded``: id -> why, :meth:`Registry.unloaded
    <gpudoctor.registry.Registry.unloaded>`), saying why. Skipping such a check is no error:
    it is how a user gets past a broken plug-in.
    """
    for pattern in list(ids) + list(skip):
        if not any(selects(pattern, cid) for cid in checks):
            broken = [why for cid, why in (unloaded or {}).items() if selects(pattern, cid)]
            if broken and pattern in skip and pattern not in ids:
                continue
            if broken:
                raise SelectionError(f"{pattern!r} did not load: {broken[0]}")
            raise SelectionError(f"no check matches {pattern!r}; known checks: {', '.join(checks)}")
    chosen = [c for cid, c in checks.items() if not ids or any(selects(p, cid) for p in ids)]
    return [c for c in chosen if not any(selects(p, c.id) for p in skip)]


def selects(pattern: str, cid: str) -> bool:
    """Whether a selection pattern (an id or an id prefix) names check ``cid``."""
    pattern = pattern.rstrip(".")
    return cid == pattern or cid.startswith(pattern + ".")


def probe_level(checks: Iterable[Check]) -> str:
    """The cheapest probe level (``light`` < ``full``) that serves every check reading ``targets``;
    ``light`` when none does (no probe runs then anyway)."""
    levels = [c.probe_level if c.probe_level in ("light", "full") else "full" for c in checks if "targets" in c.needs]
    return "full" if "full" in levels else "light"


def needed_domains(checks: Iterable[Check], collectors: Mapping[str, Collector]) -> list[str]:
    """Domains the ``checks`` need, transitively through collector ``requires``, in
    dependency order (what :func:`collect_facts` takes). Raises ``RuntimeError`` on a cycle."""
    order: list[str] = []
    seen = set()

    def visit(name: str, stack: tuple[str, ...]) -> None:
        if name in seen:
            return
        if name in stack:
            raise RuntimeError(f"collector dependency cycle: {' -> '.join(stack + (name,))}")
        coll = collectors.get(name)
        for dep in coll.requires if coll else ():
            visit(dep, stack + (name,))
        seen.add(name)
        order.append(name)

    for check in checks:
        for name in check.needs:
            visit(name, ())
    return order


#: Seconds one check's ``evaluate`` may take before it is abandoned as an ``error`` finding
#: (checks are pure functions of the facts: milliseconds normally).
try:
    CHECK_TIMEOUT_S = check_timeout_from_env()
except ValueError:  # reported by the CLI (gpudoctor.cli.common); a library caller gets the default
    CHECK_TIMEOUT_S = 10.0


class _ReadyFacts(Mapping[str, Any]):
    """``CollectContext.facts`` for one collector: its declared ``requires``, each
    handed over as soon as that domain is collected (reading one waits for it)."""

    def __init__(self, names: Sequence[str], results: dict[str, Any], ready: dict[str, threading.Event]):
        self._names = tuple(names)
        self._results = results
        self._ready = ready
        self._waited = 0.0
        self._since: float | None = None

    def waited_s(self) -> float:
        """Seconds spent waiting for required domains so far (the current wait included)."""
        since = self._since
        return self._waited + (time.monotonic() - since if since is not None else 0.0)

    def __getitem__(self, name: str) -> Any:
        if name not in self._names:
            raise KeyError(name)
        if not self._ready[name].is_set():
            self._since = time.monotonic()
            try:
                self._ready[name].wait()
            finally:
                self._waited += time.monotonic() - self._since
                self._since = None
        return self._results[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def collect_facts(
    domains: Sequence[str],
    system: System,
    options: CollectOptions,
    collectors: Mapping[str, Collector] | None = None,
    progress: Progress | None = None,
) -> tuple[Facts, list[Finding]]:
    """Collect ``domains`` (in dependency order, see :func:`needed_domains`) concurrently.

    Every collector starts at once, in its own thread, under its own timeout;
    one that reads a domain it ``requires`` from ``ctx.facts`` waits for just
    that domain, so its independent work (starting a probe, say) overlaps
    with the dependency's. Returns the facts and ``error`` findings for
    collectors that raised or timed out. Domains with no collector are Unavailable.
    """
    collectors = all_collectors() if collectors is None else collectors
    progress = progress or Progress()
    results: dict[str, Any] = {}
    ready: dict[str, threading.Event] = {d: threading.Event() for d in domains}
    durations: dict[str, float] = {}
    errors: list[Finding] = []
    lock = threading.Lock()
    for name in domains:
        coll = collectors.get(name)
        missing = [r for r in (coll.requires if coll else ()) if r not in ready]
        if missing:  # pragma: no cover - needed_domains includes them
            raise RuntimeError(f"{name} requires {missing}, which are not being collected")

    def finish(name: str, value: Any) -> None:
        results[name] = value
        ready[name].set()

    def work(name: str) -> None:
        coll = collectors[name]
        start = time.monotonic()
        facts_in = _ReadyFacts(coll.requires, results, ready)
        ctx = CollectContext(system, options, facts_in)
        budget = collector_budget_s(coll, options)
        kind, value = _run_with_timeout(lambda: coll.collect(ctx), budget, facts_in.waited_s)
        durations[name] = (time.monotonic() - start) * 1000.0
        if kind == "ok" and not _is_facts_value(value):
            kind, value = "bad", f"returned {_describe(value)}, not a facts dataclass or Unavailable"
        if kind == "ok":
            finish(name, value)
        elif kind == "timeout":
            finish(name, Unavailable(f"collecting the {name} facts took longer than {budget:g} s"))
            with lock:
                errors.append(
                    Finding(
                        check=f"collect.{name}",
                        status=Status.ERROR,
                        summary=f"collecting the {name} facts timed out after {budget:g} s",
                        explanation="A collector did not finish in time; checks that need these facts were skipped. "
                        "Run again with `-v` and report it if it repeats.",
                        evidence={"domain": name, "timeout_s": budget, "provider": _provider(coll.collect)},
                    )
                )
        elif kind == "bad":
            finish(name, Unavailable(f"the {name} collector {value}"))
            with lock:
                errors.append(
                    Finding(
                        check=f"collect.{name}",
                        status=Status.ERROR,
                        summary=f"the {name} collector ({_provider(coll.collect)}) {value}",
                        explanation="This is a bug in the collector (or the plug-in that provides it); checks that "
                        "need these facts were skipped, the others ran.",
                        evidence={"domain": name, "provider": _provider(coll.collect)},
                    )
                )
        else:
            value = value[1]
            last = value.strip().splitlines()[-1] if value else "unknown error"
            finish(name, Unavailable(f"the {name} collector crashed: {last}"))
            with lock:
                errors.append(
                    Finding(
                        check=f"collect.{name}",
                        status=Status.ERROR,
                        summary=f"the {name} collector crashed: {last}",
                        explanation="This is a bug in gpudoctor (or a plug-in); checks that need these facts were "
                        "skipped, the others ran. Please report it with the traceback (`-v`).",
                        evidence={"domain": name, "traceback": value},
                    )
                )
        progress.finished(name)

    threads: list[threading.Thread] = []
    quiet = _stdout_to_stderr()
    quiet.__enter__()
    for name in domains:
        if name not in collectors:
            finish(name, Unavailable(f"no collector is installed for the {name} facts"))
            continue
        progress.started(name)
        t = threading.Thread(target=work, args=(name,), daemon=True)
        threads.append(t)
        t.start()
    try:
        for t in threads:
            t.join()
    finally:
        quiet.__exit__(None, None, None)
    order = {d: i for i, d in enumerate(domains)}
    errors.sort(key=lambda f: order.get(str(f.evidence.get("domain")), 0))
    jail = jail_finding(list(getattr(system.files, "incidents", ()) or ()), str(system.files.root))
    if jail is not None:
        errors.append(jail)
    facts = Facts(
        domains={d: results[d] for d in domains},
        gpudoctor_version=__version__,
        collected_at=system.clock.now().astimezone(_dt.timezone.utc).isoformat(timespec="seconds"),
        root=str(system.files.root),
        durations_ms={d: durations[d] for d in domains if d in durations},
    )
    return facts, errors


def jail_finding(incidents: Sequence[Any], root: str) -> Finding | None:
    """The ``root.symlinks`` finding for the symlinks the ``--root`` jail reined in
    (:class:`gpudoctor.system.JailIncident`), or None when there were none.

    ``warn`` when a link loops or still resolves outside the root (those files were
    not read); ``info`` when links only climb above the root with ``..`` (they were
    resolved inside it, as chroot(2) would).
    """
    if not incidents:
        return None
    bad = [i for i in incidents if i.kind in ("loop", "escape")]
    words = {
        "loop": "is a symlink loop (not followed)",
        "escape": "resolves outside the root (not followed)",
        "climbs-above-root": "climbs above the root with `..` (resolved inside the root)",
    }
    lines = [f"- `{i.link}` -> `{i.target}` {words.get(i.kind, i.kind)}" for i in incidents[:20]]
    if len(incidents) > 20:
        lines.append(f"- ... and {len(incidents) - 20} more")
    n = len(bad) if bad else len(incidents)
    summary = (
        f"{n} symlink{'s' if n != 1 else ''} under --root {root} "
        + (
            "loop or point outside it; those files were not read"
            if n != 1
            else "loops or points outside it; that file was not read"
        )
        if bad
        else f"{n} symlink{'s' if n != 1 else ''} under --root {root} climb{'s' if n == 1 else ''} above it; "
        "resolved inside the root"
    )
    return Finding(
        check="root.symlinks",
        status=Status.WARN if bad else Status.INFO,
        summary=summary,
        explanation="`--root` is a jail: symlinks are resolved inside it as `chroot` would (an absolute "
        "target is read inside the root, `..` stops at the root). These links could not be "
        "followed that way, so the facts that depend on them are missing or partial:\n\n"
        + "\n".join(lines)
        + "\n\nCheck them with `ls -l` inside the image; a loop or an escaping link in an image "
        "is usually a packaging mistake.",
        evidence={
            "links": [{"path": i.path, "link": i.link, "target": i.target, "kind": i.kind} for i in incidents[:100]]
        },
    )


def _stdout_to_stderr() -> contextlib.redirect_stdout[TextIO]:
    """While plug-in code runs, what it prints goes to stderr (still through the redaction
    guard): stdout carries only the report."""
    import sys

    return contextlib.redirect_stdout(sys.stderr)


def collector_budget_s(coll: Collector, options: CollectOptions) -> float:
    """Seconds the engine gives ``coll`` (time spent waiting for its required domains not
    counted): its ``timeout_s``, and for a collector that runs probes
    (``Collector.runs_probes``) at least ``--probe-timeout`` plus 30 s, so a slow but
    healthy torch import (25 s with ``--probe-timeout 120``) is not an error. Multiplied by
    ``GPUDOCTOR_COLLECT_TIMEOUT_SCALE`` (a loaded machine; the CLI validates it, a library caller
    with a bad value gets 1)."""
    budget = float(coll.timeout_s)
    if getattr(coll, "runs_probes", False):
        budget = max(budget, float(options.probe_timeout_s) + 30.0)
    try:
        return budget * collect_timeout_scale_from_env()
    except ValueError:
        return budget


def _is_facts_value(value: Any) -> bool:
    """A value the facts snapshot can hold: a dataclass, Unavailable or JSON-like data (not
    None, which the facts rules forbid, and nothing the snapshot cannot serialise)."""
    import json

    from gpudoctor.facts.base import to_jsonable

    if value is None:
        return False
    try:
        json.dumps(to_jsonable(value), allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def _provider(obj: Any) -> str:
    """``module.function`` that implements a check or collector (names the plug-in)."""
    fn = getattr(obj, "evaluate", obj)
    mod = getattr(fn, "__module__", None) or type(obj).__module__
    name = getattr(fn, "__qualname__", None) or type(obj).__qualname__
    return f"{mod}.{name}"


def _check_error(check: Check, summary: str, evidence: Mapping[str, Any]) -> Finding:
    return check.finding(
        Status.ERROR,
        summary,
        f"This is a bug in the check `{check.id}` (`{_provider(check)}`), not a verdict on your machine; "
        "the other checks ran. Please report it with the traceback (`gpudoctor check -v`).",
        evidence=dict(evidence, provider=_provider(check)),
    )


def _run_check(check: Check, facts: Facts, timeout_s: float) -> list[Finding]:
    if _provider(check).startswith("gpudoctor."):
        kind, value = _run_with_timeout(lambda: list(check.evaluate(facts)), timeout_s)
    else:  # a plug-in's code: os._exit, raw writes to stdout and forks are contained
        with guarded():
            kind, value = _run_with_timeout(lambda: list(check.evaluate(facts)), timeout_s)
    if kind == "timeout":
        return [
            _check_error(
                check,
                f"the check {check.id} did not finish within {timeout_s:g} s and was abandoned",
                {"timeout_s": timeout_s},
            )
        ]
    if kind == "raised":
        exc, tb = value
        if isinstance(exc, SkipCheck):
            return [check.finding(Status.SKIP, str(exc) or "not applicable here")]
        return [_check_error(check, f"the check itself failed: {type(exc).__name__}: {exc}", {"traceback": tb})]
    bad = [f for f in value if not isinstance(f, Finding)]
    if bad:
        return [
            _check_error(
                check,
                f"the check {check.id} returned {_describe(bad[0])}, not a Finding",
                {"returned": repr(bad[0])[:500]},
            )
        ]
    return value or [check.finding(Status.OK, f"{check.title}: nothing to report")]


def evaluate(
    checks: Sequence[Check],
    facts: Facts,
    progress: Progress | None = None,
    check_timeout_s: float = CHECK_TIMEOUT_S,
    light_helpers: bool = False,
) -> list[Finding]:
    """Evaluate ``checks`` in order on ``facts``; never raises for a check's fault.

    Each check runs in a worker thread under ``check_timeout_s``: one that raises
    anything (``BaseException`` included), returns something that is not an iterable of
    :class:`Finding`, or overruns becomes an ``error`` finding naming it; the rest run."""
    progress = progress or Progress()
    findings = _evaluate(checks, facts, progress, check_timeout_s)
    if not any(c.id == causes.HEADLINE for c in checks):
        return findings
    # the headline is derived from the findings of the run: the candidates it summarises run once,
    # selected or not (those not selected are evaluated for it and left out of the report)
    hidden = _headline_helpers(checks, light_helpers)
    extra = _evaluate(hidden, facts, Progress(), check_timeout_s) if hidden else []
    derived = causes.derive(findings + extra)
    return derived[: len(findings)]


def _headline_helpers(checks: Sequence[Check], light: bool = False) -> list[Check]:
    """The built-in candidates of the headline's root cause that are not among ``checks``, from the
    registry; with ``light`` (the light gate) only those it could run (light probe or a light gate
    row; never a deep-only one)."""
    from gpudoctor import catalogue
    from gpudoctor.registry import load_registry

    chosen = {c.id for c in checks}
    wanted = set()
    for cid in causes.candidate_ids():
        row = catalogue.row(cid)
        if cid in chosen or row is None:
            continue
        if not light or (row.gate != "deep" and "light" in (row.probe, row.gate)):
            wanted.add(cid)
    if not wanted:
        return []
    return list(load_registry(load_fixes=False, check_filter=lambda cid, own: own and cid in wanted).checks.values())


def _evaluate(checks: Sequence[Check], facts: Facts, progress: Progress, check_timeout_s: float) -> list[Finding]:
    findings: list[Finding] = []
    for check in checks:
        progress.started(check.id)
        start = time.monotonic()
        with _stdout_to_stderr():  # a check that prints must not corrupt a JSON report on stdout
            produced = _run_check(check, facts, check_timeout_s)
        elapsed = (time.monotonic() - start) * 1000.0
        share = elapsed / len(produced)
        area = area_for(check.id, check.area)
        findings.extend(replace(f, duration_ms=share, area=f.area or area) for f in produced)
        progress.finished(check.id)
    return findings


def run(
    checks: Sequence[Check],
    system: System,
    options: CollectOptions,
    progress: Progress | None = None,
    facts: Facts | None = None,
    extra_findings: Sequence[Finding] = (),
    collectors: Mapping[str, Collector] | None = None,
    light_helpers: bool = False,
) -> Report:
    """Collect (unless ``facts`` is given: replay) and evaluate; returns the Report.

    ``light_helpers``: the headline's unselected candidates are only those the light gate runs.

    ``collectors`` defaults to every collector (:func:`~gpudoctor.collect.all_collectors`);
    the gate passes :func:`~gpudoctor.collect.collectors_for` its selection, so it imports
    only the collector modules it needs."""
    start = time.monotonic()
    collector_errors: list[Finding] = []
    replayed = facts is not None
    if facts is None:
        if not options.probe_level_fixed and not options.deep:  # --deep's smoke test runs in the full probe
            options = replace(options, probe_level=probe_level(checks))
        collectors = all_collectors() if collectors is None else collectors
        domains = needed_domains(checks, collectors)
        facts, collector_errors = collect_facts(domains, system, options, collectors, progress)
    findings = list(extra_findings) + collector_errors + evaluate(checks, facts, progress, light_helpers=light_helpers)
    import socket

    return Report(
        tuple(findings),
        facts,
        (time.monotonic() - start) * 1000.0,
        hostname=socket.gethostname(),
        replayed=replayed,
        machine_id=machine_id(),
        time=utc_now(),
    )
