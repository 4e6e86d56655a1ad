"""Check ``torch.compile``: can inductor build its helpers in each target?

``torch.compile`` (inductor) compiles C/C++ at run time: on GPU, Triton builds
a small C module (``cuda_utils``) with the C compiler (``$CC``, else gcc) against
the running interpreter's ``Python.h``; on CPU, inductor builds C++ with
``$CXX``/g++, also against ``Python.h``. Eager mode works without them, so the
failure shows up only at the first compiled call ("fatal error: Python.h: No
such file or directory", pytorch/pytorch issue #129351).

- ``Python.h`` for the target's own Python version missing -> ``fail`` with the
  package for this distro (``python3.10-dev`` ...);
- the compiler missing -> ``fail`` with the package;
- a CUDA build on a GPU machine without an importable Triton -> ``fail``;
- Triton links its launcher with ``gcc ... -lcuda``: no 64-bit unversioned
  ``libcuda.so`` in any directory it passes (``TRITON_LIBCUDA_PATH``, the
  directories of the ld.so cache's ``libcuda`` entries), ``LIBRARY_PATH`` or the
  linker's defaults -> ``fail`` ("cannot find -lcuda"; pytorch/pytorch #123159,
  triton-lang/triton PR #1981);
- torch older than 2.0 -> ``skip`` (no ``torch.compile``; 2.0 nightlies and NGC ``2.0.0a0`` builds have it);
- otherwise ``info``: inductor's prerequisites are met.
"""

from __future__ import annotations

from typing import Any

from gpudoctor.checks._common import install_command, split_local
from gpudoctor.checks._gpu import has_nvidia_gpu, per_target, v
from gpudoctor.checks._platform import platform_of
from gpudoctor.data import load_table
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.host import OsFacts
from gpudoctor.facts.libraries import CudaLibrariesFacts, LinkDir
from gpudoctor.facts.targets import ProbeFacts, TargetFacts
from gpudoctor.model import Check, Command, Finding, Status, fenced

DEBIAN_LIKE = {"debian", "ubuntu", "linuxmint", "pop", "raspbian"}
RPM_LIKE = {"fedora", "rhel", "centos", "rocky", "almalinux", "amzn", "ol"}


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def rpm_devel_package(distro: str, release: str, mm: str) -> tuple[str, str]:
    """(package, note): the RPM that ships ``Python.h`` for Python ``mm`` on ``distro`` ``release``.

    ``python3-devel`` holds only the headers of the release's system Python; every other version has its
    own (``python3.11-devel``; RHEL 8: ``python39-devel``). Table: ``data/platform.toml`` [[python_devel]].
    """
    major = release.split(".")[0]
    row = next(
        (r for r in load_table("platform")["python_devel"] if distro in r["id"] and r["major"] == major),
        None,
    )
    if row is None:
        return (
            f"python{mm}-devel",
            f"(when Python {mm} is this release's system `python3`, the package is `python3-devel`).",
        )
    if row["system"] == mm:
        return "python3-devel", f"(Python {mm} is the system `python3` of {distro} {major}.)"
    return (
        row["others"].get(mm, f"python{mm}-devel"),
        f"(`python3-devel` would install the headers of the system Python {row['system']}, not of {mm}.)",
    )


def headers_remedy(facts: Facts, probe: ProbeFacts) -> str:
    """The exact command that installs Python.h for this interpreter."""
    mm = _minor(probe.python_version)
    if probe.is_conda:
        return (
            f"This is a conda environment: its `python` package ships the headers. Reinstall it:\n\n```\n"
            f"conda install --force-reinstall -p {probe.prefix} python={mm}\n```"
        )
    if not probe.include_dir.startswith("/usr/include"):
        return (
            f"This interpreter (base `{probe.base_prefix}`) is not the distribution's; it was installed without "
            f"headers. Reinstall it with them (pyenv: `pyenv install --force {probe.python_version}`; uv: "
            f"`uv python install --reinstall {mm}`; a source build: `make install`, not `make altinstall` of a "
            f"partial tree)."
        )
    os_facts = facts.of(OsFacts)
    distro = "" if isinstance(os_facts, Unavailable) else os_facts.id
    if distro in DEBIAN_LIKE:
        return (
            f"Install the headers for Python {mm}:\n\n```\nsudo apt-get install python{mm}-dev\n```\n\n"
            f"(deadsnakes builds: the same `python{mm}-dev` from that PPA)."
        )
    if distro in RPM_LIKE:
        release = "" if isinstance(os_facts, Unavailable) else os_facts.version
        package, note = rpm_devel_package(distro, release, mm)
        return f"Install the headers for Python {mm}:\n\n```\nsudo dnf install {package}\n```\n\n{note}"
    if distro == "alpine":
        return "Install the headers:\n\n```\nsudo apk add python3-dev\n```"
    if distro in {"opensuse-leap", "opensuse-tumbleweed", "sles"}:
        return f"Install the headers:\n\n```\nsudo zypper install python{mm.replace('.', '')}-devel\n```"
    return (
        f"Install your distribution's development package for Python {mm} (Debian/Ubuntu `python{mm}-dev`, "
        f"Fedora/RHEL `python{mm}-devel`)."
    )


def install_commands(facts: Facts, probe: ProbeFacts | None = None) -> tuple[Command, ...]:
    """The command of :func:`headers_remedy` (``probe`` given) or :func:`compiler_remedy`, for this
    distribution; empty when there is no single one."""
    os_facts = facts.of(OsFacts)
    distro = "" if isinstance(os_facts, Unavailable) else os_facts.id
    if probe is not None:
        mm = _minor(probe.python_version)
        if probe.is_conda:
            text = f"conda install --force-reinstall -p {probe.prefix} python={mm}"
            return (Command(text, "the environment's Python with its headers", "changes"),)
        if not probe.include_dir.startswith("/usr/include"):
            return ()
        if distro in DEBIAN_LIKE:
            package = f"sudo apt-get install python{mm}-dev"
        elif distro in RPM_LIKE:
            release = "" if isinstance(os_facts, Unavailable) else os_facts.version
            package = f"sudo dnf install {rpm_devel_package(distro, release, mm)[0]}"
        elif distro == "alpine":
            package = "sudo apk add python3-dev"
        else:
            return ()
        return (Command(package, f"the headers (Python.h) of Python {mm}", "root"),)
    text = {"alpine": "sudo apk add build-base"}.get(distro, "")
    install = {"alpine": "apk add --no-cache build-base"}.get(distro, "")
    if distro in DEBIAN_LIKE:
        text, install = "sudo apt-get install build-essential", "apt-get update && apt-get install -y build-essential"
    elif distro in RPM_LIKE:
        text, install = "sudo dnf install gcc gcc-c++", "dnf install -y gcc gcc-c++"
    engine = _engine(os_facts)
    if text and engine in {"apptainer", "singularity"}:  # a read-only image: its definition file
        return (
            Command(f"%post\n    {install}", "a C/C++ compiler, in the definition file's %post; rebuild", "changes"),
        )
    if text and engine is not None:  # installed in a running container it is gone when it is recreated
        return (Command(f"RUN {install}", "a C/C++ compiler, in the image's Dockerfile/Containerfile", "changes"),)
    return (Command(text, "a C/C++ compiler", "root"),) if text else ()


def _engine(os_facts: OsFacts | Unavailable) -> str | None:
    """The container engine the process runs in (``container`` when unknown), or None on a host."""
    if isinstance(os_facts, Unavailable) or not os_facts.container.in_container:
        return None
    return os_facts.container.kind or "container"


def compiler_remedy(facts: Facts, which: str) -> str:
    """How to install gcc and g++ (Triton builds C, inductor's CPU path C++) where the user is: on a host
    with the distribution's package manager; in a container, in the image (a package installed in a
    running container is gone when it is recreated); under Apptainer/Singularity, whose image is
    read-only, in the definition file's ``%post`` and a rebuild."""
    os_facts = facts.of(OsFacts)
    distro = "" if isinstance(os_facts, Unavailable) else os_facts.id
    if distro in DEBIAN_LIKE:
        install = "apt-get update && apt-get install -y build-essential"
        host = "sudo apt-get install build-essential"
    elif distro in RPM_LIKE:
        install = "dnf install -y gcc gcc-c++"
        host = "sudo dnf install gcc gcc-c++"
    elif distro == "alpine":
        install = "apk add --no-cache build-base"
        host = "sudo apk add build-base"
    else:
        return f"Install a {which} compiler (gcc and g++) with your package manager, or set `CC`/`CXX` to one."
    engine = _engine(os_facts)
    if engine is None:
        return f"```\n{host}\n```"
    if engine in {"apptainer", "singularity"}:
        return (
            f"The container image is read-only: add the compilers to its definition file and rebuild it:\n\n"
            f"```\n%post\n    {install}\n```"
        )
    return (
        f"Put the compilers in the image (installed in a running container they are gone when it is "
        f"recreated), in its Dockerfile/Containerfile:\n\n```\nRUN {install}\n```"
    )


def _is_32bit(d: LinkDir) -> bool:
    if d.arch_tag is not None:
        return "64" not in d.arch_tag
    return d.elf_class == 32 or "i386" in d.path or "lib32" in d.path


def driver_dir64(link_dirs: tuple[LinkDir, ...]) -> str:
    """The directory of the 64-bit driver library, where the ``libcuda.so`` link belongs.

    The ld.so cache tag decides (``libc6,x86-64`` / ``libc6,AArch64`` vs ``libc6`` = 32-bit: RHEL keeps
    the 32-bit copy in ``/usr/lib``, Debian in ``/usr/lib/i386-linux-gnu``); without cache entries the
    multiarch directory when it exists, else ``/usr/lib64``.
    """
    cached = [d.path for d in link_dirs if d.origin == "ld.so cache" and not _is_32bit(d)]
    if cached:
        return cached[0]
    defaults = [d.path for d in link_dirs if d.origin == "default"]
    for candidate in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64"):
        if candidate in defaults:
            return candidate
    return "/usr/lib/x86_64-linux-gnu"


def libcuda_link(
    facts: Facts, t: TargetFacts, probe: ProbeFacts
) -> tuple[str, str, dict[str, Any], tuple[Command, ...]] | None:
    """(summary, explanation, evidence, commands) when ``gcc -lcuda`` cannot find a 64-bit ``libcuda.so``, else
    None."""
    cl = facts.of(CudaLibrariesFacts)
    if isinstance(cl, Unavailable):
        return None
    model = next((m for m in cl.targets if m.label == t.label), None)
    if model is None or not model.link_dirs:
        return None
    usable = [
        d
        for d in model.link_dirs
        if d.unversioned
        and d.elf_class != 32
        and not (d.arch_tag is not None and d.elf_class is None and "64" not in d.arch_tag)
    ]
    if usable:
        return None
    wrong = [d for d in model.link_dirs if d.unversioned]
    dir64 = driver_dir64(model.link_dirs)
    skipped = (
        f" The only `libcuda.so` is the 32-bit one in `{wrong[0].path}`"
        f"{' (ld.so cache tag `' + wrong[0].arch_tag + '`)' if wrong[0].arch_tag else ''}, which `ld` skips "
        f"as incompatible."
        if wrong
        else ""
    )
    evidence = {
        "link_dirs": [
            f"{d.path} ({d.origin}): libcuda.so "
            f"{'present, ' + str(d.elf_class or '?') + '-bit' if d.unversioned else 'absent'}"
            for d in model.link_dirs
        ]
    }
    summary = (
        "torch.compile on the GPU cannot link its launcher: no 64-bit libcuda.so on the linker path "
        "(`cannot find -lcuda`)"
    )
    explanation = (
        f"Triton builds a small C launcher with `gcc ... -lcuda` at the first compiled call. The linker needs the "
        f"*unversioned* `libcuda.so` (only `libcuda.so.1` is needed at run time, which is why eager mode works).{skipped}"
        f" Searched: {', '.join(f'`{d.path}` ({d.origin})' for d in model.link_dirs)}.\n\nWith root, add the "
        f"development link once:\n\n```\nsudo ln -s libcuda.so.1 {dir64}/libcuda.so && sudo ldconfig\n```\n\n"
        f"(or install the distribution package of the same driver branch that ships that link). Without root, give "
        f"the linker a directory that has one, for link time only:\n\n```\nmkdir -p ~/.local/lib/cuda-link\n"
        f"ln -s {dir64}/libcuda.so.1 ~/.local/lib/cuda-link/libcuda.so\nexport LIBRARY_PATH=~/.local/lib/cuda-link\n"
        f"```\n\n(newer Triton also reads `TRITON_LIBCUDA_PATH`). Never put the toolkit's `stubs` directory on "
        f"`LD_LIBRARY_PATH`. Clear `~/.triton/cache` afterwards."
    )
    p = platform_of(facts)
    if p is not None and p.in_container:
        explanation += (
            f"\n\nIn a container the NVIDIA runtime mounts only `libcuda.so.1` at start, and a link made inside "
            f"the container is gone when it is recreated: put it in the image instead, `RUN ln -s libcuda.so.1 "
            f"{dir64}/libcuda.so` in the Dockerfile (dangling at build time, valid once the driver is mounted)."
        )
    commands = (
        Command(f"sudo ln -s libcuda.so.1 {dir64}/libcuda.so && sudo ldconfig", "the link the linker needs", "root"),
        Command(
            f"mkdir -p ~/.local/lib/cuda-link && ln -s {dir64}/libcuda.so.1 ~/.local/lib/cuda-link/libcuda.so "
            "&& export LIBRARY_PATH=~/.local/lib/cuda-link",
            "or without root: a link for link time only",
        ),
    )
    return summary, explanation, evidence, commands


def assess(facts: Facts, t: TargetFacts, probe: ProbeFacts) -> Finding:
    """The ``torch.compile`` finding for one target (pure)."""
    tf = probe.torch
    if not tf.installed or not tf.import_ok:
        what = "is not installed" if not tf.installed else "does not import"
        return CHECK.finding(Status.SKIP, f"torch {what} in {probe.executable} (see torch.install)", target=t.label)
    # the release part: 2.0 pre-releases and nightlies (2.0.0.dev20230120, 2.0.0a0+1767026) have torch.compile
    if tf.version and v(v(split_local(tf.version)[0]).base_version) < v("2.0"):
        return CHECK.finding(
            Status.SKIP, f"torch {tf.version} has no torch.compile (it arrived in torch 2.0)", target=t.label
        )
    tc = probe.toolchain
    if isinstance(tc, Unavailable):
        return CHECK.finding(Status.SKIP, f"the toolchain was not probed: {tc.reason}", target=t.label)
    gpu_path = bool(tf.cuda) and bool(has_nvidia_gpu(facts))
    mm = _minor(probe.python_version)
    evidence = {
        "python": probe.executable,
        "python_version": probe.python_version,
        "Python.h": tc.python_h_path,
        "python_h_present": tc.python_h,
        "cc": tc.cc,
        "cxx": tc.cxx,
        "other_python_headers": list(tc.other_python_headers),
    }
    triton = probe.triton
    if not isinstance(triton, Unavailable):
        evidence["triton"] = triton.version if triton.installed else None
    if not tc.python_h:
        others = ""
        if tc.other_python_headers:
            others = (
                f" Headers exist only for other versions ({', '.join(f'`{d}`' for d in tc.other_python_headers)}),"
                f" which is why the same code may compile under another interpreter."
            )
        return CHECK.finding(
            Status.FAIL,
            f"Python.h for Python {mm} is missing ({tc.python_h_path}): torch.compile cannot build its helpers",
            f"`torch.compile` compiles a small C module against the running interpreter's headers; for "
            f"`{probe.executable}` (Python {probe.python_version}) that is `{tc.python_h_path}`, which does not "
            f"exist, so the first compiled call fails with `fatal error: Python.h: No such file or directory` "
            f"(eager mode is unaffected).{others}\n\n{headers_remedy(facts, probe)}\n\nThen re-run; clear "
            f"`/tmp/torchinductor_$USER` and `~/.triton/cache` only if stale builds keep failing.",
            evidence=evidence,
            target=t.label,
            commands=install_commands(facts, probe),
        )
    needed = [("C", tc.cc)] if gpu_path else [("C++", tc.cxx)]
    missing = [kind for kind, found in needed if not found]
    if missing:
        kind = missing[0]
        also = (
            " Nor is there a C++ compiler (`CXX` unset, no g++), which inductor needs for graphs that run on the "
            'CPU (CPU tensors, `device="cpu"` models) even on a GPU machine.'
            if gpu_path and not tc.cxx
            else ""
        )
        return CHECK.finding(
            Status.FAIL,
            f"no {kind} compiler for torch.compile in {probe.executable}",
            f"`torch.compile` ({'Triton' if gpu_path else 'inductor CPU backend'}) needs a {kind} compiler at run time "
            f"and none was found (`{'CC' if kind == 'C' else 'CXX'}` unset; gcc/cc/clang not on PATH).{also}\n\n"
            + compiler_remedy(facts, kind),
            evidence=evidence,
            target=t.label,
            commands=install_commands(facts),
        )
    if gpu_path and not isinstance(triton, Unavailable) and (not triton.installed or not triton.import_ok):
        detail = triton.import_error if triton.installed else "not installed"
        reinstall = Command(
            install_command(
                probe.executable,
                f"--force-reinstall torch=={tf.version.split('+')[0] if tf.version else ''}"
                f" --index-url https://download.pytorch.org/whl/cu{(tf.cuda or '').replace('.', '')}",
                probe.venv_creator,
            ),
            "torch with the Triton it pins",
            "changes",
        )
        return CHECK.finding(
            Status.FAIL,
            f"Triton is unusable in {probe.executable} ({detail}): torch.compile cannot target the GPU",
            f"Inductor generates GPU kernels with Triton. Install the version torch pins:\n\n{fenced(reinstall)}",
            evidence=evidence,
            target=t.label,
            commands=(reinstall,),
        )
    if gpu_path:
        link = libcuda_link(facts, t, probe)
        if link is not None:
            return CHECK.finding(
                Status.FAIL, link[0], link[1], evidence={**evidence, **link[2]}, target=t.label, commands=link[3]
            )
    tools = tc.cc if gpu_path else tc.cxx
    extra = f", triton {triton.version}" if gpu_path and not isinstance(triton, Unavailable) else ""
    return CHECK.finding(
        Status.INFO,
        f"torch.compile prerequisites met: {tools}, Python.h for {mm}{extra}",
        evidence=evidence,
        target=t.label,
    )


CHECK = Check(
    id="torch.compile",
    title="torch.compile toolchain: C/C++ compiler, Python.h of the target's Python, Triton",
    needs=("targets", "os", "gpu", "nvidia", "cuda_libraries", "platform"),
    evaluate=per_target("torch.compile", assess),
)
