"""Facts about a CUDA toolkit installed on disk (not needed to run PyTorch wheels)."""

from __future__ import annotations

from dataclasses import dataclass

from gpudoctor.facts.base import Unavailable, domain


@domain("cuda_toolkit")
@dataclass(frozen=True)
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
    """

    cuda_home: str | None
    default_path: str | None
    version: str | Unavailable
    nvcc: str | None
    nvcc_version: str | Unavailable
    cuda_home_missing: bool = False
