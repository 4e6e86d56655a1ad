"""Check ``torch.extensions.compiler``: is the host compiler inside the range the winning nvcc accepts?

Every build of CUDA code (``torch.utils.cpp_extension``: flash-attn, apex, xformers, mamba, custom
ops; CMake projects; plain ``nvcc``) hands the host half of each ``.cu`` file to a C++ compiler, and
nvcc accepts only the compiler majors its CUDA release supports: ``include/crt/host_config.h`` stops
with "#error -- unsupported GNU version! gcc versions later than N are not supported!" (NVIDIA CUDA
Installation Guide for Linux, "Host Compiler Support Policy"). PyTorch binary builds check the same
bounds first ("The current installed version of g++ (X) is greater than the maximum required version
by CUDA Y", ``torch/utils/cpp_extension.py``). The ranges per release: ``data/host_compilers.toml``,
each row citing the archived guide of that release.

The compiler judged is the one the build uses: ``$CC`` (``cpp_extension`` passes ``-ccbin $CC``),
else ``$NVCC_CCBIN``, else ``g++`` on ``PATH``; ``$CXX`` (the extension's C++ sources, and PyTorch's own
bound check) and ``$CUDAHOSTCXX`` (CMake builds) are judged too.

- the first of those outside the range of the nvcc that wins -> ``fail``: the remedy installs a
  supported gcc in the user's words (apt ``gcc-N``, dnf ``gcc-toolset-N``, zypper ``gccN``, conda's
  ``gxx_linux-64=N``), points the build at it (``CC``/``CXX``, ``NVCC_CCBIN``, ``CUDAHOSTCXX``), names
  the CUDA releases that accept the compiler as it is, and the ``-allow-unsupported-compiler`` escape
  hatch as such;
- inside, but another explicitly named one (``NVCC_CCBIN``, ``CXX``, ``CUDAHOSTCXX``) outside -> ``warn``;
- all inside -> ``ok``; no nvcc, its release unknown or without a sourced row, no compiler version
  -> ``skip``.
"""

from __future__ import annotations

from typing import Any

from gpudoctor.checks import SkipCheck, require
from gpudoctor.checks._common import distro_family
from gpudoctor.data import load_table
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.cuda import CudaToolkitFacts, HostCompiler
from gpudoctor.facts.host import OsFacts
from gpudoctor.facts.targets import ProbeFacts, TargetsFacts
from gpudoctor.model import Check, Command, Finding, Status

#: what each source means, in the words of the explanation
SOURCE_WORDS = {
    "CC": "`$CC` (torch.utils.cpp_extension passes `-ccbin $CC` to nvcc)",
    "NVCC_CCBIN": "`$NVCC_CCBIN` (nvcc's host compiler when no `-ccbin` is given)",
    "PATH": "`g++` on `PATH` (nvcc's default host compiler)",
    "CXX": "`$CXX` (the compiler of the extension's C++ sources, which a PyTorch binary build checks against "
    "CUDA's bounds before it compiles)",
    "CUDAHOSTCXX": "`$CUDAHOSTCXX` (the host compiler CMake gives nvcc)",
}


def cuda_release(text: str) -> str | None:
    """``"12.4.131"`` / ``"12.4"`` -> ``"12.4"``; None when unparsable."""
    parts = text.split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return f"{int(parts[0])}.{int(parts[1])}"


def range_row(release: str) -> dict[str, Any] | None:
    """The ``data/host_compilers.toml`` row of CUDA ``X.Y``, or None when the table has none."""
    return next((r for r in load_table("host_compilers")["release"] if r["cuda"] == release), None)


def accepting_releases(kind: str, major: int) -> list[str]:
    """The CUDA releases (``X.Y``) in the table whose range includes ``kind`` ``major``."""
    out = []
    for r in load_table("host_compilers")["release"]:
        lo, hi = r.get(kind, (0, -1))
        if (not lo or lo <= major) and major <= hi:
            out.append(r["cuda"])
    return out


def _major(version: str) -> int | None:
    head = version.split(".")[0]
    return int(head) if head.isdigit() else None


def _in_range(row: dict[str, Any], hc: HostCompiler) -> tuple[bool, tuple[int, int]] | None:
    """(inside, (min, max)) for a compiler with a known kind and version, None when the row has no range for it."""
    if hc.kind is None or not isinstance(hc.version, str) or hc.kind not in row:
        return None
    major = _major(hc.version)
    if major is None:
        return None
    lo, hi = row[hc.kind]
    return (not lo or lo <= major) and major <= hi, (lo, hi)


def _in_conda(facts: Facts, tk: CudaToolkitFacts, hc: HostCompiler) -> bool:
    """Is the build environment a conda environment (its compiler, its nvcc, or the target's prefix)?"""
    if "conda" in hc.command or (tk.nvcc and ("/envs/" in tk.nvcc or "conda" in tk.nvcc)):
        return True
    targets = facts.of(TargetsFacts)
    if isinstance(targets, Unavailable):
        return False
    for t in targets.targets:
        probe = t.probe
        if isinstance(probe, ProbeFacts) and probe.env.get("CONDA_PREFIX"):
            return True
    return False


def _install(facts: Facts, conda: bool, n: int) -> tuple[Command | None, str, str]:
    """(install command or None, CC, CXX) for gcc ``n`` in the user's platform; None where the distribution has
    no side-by-side gcc package gpudoctor can name (Fedora, unknown distributions)."""
    if conda:
        text = f'conda install -c conda-forge "gcc_linux-64={n}" "gxx_linux-64={n}"'
        return (
            Command(
                text, f"gcc {n} into this conda environment (reactivate it: its activation sets CC/CXX)", "changes"
            ),
            "x86_64-conda-linux-gnu-cc",
            "x86_64-conda-linux-gnu-c++",
        )
    family = distro_family(facts)
    os_facts = facts.of(OsFacts)
    if family == "rhel" and not isinstance(os_facts, Unavailable) and os_facts.id != "fedora":
        return (
            Command(f"sudo dnf install gcc-toolset-{n}", f"gcc {n} beside the system compiler", "root"),
            f"/opt/rh/gcc-toolset-{n}/root/usr/bin/gcc",
            f"/opt/rh/gcc-toolset-{n}/root/usr/bin/g++",
        )
    if family == "suse":
        install = Command(f"sudo zypper install gcc{n} gcc{n}-c++", f"gcc {n} beside the system compiler", "root")
        return install, f"gcc-{n}", f"g++-{n}"
    if family == "debian":
        install = Command(f"sudo apt-get install gcc-{n} g++-{n}", f"gcc {n} beside the system compiler", "root")
        return install, f"gcc-{n}", f"g++-{n}"
    return None, f"gcc-{n}", f"g++-{n}"


def evaluate(facts: Facts) -> list[Finding]:
    tk = require(facts, CudaToolkitFacts)
    if not tk.nvcc:
        raise SkipCheck("no nvcc: nothing here compiles CUDA extensions")
    found = tk.nvcc_version if isinstance(tk.nvcc_version, str) else tk.version
    release = cuda_release(found) if isinstance(found, str) else None
    if release is None:
        raise SkipCheck(f"the CUDA release of {tk.nvcc} is unknown")
    row = range_row(release)
    if row is None:
        raise SkipCheck(f"no sourced host-compiler range for CUDA {release} (data/host_compilers.toml)")
    if not tk.host_compilers:
        raise SkipCheck(f"no host compiler was looked at for {tk.nvcc}")
    hc = tk.host_compilers[0]
    judged = _in_range(row, hc)
    if judged is None:
        what = (
            f"{hc.command}'s version is unknown ({hc.version})"
            if not isinstance(hc.version, str) or hc.kind is None
            else f"the table has no {hc.kind} range for CUDA {release}"
        )
        raise SkipCheck(f"host compiler {hc.command}: {what}")
    inside, (lo, hi) = judged
    evidence = {
        "nvcc": tk.nvcc,
        "cuda": release,
        "host_compiler": f"{hc.command} ({hc.kind} {hc.version}, from {hc.source})",
        f"{hc.kind}_range": f"{lo or 'any'}..{hi}",
        "source": row["guide"],
    }
    if not inside:
        return [_out_of_range(facts, tk, hc, row, release, (lo, hi), evidence)]
    others = [
        (o, r)
        for o in tk.host_compilers[1:]
        if o.source in ("NVCC_CCBIN", "CXX", "CUDAHOSTCXX") and (r := _in_range(row, o)) is not None and not r[0]
    ]
    if others:
        o, (_, (olo, ohi)) = others[0]
        return [
            CHECK.finding(
                Status.WARN,
                f"{o.command} ({o.kind} {o.version}, from {o.source}) is outside CUDA {release}'s range "
                f"({o.kind} {olo or ''}..{ohi}), though {hc.command} is inside",
                f"A `torch.utils.cpp_extension` build uses {SOURCE_WORDS[hc.source]}: `{hc.command}` "
                f"({hc.kind} {hc.version}), which nvcc {release} accepts. But {SOURCE_WORDS[o.source]} names "
                f"`{o.command}` ({o.kind} {o.version}), which it refuses (`{row['host_config']}`); builds that "
                f"use it fail. Point it at the same compiler: `export {o.source}={hc.command}`.\n\n"
                f"Source: {row['guide']}",
                evidence=evidence,
            )
        ]
    return [
        CHECK.finding(
            Status.OK,
            f"host compiler {hc.command} ({hc.kind} {hc.version}) is inside the range of nvcc {release} "
            f"({hc.kind} {lo or ''}..{hi})",
            evidence=evidence,
        )
    ]


def _out_of_range(
    facts: Facts,
    tk: CudaToolkitFacts,
    hc: HostCompiler,
    row: dict[str, Any],
    release: str,
    bounds: tuple[int, int],
    evidence: dict[str, str],
) -> Finding:
    lo, hi = bounds
    major = _major(str(hc.version)) or 0
    kind = hc.kind or "gcc"
    too_new = major > hi
    conda = _in_conda(facts, tk, hc)
    n = hi if too_new or kind == "clang" else max(lo, hi)
    install, cc, cxx = _install(facts, conda, n)
    accepting = [r for r in accepting_releases(kind, major) if r.split(".")[0] == release.split(".")[0]] or (
        accepting_releases(kind, major)
    )
    wording = (
        f"{kind} versions later than {hi} are not supported"
        if too_new
        else f"{kind} {major} is older than the oldest {kind} ({lo}) CUDA {release} supports"
    )
    commands = (
        *((install,) if install else ()),
        Command(
            f"export CC={cc} CXX={cxx} NVCC_CCBIN={cxx} CUDAHOSTCXX={cxx}",
            "point extension builds (CC), plain nvcc (NVCC_CCBIN) and CMake (CUDAHOSTCXX) at it",
            "changes",
        ),
    )
    newer = (
        f"\n\n2. **Or use a CUDA toolkit that accepts {kind} {major}**: CUDA {', '.join(accepting)} (keep its major "
        f"equal to the framework's CUDA, `torch.version.cuda`, and put it first: `export CUDA_HOME=...`)."
        if accepting
        else ""
    )
    return CHECK.finding(
        Status.FAIL,
        f"host compiler {hc.command} ({kind} {hc.version}) is outside nvcc {release}'s range ({kind} "
        f"{lo or ''}..{hi}): CUDA extension builds stop",
        f"CUDA extension builds (`pip install flash-attn`, apex, xformers, `torch.utils.cpp_extension`, CMake) "
        f"compile with `{tk.nvcc}` (CUDA {release}), which hands the host code to {SOURCE_WORDS[hc.source]}: "
        f"`{hc.command}`, {kind} {hc.version}. CUDA {release} supports {kind} {lo or 'any'} to {hi} (NVIDIA CUDA "
        f"Installation Guide for Linux, {row['guide']}), so its `host_config.h` stops the build with\n\n"
        f"```\n#error -- unsupported GNU version! {wording}!\n```\n\n"
        f'(a PyTorch binary build refuses even earlier: "The current installed version of {hc.command} '
        f"({hc.version}) is {'greater than the maximum' if too_new else 'less than the minimum'} required version "
        f'by CUDA {release}").\n\n'
        f"1. **Install {kind if kind == 'gcc' else 'gcc'} {n}** and point the build at it"
        + (" (in this conda environment, from conda-forge)" if conda else "")
        + (
            ""
            if install
            else f" (this distribution has no side-by-side gcc {n} package gpudoctor knows: install one, or use "
            f'conda-forge\'s compilers, `conda install -c conda-forge "gxx_linux-64={n}"`, and set `CC`/`CXX` to them)'
        )
        + ":\n\n```\n"
        + "\n".join(c.text for c in commands)
        + "\n```\n\nthen rebuild without the cached wheel (`pip install --no-cache-dir --no-build-isolation ...`)."
        + newer
        + "\n\nLast resort, not a fix: nvcc's escape hatch `-allow-unsupported-compiler` (e.g. "
        "`export NVCC_APPEND_FLAGS=-allow-unsupported-compiler`) skips the version check; NVIDIA warns that an "
        "unsupported host compiler may cause compilation failure or incorrect run-time execution.",
        evidence=evidence,
        commands=commands,
    )


CHECK = Check(
    id="torch.extensions.compiler",
    title="the host compiler of CUDA extension builds is inside the range the winning nvcc supports",
    needs=("cuda_toolkit", "targets", "os"),
    evaluate=evaluate,
)
