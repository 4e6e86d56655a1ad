"""``gpudoctor report merge``: many nodes' JSON reports as one nodes × checks table."""

from __future__ import annotations

import json
import sys

import click

from gpudoctor.cli.common import CONTEXT_SETTINGS, EXIT_FAIL, usage


@click.group(context_settings=CONTEXT_SETTINGS)
def report():
    """Work with saved reports (the fleet view)."""


@report.command(context_settings=CONTEXT_SETTINGS)
@click.argument("paths", nargs=-1, required=True, metavar="FILES...|DIR")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: the nodes × checks table; json: a summary for tools.",
)
def merge(paths, fmt):
    """Merge JSON reports from many nodes into one table of nodes × checks.

    Reads `gpudoctor check --format json` reports and `gpudoctor gate
    --status-file` documents (a directory: every *.json in it). Failing
    nodes come first. Exit 1 when any node is failing.

    \b
    Examples:
      gpudoctor report merge /shared/gpudoctor/*.json
      gpudoctor report merge /shared/gpudoctor/ --format json
    """
    from gpudoctor.fleet import ReportError, load_reports, merge_summary, render_table

    try:
        nodes = load_reports(paths)
    except ReportError as exc:
        raise usage(str(exc)) from None
    if fmt == "json":
        click.echo(json.dumps(merge_summary(nodes), indent=2))
    else:
        click.echo(render_table(nodes), nl=False)
    sys.exit(EXIT_FAIL if any(not n.healthy for n in nodes) else 0)
