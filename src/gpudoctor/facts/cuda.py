"""Facts about a CUDA toolkit installed on disk (not needed to run PyTorch wheels)."""

from __future__ import annotations

from gpudoctor.facts.base import Unavailable, domain
from gpudoctor.records import frozen_dataclass


@frozen_dataclass
class HostCompiler:
    """A C++ compiler nvcc would call as its host compiler.

    Attributes:
        command: the compiler as named (``g++-13``, ``/usr/bin/g++``, ``x86_64-conda-linux-gnu-c++``).
        source: where the name came from: ``CC`` (``torch.utils.cpp_extension`` passes
            ``-ccbin $CC`` to nvcc), ``NVCC_CCBIN`` (nvcc's own variable), ``PATH`` (nvcc's default,
            ``g++`` on ``PATH``), ``CXX`` (the extension's C++ sources), ``CUDAHOSTCXX`` (CMake's).
        kind: ``gcc``, ``clang``, or None when ``--version`` did not say.
        version: ``X.Y.Z`` from ``<command> --version``, or Unavailable (not run, not found).
    """

    command: str
    source: str
    kind: str | None
    version: str | Unavailable


@frozen_dataclass
class ToolkitDir:
    """A CUDA toolkit installed side by side (``/usr/local/cuda-X.Y``).

    Attributes:
        path: its directory (inside the root).
        version: from its ``version.json``/``version.txt``, or None.
    """

    path: str
    version: str | None


@domain("cuda_toolkit")
@frozen_dataclass
class CudaToolkitFacts:
    """The CUDA toolkit that ``nvcc`` and source builds would use.

    Attributes:
        cuda_home: ``CUDA_HOME`` or ``CUDA_PATH`` from the environment, or None.
        default_path: where ``/usr/local/cuda`` points (resolved), or None if absent.
        version: toolkit version from ``version.json``/``version.txt`` or nvcc,
            ``major.minor[.patch]``, or Unavailable when no toolkit was found.
        nvcc: path of the ``nvcc`` used (inside the root), or None.
        nvcc_version: ``release X.Y`` parsed from ``nvcc --version``, or Unavailable.
        cuda_home_missing: ``CUDA_HOME``/``CUDA_PATH`` is set to a directory that does not
            exist (stale); the toolkit is then looked for in the standard place instead and
            both facts are reported.
        host_compilers: the host compilers an extension build may hand nvcc, in the order
            ``torch.utils.cpp_extension`` and nvcc pick them (``CC``, ``NVCC_CCBIN``, ``g++`` on
            ``PATH``), then ``CXX`` and ``CUDAHOSTCXX`` (CMake builds); empty when not collected.
        nvcc_source: why that nvcc wins, in ``torch.utils.cpp_extension``'s order (``_find_cuda_home``):
            ``CUDA_HOME``, ``CUDA_PATH``, ``PATH`` (the first ``nvcc`` on it: a conda ``cuda-nvcc``, a
            distribution package), ``/usr/local/cuda``; "" when none or not collected.
        path_nvcc: the first ``nvcc`` on ``PATH`` (what a bare ``nvcc`` or CMake runs), or None.
        toolkits: every ``/usr/local/cuda-*`` toolkit with an ``nvcc``, oldest first.
        headers: the winning nvcc's directory (``<bin>/..``, what ``cpp_extension`` takes as ``CUDA_HOME``)
            holds ``include/cuda_runtime_api.h`` (or ``targets/*/include/``); None when not looked at. False
            for an ``nvcc`` wrapper script outside a toolkit tree (``/usr/local/bin/nvcc`` exec'ing the real one).
    """

    cuda_home: str | None
    default_path: str | None
    version: str | Unavailable
    nvcc: str | None
    nvcc_version: str | Unavailable
    cuda_home_missing: bool = False
    host_compilers: tuple[HostCompiler, ...] = ()
    nvcc_source: str = ""
    path_nvcc: str | None = None
    toolkits: tuple[ToolkitDir, ...] = ()
    headers: bool | None = None
