"""Check ``cuda.libraries``: does each target's loader pick the right copy of every CUDA library?

Evidence: the ``cuda_libraries`` domain (the loader model: which copy of each
``DT_NEEDED`` CUDA library the framework's GPU libraries would bind, why, and
which versioned symbols that copy lacks). Works for any framework found from
distribution metadata, with or without torch.

In order:

1. a framework library binds a copy that lacks the symbol versions / symbols it
   needs (``undefined symbol: __nvJitLinkComplete_12_4, version
   libnvJitLink.so.12``), or that is older than the copy it would bind without
   ``LD_LIBRARY_PATH``/``LD_PRELOAD`` (its wheel's own) -> ``fail`` naming the
   directory, the library, both versions and how to change the search order;
2. a needed CUDA library is found nowhere -> ``fail``;
3. an ``nvidia-*`` wheel installed older than the framework pins it
   (``Requires-Dist``; pytorch/pytorch #119072: torch 2.2 with
   ``nvidia-nccl-cu12`` 2.18, ``undefined symbol: ncclCommRegister``) ->
   ``fail`` with the pinned install and ``pip check``;
4. ``LD_LIBRARY_PATH``/``LD_PRELOAD`` swaps in another copy whose version
   cannot be compared with the framework's own -> ``warn``;
5. two copies of one library where a consumer without RUNPATH (another
   framework's ``dlopen`` by name) gets an older one than the framework uses ->
   ``warn``;
6. otherwise ``ok``; no GPU framework library in the target -> ``skip``.

Reinstalling a framework never changes the search order, so the remedy is
never a blind ``--force-reinstall``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from gpudoctor.checks._common import install_command, pip_command
from gpudoctor.checks._gpu import per_target
from gpudoctor.checks._libraries import (
    DRIVER_FAMILIES,
    activation_commands,
    activation_hint,
    framework_of,
    loads_how,
    missing_wheel_commands,
    missing_wheel_remedy,
    older,
    older_pins,
    path_commands,
    path_remedy,
    replaced,
    shadowing,
    sibling_remedy,
    target_model,
    version_of,
    vtext,
)
from gpudoctor.facts import Facts
from gpudoctor.facts.libraries import LibraryCopy, Resolution, TargetLibraries
from gpudoctor.facts.targets import ProbeFacts, TargetFacts
from gpudoctor.model import Check, Command, Finding, Status, fenced


def _not_searched(
    model: TargetLibraries,
    probe: ProbeFacts,
    t: TargetFacts,
    r: Resolution,
    present: list[LibraryCopy],
    evidence: Mapping[str, object],
) -> Finding:
    """A library the framework needs is installed (a wheel, a conda package) but in no directory its loader
    searches: onnxruntime-gpu's provider has no RUNPATH to the ``nvidia/*/lib`` wheels (microsoft/onnxruntime
    #25609), TensorFlow 2.16's RUNPATH missed them (tensorflow/tensorflow#63362)."""
    fw = framework_of(model, r.consumer, r)
    dirs = list(dict.fromkeys(c.directory for c in present))
    c = present[0]
    version = f" {c.version}" if c.version else ""
    own = ""
    if fw == "cupy":
        own = (
            "\n\nCuPy 13 and earlier look for a system CUDA Toolkit, not for the `nvidia-*` wheels (NVIDIA/cutile-python"
            "#57); CuPy 14 finds pip-installed CUDA libraries itself."
        )
    if fw == "onnxruntime-gpu":
        own = (
            "\n\nonnxruntime-gpu 1.21 and later can load the wheels' libraries itself: call "
            "`onnxruntime.preload_dlls()` before creating the `InferenceSession` (ONNX Runtime docs, CUDA Execution "
            'Provider, "Preload DLLs"); importing torch first has the same effect.'
        )
    return CHECK.finding(
        Status.FAIL,
        f"{r.needed}{version} is installed in {dirs[0]} ({c.origin}), but {fw} does not search there",
        f"{loads_how(r, fw)}. A copy exists at `{c.path}`, but no directory the loader searches for "
        f"{'that `dlopen`' if r.consumer == 'dlopen' else f'`{os.path.basename(r.consumer)}`'} holds it: not a "
        f"RUNPATH, not `LD_LIBRARY_PATH` "
        f"(`{':'.join(model.ld_library_path) or 'unset'}`), not the ld.so cache ({model.cache_source}) nor the "
        f"default directories. Installing the wheel again changes nothing; put its directory on the loader path."
        f"\n\n{activation_hint(probe, dirs)}{own}",
        evidence={**evidence, "installed_copies": [x.path for x in present]},
        target=t.label,
        commands=activation_commands(probe, dirs),
    )


def assess(facts: Facts, t: TargetFacts, probe: ProbeFacts) -> Finding:
    """The ``cuda.libraries`` finding for one target (pure)."""
    model = target_model(facts, t.label)
    if model is None:
        return CHECK.finding(
            Status.SKIP, "the CUDA libraries were not modelled (no cuda_libraries facts)", target=t.label
        )
    if not model.roots and not model.resolutions:
        return CHECK.finding(Status.SKIP, f"no GPU framework library found in {probe.executable}", target=t.label)
    evidence = {
        "python": probe.executable,
        "LD_LIBRARY_PATH": ":".join(model.ld_library_path),
        "resolutions": [
            f"{os.path.basename(r.consumer)} -> {r.needed} => {r.path or 'not found'} "
            f"({r.via}{', ' + vtext(model, r.path) if r.path else ''})"
            for r in model.resolutions
        ],
    }
    bad = shadowing(model)
    if bad:
        res, good, why = bad[0]
        fw = framework_of(model, res.consumer, res)
        where = f"`{res.directory}` ({res.path_origin or res.via})"
        mine, theirs = vtext(model, res.path), vtext(model, good) if good else None
        lacks = ""
        if res.missing:
            lacks = (
                f" {os.path.basename(res.consumer)} needs `{res.missing[0]}`, which that copy does not define, "
                f"so loading fails with `undefined symbol: {res.missing[0]}`."
            )
        good_txt = f" instead of the wheel's {theirs} copy `{good}`" if good else ""
        binder = f"{fw} (dlopen)" if res.how == "dlopen" else os.path.basename(res.consumer)
        summary = (
            f"{res.directory} ({res.path_origin or res.via}) shadows {res.needed}: {binder} binds "
            f"{mine} from there"
            + (f" instead of {theirs} from {os.path.dirname(good)}" if good else "")
            + (f"; it lacks {res.missing[0].split(',')[0]}" if res.missing else "")
        )
        others = ""
        if len(bad) > 1:
            others = "\n\nAlso shadowed:\n\n" + "\n".join(
                f"- `{r.needed}` for `{os.path.basename(r.consumer)}`: `{r.path}` ({vtext(model, r.path)}, {r.via})"
                for r, _g, _w in bad[1:]
            )
        return CHECK.finding(
            Status.FAIL,
            summary,
            f"{loads_how(res, fw)}. The dynamic loader resolves it for `{res.consumer}` from {where}: version {mine}"
            f"{good_txt}.{lacks} The loader searches `LD_LIBRARY_PATH` before a library's RUNPATH, so a CUDA "
            f"toolkit or module directory there hides the copy {fw} was built with.{others}\n\n"
            f"{path_remedy(model, res, good)}\n\nReinstalling {fw} does not help: the files are fine, the search "
            f"order is not.",
            evidence=evidence,
            target=t.label,
            commands=path_commands(model, res, good),
        )
    lost = [r for r in model.resolutions if r.path is None and r.family not in DRIVER_FAMILIES]
    if lost:
        r = lost[0]
        unsearched = [cp for cp in model.copies if cp.name == r.needed]
        if unsearched:
            # every directory that holds a lost library, so one LD_LIBRARY_PATH line repairs them all
            more_copies = [cp for x in lost[1:] for cp in model.copies if cp.name == x.needed]
            return _not_searched(model, probe, t, r, unsearched + more_copies, evidence)
        return CHECK.finding(
            Status.FAIL,
            f"{r.needed}, needed by {framework_of(model, r.consumer, r) if r.how == 'dlopen' else os.path.basename(r.consumer)}"
            f"{' (dlopen by name)' if r.how == 'dlopen' else ''}, is found nowhere on the loader path",
            f"{loads_how(r, framework_of(model, r.consumer, r))}; no directory of `{os.path.basename(r.consumer)}`'s "
            f"RUNPATH, `LD_LIBRARY_PATH`, the ld.so cache "
            f"({model.cache_source}) or the default directories holds it. "
            + (
                sibling_remedy(facts, t.label, probe.executable, model, r)
                or missing_wheel_remedy(
                    facts, t.label, probe.executable, framework_of(model, r.consumer, r), r.family, probe.venv_creator
                )
            ),
            evidence=evidence,
            target=t.label,
            commands=missing_wheel_commands(
                facts, t.label, probe.executable, framework_of(model, r.consumer, r), r.family, probe.venv_creator
            ),
        )
    stale = older_pins(facts, t.label)
    if stale:
        owner, dist, pinned, have = stale[0]
        more = "".join(f"\n- `{d}` {h} (pinned {p}, by {f.dist})" for f, d, p, h in stale[1:])
        fix = " ".join(f"{d}=={p}" for _f, d, p, _h in stale)
        restore = (
            Command(
                install_command(probe.executable, fix, probe.venv_creator),
                "restore the versions the framework pins",
                "changes",
            ),
            Command(
                pip_command(probe.executable, "check", "", probe.venv_creator),
                "which package asked for the older version",
            ),
        )
        return CHECK.finding(
            Status.FAIL,
            f"{dist} {have} is installed, older than the {pinned} that {owner.dist} {owner.version} pins",
            f"`{owner.dist} {owner.version}` was built against `{dist}=={pinned}` (its `Requires-Dist`), but this "
            f"environment has `{dist} {have}`: another package's requirement, or a manual install, moved it "
            f"back. The older library lacks functions the framework calls, so it fails at import or first use "
            f"(NCCL: `undefined symbol: ncclCommRegister`; cuDNN: a version-incompatibility error).{more}\n\n"
            f"Restore the pinned versions:\n\n{fenced(*restore)}\n\n`pip check` names the package that asked for the older "
            f"version; upgrade that one too, or keep it in a separate environment.",
            evidence={**evidence, "pins": list(owner.pins), "installed": list(owner.pinned_installed)},
            target=t.label,
            commands=restore,
        )
    swapped = replaced(model)
    if swapped:
        res, own = swapped[0]
        return CHECK.finding(
            Status.WARN,
            f"{res.directory} ({res.via}) replaces {framework_of(model, res.consumer, res)}'s own {res.needed} "
            f"({own}); the two versions cannot be compared",
            f"`{res.consumer}` would bind `{own}` (its RUNPATH / wheel copy, {vtext(model, own)}) but the "
            f"environment puts `{res.path}` ({vtext(model, res.path)}) first. If that copy is older than the one the "
            f"framework was built with, it fails at import or at the first call that needs the newer symbols.\n\n"
            f"{path_remedy(model, res, own)}",
            evidence=evidence,
            target=t.label,
            commands=path_commands(model, res, own),
        )
    for r in model.resolutions:
        if not r.path or not r.bare or r.family in DRIVER_FAMILIES:
            continue
        if older(version_of(model, r.bare), version_of(model, r.path)):
            return CHECK.finding(
                Status.WARN,
                f"an older {r.needed} ({vtext(model, r.bare)}, {r.bare}) is what a library without RUNPATH gets; "
                f"{os.path.basename(r.consumer)} uses {vtext(model, r.path)} from {r.directory}",
                f"Two copies of `{r.needed}` are on this machine. The framework binds `{r.path}` through its "
                f'{r.via}, but any consumer without that RUNPATH — another framework\'s `dlopen("{r.needed}")`, '
                f"a custom extension — gets `{r.bare}` ({vtext(model, r.bare)}). Whichever is loaded first wins "
                f"for the whole process (same SONAME), so import order decides which version everybody uses. "
                f"Remove the old copy (its system package) or put `{r.directory}` first on `LD_LIBRARY_PATH`.",
                evidence=evidence,
                target=t.label,
                commands=(
                    Command(f"export LD_LIBRARY_PATH={r.directory}:$LD_LIBRARY_PATH", "the framework's copy for all"),
                ),
            )
    n = len({r.needed for r in model.resolutions})
    return CHECK.finding(
        Status.OK,
        f"{n} CUDA libraries resolve to the frameworks' own copies in {probe.executable}",
        evidence=evidence,
        target=t.label,
    )


CHECK = Check(
    id="cuda.libraries",
    title="CUDA libraries: the loader picks each framework's own copy, with every symbol it needs",
    needs=("targets", "cuda_libraries"),
    evaluate=per_target("cuda.libraries", assess),
)
