"""Replay the explain log corpus: real multi-line logs from public reports (``tests/field/logs``).

Each log is ``logs/<area>/<name>.log`` (5 to 100 lines, verbatim from the report with user
names, hosts, paths and tokens neutralised) beside a sidecar ``<name>.toml``:

```toml
source = "https://github.com/owner/repo/issues/1234"   # required: the public report
kind = "cuda.oom"                 # the fault kind (free text): the summary groups by it
framework = "tensorflow"          # optional
platform = "docker"               # optional
expect = "cuda.out-of-memory"     # the explain signature that must be the top diagnosis
keywords = ["expandable_segments"]  # words the top diagnosis (title + explanation) must hold
forbidden = ["cuda.out-of-memory-other-process"]  # signatures that must not be the top one
several = "why"                   # optional: the top signature may be diagnosed more than once
                                  # (distinct faults of one kind, e.g. different Xids), else once
# or, for a working run with benign noise:
healthy = true                    # no diagnosis at all
xfail = "why"                     # optional: a known gap (the test's mark is strict)
```

The top diagnosis is judged in the tool's own words: its filled-in title, meaning and remedy
(:func:`gpudoctor.explain.match_finding`), never the quoted log line. Used by
``tests/field/test_logs.py`` and ``scripts/field_summary.py`` (``judge_all``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _field_spec import read_spec, spec_problems

from gpudoctor.explain import explain_text, load_signatures, match_finding

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover - the 3.10 branch
    pass

FIELD = Path(__file__).resolve().parent
LOGS = FIELD / "logs"
AREAS = ("gpu", "libraries", "platform", "devices", "notebooks", "data", "sources")
MIN_LINES, MAX_LINES = 5, 100
_KEYS = {
    "source",
    "kind",
    "framework",
    "platform",
    "expect",
    "keywords",
    "forbidden",
    "healthy",
    "xfail",
    "notes",
    "several",
}


@dataclass(frozen=True)
class Result:
    """The verdict on one log: ``right`` when the top diagnosis is the expected one, says every
    keyword, is none of the forbidden ones and is told once, however often the log repeats it (or, for a healthy log, when nothing is diagnosed);
    ``why`` says what the tool said and, when wrong, what did not hold."""

    area: str
    kind: str
    name: str
    right: bool
    why: str
    xfail: bool = False


@dataclass(frozen=True)
class Log:
    area: str
    name: str
    text: str
    spec: Mapping[str, Any]

    @property
    def id(self) -> str:
        return f"{self.area}/{self.name}"

    @property
    def healthy(self) -> bool:
        return bool(self.spec.get("healthy"))


class LogError(ValueError):
    """A malformed log entry (the message names the file and the problem)."""


def log_paths() -> list[Path]:
    """Every ``<area>/<name>.log`` of the corpus, sorted."""
    return sorted(LOGS.glob("*/*.log"))


def load_log(path: Path) -> Log:
    """Read a log and its sidecar and validate them. Raises :class:`LogError`."""
    area, name = path.parent.name, path.stem
    where = f"{area}/{name}"
    sidecar = path.with_suffix(".toml")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LogError(f"{where}: {exc}") from None
    spec = read_spec(sidecar, where, LogError)
    problems = []
    if area not in AREAS:
        problems.append(f"area {area!r} is not one of {', '.join(AREAS)}")
    problems += spec_problems(spec, _KEYS, required=("kind",))
    n = len(text.splitlines())
    if not MIN_LINES <= n <= MAX_LINES:
        problems.append(f"{n} lines (a log has {MIN_LINES} to {MAX_LINES})")
    if spec.get("healthy"):
        if "expect" in spec or "keywords" in spec:
            problems.append("a healthy log has no expect or keywords")
    else:
        ids = {s.id for s in load_signatures()}
        if not isinstance(spec.get("expect"), str):
            problems.append("expect (a signature id) or healthy = true is required")
        elif spec["expect"] not in ids:
            problems.append(f"expect names no signature: {spec['expect']!r}")
        if not spec.get("keywords"):
            problems.append("keywords are required for a fault log")
        stray = [f for f in spec.get("forbidden", []) if f not in ids]
        if stray:
            problems.append(f"forbidden names no signature: {stray}")
        if spec.get("expect") in spec.get("forbidden", []):
            problems.append("expect is also forbidden")
    if problems:
        raise LogError(f"{where}: " + "; ".join(problems))
    return Log(area, name, text, spec)


def judge(log: Log) -> Result:
    """Explain the log and judge the top diagnosis against the sidecar."""
    matches = explain_text(log.text).matches
    kind = str(log.spec.get("kind", ""))
    xfail = bool(log.spec.get("xfail"))
    said = ", ".join(f"{m.signature.id} (line {m.line})" for m in matches) or "nothing"
    if log.healthy:
        right = not matches
        return Result(log.area, kind, log.name, right, f"healthy; diagnosed {said}", xfail)
    expect = log.spec["expect"]
    if not matches:
        return Result(log.area, kind, log.name, False, f"expected {expect}; diagnosed nothing", xfail)
    top = matches[0]
    problems = []
    if top.signature.id != expect:
        problems.append(f"top diagnosis {top.signature.id}, expected {expect}")
    repeats = sum(m.signature.id == top.signature.id for m in matches)
    if repeats > 1 and not log.spec.get("several"):
        problems.append(f"one error counted as {repeats} diagnoses")
    if top.signature.id in log.spec.get("forbidden", []):
        problems.append(f"forbidden top diagnosis {top.signature.id}")
    finding = match_finding(top)
    words = (finding.summary + "\n" + finding.explanation).lower()
    missing = [k for k in log.spec["keywords"] if k.lower() not in words]
    if missing:
        problems.append(f"the diagnosis does not say {missing}")
    why = f"diagnosed {said}" + ("; " + "; ".join(problems) if problems else "")
    return Result(log.area, kind, log.name, not problems, why, xfail)


def judge_path(path: Path) -> Result:
    """Load and judge one log; a malformed entry is a wrong result, not a crash."""
    try:
        log = load_log(path)
    except LogError as exc:
        return Result(path.parent.name, "?", path.stem, False, str(exc))
    return judge(log)


def judge_all() -> list[Result]:
    """Every log of the corpus, judged (``scripts/field_summary.py`` calls this)."""
    return [judge_path(p) for p in log_paths()]
