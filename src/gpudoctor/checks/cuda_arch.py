"""Check ``cuda.arch``: does each target's torch contain kernels for every GPU?

The arch list is ``torch.cuda.get_arch_list()`` from the probe; when CUDA is
unavailable that list is empty, and the official wheel's list comes from
``data/torch_wheels.toml``. Rules (see :mod:`gpudoctor.checks._gpu`): a cubin
``sm_XY`` runs on the same major with minor >= Y; PTX ``compute_XY`` is
JIT-compiled for any capability >= X.Y, provided the driver is at least the
toolkit driver of the CUDA that produced the PTX.

- a GPU with neither a fitting cubin nor PTX -> ``fail``, naming the first
  official torch build/CUDA variant that covers it and the install command;
- covered only by PTX, but the driver is too old to JIT it -> ``fail``;
- covered only by PTX -> ``ok`` (JIT-compiled on first use, noted);
- covered by a cubin (e.g. sm_86 on the sm_80 cubin) -> ``ok``.
"""

from __future__ import annotations

from typing import Any

from gpudoctor.checks._common import (
    driver_install_commands,
    driver_version,
    pip_install_command,
    variant_fits_python,
    wheel_variants,
)
from gpudoctor.checks._gpu import (
    arch_name,
    cc_tuple,
    coverage,
    cuda_build_skip,
    first_covering,
    gpu_devices,
    parse_arch_list,
    per_target,
    table_arch_list,
    toolkit_driver,
    v,
)
from gpudoctor.facts import Facts
from gpudoctor.facts.targets import ProbeFacts, TargetFacts
from gpudoctor.model import Check, Command, Finding, Status


def _remedy(
    facts: Facts, probe: ProbeFacts, cc: tuple[int, int], dropped: bool = False
) -> tuple[str, tuple[Command, ...]]:
    """The builds that cover ``cc`` and the install command of the newest one the driver and Python
    run. ``dropped``: the GPU is older than every arch of the installed build (new wheels dropped it),
    so the text names the newest build that still covers it rather than the first one."""
    builds = first_covering(cc)
    if not builds:
        return (
            "No official PyTorch wheel contains kernels for this GPU; build PyTorch from source with "
            f'`TORCH_CUDA_ARCH_LIST="{cc[0]}.{cc[1]}"`.'
        ), ()
    first_torch, first_variant = builds[0]
    variants: dict[str, dict[str, Any]] = {r["name"]: r for r in wheel_variants()}
    driver = driver_version(facts)
    # the newest build covering the GPU whose variant the driver can run
    runnable = [
        b
        for b in builds
        if b[1] in variants
        and variant_fits_python(variants[b[1]], probe.python_version)
        and (driver is None or v(driver) >= v(variants[b[1]]["min_driver"]))
    ]
    text = f"The first official build that covers it is **torch {first_torch} with {first_variant}**"
    if dropped:
        last_torch = max((b[0] for b in builds), key=v)
        last_variants = ", ".join(sorted({b[1] for b in builds if b[0] == last_torch}, key=v))
        text = (
            f"This build leaves the architecture out (newer CUDA variants of PyTorch drop old GPUs); the newest "
            f"official build that still covers it "
            f"is **torch {last_torch} with {last_variants}**"
        )
    if runnable:
        best_torch, best_variant = runnable[-1]
        row = variants[best_variant]
        newest_minor = ".".join(row["newest_torch"].split(".")[:2])
        spec = None if best_torch == newest_minor else f"{best_torch}.*"
        cmd = pip_install_command(
            probe.executable, row, spec, python_version=probe.python_version, venv_creator=probe.venv_creator
        )
        out = text + f"; install one that this driver runs:\n\n```\n{cmd}\n```"
        commands = [Command(cmd, f"a torch build with kernels for this GPU ({best_variant})", "changes")]
        if not dropped and runnable[0] != runnable[-1]:
            # a GPU newer than the installed build: the smallest upgrade keeps code written for this torch
            small_torch, small_variant = runnable[0]
            small = pip_install_command(
                probe.executable,
                variants[small_variant],
                f"{small_torch}.*",
                python_version=probe.python_version,
                venv_creator=probe.venv_creator,
            )
            out += f"\n\nor the smallest upgrade that covers it (torch {small_torch}, {small_variant}):\n\n```\n{small}\n```"
            commands.append(Command(small, f"or the smallest upgrade: torch {small_torch}", "changes"))
        return out, tuple(commands)
    need = variants.get(first_variant, {}).get("min_driver", "?")
    return text + (
        f", which needs driver ≥ {need}; upgrade the NVIDIA driver first, then install it from "
        f"{variants.get(first_variant, {}).get('index_url', 'the PyTorch index')}."
    ), driver_install_commands(facts)


def assess(facts: Facts, t: TargetFacts, probe: ProbeFacts) -> Finding:
    """The ``cuda.arch`` finding for one target (pure)."""
    reason = cuda_build_skip(probe)
    if reason:
        return CHECK.finding(Status.SKIP, reason, target=t.label)
    tf = probe.torch
    gpus = [g for g in gpu_devices(facts, probe) if g.cc]
    if not gpus:
        return CHECK.finding(Status.SKIP, "no GPU with a known compute capability", target=t.label)
    arch_list: list[str] | None = list(tf.arch_list) or None
    source = "torch.cuda.get_arch_list()"
    if arch_list is None:
        arch_list = table_arch_list(tf.version or "", tf.cuda)
        source = "the official wheel's arch list (gpudoctor data table; " + (
            "the light probe does not import torch)"
            if not tf.import_tried
            else "CUDA is unavailable so torch reports none)"
        )
    if not arch_list:
        return CHECK.finding(
            Status.SKIP,
            f"torch {tf.version} reports no arch list and is not an official build gpudoctor knows",
            target=t.label,
        )
    entries = parse_arch_list(arch_list)
    evidence = {
        "arch_list": " ".join(arch_list),
        "arch_list_source": source,
        "gpus": [f"{g.index}: {g.name} (compute capability {g.cc})" for g in gpus],
    }
    failures: list[tuple[str, str]] = []
    commands: tuple[Command, ...] = ()
    notes: list[str] = []
    driver = driver_version(facts)
    for g in gpus:
        cc_text = g.cc or ""  # every GPU in `gpus` has one (filtered above)
        cc = cc_tuple(cc_text)
        sm = f"sm_{cc[0]}{cc[1]}"
        label = f"{g.name} (compute capability {g.cc}, {sm}{', ' + arch_name(cc_text) if arch_name(cc_text) else ''})"
        cubin, ptx = coverage(cc, entries)
        if cubin:
            notes.append(f"{g.name}: {sm} runs the {cubin.text} kernels" if cubin.text != sm else f"{g.name}: {sm}")
            continue
        if ptx:
            need = toolkit_driver(tf.cuda or "")
            if driver and need and v(driver) < v(need):
                remedy, commands = _remedy(facts, probe, cc)
                failures.append(
                    (
                        f"{g.name} ({sm}) is covered only by {ptx.text} PTX, which driver {driver} cannot JIT-compile",
                        f"{label} has no matching cubin in torch {tf.version}; only {ptx.text} PTX, which the driver "
                        f"must JIT-compile. PTX from CUDA {tf.cuda} needs driver ≥ {need}, this is {driver}: kernels fail "
                        f"with `the provided PTX was compiled with an unsupported toolchain`. Upgrade the driver to ≥ "
                        f"{need}. " + remedy,
                    )
                )
            else:
                notes.append(
                    f"{g.name}: {sm} is covered only by {ptx.text} PTX (JIT-compiled on first use; the "
                    f"first run is slower)"
                )
            continue
        listed = " ".join(e.text for e in entries)
        dropped = bool(entries) and all((e.major, e.minor) > cc for e in entries)
        remedy, commands = _remedy(facts, probe, cc, dropped)
        failures.append(
            (
                f"{g.name} ({sm}) is not supported by torch {tf.version}, whose kernels cover {listed}",
                f"{label} has neither a cubin of its major nor PTX it could JIT in torch {tf.version} (arch list: "
                f"`{listed}`). CUDA calls fail with `no kernel image is available for execution on the device` (and "
                f"torch warns `{sm} is not compatible with the current PyTorch installation`). " + remedy,
            )
        )
    if failures:
        summary = "; ".join(s for s, _ in failures)
        return CHECK.finding(
            Status.FAIL,
            summary,
            "\n\n".join(e for _, e in failures),
            evidence=evidence,
            target=t.label,
            commands=commands,
        )
    notes = list(dict.fromkeys(notes))  # two GPUs of one model say the same
    ptx_only = [n for n in notes if "PTX" in n]
    summary = f"torch {tf.version} has kernels for every GPU" + (
        ": " + "; ".join(ptx_only) if ptx_only else f" ({'; '.join(notes)})"
    )
    return CHECK.finding(Status.OK, summary, evidence=evidence, target=t.label)


CHECK = Check(
    id="cuda.arch",
    title="each GPU's compute capability covered by the torch build (cubin or PTX)",
    needs=("targets", "nvidia", "gpu"),
    evaluate=per_target("cuda.arch", assess),
)
