"""The CUDA library domain shared by ``cuda.libraries``, ``cuda.frameworks``, ``torch.install`` and the
headline: which GPU frameworks a target holds, the loader model's verdicts (a copy that shadows the
framework's own, an older pinned wheel) and the remedies for them, in words and as commands. A
private domain helper, not a check: checks call it, none imports another check.
"""

from __future__ import annotations

import os

from gpudoctor.checks._common import install_command, pip_command
from gpudoctor.checks._gpu import v
from gpudoctor.data import load_table
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.libraries import (
    CudaLibrariesFacts,
    FrameworkInstall,
    LibraryCopy,
    Resolution,
    TargetLibraries,
)
from gpudoctor.facts.targets import ProbeFacts
from gpudoctor.model import Command, fenced


def frameworks_of(facts: Facts, label: str) -> list[FrameworkInstall] | None:
    cl = facts.of(CudaLibrariesFacts)
    if isinstance(cl, Unavailable):
        return None
    return [f for f in cl.frameworks if f.label == label]


def framework_dists(probe: ProbeFacts, *, besides: str | None = None, by_name_only: bool = False) -> list[str]:
    """``dist version`` of the GPU frameworks (data/frameworks.toml) among the probe's installed
    distributions, in the table's order; ``besides`` leaves one framework out, ``by_name_only``
    keeps those that dlopen CUDA libraries by bare name (``opens_by_name``)."""
    have = {k.lower().replace("_", "-"): v for k, v in (probe.distributions or {}).items()}
    return [
        f"{d} {have[d]}"
        for row in load_table("frameworks")["framework"]
        if row["name"] != besides and (row.get("opens_by_name") or not by_name_only)
        for d in row["dists"]
        if d in have
    ]


def agreeing_releases(framework: str, key: str, major: int) -> list[str]:
    """``framework`` release ranges whose ``key`` (``cudnn_major``/``cuda_major``) equals ``major``."""
    return [
        f"{framework}{row['versions']}"
        for row in load_table("frameworks")["requirement"]
        if row["framework"] == framework and row.get(key) == major
    ]


#: family -> nvidia-* wheel name stem (PyPI ``nvidia-<stem>-cu<CUDA major>``)
WHEEL_STEM = {
    "cudart": "cuda-runtime",
    "cublas": "cublas",
    "cublasLt": "cublas",
    "cufft": "cufft",
    "curand": "curand",
    "cusolver": "cusolver",
    "cusparse": "cusparse",
    "nvJitLink": "nvjitlink",
    "nvrtc": "cuda-nvrtc",
    "cupti": "cuda-cupti",
    "cudnn": "cudnn",
    "nccl": "nccl",
    "nvshmem": "nvshmem",
}

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


def copy_at(model: TargetLibraries, path: str | None) -> LibraryCopy | None:
    if not path:
        return None
    return copies_by_path(model).get(os.path.normpath(path))


def version_of(model: TargetLibraries, path: str | None) -> str | None:
    c = copy_at(model, path)
    return c.version if c else None


def vtext(model: TargetLibraries, path: str | None) -> str:
    c = copy_at(model, path)
    if c is None or not c.version:
        return "of unknown version"
    return c.version


def framework_of(model: TargetLibraries, consumer: str, res: Resolution | None = None) -> str:
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
            f"```\ngrep -n LD_LIBRARY_PATH {script}\nconda deactivate && conda activate {env_of(script)}\n```"
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


def env_of(script: str) -> str:
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


def activation_commands(probe: ProbeFacts, dirs: list[str]) -> tuple[Command, ...]:
    """The commands that put ``LD_LIBRARY_PATH=dirs`` where it holds for every run of this environment."""
    value = ":".join(dirs)
    export = f"export LD_LIBRARY_PATH={value}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"
    if probe.is_conda:
        return (
            Command(f"mkdir -p {probe.prefix}/etc/conda/activate.d", "the environment's activation scripts"),
            Command(
                f"echo '{export}' > {probe.prefix}/etc/conda/activate.d/cuda_libs.sh",
                "conda activate puts the libraries' directories on the loader path",
                "changes",
            ),
        )
    return (Command(export, "the libraries' directories on the loader path (in the job script to keep it)"),)


def activation_hint(probe: ProbeFacts, dirs: list[str]) -> str:
    """Markdown: where to put ``LD_LIBRARY_PATH=dirs`` so it holds for every run of this environment."""
    if probe.is_conda:
        return (
            "Make it part of the environment's activation (conda runs `activate.d` scripts on `conda activate`):"
            f"\n\n{fenced(*activation_commands(probe, dirs))}"
        )
    return (
        "Set it where the job starts (the job script, the container `ENV`, or the venv's `bin/activate`):\n\n"
        + fenced(*activation_commands(probe, dirs))
    )


def path_commands(model: TargetLibraries, res: Resolution, good: str | None) -> tuple[Command, ...]:
    """The commands of :func:`path_remedy`, preferred first (none where it names no single command)."""
    d = os.path.normpath(res.directory or "")
    good_dir = os.path.dirname(good) if good else None
    out: list[Command] = []
    if res.via.startswith("LD_LIBRARY_PATH"):
        rest = [e for e in model.ld_library_path if not (e and os.path.normpath(e) == d)]
        drop = f"export LD_LIBRARY_PATH={':'.join(rest)}" if any(rest) else "unset LD_LIBRARY_PATH"
        out.append(Command(drop, f"the loader path without {d}"))
    elif res.via == "LD_PRELOAD":
        out.append(Command("unset LD_PRELOAD", f"stop preloading {res.path}"))
    if good_dir and res.via not in ("LD_PRELOAD", "RPATH"):
        out.append(Command(f"export LD_LIBRARY_PATH={good_dir}:$LD_LIBRARY_PATH", "the wheel's copy first"))
    return tuple(out)


def older(a: str | None, b: str | None) -> bool:
    return bool(a and b) and v(a) < v(b)


def better_copy(model: TargetLibraries, res: Resolution) -> str | None:
    """The copy the consumer should get: its own (without the environment), else a newer candidate."""
    if res.without_env and os.path.normpath(res.without_env) != os.path.normpath(res.path or ""):
        return res.without_env
    mine = version_of(model, res.path)
    newer = [c for c in res.candidates if older(mine, version_of(model, c))]
    return newer[0] if newer else None


def shadowing(model: TargetLibraries) -> list[tuple[Resolution, str | None, str]]:
    """(resolution, the copy it should get, why) of every resolution the loader gets wrong."""
    out = []
    for res in model.resolutions:
        if not res.path or res.family in DRIVER_FAMILIES:
            continue
        good = better_copy(model, res)
        if res.missing:
            out.append((res, good, "missing"))
        elif good and older(version_of(model, res.path), version_of(model, good)):
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
            if dist in have and older(have[dist], pinned):
                out.append((fw, dist, pinned, have[dist]))
    return out


def missing_wheel_commands(
    facts: Facts, label: str, python: str, framework: str, family: str | None, venv_creator: str | None = None
) -> tuple[Command, ...]:
    """The commands of :func:`missing_wheel_remedy` (none where it names no exact package)."""
    fw = next((f for f in frameworks_of(facts, label) or [] if f.name == framework), None)
    if fw is not None and fw.name == "torch":
        public, _, local = fw.version.partition("+")
        index = f" --index-url https://download.pytorch.org/whl/{local}" if local.startswith("cu") else ""
        if not local or index:
            return (
                Command(
                    install_command(python, f"torch=={public}{index}", venv_creator),
                    "restore torch's pinned wheels",
                    "changes",
                ),
                Command(pip_command(python, "check", "", venv_creator), "what is still missing or mismatched"),
            )
    stem = WHEEL_STEM.get(family or "")
    if fw is not None and stem and fw.cuda_major:
        return (
            Command(
                install_command(python, f"nvidia-{stem}-cu{fw.cuda_major}", venv_creator),
                "the wheel that ships the library",
                "changes",
            ),
        )
    return ()


def missing_wheel_remedy(
    facts: Facts, label: str, python: str, framework: str, family: str | None, venv_creator: str | None = None
) -> str:
    """Markdown: the exact command that installs a CUDA library a framework needs and cannot find.

    torch pins each ``nvidia-*`` wheel in its metadata, and ``pip install torch==<installed>`` installs the
    dependencies that are missing at those pins (from the index of its ``+cuXYZ`` build); other frameworks
    get the ``nvidia-<stem>-cu<major>`` wheel of the family (PyPI names, ``WHEEL_STEM`` in
    :mod:`gpudoctor.checks.cuda_frameworks`).
    """
    fw = next((f for f in frameworks_of(facts, label) or [] if f.name == framework), None)
    tail = " (or put the directory that holds it on `LD_LIBRARY_PATH`)."
    if fw is not None and fw.name == "torch":
        public, _, local = fw.version.partition("+")
        index = f" --index-url https://download.pytorch.org/whl/{local}" if local.startswith("cu") else ""
        if not local or index:
            return (
                "A dependency wheel of torch was removed or never installed (`pip install --no-deps`, a partial "
                "uninstall). Let pip restore it at the version this torch pins, keeping torch itself:\n\n"
                + fenced(*missing_wheel_commands(facts, label, python, framework, family, venv_creator))
            )
    if fw is not None and family == "tensorrt":
        return (
            f"The file belongs to TensorRT itself ({fw.dist} {fw.version}), whose builder opens it by name when an "
            f"engine is built; this installation lacks it (the 10.2.0 wheels shipped without it, fixed in "
            f"10.2.0.post1), or a tarball's `lib` directory is not on `LD_LIBRARY_PATH`. Install a release that "
            f"ships it:\n\n```\n{install_command(python, '-U ' + fw.dist, venv_creator)}\n```\n\n(or put the TensorRT `lib` "
            f"directory that holds it on `LD_LIBRARY_PATH`)."
        )
    stem = WHEEL_STEM.get(family or "")
    if fw is not None and stem and fw.cuda_major:
        return (
            f"Install the CUDA {fw.cuda_major} wheel that ships it into this environment:\n\n"
            f"{fenced(*missing_wheel_commands(facts, label, python, framework, family, venv_creator))}\n\n({fw.dist} may pin an exact "
            f"version: `{pip_command(python, 'show', fw.dist, venv_creator)}`; or put the directory that holds it on "
            "`LD_LIBRARY_PATH`)."
        )
    return (
        "Install the matching `nvidia-*` wheel into this environment "
        f"(`{install_command(python, '<framework>[and-cuda]', venv_creator)}` "
        f"or the framework's CUDA extra){tail}"
    )


#: the flag PaddlePaddle reads for a family's directory before it searches by name (dynamic_loader.cc)
_PADDLE_FLAGS = {
    "cudnn": "FLAGS_cudnn_dir",
    "cublas": "FLAGS_cublas_dir",
    "cublasLt": "FLAGS_cublas_dir",
    "curand": "FLAGS_curand_dir",
    "cusolver": "FLAGS_cusolver_dir",
    "cusparse": "FLAGS_cusparse_dir",
}
_LABEL = {"cudnn": "cuDNN", "cublas": "cuBLAS", "cublasLt": "cuBLAS", "cudart": "CUDA runtime"}


def _so_major(name: str) -> str:
    """``libcudnn_ops.so.9.1.0`` -> ``9``; "" for an unversioned name."""
    return name.partition(".so")[2].lstrip(".").split(".")[0]


def sibling_remedy(facts: Facts, label: str, python: str, model: TargetLibraries, res: Resolution) -> str | None:
    """Markdown for a library found nowhere under the name a framework asks for while the same library is here
    under another name: only another major (CTranslate2 4.4 opens ``libcudnn.so.8``, cuDNN 9 is installed), or only
    versioned names where the framework opens the unversioned development name (PaddlePaddle's ``libcudnn.so``).
    None when no such copy exists."""
    stem, _, tail = res.needed.partition(".so")
    stem += ".so"
    siblings = [
        c
        for c in model.copies
        if c.name != res.needed and c.name.startswith(stem + ".") and c.name[len(stem) + 1 :].split(".")[0].isdigit()
    ]
    want = tail.lstrip(".").split(".")[0]
    if not siblings and res.family == "cudnn" and want.isdigit():
        # cuDNN renames its sub-libraries across majors (libcudnn_ops_infer.so.8 -> libcudnn_ops.so.9): any cuDNN
        # of another major, the main library first
        siblings = sorted(
            (c for c in model.copies if c.family == "cudnn" and _so_major(c.name) not in ("", want)),
            key=lambda c: not c.name.startswith("libcudnn.so."),
        )
    if not siblings:
        return None
    have = siblings[0]
    fw_name = framework_of(model, res.consumer, res)
    fw = next((f for f in frameworks_of(facts, label) or [] if f.name == fw_name), None)
    what = f"{fw_name} {fw.version}" if fw else fw_name
    if not tail:  # the unversioned development name
        flag = _PADDLE_FLAGS.get(res.family or "") if fw_name.startswith("paddle") else None
        return (
            f"Only the versioned {have.name} is here ({have.path}), but {what} opens the unversioned name "
            f"`{res.needed}`: the development link that only the `-dev` package or NVIDIA's tarball creates, so "
            f"the loader finds nothing. Create the link in that directory:\n\n```\nln -s {have.name} "
            f"{have.directory}/{res.needed}\n```"
            + (f"\n\n(or point `{flag}` at a directory that holds `{res.needed}`)." if flag else "")
        )
    got = _so_major(have.name)
    fam = res.family or ""
    lib = _LABEL.get(fam, fam)
    stem_pkg = WHEEL_STEM.get(fam)
    if fam == "cudnn":
        pin = f"nvidia-cudnn-cu{(fw.cuda_major if fw and fw.cuda_major else 12)}=={want}.*"
        upgrade = agreeing_releases(fw_name, "cudnn_major", int(got)) if got.isdigit() else []
    else:
        pin = f"nvidia-{stem_pkg}-cu{want}" if stem_pkg else ""
        upgrade = agreeing_releases(fw_name, "cuda_major", int(got)) if got.isdigit() else []
    in_wheel = have.origin == "wheel" or "/nvidia/" in have.path
    keepers = [
        f
        for f in frameworks_of(facts, label) or []
        if f.name != fw_name and str(f.cudnn_major if fam == "cudnn" else f.cuda_major) == got
    ]
    ways = []
    if upgrade:
        ways.append(f"move {fw_name} to a release built for {lib} {got}: `{'`, `'.join(upgrade)}`")
    if pin and not (keepers and in_wheel):
        verb = f"replace the {lib} {got} wheel with {lib} {want}" if in_wheel else f"install {lib} {want} beside it"
        ways.append(
            f'{verb}:\n\n```\n{python} -m pip install "{pin}"\n```\n\n(its directory on `LD_LIBRARY_PATH` the way '
            f"{have.directory} is)"
        )
    if keepers and in_wheel:
        ways.append(
            f"keep the {lib} {got} wheel: {keepers[0].dist} {keepers[0].version} here needs {lib} {got}, so "
            f"downgrading it would break that one"
        )
    joined = ". Or ".join(ways)
    return (
        f"{have.name} ({lib} {got}) is here ({have.path}), but {what} opens `{res.needed}` ({lib} {want}): another "
        f"major, which the loader never substitutes. " + (joined[:1].upper() + joined[1:] + "." if joined else "")
    )
