"""Facts about target interpreters, gathered by the probe running inside each.

A *target* is one Python interpreter plus the environment it runs with: the
interpreter running gpudoctor (``current``), each ``--python PATH``, and each
Jupyter kernel. The probe (``gpudoctor/probe/_script.py``) prints a versioned
JSON document that maps onto :class:`ProbeFacts`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple, Union

from gpudoctor.facts.base import Unavailable, domain


@dataclass(frozen=True)
class TorchFacts:
    """PyTorch as seen from inside the target interpreter.

    Attributes:
        installed: a ``torch`` distribution is installed (from metadata, before import).
        dist_version: the distribution's version from metadata, e.g. ``2.13.0+cpu``.
        location: directory of the torch package, or None.
        import_ok: ``import torch`` succeeded.
        import_error: ``Type: message`` of the import failure, verbatim, or None.
        version: ``torch.__version__``.
        cuda: ``torch.version.cuda`` (e.g. ``12.1``), None for CPU/ROCm builds.
        hip: ``torch.version.hip``, None unless a ROCm build.
        cudnn_version: ``torch.backends.cudnn.version()`` (e.g. 90100), None
            when unavailable or when the call raised.
        cudnn_compile_version: cuDNN torch was built with, ``major.minor.patch``, or None.
        cuda_available: ``torch.cuda.is_available()``, None if it raised.
        cuda_error: warnings or errors raised while asking (verbatim), or None.
        device_count: ``torch.cuda.device_count()``, None if it raised.
        arch_list: ``torch.cuda.get_arch_list()`` (``sm_80``, ``compute_90`` ...).
        driver_api_version: ``torch._C._cuda_getDriverVersion()`` (e.g. 11040), or None.
    """

    installed: bool
    dist_version: Optional[str] = None
    location: Optional[str] = None
    import_ok: bool = False
    import_error: Optional[str] = None
    version: Optional[str] = None
    cuda: Optional[str] = None
    hip: Optional[str] = None
    cudnn_version: Optional[int] = None
    cudnn_compile_version: Optional[str] = None
    cuda_available: Optional[bool] = None
    cuda_error: Optional[str] = None
    device_count: Optional[int] = None
    arch_list: Tuple[str, ...] = ()
    driver_api_version: Optional[int] = None

    @property
    def is_cpu_build(self) -> bool:
        """True for an imported torch built without CUDA or ROCm (``+cpu``)."""
        return self.import_ok and not self.cuda and not self.hip


@dataclass(frozen=True)
class ProbeFacts:
    """What the probe printed, for one target.

    Attributes:
        probe_version: version of the probe document format.
        executable: ``sys.executable`` inside the target.
        python_version: e.g. ``3.11.7``.
        implementation: e.g. ``cpython``.
        prefix: ``sys.prefix``.
        base_prefix: ``sys.base_prefix``.
        is_venv: prefix differs from base_prefix.
        is_conda: a ``conda-meta`` directory sits in the prefix.
        include_dir: ``sysconfig.get_paths()['include']`` (where Python.h should be).
        torch: PyTorch facts.
        env: the relevant variables (CUDA_*, NVIDIA_*, LD_LIBRARY_PATH,
            PYTORCH_*, ...) as the target sees them (secrets redacted on output).
        duration_ms: wall time of the probe process in ms.
    """

    probe_version: int
    executable: str
    python_version: str
    implementation: str
    prefix: str
    base_prefix: str
    is_venv: bool
    is_conda: bool
    include_dir: str
    torch: TorchFacts
    env: Dict[str, str] = field(default_factory=dict)
    duration_ms: float = 0.0


@dataclass(frozen=True)
class TargetFacts:
    """One target interpreter and its probe result.

    Attributes:
        label: short name used in output: ``current``, the ``--python`` path,
            or ``kernel:NAME``.
        python: the interpreter path that was (or would be) run.
        kind: ``current``, ``python`` (from --python), ``active-env`` (the
            activated venv/conda env, when gpudoctor runs from another one) or ``kernel``.
        env_overrides: variables set for the target on top of ours (kernels).
        probe: the probe's facts, or Unavailable with why it failed (missing
            interpreter, timeout, crash: with its stderr).
    """

    label: str
    python: str
    kind: str
    probe: Union[ProbeFacts, Unavailable]
    env_overrides: Dict[str, str] = field(default_factory=dict)


@domain("targets")
@dataclass(frozen=True)
class TargetsFacts:
    """All probed targets; the first is the reference (the current interpreter,
    or the first ``--python``)."""

    targets: Tuple[TargetFacts, ...]
