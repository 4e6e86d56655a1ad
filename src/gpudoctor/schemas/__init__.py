"""Published JSON Schemas: ``facts.schema.json`` (the snapshot),
``report.schema.json`` (``gpudoctor check --format json``) and
``explain.schema.json`` (``gpudoctor explain --format json``).

The facts schema is generated from the domain dataclasses, so it cannot drift
from the code; the explain document embeds findings of the report schema and, when
confirming checks ran, a whole report (``$ref``); the files in this package are the published copies, and a test
fails if they differ from what the code generates. Regenerate with
``python -m gpudoctor.schemas``.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from gpudoctor.engine import REPORT_SCHEMA_VERSION
from gpudoctor.facts import facts_schema
from gpudoctor.model import SAFETY, Status

__all__ = ["explain_schema", "generated_schemas", "published_schema", "report_schema", "write_schemas"]


def report_schema() -> dict:
    """JSON Schema of the ``gpudoctor check --format json`` document."""
    statuses = [s.value for s in Status]
    finding = {
        "type": "object",
        "required": [
            "check",
            "status",
            "summary",
            "explanation",
            "evidence",
            "fixes",
            "duration_ms",
            "area",
            "commands",
            "caused_by",
        ],
        "properties": {
            "check": {"type": "string", "description": "check id, e.g. cuda.driver"},
            "status": {"enum": statuses},
            "summary": {"type": "string", "description": "one line: the root cause"},
            "explanation": {"type": "string", "description": "Markdown: cause, evidence, what to do"},
            "evidence": {"type": "object", "description": "key -> JSON value supporting the verdict"},
            "fixes": {"type": "array", "items": {"type": "string"}, "description": "ids for `gpudoctor fix`"},
            "doc_url": {"type": ["string", "null"]},
            "target": {"type": ["string", "null"], "description": "target interpreter label, if any"},
            "duration_ms": {"type": "number", "minimum": 0},
            "area": {
                "type": "string",
                "description": "report area the finding is grouped under, e.g. gpu, "
                "libraries, platform, devices, notebooks, data, sources",
            },
            "commands": {
                "type": "array",
                "description": "the remedy as data, preferred first (schema 3; schema 2 had only the explanation)",
                "items": {"$ref": "#/$defs/Command"},
            },
            "caused_by": {
                "type": "array",
                "items": {"type": "string"},
                "description": "ids of the checks whose findings explain this one (schema 3; "
                "schema 2 kept one id in evidence.caused_by)",
            },
        },
        "additionalProperties": False,
    }
    command = {
        "type": "object",
        "required": ["text", "purpose", "safety"],
        "properties": {
            "text": {"type": "string", "description": "the exact command line"},
            "purpose": {"type": "string", "description": "one line: what it does or shows"},
            "safety": {
                "enum": list(SAFETY),
                "description": "safe: run as is; root: needs root; changes: changes the system",
            },
        },
        "additionalProperties": False,
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://gpudoctor.invalid/schemas/report.schema.json",
        "title": "gpudoctor check report",
        "type": "object",
        "required": ["schema_version", "gpudoctor_version", "status", "counts", "duration_ms", "findings"],
        "properties": {
            "schema_version": {"const": REPORT_SCHEMA_VERSION},
            "gpudoctor_version": {"type": "string"},
            "hostname": {"type": "string", "description": "the node that ran the checks (for fleet views)"},
            "machine_id": {
                "type": "string",
                "description": "/etc/machine-id of that node, empty when unreadable (fleet views tell nodes apart by "
                "hostname, machine id and time)",
            },
            "time": {"type": "string", "description": "when the run finished, UTC ISO 8601; empty when unknown"},
            "status": {
                "enum": ["ok", "warn", "fail", "error", "unknown"],
                "description": "overall verdict: the most severe of warn/fail/error among the findings, "
                "else ok (info and skip need no action); unknown when every finding is skip (nothing "
                "was judged)",
            },
            "counts": {
                "type": "object",
                "properties": {s: {"type": "integer", "minimum": 0} for s in statuses},
                "required": statuses,
                "additionalProperties": False,
            },
            "duration_ms": {"type": "number", "minimum": 0},
            "findings": {"type": "array", "items": {"$ref": "#/$defs/Finding"}},
            "facts": {"$ref": "facts.schema.json"},
        },
        "$defs": {"Finding": finding, "Command": command},
    }


def explain_schema() -> dict:
    """JSON Schema of the ``gpudoctor explain --format json`` document
    (:meth:`gpudoctor.explain_run.ExplainResult.to_json`).

    A diagnosis is a report-schema finding (its ``check`` is the signature id) plus the
    match: signature, extracted values, line, stream, occurrences, the message's source and
    the confirming checks the knowledge base names. ``checks`` is the report of the
    confirming checks (``report.schema.json``) or null when none ran.
    """
    from gpudoctor.explain_run import EXPLAIN_SCHEMA_VERSION

    finding = report_schema()["$defs"]["Finding"]
    diagnosis = {
        "type": "object",
        "required": [
            *finding["required"],
            "signature",
            "values",
            "line",
            "stream",
            "occurrences",
            "source",
            "confirming_checks",
        ],
        "properties": {
            **finding["properties"],
            "check": {"type": "string", "description": "the signature id (never a check id)"},
            "signature": {"type": "string", "description": "signature id in data/errors.toml, e.g. cuda.out-of-memory"},
            "values": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "named value -> text taken from the message (or derived from it)",
            },
            "line": {"type": "integer", "minimum": 1, "description": "1-based line of the first matched line"},
            "stream": {"enum": ["stdout", "stderr", None], "description": "the command's stream; null for a file"},
            "occurrences": {"type": "integer", "minimum": 1, "description": "times seen with the same values"},
            "source": {"type": "string", "description": "the project code or docs that emit the message"},
            "confirming_checks": {
                "type": "array",
                "items": {"type": "string"},
                "description": "check ids or id prefixes that confirm or rule out the diagnosis",
            },
        },
        "additionalProperties": False,
    }
    strings = {"type": "array", "items": {"type": "string"}}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://gpudoctor.invalid/schemas/explain.schema.json",
        "title": "gpudoctor explain result",
        "type": "object",
        "required": [
            "schema_version",
            "kind",
            "gpudoctor_version",
            "source",
            "command",
            "command_exit_code",
            "lines_read",
            "matched",
            "diagnosis",
            "checks",
            "checks_run",
            "confirmed_here",
            "confirm_with",
            "unresolved_checks",
            "suggestion",
        ],
        "properties": {
            "schema_version": {"const": EXPLAIN_SCHEMA_VERSION},
            "kind": {"const": "explain"},
            "gpudoctor_version": {"type": "string"},
            "source": {"type": "string", "description": "a file path, `stdin`, or the command line that ran"},
            "command": {"oneOf": [{**strings, "minItems": 1}, {"type": "null"}], "description": "argv, or null"},
            "command_exit_code": {
                "type": ["integer", "null"],
                "description": "the command's exit status (128 + N when killed by signal N); null: no command",
            },
            "lines_read": {"type": "integer", "minimum": 0},
            "matched": {"type": "boolean", "description": "whether any known error was recognised"},
            "diagnosis": {
                "type": "array",
                "items": {"$ref": "#/$defs/Diagnosis"},
                "description": "recognised errors, most specific first",
            },
            "checks": {
                "oneOf": [{"$ref": "report.schema.json"}, {"type": "null"}],
                "description": "the confirming checks' report, null when none ran (--no-check)",
            },
            "checks_run": {**strings, "description": "the confirming checks that ran"},
            "confirmed_here": {
                "type": ["boolean", "null"],
                "description": "whether a confirming check warns or fails on this machine; null: none ran",
            },
            "confirm_with": {**strings, "description": "installed checks that confirm the diagnosis"},
            "unresolved_checks": {**strings, "description": "confirming checks named but not installed"},
            "suggestion": {
                "type": ["string", "null"],
                "description": "what to run when nothing was recognised (`gpudoctor check`), else null",
            },
        },
        "additionalProperties": False,
        "$defs": {"Diagnosis": diagnosis, "Command": report_schema()["$defs"]["Command"]},
    }


def generated_schemas() -> dict[str, dict]:
    """File name -> schema as the code generates it now."""
    return {
        "facts.schema.json": facts_schema(),
        "report.schema.json": report_schema(),
        "explain.schema.json": explain_schema(),
        "watch.schema.json": _watch_schema(),
    }


def _watch_schema() -> dict:
    from gpudoctor.stall import watch_schema

    return watch_schema()


def published_schema(name: str) -> dict:
    """A published schema file shipped in this package (``facts.schema.json``, ``report.schema.json``
    or ``explain.schema.json``). Raises ``FileNotFoundError`` for another name."""
    return json.loads(resources.files(__name__).joinpath(name).read_text(encoding="utf-8"))


def write_schemas(directory: Path) -> None:
    """Write the generated schemas into ``directory``."""
    for name, schema in generated_schemas().items():
        (directory / name).write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n", encoding="utf-8")
