"""Replay the field corpus: public bug reports as cases (``tests/field/cases``).

Each case is a directory ``cases/<area>/<name>/`` with the reporter's artefacts, a
``case.toml`` and the replay input: ``facts.json`` (mode ``facts``: a snapshot as
``gpudoctor facts`` writes it; domains the report does not show are left out) or a fake
root ``root/`` (mode ``root``: the real collectors run on it, with the process
environment and the scripted commands the case gives). The format is documented in
``tests/field/README.md``.

Used by ``tests/field/test_cases.py`` (one parametrised test) and by
``scripts/field_summary.py`` (right/wrong per area and kind).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _field_spec import read_spec, spec_problems

from gpudoctor import engine
from gpudoctor.areas import AREAS
from gpudoctor.collect import CollectOptions, all_collectors
from gpudoctor.facts import Facts
from gpudoctor.model import Finding, Status
from gpudoctor.registry import Registry, load_registry
from gpudoctor.system import CommandResult
from gpudoctor.testing import ScriptedRunner, fake_system, not_found

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover
    pass

FIELD = Path(__file__).resolve().parent
CASES = FIELD / "cases"

#: areas a case may be filed under (the report areas, less gpudoctor's own and "other")
CASE_AREAS = tuple(a for a in AREAS if a not in ("gpudoctor", "other"))
STATUSES = ("fail", "warn", "ok", "skip")
_TOP_KEYS = {
    "source",
    "title",
    "kind",
    "framework",
    "platform",
    "distro",
    "twin_of",
    "assumptions",
    "xfail",
    "notes",
    "replay",
    "expect",
}
_REPLAY_KEYS = {"mode", "checks", "domains", "env", "home", "offline", "command", "options"}
_EXPECT_KEYS = {"status", "carrier", "keywords", "forbidden", "fine"}


class CaseError(ValueError):
    """A case directory that does not follow the format (named in the message)."""


@dataclass(frozen=True)
class Case:
    """One field case: ``area`` and ``name`` from its directory, ``spec`` from case.toml."""

    path: Path
    area: str
    name: str
    spec: Mapping[str, Any]

    @property
    def id(self) -> str:
        return f"{self.area}/{self.name}"

    @property
    def kind(self) -> str:
        return str(self.spec.get("kind", "?"))

    @property
    def expect(self) -> Mapping[str, Any]:
        return self.spec.get("expect", {})

    @property
    def healthy(self) -> bool:
        return self.expect.get("status") in ("ok", "skip")

    @property
    def xfail(self) -> str | None:
        reason = self.spec.get("xfail")
        return str(reason) if reason else None


@dataclass(frozen=True)
class Result:
    """The verdict on one case: ``right`` when status, carrier, keywords, forbidden
    remedies and the checks that must stay fine all hold; ``why`` lists what did not."""

    area: str
    kind: str
    name: str
    right: bool
    why: str
    xfail: bool = False


def load_case(path: Path) -> Case:
    """Read and validate ``path/case.toml``. Raises :class:`CaseError`."""
    area = path.parent.name
    where = f"{area}/{path.name}/case.toml"
    spec = read_spec(path / "case.toml", where, CaseError)
    problems = []
    if area not in CASE_AREAS:
        problems.append(f"area directory {area!r} is not one of {', '.join(CASE_AREAS)}")
    problems += spec_problems(spec, _TOP_KEYS, required=("title", "kind"))
    replay = spec.get("replay")
    expect = spec.get("expect")
    if not isinstance(replay, dict) or replay.get("mode") not in ("facts", "root"):
        problems.append('[replay] mode must be "facts" or "root"')
    else:
        if set(replay) - _REPLAY_KEYS:
            problems.append(f"unknown [replay] keys {sorted(set(replay) - _REPLAY_KEYS)}")
        needed = "facts.json" if replay["mode"] == "facts" else "root"
        if not (path / needed).exists():
            problems.append(f"mode {replay['mode']!r} needs {needed} in the case directory")
    if not isinstance(expect, dict):
        problems.append("[expect] is required")
    else:
        if set(expect) - _EXPECT_KEYS:
            problems.append(f"unknown [expect] keys {sorted(set(expect) - _EXPECT_KEYS)}")
        if expect.get("status") not in STATUSES:
            problems.append(f"[expect] status must be one of {', '.join(STATUSES)}")
        if not isinstance(expect.get("carrier"), str):
            problems.append("[expect] carrier (a check id) is required")
        for key in ("keywords", "forbidden", "fine"):
            value = expect.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                problems.append(f"[expect] {key} must be a list of strings")
    if problems:
        raise CaseError(f"{where}: " + "; ".join(problems))
    return Case(path, area, path.name, spec)


def case_dirs(root: Path = CASES) -> list[Path]:
    """Every case directory (one holding case.toml) under ``root``, sorted."""
    return sorted(p.parent for p in root.glob("*/*/case.toml"))


_REGISTRY: Registry | None = None


def registry() -> Registry:
    """The installed checks (loaded once per process)."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = load_registry()
    return _REGISTRY


def _stdout(case: Case, value: str) -> str:
    if value.startswith("file:"):
        return (case.path / value[5:]).read_text(encoding="utf-8")
    return value


def _runner(case: Case, commands: Sequence[Mapping[str, Any]]) -> ScriptedRunner:
    script = {}
    for cmd in commands:
        argv = tuple(str(a) for a in cmd["argv"])
        result = CommandResult(
            argv,
            int(cmd.get("exit", 0)),
            _stdout(case, str(cmd.get("stdout", ""))),
            _stdout(case, str(cmd.get("stderr", ""))),
            1.0,
        )
        script[argv] = result
    return ScriptedRunner(script, default=not_found())


def replay(case: Case) -> list[Finding]:
    """The findings gpudoctor gives for ``case`` (collector errors included, mode root)."""
    reg = registry()
    spec = case.spec["replay"]
    ids = list(spec.get("checks", []))
    unknown = [i for i in ids + [case.expect["carrier"]] + list(case.expect.get("fine", [])) if i not in reg.checks]
    if unknown:
        raise CaseError(f"{case.id}: no such check {sorted(set(unknown))}")
    checks = engine.select_checks(reg.checks, ids)
    if spec["mode"] == "facts":
        facts = Facts.from_json(json.loads((case.path / "facts.json").read_text(encoding="utf-8")))
        return engine.evaluate(checks, facts)
    collectors = all_collectors()
    domains = spec.get("domains") or engine.needed_domains(checks, collectors)
    system = fake_system(
        case.path / "root",
        env={str(k): str(v) for k, v in spec.get("env", {}).items()},
        runner=_runner(case, spec.get("command", [])),
        home=str(spec.get("home", "/home/user")),
        # scripted commands speak for the recorded machine under root/ (its kernel log, nvidia-smi, lspci)
        host_commands=True if spec.get("command") else None,
    )
    opts = dict(spec.get("options", {}))
    options = CollectOptions(
        offline=bool(spec.get("offline", True)),
        kernels=bool(opts.pop("kernels", False)),
        probe_level=str(opts.pop("probe_level", "full")),
        extra=opts,
    )
    facts, errors = engine.collect_facts(list(domains), system, options, collectors)
    given = case.path / "facts.json"
    if given.exists():  # the domains the artefacts show but no collector can read from files
        snapshot = Facts.from_json(json.loads(given.read_text(encoding="utf-8")))
        facts = snapshot.with_domains(**{d: facts.get(d) for d in domains})
    return errors + engine.evaluate(checks, facts)


def finding_text(finding: Finding) -> str:
    """Everything a person reads of a finding: summary, explanation and remedies."""
    parts = [finding.summary, finding.explanation]
    for cmd in getattr(finding, "commands", ()) or ():
        parts.extend(str(getattr(cmd, attr, "")) for attr in ("text", "purpose"))
    return "\n".join(parts)


def _status_ok(expected: str, worst: Status) -> bool:
    if expected == "ok":
        return worst in (Status.OK, Status.INFO)
    return worst is Status(expected)


def judge(case: Case, findings: Sequence[Finding]) -> Result:
    """Judge ``findings`` against the case's [expect] table."""
    expect = case.expect
    carrier = expect["carrier"]
    why = []
    mine = [f for f in findings if f.check == carrier]
    if not mine:
        why.append(f"{carrier} gave no finding")
    else:
        worst = Status.worst([f.status for f in mine])
        if not _status_ok(expect["status"], worst):
            summary = next(f.summary for f in mine if f.status is worst)
            why.append(f"{carrier} is {worst.value}, expected {expect['status']}: {summary}")
        text = "\n".join(finding_text(f) for f in mine).lower()
        missing = [k for k in expect.get("keywords", []) if k.lower() not in text]
        if missing:
            why.append(f"{carrier} does not say {missing}")
    for bad in expect.get("forbidden", []):
        offenders = sorted({f.check for f in findings if bad.lower() in finding_text(f).lower()})
        if offenders:
            why.append(f"forbidden remedy {bad!r} offered by {', '.join(offenders)}")
    for check_id in expect.get("fine", []):
        bad_findings = [f for f in findings if f.check == check_id and f.status >= Status.WARN]
        if bad_findings:
            why.append(f"{check_id} should stay fine but is {bad_findings[0].status.value}: {bad_findings[0].summary}")
    return Result(case.area, case.kind, case.name, not why, "; ".join(why), bool(case.xfail))


def judge_case(path: Path) -> Result:
    """Load, replay and judge one case directory; a broken case is a wrong result."""
    try:
        case = load_case(path)
        return judge(case, replay(case))
    except CaseError as exc:
        return Result(path.parent.name, "?", path.name, False, str(exc))


def judge_all(root: Path = CASES) -> list[Result]:
    """Every case under ``root``, judged."""
    return [judge_case(p) for p in case_dirs(root)]
