"""``--format json``: the report document, validated in tests against
``gpudoctor/schemas/report.schema.json``."""

from __future__ import annotations

import json

from gpudoctor.engine import Report


def render_json(report: Report, include_facts: bool = False) -> str:
    """The report as indented JSON text (secrets redacted)."""
    return json.dumps(report.to_json(include_facts=include_facts), indent=2, sort_keys=False) + "\n"
