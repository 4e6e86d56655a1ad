"""``gpudoctor fix``: plan repairs, show diffs, confirm, write through :mod:`gpudoctor.apply`, re-check.

Flow: run the checks the chosen fixes address (the engine), ask each fix's
planner for a :class:`~gpudoctor.model.FixPlan`, show every file's unified
diff, confirm on a terminal (``--yes`` skips; without a terminal and without
``--yes`` nothing is written and the exit status is 2), write the plans as
one journal transaction, run the addressed checks again and show
``before -> after``. ``--undo [TXN]`` and ``--history`` work on the journal.

Options meant for planners are passed to them in the ``options`` mapping
(all strings): ``scope``, ``index-url``, ``mirror``, ``allow-insecure``
(``"1"`` when given) and every ``--set KEY=VALUE``.

Exit codes (the same with and without ``--dry-run``, named fixes or ``--all``):
0 applied (or already fixed, or a dry run of fixes that would apply) and no
addressed check still fails; 1 a fix was refused or failed, a write failed, a
check still fails after writing, a fix's tool still resolves something else
after writing ("not fixed: <file> still wins": the configuration is read again
the way the tool reads it, every layer with its precedence), or (``--all``) a failing check offers no
automatic fix (it is named: edit by hand), or an ``--undo`` was refused because
a file changed since; 2 usage error (bad option, unknown fix, ``--undo`` of an
unknown transaction or with nothing to undo) or confirmation needed but no
terminal.
"""

from __future__ import annotations

import json
import posixpath
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import click

from gpudoctor.cli.common import (
    CONTEXT_SETTINGS,
    EXIT_FAIL,
    EXIT_OK,
    EXIT_USAGE,
    build_system,
    check_pythons,
    common_collect_options,
    complete_fix_ids,
    load_registry,
    make_collect_options,
    refuse_conflicts,
    usage,
)
from gpudoctor.mirrors.cli_options import (
    fix_mirror_extra,
    mirror_check_options,
    resolve_apt_security,
    resolve_pip_mirror,
)
from gpudoctor.model import Finding, Fix, FixPlan, FixRefused, Status
from gpudoctor.redact import redact_text, redact_value
from gpudoctor.words import plural

__all__ = ["fix", "FixOutcome", "plan_fixes", "stdin_is_tty"]

OUTCOME_SCHEMA_VERSION = 1


def stdin_is_tty() -> bool:
    """Whether we may prompt (stdin is a terminal). Tests monkeypatch this."""
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


@dataclass
class FixOutcome:
    """What happened to one fix.

    Attributes:
        id: fix id.
        status: ``planned`` (will change files), ``applied``, ``not-fixed`` (written, but the
            tool, its configuration read again, still resolves something else: ``message``
            names what still wins), ``already-fixed``,
            ``nothing-to-do`` (the planner offered nothing), ``refused``
            (the planner declined; ``message`` says what to edit by hand),
            ``error`` (the planner crashed).
        plan: the plan, when there is one.
        message: one line for ``refused``/``error``/``nothing-to-do``.
        finding: the finding the plan was made for.
    """

    id: str
    status: str
    plan: FixPlan | None = None
    message: str = ""
    finding: Finding | None = None

    @property
    def planned(self) -> FixPlan:
        """The plan of a ``planned``/``applied`` outcome. Raises ValueError for an outcome without one."""
        if self.plan is None:
            raise ValueError(f"fix {self.id} ({self.status}) has no plan")
        return self.plan

    def to_json(self) -> dict:
        return redact_value(
            {
                "id": self.id,
                "status": self.status,
                "description": self.plan.description if self.plan else None,
                "files": [e.path for e in self.plan.edits if e.changes_anything] if self.plan else [],
                "notes": list(self.plan.notes) if self.plan else [],
                "message": self.message or None,
                "finding": {
                    "check": self.finding.check,
                    "status": self.finding.status.value,
                    "summary": self.finding.summary,
                }
                if self.finding
                else None,
            }
        )


def _candidates(fix: Fix, findings: Sequence[Finding], named: bool) -> list[Finding]:
    """Findings to plan ``fix`` for: those offering it (worst first); when the user named the fix,
    then any other finding of the checks it addresses, or a neutral one."""
    offering = sorted(
        (f for f in findings if fix.id in f.fixes and f.status in (Status.WARN, Status.FAIL)),
        key=lambda f: -f.status.severity,
    )
    if not named:
        return offering
    rest = sorted(
        (f for f in findings if f.check in fix.addresses and f not in offering), key=lambda f: -f.status.severity
    )
    out = offering + rest
    if not out:
        out = [
            Finding(
                check=fix.addresses[0] if fix.addresses else fix.id,
                status=Status.OK,
                summary="no finding; planning on request",
            )
        ]
    return out


def plan_fixes(
    fixes: Sequence[Fix], findings: Sequence[Finding], facts: Any, options: Mapping[str, str], named: bool
) -> list[FixOutcome]:
    """Ask each fix's planner for plans; never raises for a planner's fault.

    One plan per finding that offers the fix when the findings are about
    different files (``fix --all`` repairs every broken kernel: one plan per
    kernel.json); a file already changed by an earlier plan is left to that
    plan (the first applicable fix per file wins, the later one says so)
    instead of refusing the whole run.
    """
    outcomes: list[FixOutcome] = []
    claimed: dict[str, str] = {}  # path -> fix id that plans to change it
    for fx in fixes:
        candidates = _candidates(fx, findings, named)
        offering = next((f for f in candidates if fx.id in f.fixes and f.status >= Status.WARN), None)
        mine: list[FixOutcome] = []
        fallback = FixOutcome(fx.id, "nothing-to-do", message="nothing to change for what was found", finding=offering)
        for finding in candidates:
            offers = finding.status >= Status.WARN and fx.id in finding.fixes
            if not offers and any(o.status in ("planned", "already-fixed", "refused") for o in mine):
                break  # the offering findings were handled: no planning on request on top
            try:
                plan = fx.plan(facts, finding, options)
            except FixRefused as exc:
                mine.append(FixOutcome(fx.id, "refused", message=str(exc), finding=finding))
                if finding.status >= Status.WARN and fx.id in finding.fixes and named is False:
                    continue  # fix --all: the other kernels/files still get their plans
                break
            except (Exception, SystemExit, KeyboardInterrupt) as exc:
                from gpudoctor import signals

                if isinstance(exc, KeyboardInterrupt) and signals.received() is not None:
                    raise  # a real Ctrl-C/SIGTERM, not the planner's own doing
                mine.append(
                    FixOutcome(
                        fx.id,
                        "error",
                        message=f"the fix itself failed: {type(exc).__name__}: {exc}"
                        f" (a bug in gpudoctor or the plug-in)",
                        finding=finding,
                    )
                )
                break
            if plan is None:
                continue
            paths = [e.path for e in plan.edits if e.changes_anything]
            if not plan.changes_anything:
                if not any(o.status == "planned" for o in mine):
                    mine = [FixOutcome(fx.id, "already-fixed", plan=plan, finding=finding, message="already fixed")]
                if not (finding.status >= Status.WARN and fx.id in finding.fixes):
                    break
                continue
            taken = [p for p in paths if p in claimed]
            if taken:
                mine.append(
                    FixOutcome(
                        fx.id,
                        "deferred",
                        finding=finding,
                        message=f"{taken[0]} is repaired by {claimed[taken[0]]} in this run "
                        f"(the first applicable fix per file)",
                    )
                )
                continue
            if any(
                o.plan is not None and [e.path for e in o.plan.edits if e.changes_anything] == paths
                for o in mine
                if o.status == "planned"
            ):
                continue
            for p_ in paths:
                claimed[p_] = fx.id
            mine = [o for o in mine if o.status != "already-fixed"]
            mine.append(FixOutcome(fx.id, "planned", plan=plan, finding=finding))
            if not (finding.status >= Status.WARN and fx.id in finding.fixes):
                break  # planning on request: one plan
        outcomes.extend(mine or [fallback])
    return outcomes


def _status_by_check(findings: Sequence[Finding], checks: Sequence[str]) -> dict[str, Status]:
    out: dict[str, Status] = {}
    for c in checks:
        statuses = [f.status for f in findings if f.check == c]
        if statuses:
            out[c] = Status.worst(statuses)
    return out


def _parse_sets(sets: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise usage(f"--set {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


#: ``--set`` keys the built-in planners read; a plug-in fix adds its own with an ``options`` attribute
#: (a tuple of key names) on its Fix object.
BUILTIN_SET_KEYS = (
    "kernel",
    "python",
    "name",
    "display-name",
    "display_name",
    "timeout",
    "retries",
    "security-mirror",
    "scope",
    "index-url",
    "mirror",
    "allow-insecure",
)


def _has_ipykernel(files, python: str) -> bool:
    """Whether ``python`` (inside the root) has ipykernel in its own site-packages (or Debian's dist-packages)."""
    prefix = python.rsplit("/", 2)[0] if "/bin/" in python else python.rsplit("/", 1)[0]
    patterns = [
        "lib/python3*/site-packages/ipykernel/__init__.py",
        "lib/python3*/dist-packages/ipykernel/__init__.py",
        "lib/python3/dist-packages/ipykernel/__init__.py",
        "local/lib/python3*/dist-packages/ipykernel/__init__.py",
    ]
    for pattern in patterns:
        try:
            if any(True for _ in files.glob(prefix or "/", pattern)):
                return True
        except OSError:
            continue
    return False


def _venv_creator(files: Any, python: str) -> str | None:
    """``uv`` when the venv of ``python`` (``<prefix>/bin/python``) was made by ``uv venv`` (its
    ``pyvenv.cfg`` has a ``uv`` key, as the probe reads it), else None."""
    text = files.read_text_or_none(posixpath.join(posixpath.dirname(posixpath.dirname(python)), "pyvenv.cfg"))
    keys = {line.partition("=")[0].strip().lower() for line in (text or "").splitlines() if "=" in line}
    return "uv" if "uv" in keys else None


def _check_set_options(
    sets: Sequence[str], options: Mapping[str, str], registry: Any, pool: Sequence[Fix], system: Any
) -> None:
    """Refuse ``--set`` keys no fix reads, and a ``--set python=`` that does not exist or has no ipykernel."""
    known = set(BUILTIN_SET_KEYS)
    for fx in registry.fixes.values():
        known.update(getattr(fx, "options", ()) or ())
    undeclared = [
        fx
        for fx in pool
        if not getattr(fx.plan, "__module__", "").startswith("gpudoctor.fixes.")
        and getattr(fx, "options", None) is None
    ]
    for item in [] if undeclared else sets:  # a plug-in that does not declare its keys may read any
        key = item.partition("=")[0].strip()
        if key not in known:
            raise usage(f"--set {key}: no fix reads that option (known: {', '.join(sorted(known))})")
    python = (options.get("python") or "").strip()
    if python and python.startswith("/") and any(fx.id.startswith("jupyter.") for fx in pool):
        if not system.files.exists(python):
            raise usage(
                f"--set python={python}: no such interpreter"
                + ("" if system.files.is_live else f" (in --root {system.files.root})")
            )
        if not _has_ipykernel(system.files, python):
            from gpudoctor.checks._common import install_command

            raise usage(
                f"--set python={python}: ipykernel is not installed there, so a kernel using it would die "
                f"at start. First run `{install_command(python, 'ipykernel', _venv_creator(system.files, python))}`, "
                "then this fix again"
            )


def _rerun_argv(ids, all_, yes, root, scope, index_url, mirror, allow_insecure, sets) -> list[str]:
    argv = ["gpudoctor", "fix", *ids]
    if all_:
        argv.append("--all")
    if root and root != "/":
        argv += ["--root", root]
    for flag, value in (("--scope", scope), ("--index-url", index_url), ("--mirror", mirror)):
        if value:
            argv += [flag, value]
    if allow_insecure:
        argv.append("--allow-insecure")
    for s in sets:
        argv += ["--set", s]
    if yes:
        argv.append("--yes")
    return argv


class _Out:
    """Console lines (stdout) or, with --format json, human text to stderr and one JSON document at the end."""

    def __init__(self, fmt: str):
        self.fmt = fmt

    def line(self, text: str = "", err: bool = False) -> None:
        click.echo(redact_text(text), err=err or self.fmt == "json")


def _echo_diff(diff: str, err: bool) -> None:
    """Print a unified diff, coloured on a terminal (click drops the colour when piped; NO_COLOR honoured)."""
    import os

    plain = "NO_COLOR" in os.environ
    for line in diff.splitlines():
        colour = None
        if not plain:
            if line.startswith(("+++", "---")):
                colour = "bright_white"
            elif line.startswith("+"):
                colour = "green"
            elif line.startswith("-"):
                colour = "red"
            elif line.startswith("@@"):
                colour = "cyan"
        click.echo(click.style(line, fg=colour) if colour else line, err=err)


def _fix_selection(registry, ids: Sequence[str]) -> list[Fix]:
    chosen: list[Fix] = []
    for pattern in ids:
        p = pattern.rstrip(".")
        matches = [f for fid, f in registry.fixes.items() if fid == p or fid.startswith(p + ".")]
        if not matches:
            known = ", ".join(registry.fixes) or "none installed"
            raise usage(f"no fix matches {pattern!r}; known fixes: {known}")
        chosen.extend(m for m in matches if m not in chosen)
    return chosen


@click.command("fix", context_settings=CONTEXT_SETTINGS)
@click.argument("ids", nargs=-1, metavar="[IDS]...", shell_complete=complete_fix_ids)
@click.option("--all", "all_", is_flag=True, help="Apply every fix offered by a failing or warning finding.")
@click.option("--dry-run", is_flag=True, help="Only show the diffs; write nothing.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@common_collect_options
@click.option(
    "--scope",
    type=click.Choice(["user", "site", "global"]),
    help="Which configuration file to edit (default: the file that sets the value now, else user); "
    "only that scope's files are edited, and a tool without that scope refuses.",
)
@click.option("--index-url", metavar="URL", help="Package index URL for fixes that set one (pip.index-url).")
@click.option("--mirror", metavar="fastest|NAME|URL", help="Mirror for fixes that switch mirrors.")
@click.option("--allow-insecure", is_flag=True, help="Allow plain-http indexes (adds trusted-host where needed).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Option for a plug-in fix (repeatable).")
@click.option(
    "--undo",
    "undo",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[TXN]",
    help="Restore the files of the last (or the named) transaction from the backup journal.",
)
@click.option(
    "--force",
    is_flag=True,
    help="With --undo: restore even files changed since (their current contents are saved in the "
    "journal first, as a transaction you can undo).",
)
@click.option("--history", is_flag=True, help="List the transactions in the backup journal.")
@click.option("--format", "fmt", type=click.Choice(["console", "json"]), default="console", show_default=True)
@mirror_check_options
def fix(
    ids,
    all_,
    dry_run,
    yes,
    root,
    pythons,
    offline,
    probe_timeout,
    scope,
    index_url,
    mirror,
    allow_insecure,
    sets,
    undo,
    force,
    history,
    fmt,
    **mirror_opts,
):
    """Repair configuration files behind failing checks, safely.

    IDS name fixes (as shown by `gpudoctor check` and `gpudoctor list`); `--all`
    applies every fix offered by a failing or warning finding. Every change
    is shown as a diff, confirmed, backed up, and can be undone.

    \b
    Examples:
      gpudoctor fix --all --dry-run
      gpudoctor fix pip.index-url --index-url https://mirror.example.org/simple --yes
      gpudoctor fix --root /mnt/image-rootfs --all --yes
      gpudoctor fix --history
      gpudoctor fix --undo            # the last transaction

    \b
    Exit codes (the same with --dry-run):
      0  fixed, already fixed, or the dry run shows fixes that would apply
      1  a fix was refused or failed, a write failed, a check still fails,
         a fix is "not fixed" (a file or variable of higher precedence still
         wins), a failing check has no automatic fix (--all names it), or an undo
         was refused because a file changed since
      2  usage error (unknown fix or TXN, nothing to undo), or no terminal
         to confirm on and no --yes
    """
    from gpudoctor import apply as ap

    out = _Out(fmt)
    # --history and --undo are whole modes of their own: nothing else may ride along silently
    modes = {"--history": bool(history), "--undo": undo is not None}
    planning = {"--all": bool(all_), "IDS": bool(ids), "--dry-run": bool(dry_run)}
    refuse_conflicts(
        ("--history", "--undo", modes["--history"] and modes["--undo"], "--history lists, --undo restores"),
        *(
            (mode, other, on and given, f"{mode} does not plan or apply fixes")
            for mode, on in modes.items()
            for other, given in planning.items()
        ),
    )
    journal = ap.Journal()
    if history:
        _history(journal, out, fmt)
        return
    if undo is not None:
        _undo(journal, undo or None, force, out, fmt)
        return
    if force:
        raise usage("--force only applies to --undo")

    refuse_conflicts(
        (
            "--offline",
            "--rank-mirrors",
            offline and bool(mirror_opts.get("rank_mirrors")),
            "ranking probes the catalogue's mirrors over the network",
        ),
        (
            "--offline",
            "--mirror fastest",
            offline and (mirror or "").strip() == "fastest",
            "the fastest mirror is found by probing the mirrors; drop --offline or name a mirror",
        ),
    )
    registry = load_registry()
    check_pythons(pythons)
    options: dict[str, str] = _parse_sets(sets)
    for key, value in (("scope", scope), ("index-url", index_url), ("mirror", mirror)):
        if value:
            options[key] = value
    if allow_insecure:
        options["allow-insecure"] = "1"
    named = _fix_selection(registry, ids) if ids else []
    pool = named or list(registry.fixes.values())
    addressed: list[str] = []
    for fx in pool:
        addressed.extend(c for c in fx.addresses if c in registry.checks and c not in addressed)
    checks = [registry.checks[c] for c in registry.checks if c in addressed]

    from gpudoctor import engine
    from gpudoctor.render.console import SpinnerProgress, make_console

    collect_options = make_collect_options(
        pythons, offline, probe_timeout, **fix_mirror_extra(mirror, ids, offline, **mirror_opts)
    )
    system = build_system(root, collect_options.extra.get("dockerfile"))
    _check_set_options(sets, options, registry, pool, system)
    with SpinnerProgress(make_console(sys.stderr)) as progress:
        before = engine.run(checks, system, collect_options, progress=progress)

    if not named:
        offered_ids: list[str] = []
        for f in before.findings:
            if f.status in (Status.WARN, Status.FAIL):
                offered_ids.extend(i for i in f.fixes if i in registry.fixes and i not in offered_ids)
        if not all_:
            _list_offered(before.findings, offered_ids, out, fmt, _offered_flags(root, pythons, offline))
            return
        selected = [registry.fixes[i] for i in offered_ids]
    else:
        selected = named
    manual = [] if named else _no_automatic_fix(before.findings, registry)

    resolve_pip_mirror(options, before.facts, collect_options.extra, offline, [f.id for f in selected])
    security_note = resolve_apt_security(
        options, before.facts, collect_options.extra, offline, [f.id for f in selected]
    )
    if security_note:
        out.line(f"apt.mirror: {security_note}")
    outcomes = plan_fixes(selected, before.findings, before.facts, options, named=bool(named))
    planned = [o for o in outcomes if o.status == "planned"]
    doc: dict[str, Any] = {
        "schema_version": OUTCOME_SCHEMA_VERSION,
        "transaction": None,
        "dry_run": dry_run,
        "before": {c: s.value for c, s in _status_by_check(before.findings, addressed).items()},
    }

    for o in outcomes:
        if o.status == "planned":
            out.line(f"{o.id}: {o.planned.description}")
        elif o.status == "already-fixed":
            out.line(f"{o.id}: already fixed, nothing to change")
        elif o.status == "nothing-to-do" and o.finding is not None and o.finding.status >= Status.FAIL:
            out.line(f"{o.id}: no automatic change for {o.finding.check}: {o.finding.summary}; edit by hand")
        else:
            out.line(f"{o.id}: {o.status}: {o.message}")
    if not selected and not manual:
        out.line("nothing to fix: no failing or warning finding offers a fix")
    if manual:
        out.line("some failures have no automatic fix; edit by hand:")
        for f in manual:
            out.line(f"    {f.check}: {f.summary}")
    doc["manual"] = [{"check": f.check, "summary": f.summary} for f in manual]

    try:
        writes = ap.prepare([o.planned for o in planned], system.files)
    except ap.ApplyError as exc:
        return _finish_error(doc, outcomes, out, fmt, str(exc))
    for w in writes:
        out.line("")
        out.line(f"{w.describe()}  [{', '.join(w.fixes)}]")
        _echo_diff(ap.unified_diff(w), err=fmt == "json")
    doc["diffs"] = [
        {"path": w.path, "target": w.target, "fixes": list(w.fixes), "diff": ap.unified_diff(w)} for w in writes
    ]

    # a fix offered by a failing finding that plans nothing leaves the failure for a person: like a refusal
    unplanned = [
        o for o in outcomes if o.status == "nothing-to-do" and o.finding is not None and o.finding.status >= Status.FAIL
    ]
    bad = any(o.status in ("refused", "error") for o in outcomes) or bool(manual) or bool(unplanned)
    if not writes:
        if planned:  # every edit turned out to be a no-op on disk
            for o in planned:
                o.status = "already-fixed"
        doc["status"] = "refused" if bad else "already-fixed"
        return _emit(doc, outcomes, fmt, EXIT_FAIL if bad else EXIT_OK)
    if dry_run:
        out.line("")
        out.line("dry run: nothing was written")
        doc["status"] = "dry-run"
        return _emit(doc, outcomes, fmt, EXIT_FAIL if bad else EXIT_OK)
    if not yes:
        if not stdin_is_tty():
            click.echo(
                "gpudoctor: error: not a terminal, so nothing was written; rerun with --yes to apply "
                "these changes (or --dry-run to only show them)",
                err=True,
            )
            doc["status"] = "needs-confirmation"
            return _emit(doc, outcomes, fmt, EXIT_USAGE, quiet=True)
        if not click.confirm(
            f"Apply these changes to {plural(len(writes), 'file')}?", default=False, err=fmt == "json"
        ):
            out.line("nothing was written")
            doc["status"] = "declined"
            return _emit(doc, outcomes, fmt, EXIT_FAIL)

    rerun = ap.sudo_command(_rerun_argv(ids, all_, yes, root, scope, index_url, mirror, allow_insecure, sets))
    try:
        txn = ap.apply(writes, system.files, journal, rerun=rerun)
    except ap.ApplyError as exc:
        return _finish_error(doc, outcomes, out, fmt, str(exc))
    for o in planned:
        o.status = "applied"
    assert txn is not None
    doc["transaction"] = txn.id
    for w in writes:
        if w.via_symlink:
            out.line(f"note: {ap.in_root(w.path, w.root)} is a symlink; its target {w.target} was edited")
    out.line(f"backup: transaction {txn.id} (undo: gpudoctor fix --undo {txn.id})")

    wanted = {c for o in planned for c in (o.planned.addresses or registry.fixes[o.id].addresses)}
    rechecks = [c for c in registry.checks if c in wanted]
    after = engine.run(
        [registry.checks[c] for c in rechecks],
        build_system(root, collect_options.extra.get("dockerfile")),
        collect_options,
    )
    before_s = _status_by_check(before.findings, rechecks)
    after_s = _status_by_check(after.findings, rechecks)
    doc["after"] = {c: s.value for c, s in after_s.items()}
    for c in rechecks:
        b, a = before_s.get(c), after_s.get(c)
        out.line(f"{c}: {b.value if b else '?'} -> {a.value if a else '?'}")
        if a is not None and a >= Status.WARN:
            for f in after.findings:
                if f.check == c and f.status >= Status.WARN:
                    out.line(f"    {f.summary}")
    verified = verify_outcomes(planned, registry, after.facts)
    for o in verified:
        out.line(f"{o.id}: not fixed: {o.message}" if o.status == "not-fixed" else f"{o.id}: fixed (re-read)")
    not_fixed = any(o.status == "not-fixed" for o in verified)
    notes = [n for o in planned for n in o.planned.notes]
    if notes:
        out.line("")
        out.line("next, run by hand:")
        for n in notes:
            out.line(f"    {n}")
    still_failing = any(s >= Status.FAIL for s in after_s.values())
    doc["status"] = "not-fixed" if not_fixed else "applied"
    return _emit(doc, outcomes, fmt, EXIT_FAIL if bad or still_failing or not_fixed else EXIT_OK)


def verify_outcomes(applied: Sequence[FixOutcome], registry, facts: Any) -> list[FixOutcome]:
    """Ask each applied fix's :attr:`~gpudoctor.model.Fix.verify` whether the tool, its configuration
    read again with every layer, now resolves what the plan set; an outcome it is not is marked
    ``not-fixed`` with what still wins. Returns the outcomes that were verified (fixes without a
    verifier are judged by their re-run checks only). A verifier that crashes cannot confirm the
    fix: that is "not fixed" too, never "fixed"."""
    verified: list[FixOutcome] = []
    for o in applied:
        fx = registry.fixes.get(o.id)
        verify = getattr(fx, "verify", None)
        if verify is None or o.plan is None:
            continue
        try:
            problem = verify(facts, o.plan)
        except Exception as exc:  # a verifier's bug must not turn into "fixed"
            problem = f"the result could not be checked ({type(exc).__name__}: {exc})"
        if problem:
            o.status, o.message = "not-fixed", problem
        verified.append(o)
    return verified


def _no_automatic_fix(findings: Sequence[Finding], registry) -> list[Finding]:
    """Failing findings that offer no installed fix: ``--all`` cannot repair them, a person must."""
    fixable_checks = {
        f.check for f in findings if f.status >= Status.FAIL and any(i in registry.fixes for i in f.fixes)
    }
    # a check's headline finding (e.g. "2 of 3 kernels are broken") is repaired through its per-item findings
    return [
        f
        for f in findings
        if f.status >= Status.FAIL and not any(i in registry.fixes for i in f.fixes) and f.check not in fixable_checks
    ]


def _finish_error(doc: dict[str, Any], outcomes: Sequence[FixOutcome], out: _Out, fmt: str, message: str):
    click.echo(f"gpudoctor: error: {redact_text(message)}", err=True)
    doc["status"] = "error"
    doc["error"] = message
    return _emit(doc, outcomes, fmt, EXIT_FAIL, quiet=True)


def _emit(doc: dict[str, Any], outcomes: Sequence[FixOutcome], fmt: str, code: int, quiet: bool = False):
    if fmt == "json":
        doc["fixes"] = [o.to_json() for o in outcomes]
        click.echo(json.dumps(redact_value(doc), indent=2))
    sys.exit(code)


def _offered_flags(root: str, pythons: Sequence[str], offline: bool) -> str:
    """The options of this run that the suggested ``gpudoctor fix`` command must repeat to
    plan the same fixes: ``--root`` (else it edits the machine's own files), each
    ``--python``, ``--offline``; shell-quoted, with a leading space (``""`` when none)."""
    import shlex

    argv: list[str] = []
    if root and root.rstrip("/"):
        argv += ["--root", root]
    for p in dict.fromkeys(pythons):
        argv += ["--python", p]
    if offline:
        argv.append("--offline")
    return "".join(" " + shlex.quote(a) for a in argv)


def _list_offered(findings: Sequence[Finding], offered: Sequence[str], out: _Out, fmt: str, flags: str = "") -> None:
    if fmt == "json":
        click.echo(
            json.dumps(
                redact_value({"schema_version": OUTCOME_SCHEMA_VERSION, "status": "offered", "offered": list(offered)}),
                indent=2,
            )
        )
        return
    if not offered:
        out.line("nothing to fix: no failing or warning finding offers a fix")
        return
    for fid in offered:
        why = [f for f in findings if fid in f.fixes and f.status in (Status.WARN, Status.FAIL)]
        out.line(f"{fid}  ({'; '.join(f'{f.check}: {f.status.value}: {f.summary}' for f in why)})")
    out.line("")
    out.line(
        f"apply with: gpudoctor fix {' '.join(offered)}{flags}   (or gpudoctor fix --all{flags}; --dry-run to preview)"
    )


def _history(journal, out: _Out, fmt: str) -> None:
    from gpudoctor import apply as ap

    txns = journal.transactions()
    if fmt == "json":
        rows = []
        for t in txns:
            row = t.to_json()
            row["changed_since"] = ap.changed_since(t) if t.status == "applied" else []
            rows.append(row)
        click.echo(
            json.dumps(
                redact_value(
                    {"schema_version": OUTCOME_SCHEMA_VERSION, "journal": str(journal.directory), "transactions": rows}
                ),
                indent=2,
            )
        )
        return
    if not txns:
        out.line(f"no transactions in {journal.directory}")
        return
    for t in txns:
        files = ", ".join(f.target for f in t.files)
        extra = ""
        if t.status == "applied":
            changed = ap.changed_since(t)
            if changed:
                extra = f"  (changed since: {', '.join(changed)})"
        root = f" root={t.root}" if t.root != "/" else ""
        out.line(f"{t.id}  {t.created_at}  {t.status:<11}  {', '.join(t.fixes)}  {files}{root}{extra}")


def _undo(journal, txn_id: str | None, force: bool, out: _Out, fmt: str) -> None:
    from gpudoctor import apply as ap

    try:
        txn = journal.undo(txn_id, force=force)
    except ap.ApplyError as exc:
        click.echo(f"gpudoctor: error: {redact_text(str(exc))}", err=True)
        if fmt == "json":
            click.echo(
                json.dumps(
                    {"schema_version": OUTCOME_SCHEMA_VERSION, "status": "error", "error": redact_text(str(exc))},
                    indent=2,
                )
            )
        sys.exit(EXIT_USAGE if isinstance(exc, ap.NoSuchUndo) else EXIT_FAIL)
    if fmt == "json":
        click.echo(
            json.dumps(
                redact_value(
                    {
                        "schema_version": OUTCOME_SCHEMA_VERSION,
                        "status": "undone",
                        "transaction": txn.id,
                        "files": [f.target for f in txn.files],
                        "saved_by": txn.saved_by,
                        "undoes": txn.undoes,
                    }
                ),
                indent=2,
            )
        )
        return
    forced = False
    if txn.saved_by:
        try:
            forced = any(f.startswith("undo --force") for f in journal.load(txn.saved_by).fixes)
        except ap.ApplyError:
            forced = False
    if txn.saved_by and forced:
        out.line(
            f"saved the current contents first (they changed since) as transaction {txn.saved_by}; "
            f"bring them back with: gpudoctor fix --undo {txn.saved_by}"
        )
    for f in txn.files:
        shown = ap.in_root(f.target, txn.root)
        out.line(f"restored {shown}" if f.existed else f"removed {shown} (the transaction created it)")
    what = f"the undo of {txn.undoes}" if txn.undoes else f"transaction {txn.id}"
    out.line(f"{what} undone" + (f" (transaction {txn.id}); {txn.undoes} is applied again" if txn.undoes else ""))
    if txn.saved_by and not forced:
        out.line(f"to undo this undo: gpudoctor fix --undo {txn.saved_by}")
