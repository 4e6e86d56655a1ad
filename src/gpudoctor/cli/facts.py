"""``gpudoctor facts``: collect the facts snapshot (JSON, secrets redacted)."""

from __future__ import annotations

import json
import sys

import click

from gpudoctor.cli.common import (
    CONTEXT_SETTINGS,
    build_system,
    check_output_path,
    check_pythons,
    common_collect_options,
    complete_check_ids,
    load_registry,
    make_collect_options,
    usage,
    write_output,
)


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("ids", nargs=-1, metavar="[IDS]...", shell_complete=complete_check_ids)
@common_collect_options
@click.option("-o", "--output", metavar="FILE", help="Write the snapshot to FILE instead of stdout.")
def facts(ids, root, pythons, offline, probe_timeout, output):
    """Collect the facts snapshot (JSON, secrets redacted).

    IDS limit collection to what those checks need. Replay the snapshot
    anywhere with `gpudoctor check --facts FILE`.

    \b
    Examples:
      gpudoctor facts -o facts.json
      gpudoctor facts cuda > cuda-facts.json
    """
    from gpudoctor import engine
    from gpudoctor.collect import all_collectors
    from gpudoctor.render.console import SpinnerProgress, make_console

    registry = load_registry()
    try:
        selected = engine.select_checks(registry.checks, ids, unloaded=registry.unloaded())
    except engine.SelectionError as exc:
        raise usage(str(exc)) from None
    check_pythons(pythons)
    check_output_path("-o", output)
    system = build_system(root)
    collectors = all_collectors()
    domains = engine.needed_domains(selected, collectors)
    with SpinnerProgress(make_console(sys.stderr)) as progress:
        snapshot, errors = engine.collect_facts(
            domains, system, make_collect_options(pythons, offline, probe_timeout), collectors, progress
        )
    for err in errors:
        click.echo(f"gpudoctor: warning: {err.summary}", err=True)
    write_output(json.dumps(snapshot.to_json(), indent=2) + "\n", output)
