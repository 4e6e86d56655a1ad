"""Published JSON Schemas: ``facts.schema.json`` (the snapshot) and
``report.schema.json`` (``--format json``).

The facts schema is generated from the domain dataclasses, so it cannot drift
from the code; the files in this package are the published copies, and a test
fails if they differ from what the code generates. Regenerate with
``python -m gpudoctor.schemas``.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from gpudoctor.engine import REPORT_SCHEMA_VERSION
from gpudoctor.facts import facts_schema
from gpudoctor.model import Status

__all__ = ["generated_schemas", "published_schema", "report_schema", "write_schemas"]


def report_schema() -> dict:
    """JSON Schema of the ``gpudoctor check --format json`` document."""
    statuses = [s.value for s in Status]
    finding = {
        "type": "object",
        "required": ["check", "status", "summary", "explanation", "evidence", "fixes", "duration_ms", "area"],
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
            "status": {
                "enum": ["ok", "warn", "fail", "error"],
                "description": "overall verdict: the most severe of warn/fail/error among the findings, "
                "else ok (info and skip need no action)",
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
        "$defs": {"Finding": finding},
    }


def generated_schemas() -> dict[str, dict]:
    """File name -> schema as the code generates it now."""
    return {"facts.schema.json": facts_schema(), "report.schema.json": report_schema()}


def published_schema(name: str) -> dict:
    """A published schema file shipped in this package (``facts.schema.json`` or ``report.schema.json``)."""
    return json.loads(resources.files(__name__).joinpath(name).read_text(encoding="utf-8"))


def write_schemas(directory: Path) -> None:
    """Write the generated schemas into ``directory``."""
    for name, schema in generated_schemas().items():
        (directory / name).write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n", encoding="utf-8")
