"""``gpudoctor diff``: what differs between two machines (or one machine on two days) that matters.

Input: two facts snapshots (``gpudoctor facts``) or two reports (``check --format json``).
With snapshots, every check is evaluated on both sides, so the verdicts that differ are known,
and every fact is compared, flattened to a path (``nvidia.driver_version``,
``targets.targets[label=current].probe.env.LD_LIBRARY_PATH``). A fact difference in a domain
that a differing check reads is listed first, with the checks it can explain; within that,
the facts that steer CUDA and the loader (driver, framework builds, the environment, library
copies, modules) come first. Timings and timestamps are not differences. With reports only the
verdicts can be compared.

Pure functions over values; the CLI (``gpudoctor.cli.diff``) reads the files and renders.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import field
from typing import Any

from gpudoctor.model import Check, Finding, Status
from gpudoctor.records import frozen_dataclass

__all__ = ["CheckDiff", "Diff", "FactDiff", "diff_facts", "diff_findings", "flatten"]

#: keys whose values change on every run: never a difference
NOISE_KEYS = frozenset(
    {
        "duration_ms",
        "durations_ms",
        "collected_at",
        "measured_at",
        "timestamp",
        "time",
        "elapsed_ms",
        "lines_read",
        "gpudoctor_version",
        "age_s",
    }
)
#: keys that identify an element of a list, so lists are compared element by element
ID_KEYS = ("label", "index", "uuid", "name", "path", "python", "id", "source", "soname")
#: path words of the facts that steer CUDA and the loader: listed first among equals
STEERING = (
    "driver_version",
    "cuda_driver_version",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "CUDA_HOME",
    "torch.version",
    "torch.cuda",
    "cudnn",
    "arch_list",
    "cuda_available",
    "device_count",
    "compute_capability",
    "import_error",
    "winner",
    "resolved",
    "modules",
    "index_url",
    "index-url",
    "channels",
)


@frozen_dataclass
class CheckDiff:
    """A check whose worst status differs: ``a``/``b`` status values (``absent`` when the check
    gave no finding on that side) and the summary of its worst finding on each side."""

    check: str
    a: str
    b: str
    summary_a: str = ""
    summary_b: str = ""


@frozen_dataclass
class FactDiff:
    """One fact that differs: its flattened ``path``, the values on each side (None: absent),
    and the differing checks that read its domain (``explains``)."""

    path: str
    a: Any
    b: Any
    explains: tuple[str, ...] = ()


@frozen_dataclass
class Diff:
    """Everything that differs, most explanatory first."""

    checks: tuple[CheckDiff, ...] = ()
    facts: tuple[FactDiff, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def same(self) -> bool:
        return not self.checks and not self.facts

    def to_json(self) -> dict[str, Any]:
        return {
            "same": self.same,
            "checks": [vars(c) for c in self.checks],
            "facts": [{"path": f.path, "a": f.a, "b": f.b, "explains": list(f.explains)} for f in self.facts],
            "notes": list(self.notes),
        }


def _element_key(item: Any, position: int) -> str:
    if isinstance(item, Mapping):
        for key in ID_KEYS:
            value = item.get(key)
            if isinstance(value, (str, int)) and not isinstance(value, bool):
                return f"[{key}={value}]"
    return f"[{position}]"


def flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(path, leaf value) pairs of a JSON value; lists of records are keyed by their id field,
    lists of plain values are one leaf (their order matters: a search path, an arch list)."""
    if isinstance(value, Mapping):
        if not value:
            yield prefix, {}
        for key, item in value.items():
            if key in NOISE_KEYS:
                continue
            yield from flatten(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list) and any(isinstance(v, (Mapping, list)) for v in value):
        for i, item in enumerate(value):
            yield from flatten(item, f"{prefix}{_element_key(item, i)}")
    else:
        yield prefix, value


def _worst(findings: Sequence[Finding]) -> dict[str, Finding]:
    out: dict[str, Finding] = {}
    for f in findings:
        if f.check not in out or f.status > out[f.check].status:
            out[f.check] = f
    return out


def diff_findings(a: Sequence[Finding], b: Sequence[Finding]) -> list[CheckDiff]:
    """Checks whose worst status differs, the side that got worse first (fail before warn)."""
    wa, wb = _worst(a), _worst(b)
    out = []
    for check in sorted(set(wa) | set(wb)):
        fa, fb = wa.get(check), wb.get(check)
        sa = fa.status.value if fa else "absent"
        sb = fb.status.value if fb else "absent"
        if sa != sb:
            out.append(CheckDiff(check, sa, sb, fa.summary if fa else "", fb.summary if fb else ""))

    def badness(c: CheckDiff) -> int:
        worst = max((Status(s) for s in (c.a, c.b) if s != "absent"), default=Status.OK)
        return -worst.severity

    return sorted(out, key=lambda c: (badness(c), c.check))


def _steering(path: str) -> int:
    return 0 if any(word in path for word in STEERING) else 1


def diff_facts(
    a: Mapping[str, Any], b: Mapping[str, Any], changed: Sequence[CheckDiff] = (), checks: Mapping[str, Check] = {}
) -> list[FactDiff]:
    """Fact differences between two snapshots' ``domains`` documents (as ``Facts.to_json``
    writes them), those in a domain a changed check reads first, then the steering facts."""
    readers: dict[str, list[str]] = {}
    for c in changed:
        check = checks.get(c.check)
        for domain in check.needs if check else ():
            readers.setdefault(domain, []).append(c.check)
    fa, fb = dict(flatten(a)), dict(flatten(b))
    out = []
    for path in sorted(set(fa) | set(fb)):
        va, vb = fa.get(path), fb.get(path)
        if va != vb:
            out.append(FactDiff(path, va, vb, tuple(readers.get(path.split(".", 1)[0].split("[", 1)[0], ()))))
    return sorted(out, key=lambda d: (not d.explains, _steering(d.path), d.path))
