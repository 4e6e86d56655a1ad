"""Check ``cuda.toolkit``: report the CUDA toolkit on disk and what it is (not) for.

PyTorch wheels bundle their own CUDA runtime (``nvidia-*`` wheels), so a
toolkit is needed only to compile CUDA code (extensions, ``nvcc``); a newer
toolkit never makes an old driver run newer CUDA code (NVIDIA CUDA
Compatibility guide). The verdicts about the driver belong to ``nvidia.driver``
and ``cuda.driver``.

- ``CUDA_HOME`` names a missing directory -> ``warn``;
- the toolkit's CUDA major differs from a target torch's ``torch.version.cuda``
  -> ``warn``: ``torch.utils.cpp_extension`` (every ``pip install`` that compiles
  CUDA code: flash-attn, apex, mmcv, pytorch3d, ...) refuses to build with "The
  detected CUDA version (X) mismatches the version that was used to compile
  PyTorch (Y)" (its ``_check_cuda_version``: a different major raises, a
  different minor only warns);
- otherwise ``info`` (no toolkit, no driver) or ``ok``.
"""

from __future__ import annotations

from gpudoctor.checks import require
from gpudoctor.checks._common import (
    distinct_targets,
    driver_version,
    pip_install_command,
    split_local,
    wheel_variants,
)
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.cuda import CudaToolkitFacts
from gpudoctor.facts.targets import ProbeFacts, TargetsFacts
from gpudoctor.model import Check, Command, Finding, Status, fenced
from gpudoctor.versions import v


def evaluate(facts: Facts) -> list[Finding]:
    tk = require(facts, CudaToolkitFacts)
    evidence = {
        "CUDA_HOME": tk.cuda_home or "(unset)",
        "/usr/local/cuda": tk.default_path or "(absent)",
        "nvcc": tk.nvcc or "(not found)",
    }
    if tk.cuda_home_missing:
        evidence["CUDA_HOME"] = f"{tk.cuda_home} (does not exist)"
        found = (
            f"a CUDA toolkit {tk.version} is installed at {tk.default_path}"
            if not isinstance(tk.version, Unavailable) and tk.default_path
            else "no other toolkit was found"
        )
        return [
            CHECK.finding(
                Status.WARN,
                f"CUDA_HOME points at {tk.cuda_home}, which does not exist; {found}",
                f"`CUDA_HOME={tk.cuda_home}` names a directory that is not there (a removed toolkit, or a path "
                f"from another machine). Builds of CUDA extensions (`torch.utils.cpp_extension`, `pip install` of "
                f"packages with CUDA code) read `CUDA_HOME` and fail. "
                + (
                    f"The toolkit at `{tk.default_path}` is the one to use: `export CUDA_HOME={tk.default_path}` "
                    f"(and fix it where it is set: your shell profile, the kernel.json `env`, the Dockerfile)."
                    if tk.default_path
                    else "Unset it (`unset CUDA_HOME`) or install the toolkit it names."
                ),
                evidence=evidence,
                commands=(
                    Command(f"export CUDA_HOME={tk.default_path}", "point builds at the toolkit that is installed")
                    if tk.default_path
                    else Command("unset CUDA_HOME", "stop builds looking for the removed toolkit"),
                ),
            )
        ]
    wrapper = _nvcc_outside_toolkit(tk, evidence)
    if wrapper is not None:
        return [wrapper]
    if isinstance(tk.version, Unavailable):
        return [
            CHECK.finding(
                Status.INFO,
                "no CUDA toolkit installed (not needed to run PyTorch wheels)",
                "PyTorch wheels bring their own CUDA runtime libraries. A toolkit (`nvcc`) is only needed to compile "
                "CUDA extensions; if you need one, install the version matching `torch.version.cuda`.",
                evidence=evidence,
            )
        ]
    evidence["version"] = tk.version
    if isinstance(tk.nvcc_version, str):
        evidence["nvcc_version"] = tk.nvcc_version
    where = tk.nvcc.rsplit("/bin/nvcc", 1)[0] if tk.nvcc else (tk.cuda_home or tk.default_path)
    if tk.nvcc_source:
        evidence["nvcc_source"] = tk.nvcc_source
    if tk.path_nvcc and tk.path_nvcc != tk.nvcc:
        evidence["nvcc_on_PATH"] = tk.path_nvcc
    if tk.toolkits:
        evidence["toolkits"] = ", ".join(f"{t.path} ({t.version or '?'})" for t in tk.toolkits)
    driver = driver_version(facts)
    if driver is None:
        return [
            CHECK.finding(
                Status.INFO,
                f"CUDA toolkit {tk.version} at {where}, but no NVIDIA driver: it can compile CUDA code, not run it",
                f"The toolkit (`nvcc`, headers, libraries) is installed at `{where}`, but CUDA programs need the NVIDIA "
                f"driver (`libcuda.so.1`) to run, and there is none (see `nvidia.driver`). The toolkit does not replace "
                f"the driver, and PyTorch wheels do not use it.",
                evidence=evidence,
            )
        ]
    evidence["driver"] = driver
    mismatch = _major_mismatch(facts, tk, tk.version, where or "")
    if mismatch is not None:
        return [mismatch]
    won = f"; nvcc wins through {WINS[tk.nvcc_source]}" if tk.nvcc_source in WINS else ""
    return [CHECK.finding(Status.OK, f"CUDA toolkit {tk.version} at {where} (driver {driver}{won})", evidence=evidence)]


def _nvcc_outside_toolkit(tk: CudaToolkitFacts, evidence: dict[str, str]) -> Finding | None:
    """A ``warn`` when the nvcc that wins through ``PATH`` sits outside a toolkit tree (a wrapper script such as
    ``/usr/local/bin/nvcc``): ``cpp_extension`` then takes its ``bin/..`` as ``CUDA_HOME`` and finds no headers."""
    if tk.nvcc_source != "PATH" or tk.headers is not False or not tk.nvcc:
        return None
    home = tk.nvcc.rsplit("/bin/nvcc", 1)[0] or "/"
    release = tk.nvcc_version if isinstance(tk.nvcc_version, str) else str(tk.version)
    same = [t for t in tk.toolkits if t.version and ".".join(t.version.split(".")[:2]) == release]
    real = same[-1].path if same else tk.default_path
    fix = (
        f"Point builds at the toolkit itself:\n\n```\nexport CUDA_HOME={real}\n```\n\n(in your shell profile, the "
        f"kernel.json `env`, the Dockerfile `ENV`)."
        if real
        else "Set `CUDA_HOME` to the toolkit directory the wrapper runs (the one with `bin/nvcc` and `include/`)."
    )
    return CHECK.finding(
        Status.WARN,
        f"the nvcc first on PATH ({tk.path_nvcc}) is outside a CUDA toolkit: extension builds take CUDA_HOME={home}, "
        f"which has no CUDA headers",
        f"`CUDA_HOME` is unset, so `torch.utils.cpp_extension` derives it from the first `nvcc` on `PATH`: "
        f"`{tk.path_nvcc}` -> `CUDA_HOME={home}`. That `nvcc` runs (CUDA {release}), but `{home}` is not a toolkit: "
        f"there is no `{home}/include/cuda_runtime_api.h` and no `{home}/lib64`, so the extension's C++ sources that "
        f"include CUDA headers stop with `fatal error: cuda_runtime_api.h: No such file or directory` and the link "
        f"against `-lcudart` fails. {fix}",
        evidence=evidence,
        commands=(
            (Command(f"export CUDA_HOME={real}", "point extension builds at the toolkit the wrapper runs"),)
            if real
            else (Command(f"{tk.path_nvcc} --version", "which CUDA the wrapper runs (its toolkit is CUDA_HOME)"),)
        ),
    )


#: how the nvcc of a build was chosen (``CudaToolkitFacts.nvcc_source``), in words
WINS = {
    "CUDA_HOME": "`CUDA_HOME`",
    "CUDA_PATH": "`CUDA_PATH`",
    "PATH": "the first `nvcc` on `PATH`",
    "/usr/local/cuda": "`/usr/local/cuda` (no `CUDA_HOME`, no `nvcc` on `PATH`)",
}


def _torch_for_toolkit(probe: ProbeFacts, major: str, public: str) -> tuple[str, Command | None]:
    """The second remedy: a torch build of the toolkit's CUDA major (only the major must match for
    extension builds), the installed release when that variant published it (``data/torch_wheels.toml``);
    ("", None) when PyTorch has no variant of that major in the table."""
    rows = [r for r in wheel_variants() if r["cuda"].split(".")[0] == major]
    if not rows:
        return "", None
    same = [r for r in rows if public and v(r["first_torch"]) <= v(public) <= v(r["newest_torch"])]
    row = same[-1] if same else rows[-1]
    cmd = Command(
        pip_install_command(
            probe.executable,
            row,
            public if same else None,
            python_version=probe.python_version,
            venv_creator=probe.venv_creator,
        ),
        f"or a torch built for the toolkit's CUDA {row['cuda']}",
        "changes",
    )
    return (
        f"\n\n2. Or install the torch build for CUDA {row['cuda']} (only the major version has to match the "
        f"toolkit's), provided the driver runs it (see `cuda.driver`):\n\n{fenced(cmd)}"
    ), cmd


def _major_mismatch(facts: Facts, tk: CudaToolkitFacts, version: str, where: str) -> Finding | None:
    """A ``warn`` when a target's torch was built for another CUDA major than this toolkit, or None."""
    targets = facts.of(TargetsFacts)
    if isinstance(targets, Unavailable):
        return None
    tk_major = version.split(".")[0]
    for t in distinct_targets(targets):
        probe = t.probe
        if not isinstance(probe, ProbeFacts) or not probe.torch.cuda or probe.torch.hip:
            continue
        torch_cuda = probe.torch.cuda
        if torch_cuda.split(".")[0] == tk_major:
            continue
        torch_mm = ".".join(torch_cuda.split(".")[:2])
        public = split_local(probe.torch.version or "")[0]
        option2, reinstall = _torch_for_toolkit(probe, tk_major, public)
        same_major = [x for x in tk.toolkits if x.version and x.version.split(".")[0] == torch_cuda.split(".")[0]]
        exact = [x for x in same_major if ".".join((x.version or "").split(".")[:2]) == torch_mm]
        beside = (exact or same_major)[-1] if same_major else None
        won = f", chosen through {WINS[tk.nvcc_source]}" if tk.nvcc_source in WINS else ""
        if beside is not None:
            option1 = (
                f"1. Point builds at the CUDA {beside.version} toolkit already installed at `{beside.path}`"
                f":\n\n```\nexport CUDA_HOME={beside.path}\nexport PATH=$CUDA_HOME/bin:$PATH\n```"
            )
            toolkit: tuple[Command, ...] = (
                Command(
                    f"export CUDA_HOME={beside.path} PATH={beside.path}/bin:$PATH",
                    f"build against the CUDA {beside.version} toolkit already installed",
                ),
            )
        else:
            option1 = (
                f"1. Install a CUDA {torch_mm} toolkit next to this one (NVIDIA's repository: "
                f"`sudo apt-get install cuda-toolkit-{torch_mm.replace('.', '-')}`; conda: `conda install -c nvidia "
                f"cuda-toolkit={torch_mm}`) and point builds at it:\n\n```\nexport CUDA_HOME=/usr/local/cuda-{torch_mm}\n"
                f"export PATH=$CUDA_HOME/bin:$PATH\n```"
            )
            toolkit = (
                Command(
                    f"sudo apt-get install cuda-toolkit-{torch_mm.replace('.', '-')}",
                    f"a CUDA {torch_mm} toolkit beside this one (NVIDIA's repository), then CUDA_HOME to it",
                    "root",
                ),
                Command(
                    f"export CUDA_HOME=/usr/local/cuda-{torch_mm} PATH=/usr/local/cuda-{torch_mm}/bin:$PATH",
                    f"build against the CUDA {torch_mm} toolkit",
                ),
            )
        return CHECK.finding(
            Status.WARN,
            f"the CUDA toolkit at {where} is {version}, but torch {probe.torch.version} in {probe.executable} was "
            f"built with CUDA {torch_cuda}: building CUDA extensions fails",
            f"PyTorch wheels do not need a toolkit to *run*, but every build of CUDA code against torch "
            f"(`pip install flash-attn`, apex, mmcv, pytorch3d, `torch.utils.cpp_extension`, "
            f"`python setup.py build_ext`) uses the toolkit at `{where}`{won} (the order: `CUDA_HOME`, else `nvcc` "
            f"on `PATH`, else `/usr/local/cuda`) and stops with:\n\n```\nThe detected CUDA version ({'.'.join(version.split('.')[:2])}"
            f") mismatches the version that was used to compile\nPyTorch ({torch_mm}). Please make sure to use the "
            f"same CUDA versions.\n```\n\nMake the two agree, one of these ways:\n\n" + option1 + option2,
            evidence={
                "toolkit": version,
                "toolkit_path": where,
                "torch": probe.torch.version,
                "torch.version.cuda": torch_cuda,
            },
            target=t.label,
            commands=toolkit + ((reinstall,) if reinstall else ()),
        )
    return None


CHECK = Check(
    id="cuda.toolkit",
    title="CUDA toolkit on disk (nvcc) and what it is for",
    needs=("cuda_toolkit", "nvidia", "targets"),
    evaluate=evaluate,
)
