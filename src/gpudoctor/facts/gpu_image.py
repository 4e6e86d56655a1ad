"""Facts of the ``gpu_image`` domain: what a build file (``--dockerfile FILE``) says about the GPU stack."""

from __future__ import annotations

from gpudoctor.facts.base import domain
from gpudoctor.records import frozen_dataclass


@domain("gpu_image")
@frozen_dataclass
class GpuImageFacts:
    """The GPU side of an image build, read from its Dockerfile (never built).

    Attributes:
        file: the build file's name.
        base: the last ``FROM`` image reference (the final stage), ARGs expanded.
        base_cuda: the CUDA ``X.Y`` its tag names (``nvidia/cuda:12.1.1-...``,
            ``pytorch/pytorch:2.3.1-cuda12.1-...``), or None.
        base_flavor: ``devel``, ``runtime``, ``base`` (``nvidia/cuda`` flavors) or None.
        wheel_cuda: the CUDA ``X.Y`` of the torch wheel installed (``+cu121`` pin or the
            ``download.pytorch.org/whl/cu121`` index), or None.
        wheel_origin: ``<file>:<line>`` of that install.
        compiles: ``<file>:<line> <command>`` of every step that compiles CUDA code
            (``nvcc``, a ``pip install --no-build-isolation`` / ``setup.py`` build, an
            extension built from source).
        driver_installs: ``<file>:<line> <package>`` of every NVIDIA driver package the
            build installs into the image.
    """

    file: str
    base: str | None = None
    base_cuda: str | None = None
    base_flavor: str | None = None
    wheel_cuda: str | None = None
    wheel_origin: str | None = None
    compiles: tuple[str, ...] = ()
    driver_installs: tuple[str, ...] = ()
