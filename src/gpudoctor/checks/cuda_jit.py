"""Check ``cuda.jit``: is the PTX assembler a framework compiles with newer than the driver's CUDA?

JAX/XLA compile every kernel at run time: LLVM emits PTX, ``ptxas`` turns it
into SASS. XLA takes ``ptxas`` from the ``nvidia-cuda-nvcc-cu<N>`` wheel
(``jax[cuda12]`` installs it), else from a CUDA toolkit (``CUDA_HOME`` /
``PATH``). When that ``ptxas`` is of a newer CUDA than the driver supports,
XLA warns "The NVIDIA driver's CUDA version is 12.2 which is older than the
ptxas CUDA version (12.3.107). Because the driver is older than the ptxas
version, XLA is disabling parallel compilation" (xla/service/gpu/nvptx_compiler.cc;
jax-ml/jax#19821) and every compile is serial; across a CUDA major, nothing
compiled by it loads. NVIDIA CUDA Compatibility guide: code from a newer
toolkit's PTX compiler needs a driver of at least that toolkit's version
(minor-version compatibility does not cover JIT).

Evidence: the target's ``nvidia-*`` wheels (``cuda_wheels`` domain), the CUDA
toolkit found on disk (``cuda_toolkit``), the driver's CUDA (NVML or
``cuDriverGetVersion``), and the frameworks installed (``cuda_libraries``).

- the wheel's / toolkit's ptxas of another CUDA major than the driver, with JAX
  installed -> ``fail``; of a newer minor -> ``warn``; both name the two versions
  and the choices (a newer driver; the wheel pinned to the driver's CUDA; the
  forward-compatibility package on data-center GPUs);
- Numba (``numba-cuda``, ``numba``) compiles kernels with NVVM (``libnvvm`` of the same
  ``nvidia-cuda-nvcc-cu<N>`` wheel, else the toolkit's) to PTX and has the *driver* JIT-link it
  (``cuLinkAddData``): PTX of a newer CUDA than the driver's is refused with
  ``CUDA_ERROR_UNSUPPORTED_PTX_VERSION`` / "ptxas ... Unsupported .version 8.7; current version is
  '8.4'" (NVIDIA/numba-cuda#163), so a newer minor is already a ``fail``;
- otherwise ``ok``; no framework that compiles PTX at run time -> ``skip``.
"""

from __future__ import annotations

from gpudoctor.checks._common import driver_install_commands, driver_version, install_command
from gpudoctor.checks._gpu import driver_max_cuda, per_target, toolkit_driver, v
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.cuda import CudaToolkitFacts
from gpudoctor.facts.libraries import CudaLibrariesFacts
from gpudoctor.facts.loader import CudaWheelsFacts
from gpudoctor.facts.targets import ProbeFacts, TargetFacts
from gpudoctor.model import Check, Command, Finding, Status, fenced

#: frameworks that run ptxas at run time (JIT-compile every kernel): ``data/frameworks.toml`` keys
PTXAS_USERS = ("jax",)
#: distributions (``ProbeFacts.distributions``) that compile with NVVM and let the driver JIT the PTX
NVVM_USERS = ("numba-cuda", "numba")


def _ptxas(facts: Facts, label: str) -> tuple[str, str] | None:
    """(version, where) of the ptxas a JAX process uses: the ``nvidia-cuda-nvcc-cu*`` wheel, else the toolkit's."""
    cw = facts.of(CudaWheelsFacts)
    if not isinstance(cw, Unavailable):
        w = next((x for x in cw.targets if x.label == label), None)
        for d in w.dists if w else ():
            if d.name.startswith("nvidia-cuda-nvcc-cu"):
                return d.version, f"the `{d.name}` wheel ({d.name} {d.version})"
    tk = facts.of(CudaToolkitFacts)
    if not isinstance(tk, Unavailable) and tk.nvcc and isinstance(tk.nvcc_version, str):
        return tk.nvcc_version, f"the CUDA toolkit's `{tk.nvcc.rsplit('/', 1)[0]}/ptxas` (CUDA {tk.nvcc_version})"
    return None


def _choices(
    facts: Facts, probe: ProbeFacts, version: str, where: str, max_cuda: str, what: str
) -> tuple[list[str], tuple[Command, ...]]:
    """The numbered remedies (prose) and their commands when ``what`` (ptxas, NVVM) of ``version``
    is newer than the driver's ``max_cuda``."""
    ptx, drv = v(version), v(max_cuda)
    xy = f"{ptx.major}.{ptx.minor}"
    need = toolkit_driver(xy)
    wheel = next(
        (w for w in ("nvidia-cuda-nvcc-cu12", "nvidia-cuda-nvcc-cu13", "nvidia-cuda-nvcc-cu11") if w in where), None
    )
    commands = list(driver_install_commands(facts, need.split(".")[0] if need else ""))
    choices = [f"1. **Upgrade the driver** to one that supports CUDA {xy}" + (f" (≥ {need})" if need else "") + "."]
    if ptx.major == drv.major and wheel:
        pin = Command(
            install_command(probe.executable, f'"{wheel}=={drv.major}.{drv.minor}.*"', probe.venv_creator),
            f"or keep the driver: a {what} of the driver's CUDA {max_cuda}",
            "changes",
        )
        commands.append(pin)
        choices.append(
            f"2. **Or keep the driver** and pin the {what} to its CUDA:\n\n{fenced(pin)}\n\n(if the index has no "
            f"such build, the newest one not newer than CUDA {max_cuda})."
        )
    elif ptx.major == drv.major:
        choices.append(
            f"2. **Or keep the driver** and put a CUDA {max_cuda} toolkit's `bin` first on `PATH` (or install the "
            f"`nvidia-cuda-nvcc-cu{drv.major}` wheel of that version, which is preferred)."
        )
    choices.append(
        "3. On data-center GPUs only: the CUDA forward-compatibility package (`cuda-compat-<X>-<Y>`) of the newer "
        "CUDA, put first on the loader path."
    )
    return choices, tuple(commands)


def _nvvm(facts: Facts, t: TargetFacts, probe: ProbeFacts, dist: str) -> Finding:
    """The finding for a Numba target: NVVM's PTX is JIT-linked by the driver, so any newer CUDA fails."""
    found = _ptxas(facts, t.label)
    max_cuda = driver_max_cuda(facts, probe)
    if found is None or max_cuda is None:
        what = "no NVVM (nvcc wheel or toolkit) was found" if found is None else "the driver's CUDA version is unknown"
        return CHECK.finding(Status.SKIP, f"{dist} compiles with NVVM, but {what}", target=t.label)
    version, where = found
    ptx, drv = v(version), v(max_cuda)
    evidence = {"python": probe.executable, "nvvm": version, "from": where, "driver_max_cuda": max_cuda}
    if (ptx.major, ptx.minor) <= (drv.major, drv.minor):
        return CHECK.finding(
            Status.OK,
            f"{dist}'s NVVM {version} is not newer than the driver's CUDA {max_cuda}",
            evidence=evidence,
            target=t.label,
        )
    driver = driver_version(facts) or "?"
    where_nvvm = where.replace("bin/ptxas`", "nvvm/lib64/libnvvm.so`")
    nvvm_choices, nvvm_commands = _choices(facts, probe, version, where, max_cuda, "NVVM")
    return CHECK.finding(
        Status.FAIL,
        f"{dist} compiles with NVVM {version} (CUDA {ptx.major}.{ptx.minor}) but the driver {driver} supports only "
        f"CUDA {max_cuda}: every @cuda.jit kernel fails to load",
        f"Numba compiles each kernel with the NVVM of {where_nvvm} into PTX of CUDA {ptx.major}.{ptx.minor} and hands "
        f"it to the driver to JIT-link (`cuLinkAddData`). The driver's JIT only reads PTX up to its own CUDA "
        f"({max_cuda}), so the first launch fails with\n\n```\nLinkerError: [222] Call to cuLinkAddData results in "
        f"CUDA_ERROR_UNSUPPORTED_PTX_VERSION\nptxas application ptx input, line 9; fatal   : Unsupported .version "
        f"...\n```\n\n(CUDA minor-version compatibility does not cover PTX: NVIDIA CUDA Compatibility guide). "
        f"Choices:\n\n" + "\n".join(nvvm_choices),
        evidence=evidence,
        target=t.label,
        commands=nvvm_commands,
    )


def assess(facts: Facts, t: TargetFacts, probe: ProbeFacts) -> Finding:
    """The ``cuda.jit`` finding for one target (pure)."""
    cl = facts.of(CudaLibrariesFacts)
    users = [] if isinstance(cl, Unavailable) else [f for f in cl.frameworks if f.label == t.label]
    users = [f for f in users if f.name in PTXAS_USERS]
    if not users:
        numba = next((d for d in NVVM_USERS if d in (probe.distributions or {})), None)
        if numba is not None:
            return _nvvm(facts, t, probe, f"{numba} {(probe.distributions or {})[numba]}")
        return CHECK.finding(
            Status.SKIP, f"no framework in {probe.executable} compiles PTX at run time", target=t.label
        )
    fw = users[0]
    found = _ptxas(facts, t.label)
    max_cuda = driver_max_cuda(facts, probe)
    if found is None or max_cuda is None:
        what = "no ptxas was found" if found is None else "the driver's CUDA version is unknown"
        return CHECK.finding(Status.SKIP, f"{fw.dist} uses ptxas, but {what}", target=t.label)
    version, where = found
    ptx, drv = v(version), v(max_cuda)
    xy = f"{ptx.major}.{ptx.minor}"
    evidence = {"python": probe.executable, "ptxas": version, "from": where, "driver_max_cuda": max_cuda}
    if (ptx.major, ptx.minor) <= (drv.major, drv.minor):
        return CHECK.finding(
            Status.OK,
            f"{fw.dist}'s ptxas {version} is not newer than the driver's CUDA {max_cuda}",
            evidence=evidence,
            target=t.label,
        )
    driver = driver_version(facts) or "?"
    choices, commands = _choices(facts, probe, version, where, max_cuda, "PTX assembler")
    if ptx.major > drv.major:
        return CHECK.finding(
            Status.FAIL,
            f"{fw.dist} compiles with ptxas {version} (CUDA {ptx.major}) but the driver {driver} supports only CUDA "
            f"{max_cuda}",
            f"XLA assembles every kernel with {where}; SASS from a CUDA {ptx.major} assembler does not load on a "
            f"CUDA {drv.major} driver, so the first computation on the GPU fails.\n\n" + "\n".join(choices),
            evidence=evidence,
            target=t.label,
            commands=commands,
        )
    return CHECK.finding(
        Status.WARN,
        f"{fw.dist} compiles with ptxas {version}, newer than the driver {driver}'s CUDA {max_cuda}: XLA disables "
        f"parallel compilation",
        f"XLA assembles every kernel with {where}. Because the driver's CUDA ({max_cuda}) is older than that ptxas "
        f"(CUDA {xy}), XLA warns \"The NVIDIA driver's CUDA version is {max_cuda} which is older than the ptxas CUDA "
        f'version ({version})" and compiles one kernel at a time: correct, but every compile is slower. '
        f"Choices:\n\n" + "\n".join(choices),
        evidence=evidence,
        target=t.label,
        commands=commands,
    )


CHECK = Check(
    id="cuda.jit",
    title="the PTX compiler a framework uses at run time (ptxas, NVVM) is not newer than the driver's CUDA",
    needs=("targets", "nvidia", "cuda_wheels", "cuda_toolkit", "cuda_libraries"),
    evaluate=per_target("cuda.jit", assess),
)
