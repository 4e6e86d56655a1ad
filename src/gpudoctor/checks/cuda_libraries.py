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

from gpudoctor.checks._gpu import per_target, v
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.libraries import (
    CudaLibrariesFacts,
    FrameworkInstall,
    LibraryCopy,
    Resolution,
    TargetLibraries,
)
from gpudoctor.facts.targets import ProbeFacts, TargetFacts
from gpudoctor.model import Check, Finding, Status

DRIVER_FAMILIES = {"libcuda", "nvml"}


def target_model(facts: Facts, label: str) -> TargetLibraries | None:
    """The loader model of target ``label``, or None."""
    cl = facts.of(CudaLibrariesFacts)
    if isinstance(cl, Unavailable):
        return None
    return next((t for t in cl.targets if t.label == label), None)


def copies_by_path(model: TargetLibraries) -> dict[str, LibraryCopy]:
    out: dict[str, LibraryCopy] = {}
    for c in model.copies:
        out.setdefault(os.path.normpath(c.path), c)
    return out


def _copy(model: TargetLibraries, path: str | None) -> LibraryCopy | None:
    if not path:
        return None
    return copies_by_path(model).get(os.path.normpath(path))


def version_of(model: TargetLibraries, path: str | None) -> str | None:
    c = _copy(model, path)
    return c.version if c else None


def _vtext(model: TargetLibraries, path: str | None) -> str:
    c = _copy(model, path)
    if c is None or not c.version:
        return "of unknown version"
    return c.version


def _framework_of(model: TargetLibraries, consumer: str, res: Resolution | None = None) -> str:
    if res is not None and res.framework:
        return res.framework
    for root in model.roots:
        name, _, path = root.partition(":")
        if os.path.normpath(path) == os.path.normpath(consumer):
            return name
    return model.roots[0].partition(":")[0] if model.roots else "the framework"


def path_remedy(model: TargetLibraries, res: Resolution, good: str | None) -> str:
    """The exact commands that make ``good``'s directory win over ``res.path`` (Markdown)."""
    d = os.path.normpath(res.directory or "")
    good_dir = os.path.dirname(good) if good else None
    script = res.path_origin.partition(", set by ")[2]
    if script:
        text = (
            f"`{d}` is put on `LD_LIBRARY_PATH` by the environment's activation script `{script}` (conda runs it "
            f"on `conda activate`). Delete that entry from the script, then activate the environment again:\n\n"
            f"```\ngrep -n LD_LIBRARY_PATH {script}\nconda deactivate && conda activate {_env_of(script)}\n```"
        )
        if good:
            text += (
                f"\n\nIf another program needs that directory, put `{os.path.dirname(good)}` before it in the "
                f"same line instead."
            )
        return text
    if res.via.startswith("LD_LIBRARY_PATH"):
        rest = [e for e in model.ld_library_path if not (e and os.path.normpath(e) == d)]
        drop = f"export LD_LIBRARY_PATH={':'.join(rest)}" if any(rest) else "unset LD_LIBRARY_PATH"
        text = (
            f"Take `{d}` out of `LD_LIBRARY_PATH` for this environment (delete it where it is set: "
            f"`~/.bashrc`, the job script, an environment module — `module unload` — or the toolkit's "
            f"profile script):\n\n```\n{drop}\n```\n\npip wheels carry their own CUDA libraries and need no "
            f"system toolkit on the loader path."
        )
        if good_dir:
            text += (
                f" If that directory must stay for other work, put the wheel's directory first:\n\n```\n"
                f"export LD_LIBRARY_PATH={good_dir}:$LD_LIBRARY_PATH\n```"
            )
        return text
    if res.via == "LD_PRELOAD":
        return f"Remove `{res.path}` from `LD_PRELOAD`."
    if res.via == "RPATH":
        return (
            f"`{res.consumer}` carries a DT_RPATH naming `{d}`, which beats `LD_LIBRARY_PATH`. Reinstall the "
            f"package that owns it from the same index as the framework, or remove the stray library from `{d}`."
        )
    if good_dir:
        return (
            f"The system copy in `{d}` is found before the wheel's. Put the wheel's directory first:\n\n```\n"
            f"export LD_LIBRARY_PATH={good_dir}:$LD_LIBRARY_PATH\n```\n\nor remove the old system package "
            f"that installed `{res.path}`."
        )
    return f"Remove `{d}` from the loader path."


def _env_of(script: str) -> str:
    """``/opt/conda/envs/tf/etc/conda/activate.d/x.sh`` -> ``/opt/conda/envs/tf``."""
    return script.split("/etc/conda/activate.d/")[0] or script


def loads_how(res: Resolution, fw: str) -> str:
    """How ``fw`` gets ``res.needed``, in words."""
    if res.how == "dlopen" and res.consumer == "dlopen":
        return f"{fw} opens `{res.needed}` by name at run time (`dlopen` from Python, so no library's RUNPATH applies)"
    if res.how == "dlopen":
        return f"{fw} opens `{res.needed}` by name at run time (`dlopen` from `{os.path.basename(res.consumer)}`)"
    if res.how == "preload":
        return f"{fw} preloads `{res.needed}` itself"
    return f"`{os.path.basename(res.consumer)}` ({fw}) links `{res.needed}`"


def _older(a: str | None, b: str | None) -> bool:
    return bool(a and b) and v(a) < v(b)


def _better_copy(model: TargetLibraries, res: Resolution) -> str | None:
    """The copy the consumer should get: its own (without the environment), else a newer candidate."""
    if res.without_env and os.path.normpath(res.without_env) != os.path.normpath(res.path or ""):
        return res.without_env
    mine = version_of(model, res.path)
    newer = [c for c in res.candidates if _older(mine, version_of(model, c))]
    return newer[0] if newer else None


def shadowing(model: TargetLibraries) -> list[tuple[Resolution, str | None, str]]:
    """(resolution, the copy it should get, why) of every resolution the loader gets wrong."""
    out = []
    for res in model.resolutions:
        if not res.path or res.family in DRIVER_FAMILIES:
            continue
        good = _better_copy(model, res)
        if res.missing:
            out.append((res, good, "missing"))
        elif good and _older(version_of(model, res.path), version_of(model, good)):
            out.append((res, good, "older"))
    return out


def replaced(model: TargetLibraries) -> list[tuple[Resolution, str]]:
    """(resolution, the framework's own copy) where the environment swaps in another copy whose
    version cannot be compared with it (one of the two versions is unknown)."""
    out = []
    for res in model.resolutions:
        if not res.path or res.family in DRIVER_FAMILIES or res.missing:
            continue
        own = res.without_env
        if (
            own
            and os.path.normpath(own) != os.path.normpath(res.path)
            and (res.via.startswith("LD_LIBRARY_PATH") or res.via == "LD_PRELOAD")
            and not (version_of(model, res.path) and version_of(model, own))
        ):
            out.append((res, own))
    return out


def activation_hint(probe: ProbeFacts, dirs: list[str]) -> str:
    """Markdown: where to put ``LD_LIBRARY_PATH=dirs`` so it holds for every run of this environment."""
    value = ":".join(dirs)
    if probe.is_conda:
        script = f"{probe.prefix}/etc/conda/activate.d/cuda_libs.sh"
        return (
            f"Make it part of the environment's activation (conda runs `activate.d` scripts on `conda activate`):"
            f"\n\n```\nmkdir -p {probe.prefix}/etc/conda/activate.d\necho 'export LD_LIBRARY_PATH={value}"
            f"${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}' > {script}\n```"
        )
    return (
        f"Set it where the job starts (the job script, the container `ENV`, or the venv's `bin/activate`):\n\n```\n"
        f"export LD_LIBRARY_PATH={value}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}\n```"
    )


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
    fw = _framework_of(model, r.consumer, r)
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
    )


def older_pins(facts: Facts, label: str) -> list[tuple[FrameworkInstall, str, str, str]]:
    """(framework, dist, pinned version, installed version) of every ``nvidia-*`` wheel installed OLDER than
    a framework of target ``label`` pins it (``Requires-Dist: nvidia-nccl-cu12==2.21.5``; a newer one is
    left alone: those libraries keep backward compatibility within a major, and upgrading them for another
    framework is common practice)."""
    cl = facts.of(CudaLibrariesFacts)
    if isinstance(cl, Unavailable):
        return []
    out = []
    for fw in cl.frameworks:
        if fw.label != label:
            continue
        have = dict(p.split("==", 1) for p in fw.pinned_installed)
        for pin in fw.pins:
            dist, pinned = pin.split("==", 1)
            if dist in have and _older(have[dist], pinned):
                out.append((fw, dist, pinned, have[dist]))
    return out


def missing_wheel_remedy(facts: Facts, label: str, python: str, framework: str, family: str | None) -> str:
    """Markdown: the exact command that installs a CUDA library a framework needs and cannot find.

    torch pins each ``nvidia-*`` wheel in its metadata, and ``pip install torch==<installed>`` installs the
    dependencies that are missing at those pins (from the index of its ``+cuXYZ`` build); other frameworks
    get the ``nvidia-<stem>-cu<major>`` wheel of the family (PyPI names, ``WHEEL_STEM`` in
    :mod:`gpudoctor.checks.cuda_frameworks`).
    """
    from gpudoctor.checks.cuda_frameworks import WHEEL_STEM, frameworks_of

    fw = next((f for f in frameworks_of(facts, label) or [] if f.name == framework), None)
    tail = " (or put the directory that holds it on `LD_LIBRARY_PATH`)."
    if fw is not None and fw.name == "torch":
        public, _, local = fw.version.partition("+")
        index = f" --index-url https://download.pytorch.org/whl/{local}" if local.startswith("cu") else ""
        if not local or index:
            return (
                f"A dependency wheel of torch was removed or never installed (`pip install --no-deps`, a partial "
                f"uninstall). Let pip restore it at the version this torch pins, keeping torch itself:\n\n```\n"
                f"{python} -m pip install torch=={public}{index}\n{python} -m pip check\n```"
            )
    stem = WHEEL_STEM.get(family or "")
    if fw is not None and stem and fw.cuda_major:
        return (
            f"Install the CUDA {fw.cuda_major} wheel that ships it into this environment:\n\n```\n"
            f"{python} -m pip install nvidia-{stem}-cu{fw.cuda_major}\n```\n\n({fw.dist} may pin an exact "
            f"version: `{python} -m pip show {fw.dist}`; or put the directory that holds it on `LD_LIBRARY_PATH`)."
        )
    return (
        f"Install the matching `nvidia-*` wheel into this environment (`{python} -m pip install <framework>[and-cuda]` "
        f"or the framework's CUDA extra){tail}"
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
            f"({r.via}{', ' + _vtext(model, r.path) if r.path else ''})"
            for r in model.resolutions
        ],
    }
    bad = shadowing(model)
    if bad:
        res, good, why = bad[0]
        fw = _framework_of(model, res.consumer, res)
        where = f"`{res.directory}` ({res.path_origin or res.via})"
        mine, theirs = _vtext(model, res.path), _vtext(model, good) if good else None
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
                f"- `{r.needed}` for `{os.path.basename(r.consumer)}`: `{r.path}` ({_vtext(model, r.path)}, {r.via})"
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
            f"{r.needed}, needed by {_framework_of(model, r.consumer, r) if r.how == 'dlopen' else os.path.basename(r.consumer)}"
            f"{' (dlopen by name)' if r.how == 'dlopen' else ''}, is found nowhere on the loader path",
            f"{loads_how(r, _framework_of(model, r.consumer, r))}; no directory of `{os.path.basename(r.consumer)}`'s "
            f"RUNPATH, `LD_LIBRARY_PATH`, the ld.so cache "
            f"({model.cache_source}) or the default directories holds it. "
            + missing_wheel_remedy(facts, t.label, probe.executable, _framework_of(model, r.consumer, r), r.family),
            evidence=evidence,
            target=t.label,
        )
    older = older_pins(facts, t.label)
    if older:
        owner, dist, pinned, have = older[0]
        more = "".join(f"\n- `{d}` {h} (pinned {p}, by {f.dist})" for f, d, p, h in older[1:])
        fix = " ".join(f"{d}=={p}" for _f, d, p, _h in older)
        return CHECK.finding(
            Status.FAIL,
            f"{dist} {have} is installed, older than the {pinned} that {owner.dist} {owner.version} pins",
            f"`{owner.dist} {owner.version}` was built against `{dist}=={pinned}` (its `Requires-Dist`), but this "
            f"environment has `{dist} {have}`: another package's requirement, or a manual install, moved it "
            f"back. The older library lacks functions the framework calls, so it fails at import or first use "
            f"(NCCL: `undefined symbol: ncclCommRegister`; cuDNN: a version-incompatibility error).{more}\n\n"
            f"Restore the pinned versions:\n\n```\n{probe.executable} -m pip install {fix}\n"
            f"{probe.executable} -m pip check\n```\n\n`pip check` names the package that asked for the older "
            f"version; upgrade that one too, or keep it in a separate environment.",
            evidence={**evidence, "pins": list(owner.pins), "installed": list(owner.pinned_installed)},
            target=t.label,
        )
    swapped = replaced(model)
    if swapped:
        res, own = swapped[0]
        return CHECK.finding(
            Status.WARN,
            f"{res.directory} ({res.via}) replaces {_framework_of(model, res.consumer, res)}'s own {res.needed} "
            f"({own}); the two versions cannot be compared",
            f"`{res.consumer}` would bind `{own}` (its RUNPATH / wheel copy, {_vtext(model, own)}) but the "
            f"environment puts `{res.path}` ({_vtext(model, res.path)}) first. If that copy is older than the one the "
            f"framework was built with, it fails at import or at the first call that needs the newer symbols.\n\n"
            f"{path_remedy(model, res, own)}",
            evidence=evidence,
            target=t.label,
        )
    for r in model.resolutions:
        if not r.path or not r.bare or r.family in DRIVER_FAMILIES:
            continue
        if _older(version_of(model, r.bare), version_of(model, r.path)):
            return CHECK.finding(
                Status.WARN,
                f"an older {r.needed} ({_vtext(model, r.bare)}, {r.bare}) is what a library without RUNPATH gets; "
                f"{os.path.basename(r.consumer)} uses {_vtext(model, r.path)} from {r.directory}",
                f"Two copies of `{r.needed}` are on this machine. The framework binds `{r.path}` through its "
                f'{r.via}, but any consumer without that RUNPATH — another framework\'s `dlopen("{r.needed}")`, '
                f"a custom extension — gets `{r.bare}` ({_vtext(model, r.bare)}). Whichever is loaded first wins "
                f"for the whole process (same SONAME), so import order decides which version everybody uses. "
                f"Remove the old copy (its system package) or put `{r.directory}` first on `LD_LIBRARY_PATH`.",
                evidence=evidence,
                target=t.label,
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
    tags=("gate",),
)
