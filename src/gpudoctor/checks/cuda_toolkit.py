"""Check ``cuda.toolkit``: report the CUDA toolkit on disk and what it is (not) for.

PyTorch wheels bundle their own CUDA runtime (``nvidia-*`` wheels), so a
toolkit is needed only to compile CUDA code (extensions, ``nvcc``); a newer
toolkit never makes an old driver run newer CUDA code (NVIDIA CUDA
Compatibility guide). Always ``info`` or ``ok``: the verdicts about the
driver belong to ``nvidia.driver`` and ``cuda.driver``.
"""

from __future__ import annotations

from gpudoctor.checks import require
from gpudoctor.checks._common import driver_version
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.cuda import CudaToolkitFacts
from gpudoctor.model import Check, Finding, Status


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
            )
        ]
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
    where = tk.cuda_home or tk.default_path
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
    return [CHECK.finding(Status.OK, f"CUDA toolkit {tk.version} at {where} (driver {driver})", evidence=evidence)]


CHECK = Check(
    id="cuda.toolkit",
    title="CUDA toolkit on disk (nvcc) and what it is for",
    needs=("cuda_toolkit", "nvidia"),
    evaluate=evaluate,
)
