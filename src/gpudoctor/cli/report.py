"""``gpudoctor report merge``: many nodes' JSON reports as one nodes × checks table."""

from __future__ import annotations

import json
import sys

import click

from gpudoctor.cli.common import CONTEXT_SETTINGS, EXIT_FAIL, EXIT_UNKNOWN, usage


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
    help="text: the nodes × areas table; json: a summary for tools.",
)
@click.option("--wide", is_flag=True, help="One column per check instead of per report area.")
def merge(paths, fmt, wide):
    """Merge JSON reports from many nodes into one table of nodes × areas.

    Reads `gpudoctor check --format json` reports and `gpudoctor gate
    --status-file` documents (a directory: every *.json in it). A file that
    is not a valid report is named on stderr and skipped; the rest are
    merged. Nodes are told apart by hostname and machine id; a node's newer
    report supersedes its older one, and a report given twice counts once.
    Failing nodes come first.

    Exit 1 when any node is failing; else 4 when a file was skipped or a
    node judged nothing (the fleet's state is not fully known); 2 when no
    file could be read.

    \b
    Examples:
      gpudoctor report merge /shared/gpudoctor/*.json
      gpudoctor report merge /shared/gpudoctor/ --wide
      gpudoctor report merge /shared/gpudoctor/ --format json
    """
    from gpudoctor.fleet import merge_reports, merge_summary, node_verdict, render_table
    from gpudoctor.redact import redact_text

    merged = merge_reports(paths)
    for path, why in merged.skipped:
        click.echo(redact_text(f"gpudoctor: warning: {path}: skipped: {why}"), err=True)
    if not merged.nodes:
        if len(merged.skipped) == 1:
            raise usage(f"{merged.skipped[0][0]}: {merged.skipped[0][1]}")
        raise usage("none of the files given is a readable report of gpudoctor")
    nodes = merged.nodes
    if fmt == "json":
        doc = merge_summary(nodes)
        doc["skipped"] = [{"source": p, "why": w} for p, w in merged.skipped]
        doc["left_out"] = [{"source": p, "why": w} for p, w in merged.dropped]
        click.echo(redact_text(json.dumps(doc, indent=2)))
    else:
        click.echo(render_table(nodes, wide, merged.skipped, merged.dropped), nl=False)
    if any(not n.healthy for n in nodes):
        sys.exit(EXIT_FAIL)
    sys.exit(EXIT_UNKNOWN if merged.skipped or any(node_verdict(n) == "unknown" for n in nodes) else 0)
