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
from dataclasses import replace
from pathlib import Path

from gpudoctor.model import Status
from gpudoctor.records import frozen_dataclass

__all__ = [
    "Merged",
    "NodeReport",
    "ReportError",
    "load_reports",
    "merge_reports",
    "merge_summary",
    "merge_table",
    "render_table",
]

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


#: report schema versions this gpudoctor reads (``gpudoctor check --format json``)
REPORT_SCHEMAS = (1, 2, 3)  # 3: findings carry commands and caused_by (engine.REPORT_SCHEMA_VERSION)


@frozen_dataclass
class NodeReport:
    """One node's verdicts.

    Attributes:
        node: the row's name: hostname (or the file's name when the report has none), with the
            machine id's first characters when two machines share a hostname, or the file's name
            when one machine left several reports.
        source: the file it came from.
        checks: check id -> worst status among its findings.
        failures: one-line summaries of the fail/error findings (``check: summary``).
        healthy: the gate verdict when the input is a gate status document, else
            derived (no fail/error finding).
        hostname, machine_id, time: who wrote it and when (machine id and time "" when the
            report predates them).
        kind: ``check`` (a check report) or ``gate`` (a gate status document).
    """

    node: str
    source: str
    checks: dict[str, Status]
    failures: tuple[str, ...] = ()
    healthy: bool = True
    hostname: str = ""
    machine_id: str = ""
    time: str = ""
    kind: str = "check"

    @property
    def worst(self) -> Status:
        """The most severe status on this node (``ok`` when no check ran)."""
        return Status.worst(list(self.checks.values()))

    @property
    def identity(self) -> tuple[str, str, str, str]:
        """(hostname, machine id, kind, time): two files with the same identity are one report twice."""
        return (self.hostname, self.machine_id, self.kind, self.time)


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise ReportError(f"{what} is {type(value).__name__} {value!r}, not a string")
    return value


def _status(value: object, what: str) -> Status:
    text = _text(value, what)
    try:
        return Status(text)
    except ValueError:
        raise ReportError(f"{what} is {value!r}, not one of {', '.join(s.value for s in Status)}") from None


def _parse(path: Path) -> NodeReport:
    """One file as a NodeReport; :class:`ReportError` naming the file and what is wrong in it."""
    try:
        return _parse_doc(path)
    except ReportError as exc:
        text = str(exc)
        raise ReportError(text if text.startswith(str(path)) else f"{path}: {text}") from None


def _parse_doc(path: Path) -> NodeReport:
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
    hostname = _text(doc.get("hostname") or "", "hostname")
    machine = _text(doc.get("machine_id") or "", "machine_id")
    when = _text(doc.get("time") or "", "time")
    checks: dict[str, Status] = {}
    failures: list[str] = []
    if "findings" in doc:  # gpudoctor check --format json
        version = doc.get("schema_version")
        if isinstance(version, bool) or version not in REPORT_SCHEMAS:
            raise ReportError(
                f"schema_version {version!r}: this gpudoctor reads report schemas {', '.join(map(str, REPORT_SCHEMAS))}"
            )
        if not isinstance(doc["findings"], list):
            raise ReportError(f"findings is {type(doc['findings']).__name__}, not a list")
        for n, f in enumerate(doc["findings"]):
            if not isinstance(f, dict):
                raise ReportError(f"findings[{n}] is {type(f).__name__}, not an object")
            check = _text(f.get("check"), f"findings[{n}].check")
            st = _status(f.get("status"), f"findings[{n}].status")
            summary = _text(f.get("summary", ""), f"findings[{n}].summary")
            if check not in checks or st > checks[check]:
                checks[check] = st
            if st in (Status.FAIL, Status.ERROR):
                failures.append(f"{check}: {summary}")
        healthy = not any(s in (Status.FAIL, Status.ERROR) for s in checks.values())
        kind = "check"
    elif isinstance(doc.get("checks"), dict) and "healthy" in doc:  # gate status document
        if not isinstance(doc["healthy"], bool):  # a string "false" is not healthy, nor anything else
            raise ReportError(f"healthy is {type(doc['healthy']).__name__} {doc['healthy']!r}, not true or false")
        checks = {_text(k, "a check id"): _status(v, f"checks[{k!r}]") for k, v in doc["checks"].items()}
        listed = doc.get("failures") or []
        if not isinstance(listed, list):
            raise ReportError(f"failures is {type(listed).__name__}, not a list")
        for n, f in enumerate(listed):
            if not isinstance(f, dict):
                raise ReportError(f"failures[{n}] is {type(f).__name__}, not an object")
            failures.append(
                f"{_text(f.get('check'), f'failures[{n}].check')}: {_text(f.get('summary', ''), f'failures[{n}].summary')}"
            )
        healthy = doc["healthy"]
        kind = "gate"
    else:
        raise ReportError(f"{path}: not a gpudoctor report (no findings and no gate checks)")
    return NodeReport(hostname or path.stem, str(path), checks, tuple(failures), healthy, hostname, machine, when, kind)


@frozen_dataclass
class Merged:
    """What ``report merge`` read: the nodes, the files it skipped and why, and the duplicates and
    superseded reports it left out (``(file, why)`` each)."""

    nodes: list[NodeReport]
    skipped: list[tuple[str, str]]
    dropped: list[tuple[str, str]]


def _files(paths: Sequence[str], skipped: list[tuple[str, str]]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = sorted(q for q in path.iterdir() if q.suffix == ".json" and q.is_file())
            if not found:
                skipped.append((str(path), "no *.json reports in this directory"))
            files.extend(found)
        elif path.exists() or path.is_symlink():
            files.append(path)
        else:
            skipped.append((str(path), "no such file or directory"))
    return files


def merge_reports(paths: Sequence[str]) -> Merged:
    """Read every file given, and every ``*.json`` in a directory given; a file that cannot be read or
    is not a valid report is skipped with the reason, the rest are merged.

    Nodes are identified by hostname plus machine id: two machines that share a hostname are two rows
    (told apart by their machine ids); one machine's reports of the same kind are one row, its newest
    (by ``time``), the older ones listed as superseded; the same report twice is a duplicate."""
    skipped: list[tuple[str, str]] = []
    dropped: list[tuple[str, str]] = []
    parsed: list[NodeReport] = []
    for f in _files(paths, skipped):
        try:
            parsed.append(_parse(f))
        except ReportError as exc:
            skipped.append((str(f), str(exc).removeprefix(f"{f}: ")))
    seen: dict[tuple[str, str, str, str], NodeReport] = {}
    unique: list[NodeReport] = []
    for n in parsed:
        if n.time and n.identity in seen:
            dropped.append((n.source, f"duplicate of {seen[n.identity].source} (same node, same time)"))
            continue
        seen[n.identity] = n
        unique.append(n)
    newest: dict[tuple[str, str, str], NodeReport] = {}
    for n in unique:
        key = (n.hostname or n.source, n.machine_id, n.kind)
        if not n.machine_id:  # an old report without a machine id cannot be told apart: keep every one
            key = (n.source, "", n.kind)
        old = newest.get(key)
        if old is None:
            newest[key] = n
        elif n.time and old.time and n.time != old.time:
            keep, drop = (n, old) if n.time > old.time else (old, n)
            newest[key] = keep
            dropped.append((drop.source, f"superseded by {keep.source} ({keep.time}) of the same node"))
        else:
            newest[key] = n
            dropped.append((old.source, f"duplicate of {n.source} (same node)"))
    nodes = list(newest.values())
    by_host: dict[str, set[str]] = {}
    for n in nodes:
        by_host.setdefault(n.node, set()).add(n.machine_id)
    named = []
    for n in nodes:
        if len(by_host[n.node]) > 1 and n.machine_id:  # two machines, one hostname
            n = replace(n, node=f"{n.node} [{n.machine_id[:8]}]")
        named.append(n)
    names = [n.node for n in named]
    # two reports of one host (a check report and a gate status file, or old reports without a
    # machine id) would be rows no one can tell apart: name each by its file too
    named = [replace(n, node=f"{n.node} ({Path(n.source).name})") if names.count(n.node) > 1 else n for n in named]
    return Merged(named, skipped, dropped)


def load_reports(paths: Sequence[str]) -> list[NodeReport]:
    """The nodes of :func:`merge_reports`; raises :class:`ReportError` for the first file skipped
    (the strict form, for callers that want all or nothing)."""
    merged = merge_reports(paths)
    if merged.skipped:
        path, why = merged.skipped[0]
        raise ReportError(f"{path}: {why}")
    if not merged.nodes:
        raise ReportError("no report files given")
    return merged.nodes


def _order(nodes: Sequence[NodeReport]) -> list[NodeReport]:
    return sorted(nodes, key=lambda n: (n.healthy, -n.worst.severity, n.node))


def _cell(text: str) -> str:
    """A string from a report file as one table cell: redacted, no control sequences, no line break."""
    from gpudoctor.redact import redact_text

    return " ".join(redact_text(str(text)).split()) or "?"


def node_verdict(n: NodeReport) -> str:
    """``FAILING``, ``warn``, ``unknown`` (nothing was judged: no check, or every one skipped) or ``healthy``."""
    if not n.healthy:
        return "FAILING"
    if n.worst >= Status.WARN:
        return "warn"
    if not any(s is not Status.SKIP for s in n.checks.values()):
        return "unknown"
    return "healthy"


def merge_table(nodes: Sequence[NodeReport], wide: bool = True) -> tuple[list[str], list[list[str]]]:
    """(header, rows): ``node``, ``verdict`` then one column per check id (sorted; ``wide``) or per
    report area (the worst status of its checks); failing nodes first. A cell is the worst status,
    ``-`` where no check (of the area) ran."""
    from gpudoctor.areas import area_for, area_rank

    rows = []
    if wide:
        columns = sorted({c for n in nodes for c in n.checks})
        for n in _order(nodes):
            cells = [CELL[n.checks[c]] if c in n.checks else "-" for c in columns]
            rows.append([_cell(n.node), node_verdict(n)] + cells)
        return ["node", "verdict"] + columns, rows
    by_area: list[dict[str, Status]] = [{} for _ in nodes]
    ordered = _order(nodes)
    for k, n in enumerate(ordered):
        for c, st in n.checks.items():
            area = "gate" if c.startswith("gate.") else area_for(c)
            by_area[k][area] = max(by_area[k].get(area, st), st)
    columns = sorted({a for d in by_area for a in d}, key=lambda a: (a == "gate", area_rank(a)))
    for n, d in zip(ordered, by_area):
        rows.append([_cell(n.node), node_verdict(n)] + [CELL[d[a]] if a in d else "-" for a in columns])
    return ["node", "verdict"] + columns, rows


def render_table(
    nodes: Sequence[NodeReport],
    wide: bool = False,
    skipped: Sequence[tuple[str, str]] = (),
    dropped: Sequence[tuple[str, str]] = (),
) -> str:
    """The table as aligned plain text (one column per area; per check with ``wide``), then one
    line per failure of each failing node, the files skipped or left out, and the counts."""
    header, rows = merge_table(nodes, wide)
    lines = []
    if rows:
        widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header] + rows]
    failing = [n for n in _order(nodes) if not n.healthy]
    if failing:
        lines.append("")
        for n in failing:
            for f in n.failures or ("(no failure recorded)",):
                lines.append(f"{_cell(n.node)}: {_cell(f)}")
    if dropped:
        lines.append("")
        lines += [f"left out: {_cell(path)}: {_cell(why)}" for path, why in dropped]
    healthy = sum(1 for n in nodes if n.healthy)
    unknown = sum(1 for n in nodes if node_verdict(n) == "unknown")
    lines.append("")
    lines.append(
        f"{len(nodes)} nodes: {healthy - unknown} healthy, {len(nodes) - healthy} failing"
        + (f", {unknown} unknown" if unknown else "")
        + (f"; {len(skipped)} files skipped (see stderr)" if skipped else "")
    )
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
        "unknown": sum(1 for n in nodes if node_verdict(n) == "unknown"),
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
                "hostname": n.hostname,
                "machine_id": n.machine_id,
                "time": n.time,
                "source": n.source,
                "verdict": node_verdict(n),
                "healthy": n.healthy,
                "worst": n.worst.value,
                "checks": {c: s.value for c, s in sorted(n.checks.items())},
            }
            for n in ordered
        ],
    }
