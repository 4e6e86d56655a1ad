"""``gpudoctor check``: run the checks (on this machine or a facts snapshot) and render the report."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gpudoctor.cli.common import (
    CONTEXT_SETTINGS,
    build_system,
    check_output_path,
    check_pythons,
    common_collect_options,
    complete_check_ids,
    given,
    load_registry,
    make_collect_options,
    may_need_targets,
    read_facts,
    refuse_conflicts,
    refuse_output_over_input,
    usage,
    write_output,
)
from gpudoctor.config import ConfiguredCommand
from gpudoctor.mirrors.cli_options import mirror_check_options, mirror_extra


@click.command(cls=ConfiguredCommand, context_settings=CONTEXT_SETTINGS)  # issue 14: GPUDOCTOR_*, gpudoctor.toml
@click.argument("ids", nargs=-1, metavar="[IDS]...", shell_complete=complete_check_ids)
@click.option(
    "--skip",
    multiple=True,
    metavar="ID",
    shell_complete=complete_check_ids,
    help="Leave out checks with this id or id prefix (repeatable).",
)
@common_collect_options
@click.option(
    "--facts",
    "facts_file",
    metavar="FILE",
    help="Evaluate the checks on a snapshot from `gpudoctor facts` instead of this machine ('-': stdin).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["console", "json", "markdown", "prometheus"]),
    default="console",
    show_default=True,
    help="Output format (prometheus: node_exporter textfile metrics).",
)
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    help="Write the report to FILE instead of stdout (json/markdown; prometheus: atomically).",
)
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@click.option("-v", "--verbose", is_flag=True, help="Show evidence and explanations for every finding.")
@click.option(
    "--deep",
    is_flag=True,
    help="Start each Jupyter kernel for real and probe it from inside; run "
    "the GPU smoke test (matrix product, copy bandwidth, peer access) on each visible device.",
)
@click.option(
    "--train-config",
    "train_configs",
    multiple=True,
    metavar="FILE",
    help="A training configuration to judge for precision (DeepSpeed JSON, Lightning or Accelerate YAML, "
    "Trainer arguments; repeatable); Accelerate's default config is always read.",
)
@click.option(
    "--compose",
    metavar="FILE",
    help="A Compose file (docker-compose.yml, compose.yaml) to judge for the GPU: each service that runs GPU "
    "code reserves a GPU, the reservation as Docker reads it, the images it builds.",
)
@mirror_check_options
def check(
    ids,
    skip,
    root,
    pythons,
    offline,
    probe_timeout,
    facts_file,
    fmt,
    output,
    strict,
    verbose,
    deep=False,
    train_configs=(),
    compose=None,
    **mirror_opts,
):
    """Run checks and explain what is wrong.

    IDS select checks by id or id prefix (`cuda` selects `cuda.driver`,
    `cuda.arch`, ...); none selects all.

    \b
    Examples:
      gpudoctor check
      gpudoctor check torch.install dataloader --format json
      gpudoctor check --python ~/venvs/train/bin/python
      gpudoctor check --root /mnt/image-rootfs --skip torch
      gpudoctor check --facts snapshot.json -v
      gpudoctor check amp --train-config ds_config.json
      gpudoctor check platform.compose-gpu --compose docker-compose.yml
    """
    from gpudoctor.system import kill_running_commands

    check_pythons(pythons)
    check_output_path("-o", output, atomic=fmt == "prometheus")
    refuse_output_over_input("-o", output, facts_file, *(train_configs if root == "/" else ()))
    rank = bool(mirror_opts.get("rank_mirrors"))
    refuse_conflicts(
        ("--offline", "--rank-mirrors", offline and rank, "ranking probes the catalogue's mirrors over the network"),
        ("--offline", "--mirror-budget", offline and given("mirror_budget"), "nothing is probed with --offline"),
        (
            "--facts",
            "--rank-mirrors",
            bool(facts_file) and rank,
            "a snapshot is replayed without probing anything; rank from this machine with `gpudoctor mirrors`",
        ),
        ("--facts", "--deep", bool(facts_file) and deep, "kernels are started only when collecting on this machine"),
        (
            "--facts",
            "--train-config",
            bool(facts_file) and bool(train_configs),
            "the files are read only when collecting",
        ),
        ("--facts", "--compose", bool(facts_file) and bool(compose), "the Compose file is read only when collecting"),
        (
            "--facts",
            "--dockerfile",
            bool(facts_file) and bool(mirror_opts.get("dockerfile")),
            "the Dockerfile is read only when collecting",
        ),
    )
    if root == "/":
        check_train_configs(train_configs)
    if compose:
        check_compose(compose, root)
    if facts_file and (pythons or root != "/"):
        raise usage(
            "--facts replays a snapshot; --python and --root only apply when collecting "
            "(use them with `gpudoctor facts`)"
        )
    facts = read_facts(facts_file) if facts_file else None
    from dataclasses import replace

    try:
        if facts is None and may_need_targets(ids) and Path(root).resolve() == Path("/"):
            # the torch probe is the slowest part of a check: start it first, before the report's
            # libraries, the mirror catalogue and the plug-ins are loaded (the live system does not
            # read --dockerfile, so it is the system the collectors get)
            from gpudoctor.collect.targets import start_early

            start_early(build_system(root), replace(make_collect_options(pythons, offline, probe_timeout), deep=deep))
        from gpudoctor import engine
        from gpudoctor.render.console import SpinnerProgress, make_console, render_console

        extra = mirror_extra(**mirror_opts)
        if train_configs:  # paths inside --root; on the live system, relative to the working directory
            extra["train_configs"] = tuple(str(Path(p).absolute()) if root == "/" else p for p in train_configs)
        if compose:  # a path inside --root; on the live system, relative to the working directory
            extra["compose"] = str(Path(compose).absolute()) if root == "/" else compose
        system = build_system(root, extra.get("dockerfile"))
        options = replace(make_collect_options(pythons, offline, probe_timeout, **extra), deep=deep)
        registry = load_registry()
        try:
            selected = engine.select_checks(registry.checks, ids, skip, registry.unloaded())
        except engine.SelectionError as exc:
            raise usage(str(exc)) from None
        from gpudoctor.mirrors.cli_options import selected_mirror_ecosystems

        options = replace(
            options, extra={**options.extra, "mirror_ecosystems": selected_mirror_ecosystems(c.id for c in selected)}
        )
        with SpinnerProgress(make_console(sys.stderr)) as progress:
            report = engine.run(
                selected,
                system,
                options,
                progress=progress,
                facts=facts,
                # a plug-in the user skipped is not reported as failing to load
                extra_findings=[
                    p for p in registry.problems if not any(engine.selects(s, str(p.evidence.get("id"))) for s in skip)
                ],
            )
    finally:
        kill_running_commands()  # an early probe nothing asked for (the selection did not need it)
    console = make_console(sys.stderr if fmt != "console" else sys.stdout)
    if fmt == "console":
        if output and output != "-":
            import io

            buffer = io.StringIO()
            render_console(report, make_console(buffer), verbose)
            write_output(buffer.getvalue(), output)
        else:
            render_console(report, console, verbose)
    elif fmt == "prometheus" and output and output != "-":
        from gpudoctor.render.prometheus import write_prometheus

        try:
            write_prometheus(output, report)
        except OSError as exc:
            raise usage(f"-o {output}: {exc.strerror or exc}") from None
    else:
        from gpudoctor.render import render

        write_output(render(report, fmt, verbose), output)
    sys.exit(report.exit_code(strict))


def check_compose(path: str, root: str = "/") -> None:
    """Usage error now, before anything is collected, for a ``--compose`` file (on this machine, or
    inside ``--root``) that the ``compose`` collector could not use: missing, not a regular file,
    too large, binary, not YAML, a key given twice, not a mapping with ``services:``. Under
    ``--root`` such a file was only a not-applicable line, and a run judged without it ended OK."""
    from gpudoctor.composefile import MAX_BYTES, load
    from gpudoctor.inputs import InputError, read_user_file
    from gpudoctor.system import Files

    if path == "-":
        raise usage("--compose -: the Compose file is read by path (its build contexts are relative to it)")
    host, shown = path, path
    if root != "/":  # the path is inside the root; symlinks are resolved inside it
        shown = f"{path} (in --root {root})"
        try:
            host = str(Files(Path(root)).host_path(path if path.startswith("/") else "/" + path))
        except OSError as exc:
            raise usage(f"--compose {shown}: {exc.strerror or exc}") from None
    try:
        load(read_user_file(host, max_bytes=MAX_BYTES), shown)
    except InputError as exc:
        raise usage(f"--compose {str(exc).replace(host, shown, 1)}") from None


#: what a configuration file's top level is, when it is not a mapping
_KIND_OF = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def check_train_configs(paths: tuple[str, ...]) -> None:
    """Usage error now, before anything is collected, for a ``--train-config`` file on this
    machine that the precision collector could not use: missing, not a regular file, larger
    than it reads, binary, not JSON/YAML, nested too deeply, or not a mapping. Without this such
    a file was only noted in the facts, and on a machine where amp.readiness does not apply
    (no GPU) the run ended with exit 0 as if the file had been judged."""
    from gpudoctor.collect.precision import MAX_BYTES
    from gpudoctor.inputs import InputError, loads_json, read_user_file

    for path in paths:
        try:
            text = read_user_file(path, max_bytes=MAX_BYTES)
            if path.endswith(".json") or text.lstrip().startswith("{"):
                doc = loads_json(text, path)
            else:
                import yaml

                try:
                    doc = yaml.safe_load(text)
                except (yaml.YAMLError, RecursionError, ValueError) as exc:
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                    raise InputError(f"{path}: not valid YAML ({first[:160]})") from None
        except InputError as exc:
            raise usage(f"--train-config {exc}") from None
        if not isinstance(doc, dict):
            raise usage(
                f"--train-config {path}: not a training configuration (a JSON object or YAML mapping "
                f"of settings), but {_KIND_OF.get(type(doc), 'something else') if doc is not None else 'an empty file'}"
            )
