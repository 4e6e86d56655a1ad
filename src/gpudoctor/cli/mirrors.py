"""``gpudoctor mirrors [pip|uv|conda|apt]``: rank the catalogue's mirrors from this machine.

Probes every candidate of the chosen ecosystems (and the indexes already
configured) at once, within the budget, and prints one ranked table per
ecosystem: mirror, median time to first byte, throughput, status,
freshness (apt) and why a mirror was skipped. Progress shows on a terminal
only. Network use is the point of this command; ``--offline`` lists the
candidates without probing.
"""

from __future__ import annotations

import json
import sys
import threading

import click

from gpudoctor.cli.common import (
    CONTEXT_SETTINGS,
    build_system,
    check_output_path,
    given,
    refuse_conflicts,
    write_output,
)
from gpudoctor.config import FiniteFloatRange
from gpudoctor.mirrors import DEFAULT_BUDGET_S, DEFAULT_TIMEOUT_S
from gpudoctor.mirrors.cli_options import load_catalogue_option
from gpudoctor.words import plural

ECOSYSTEMS = ("pip", "uv", "conda", "apt")


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("ecosystems", nargs=-1, type=click.Choice(ECOSYSTEMS), metavar="[pip|uv|conda|apt]...")
@click.option(
    "--root",
    default="/",
    show_default=True,
    metavar="DIR",
    help="Read apt/uv/conda configuration under DIR (distro codename, configured indexes).",
)
@click.option("--catalogue", metavar="FILE", help="Mirror catalogue TOML adding to (or replacing) the built-in one.")
@click.option(
    "--budget",
    default=DEFAULT_BUDGET_S,
    show_default=True,
    metavar="SECONDS",
    type=FiniteFloatRange(min=0.1, max=120),
    help="Overall time budget for all probes.",
)
@click.option(
    "--timeout",
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    type=FiniteFloatRange(min=0.1, max=60),
    help="Timeout of each request.",
)
@click.option("--offline", is_flag=True, help="Do not probe; list the candidates only.")
@click.option("--format", "fmt", type=click.Choice(["console", "json"]), default="console", show_default=True)
@click.option("-o", "--output", metavar="FILE", help="Write to FILE instead of stdout.")
def mirrors(ecosystems, root, catalogue, budget, timeout, offline, fmt, output):
    """Rank package-index mirrors by measured latency (all probed at once).

    \b
    Examples:
      gpudoctor mirrors                 # pip, uv, conda and apt
      gpudoctor mirrors apt --budget 3
      gpudoctor mirrors pip --catalogue my-mirrors.toml
    """
    from gpudoctor import engine
    from gpudoctor.collect import CollectOptions, all_collectors
    from gpudoctor.mirrors.gather import candidate_targets, configured_targets, measure
    from gpudoctor.render.console import make_console

    check_output_path("-o", output)

    refuse_conflicts(
        *(
            (
                ("--offline", opt, offline and given(name), "--offline lists the candidates without probing")
                for opt, name in (("--budget", "budget"), ("--timeout", "timeout"))
            )
        )
    )
    chosen = tuple(ecosystems) or ECOSYSTEMS
    cat = load_catalogue_option(catalogue)
    system = build_system(root)
    options = CollectOptions(offline=True)
    collectors = all_collectors()
    domains = [d for d in ("os", "apt", "uv", "conda", "pip") if d in collectors]
    facts, _errors = engine.collect_facts(domains, system, options, collectors)
    conf = [
        t
        for t in configured_targets(facts.get("uv"), facts.get("conda"), facts.get("apt"), facts.get("pip"), cat)
        if t.ecosystem in chosen
    ]
    cands, skipped = candidate_targets(cat, chosen, facts.get("apt"), facts.get("conda"))
    err = make_console(sys.stderr)
    total = len(conf) + len(cands)
    done = [0]
    lock = threading.Lock()
    status = (
        err.status(f"probing {plural(total, 'index', 'indexes')}", spinner="dots")
        if err.is_terminal and not offline
        else None
    )

    def on_result(res) -> None:
        with lock:
            done[0] += 1
            if status is not None:
                status.update(
                    f"probing {plural(total, 'index', 'indexes')}: {done[0]} answered, last {res.name} ({res.status})"
                )

    if status is not None:
        status.start()
    try:
        result = measure(
            conf,
            cands,
            cat,
            chosen,
            offline=offline,
            ranked=True,
            budget_s=budget,
            timeout_s=timeout,
            on_result=on_result,
        )
    finally:
        if status is not None:
            status.stop()
    if fmt == "json":
        from gpudoctor.facts.base import to_jsonable
        from gpudoctor.redact import redact_value

        doc = redact_value({"mirrors": to_jsonable(result), "skipped": skipped})
        write_output(json.dumps(doc, indent=2) + "\n", output)
        return
    from gpudoctor.checks._mirrors import ranking_table

    if offline:
        lines = [
            f"# Mirror candidates ({plural(total, 'index', 'indexes')}, not probed: --offline; catalogue {cat.origin})",
            "",
        ]
    else:
        lines = [
            f"# Mirror ranking ({plural(total, 'index', 'indexes')} probed concurrently in "
            f"{result.wall_ms / 1000:.1f} s, budget {budget:g} s, catalogue {cat.origin})",
            "",
        ]
    for eco in chosen:
        lines.append(f"## {eco}")
        if eco in skipped:
            lines += [f"not ranked: {skipped[eco]}", ""]
            continue
        mine = [p for p in result.configured if p.ecosystem == eco]
        for p in mine:
            lines.append(
                f"configured: {p.base_url}  {p.status}"
                + (f", median {p.median_ms:.0f} ms" if p.median_ms is not None else "")
                + (f" ({p.reason})" if p.reason else "")
            )
        rows = result.rankings.get(eco, ())
        lines += ["", ranking_table(rows, limit=100) if rows else "no catalogue mirror offers it", ""]
    text = "\n".join(lines) + "\n"
    if output:
        write_output(text, output)
    else:
        from rich.markdown import Markdown

        console = make_console()
        if console.is_terminal and not console.no_color:
            console.print(Markdown(text))
        else:
            click.echo(text, nl=False)
