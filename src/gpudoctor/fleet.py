"""The fleet view: many nodes' reports merged into one nodes × checks table.

Inputs are the JSON documents nodes already write: ``gpudoctor check --format
json`` reports and ``gpudoctor gate --status-file`` / ``--format json`` status
documents (both carry ``hostname``). A node's name is its ``hostname``, else
the file name; reports that share a hostname are told apart by their file
name (``gpu-07 (gate.json)``). Nodes are ordered worst first (error, fail, warn, ... then by
name), so the ones to drain are at the top.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from gpudoctor.model import Status

__all__ = ["NodeReport", "ReportError", "load_reports", "merge_summary", "merge_table", "render_table"]

#: short cell text per status
CELL = {
    Status.OK: "ok",
    Status.INFO: "info",
    Status.SKIP: "skip",
    Status.WARN: "WARN",
    Status.FAIL: "FAIL",
    Status.ERROR: "ERROR",
}


class ReportError(ValueError):
    """An input is not a readable gpudoctor report; the message names the file."""


@dataclass(frozen=True)
class NodeReport:
    """One node's verdicts.

    Attributes:
        node: hostname (or the file's name when the report has none).
        source: the file it came from.
        checks: check id -> worst status among its findings.
        failures: one-line summaries of the fail/error findings (``check: summary``).
        healthy: the gate verdict when the input is a gate status document, else
            derived (no fail/error finding).
    """

    node: str
    source: str
    checks: dict[str, Status]
    failures: tuple[str, ...] = ()
    healthy: bool = True

    @property
    def worst(self) -> Status:
        """The most severe status on this node (``ok`` when no check ran)."""
        return Status.worst(list(self.checks.values()))


def _parse(path: Path) -> NodeReport:
    from gpudoctor.inputs import InputError, loads_json, read_user_file

    try:  # with limits: a device (/dev/zero), a FIFO or a huge file is one line, never a hang
        doc = loads_json(read_user_file(str(path)), str(path))
    except InputError as exc:
        raise ReportError(str(exc)) from None
    if not isinstance(doc, dict):
        raise ReportError(f"{path}: not a gpudoctor report (a JSON object with findings or checks)")
    if "domains" in doc and "findings" not in doc:
        raise ReportError(
            f"{path}: a facts snapshot, not a report; evaluate it first: "
            f"gpudoctor check --facts {path} --format json -o REPORT.json"
        )
    node = str(doc.get("hostname") or path.stem)
    checks: dict[str, Status] = {}
    failures: list[str] = []
    try:
        if isinstance(doc.get("findings"), list):  # gpudoctor check --format json
            for f in doc["findings"]:
                st = Status(f["status"])
                if f["check"] not in checks or st > checks[f["check"]]:
                    checks[f["check"]] = st
                if st in (Status.FAIL, Status.ERROR):
                    failures.append(f"{f['check']}: {f['summary']}")
            healthy = not any(s in (Status.FAIL, Status.ERROR) for s in checks.values())
        elif isinstance(doc.get("checks"), dict) and "healthy" in doc:  # gate status document
            checks = {k: Status(v) for k, v in doc["checks"].items()}
            failures = [f"{f['check']}: {f['summary']}" for f in doc.get("failures") or []]
            healthy = bool(doc["healthy"])
        else:
            raise ReportError(f"{path}: not a gpudoctor report (no findings and no gate checks)")
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, ReportError):
            raise
        raise ReportError(f"{path}: malformed gpudoctor report ({type(exc).__name__}: {exc})") from None
    return NodeReport(node, str(path), checks, tuple(failures), healthy)


def load_reports(paths: Sequence[str]) -> list[NodeReport]:
    """Read every file given, and every ``*.json`` in a directory given. Raises :class:`ReportError`."""
    files: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = sorted(q for q in path.iterdir() if q.suffix == ".json" and q.is_file())
            if not found:
                raise ReportError(f"{path}: no *.json reports in this directory")
            files.extend(found)
        elif path.exists():
            files.append(path)
        else:
            raise ReportError(f"{path}: no such file or directory")
    if not files:
        raise ReportError("no report files given")
    nodes = [_parse(f) for f in files]
    names = [n.node for n in nodes]
    # two reports of one host (a check report and a gate status file, or replays made on one
    # machine) would be rows no one can tell apart: name each by its file too
    return [replace(n, node=f"{n.node} ({Path(n.source).name})") if names.count(n.node) > 1 else n for n in nodes]


def _order(nodes: Sequence[NodeReport]) -> list[NodeReport]:
    return sorted(nodes, key=lambda n: (n.healthy, -n.worst.severity, n.node))


def merge_table(nodes: Sequence[NodeReport]) -> tuple[list[str], list[list[str]]]:
    """(header, rows): ``node``, ``verdict`` then one column per check id (sorted); failing nodes first.
    A cell is the check's worst status on that node, ``-`` where the check did not run."""
    checks = sorted({c for n in nodes for c in n.checks})
    rows = []
    for n in _order(nodes):
        verdict = "healthy" if n.healthy and n.worst < Status.WARN else ("warn" if n.healthy else "FAILING")
        rows.append([n.node, verdict] + [CELL[n.checks[c]] if c in n.checks else "-" for c in checks])
    return ["node", "verdict"] + checks, rows


def render_table(nodes: Sequence[NodeReport]) -> str:
    """The table as aligned plain text, then one line per failure of each failing node."""
    header, rows = merge_table(nodes)
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header] + rows]
    failing = [n for n in _order(nodes) if not n.healthy]
    if failing:
        lines.append("")
        for n in failing:
            for f in n.failures or ("(no failure recorded)",):
                lines.append(f"{n.node}: {f}")
    healthy = sum(1 for n in nodes if n.healthy)
    lines.append("")
    lines.append(f"{len(nodes)} nodes: {healthy} healthy, {len(nodes) - healthy} failing")
    return "\n".join(lines) + "\n"


def merge_summary(nodes: Sequence[NodeReport]) -> dict:
    """The JSON summary: counts, failing nodes (worst first) with their failures, and per-check status counts."""
    by_check: dict[str, dict[str, int]] = {}
    for n in nodes:
        for c, st in n.checks.items():
            by_check.setdefault(c, {s.value: 0 for s in Status})[st.value] += 1
    ordered = _order(nodes)
    return {
        "nodes": len(nodes),
        "healthy": sum(1 for n in nodes if n.healthy),
        "failing": [
            {"node": n.node, "worst": n.worst.value, "failures": list(n.failures), "source": n.source}
            for n in ordered
            if not n.healthy
        ],
        "by_check": {c: by_check[c] for c in sorted(by_check)},
        "rows": [
            {
                "node": n.node,
                "healthy": n.healthy,
                "worst": n.worst.value,
                "checks": {c: s.value for c, s in sorted(n.checks.items())},
            }
            for n in ordered
        ],
    }
