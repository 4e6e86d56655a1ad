"""``gpudoctor list``: every check and fix, with its description and provider."""

from __future__ import annotations

import json

import click

from gpudoctor.cli.common import CONTEXT_SETTINGS, load_registry


@click.command("list", context_settings=CONTEXT_SETTINGS)
@click.option("--format", "fmt", type=click.Choice(["console", "json"]), default="console", show_default=True)
def list_(fmt):
    """List every check and fix, with its description and provider.

    \b
    Example:
      gpudoctor list
    """
    registry = load_registry()
    rows = [
        {
            "kind": "check",
            "id": c.id,
            "title": c.title,
            "provider": registry.provider(c.id, "check"),
            "needs": list(c.needs),
            "tags": list(c.tags),
        }
        for c in registry.checks.values()
    ]
    rows += [
        {
            "kind": "fix",
            "id": f.id,
            "title": f.title,
            "provider": registry.provider(f.id, "fix"),
            "addresses": list(f.addresses),
        }
        for f in registry.fixes.values()
    ]
    from gpudoctor.redact import redact_value

    rows = redact_value(rows)  # plug-ins write their own titles
    problems = [redact_value(p.to_json()) for p in registry.problems]
    if fmt == "json":
        click.echo(json.dumps({"items": rows, "problems": problems}, indent=2))
        return
    from rich.table import Table

    from gpudoctor.render.console import make_console

    console = make_console()
    if not console.is_terminal:  # plain, one line per item, no wrapping or padding: easy to grep
        w_id = max((len(r["id"]) for r in rows), default=0)
        for r in rows:
            click.echo(f"{r['kind']:<5}  {r['id']:<{w_id}}  {r['title']}  ({r['provider']})")
        for p in problems:
            click.echo(f"[ERROR] {p['summary']}")
        return
    table = Table(box=None, show_edge=False, pad_edge=False, expand=False)
    for col in ("kind", "id", "description", "provider"):
        table.add_column(col)
    from rich.markup import escape

    for r in rows:
        table.add_row(*(escape(str(r[k])) for k in ("kind", "id", "title", "provider")))
    console.print(table)
    for p in problems:
        console.print(f"[ERROR] {p['summary']}", markup=False)
