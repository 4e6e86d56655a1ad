"""``gpudoctor diff A B``: what differs between two snapshots or two reports, and what can
explain a failing check on one side (issue 31)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from gpudoctor.cli.common import (
    CONTEXT_SETTINGS,
    check_output_path,
    load_registry,
    refuse_output_over_input,
    usage,
    write_output,
)

#: longest value shown in the console and markdown tables (JSON has them whole)
MAX_VALUE = 70
#: most differing facts listed in the console and markdown (JSON has them all): two machines
#: with different package sets differ in thousands of facts, and the first ones are those that
#: explain a changed verdict
MAX_FACTS = 200


def _read(path: str) -> tuple[str, dict[str, Any]]:
    """("facts" | "report", the document) of ``path``; usage error for anything else."""
    from gpudoctor.inputs import InputError, loads_json, read_user_file

    try:
        doc = loads_json(read_user_file(path), path)
    except InputError as exc:
        raise usage(str(exc)) from None
    if isinstance(doc, dict) and isinstance(doc.get("domains"), dict):
        return "facts", doc
    if isinstance(doc, dict) and isinstance(doc.get("findings"), list):
        return "report", doc
    raise usage(
        f"{path}: neither a facts snapshot (`gpudoctor facts -o FILE`) nor a report (`gpudoctor check --format json`)"
    )


def _decode_facts(facts_type: Any, error_type: Any, path: str, doc: dict[str, Any]) -> Any:
    """The snapshot ``doc`` of ``path`` as Facts; a usage error that names the file otherwise."""
    try:
        return facts_type.from_json(doc)
    except error_type as exc:
        raise usage(f"{path}: not a gpudoctor facts snapshot: {exc}") from None


def _decode_findings(finding_type: Any, path: str, doc: dict[str, Any]) -> list[Any]:
    """The findings of the report ``doc`` of ``path``; a usage error naming the file and the
    finding (its index in ``findings``) that is malformed."""
    out = []
    for i, item in enumerate(doc["findings"]):
        if not isinstance(item, dict):
            raise usage(f"{path}: not a gpudoctor report: findings[{i}] is not an object")
        try:
            out.append(finding_type.from_json(item))
        except KeyError as exc:
            raise usage(f"{path}: not a gpudoctor report: findings[{i}] has no {exc} key") from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise usage(f"{path}: not a gpudoctor report: findings[{i}]: {exc}") from None
    return out


def _show(value: Any, limit: int = MAX_VALUE) -> str:
    text = "—" if value is None else value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    text = text.replace("\n", " ").replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _render_text(diff, a: str, b: str) -> str:
    if diff.same:
        return f"gpudoctor diff: {a} and {b} do not differ in any verdict or fact that gpudoctor compares\n"
    lines = [f"gpudoctor diff: {a} (A) vs {b} (B)"]
    if diff.checks:
        lines.append(f"\nchecks whose verdict differs ({len(diff.checks)}):")
        width = max(len(c.check) for c in diff.checks)
        for c in diff.checks:
            lines.append(f"  {c.check:<{width}}  {c.a} → {c.b}")
            worse = c.summary_b if c.b in ("fail", "warn", "error") else c.summary_a
            if worse:
                lines.append(f"  {'':<{width}}  {_show(worse, 160)}")
    if diff.facts:
        order = ", those that can explain the checks above first" if diff.checks else ""
        lines.append(f"\nfacts that differ ({len(diff.facts)}){order}:")
        for f in diff.facts[:MAX_FACTS]:
            why = f"   (read by {', '.join(f.explains)})" if f.explains else ""
            lines.append(f"  {f.path}\n      A: {_show(f.a)}\n      B: {_show(f.b)}{why}")
        if len(diff.facts) > MAX_FACTS:
            lines.append(f"  ... and {len(diff.facts) - MAX_FACTS} more (--format json lists them all)")
    lines.extend(f"\nnote: {n}" for n in diff.notes)
    return "\n".join(lines) + "\n"


def _render_markdown(diff, a: str, b: str) -> str:
    out = [f"## gpudoctor diff: `{a}` (A) vs `{b}` (B)", ""]
    if diff.same:
        return "\n".join(out + ["No verdict or fact differs.", ""])
    if diff.checks:
        out += ["| check | A | B | summary |", "| --- | --- | --- | --- |"]
        for c in diff.checks:
            worse = c.summary_b if c.b in ("fail", "warn", "error") else c.summary_a
            out.append(f"| `{c.check}` | {c.a} | {c.b} | {_show(worse, 160)} |")
        out.append("")
    if diff.facts:
        out += ["| fact | A | B | read by |", "| --- | --- | --- | --- |"]
        for f in diff.facts[:MAX_FACTS]:
            out.append(f"| `{f.path}` | {_show(f.a)} | {_show(f.b)} | {', '.join(f.explains)} |")
        if len(diff.facts) > MAX_FACTS:
            out.append(f"\n... and {len(diff.facts) - MAX_FACTS} more facts (`--format json` lists them all)")
        out.append("")
    out.extend(f"> {n}" for n in diff.notes)
    return "\n".join(out) + "\n"


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["console", "markdown", "json"]),
    default="console",
    show_default=True,
    help="Output format.",
)
@click.option("-o", "--output", metavar="FILE", help="Write the comparison to FILE instead of stdout.")
def diff(a, b, fmt, output):
    """Compare two facts snapshots (or two reports): what differs that matters.

    A and B are files from `gpudoctor facts -o FILE` (every check is then run on both, and
    every fact compared) or from `gpudoctor check --format json` (verdicts only). Facts that a
    check with a different verdict reads come first: the difference that explains a failing
    check on one side heads the list. Exit 0 when nothing differs, 1 when something does.

    \b
    Examples:
      gpudoctor facts -o good.json            # on the working node
      gpudoctor facts -o bad.json             # on the broken one
      gpudoctor diff good.json bad.json
      gpudoctor diff good.json bad.json --format markdown -o diff.md
    """
    from gpudoctor import diffing, engine
    from gpudoctor.facts import Facts, FactsDecodeError
    from gpudoctor.model import Finding

    check_output_path("-o", output)
    refuse_output_over_input("-o", output, a, b)
    if a == b == "-":
        raise usage("A and B are both stdin (`-`): stdin can be read once; give at most one of them as `-`")
    (kind_a, doc_a), (kind_b, doc_b) = _read(a), _read(b)
    if kind_a != kind_b:
        raise usage(f"{a} is a {kind_a} document and {b} a {kind_b} document: compare two of the same kind")
    notes = []
    if kind_a == "facts":
        facts_a, facts_b = (
            _decode_facts(Facts, FactsDecodeError, a, doc_a),
            _decode_facts(Facts, FactsDecodeError, b, doc_b),
        )
        registry = load_registry()
        checks = engine.select_checks(registry.checks)
        changed = diffing.diff_findings(engine.evaluate(checks, facts_a), engine.evaluate(checks, facts_b))
        # the documents' own domains, not the decoded ones: a domain this gpudoctor does not know (a
        # snapshot from a newer release) still differs
        from gpudoctor.redact import redact_value

        facts = diffing.diff_facts(
            redact_value(doc_a["domains"]), redact_value(doc_b["domains"]), changed, {c.id: c for c in checks}
        )
    else:
        fa, fb = _decode_findings(Finding, a, doc_a), _decode_findings(Finding, b, doc_b)
        changed, facts = diffing.diff_findings(fa, fb), []
        notes.append("reports carry no facts: compare `gpudoctor facts` snapshots to see what differs underneath")
    result = diffing.Diff(tuple(changed), tuple(facts), tuple(notes))
    if fmt == "json":
        text = json.dumps({"a": a, "b": b, **result.to_json()}, indent=2, default=str) + "\n"
    elif fmt == "markdown":
        text = _render_markdown(result, a, b)
    else:
        text = _render_text(result, a, b)
    write_output(text, output)
    sys.exit(0 if result.same else 1)
