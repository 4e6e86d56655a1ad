"""Facts about the dynamic loader's view of CUDA libraries, outside any process.

- ``loader``: ``ldconfig -p`` (the ld.so cache), ``LD_LIBRARY_PATH`` and
  ``LD_PRELOAD`` entries, and the CUDA libraries found in every directory of
  ``LD_LIBRARY_PATH`` and ``PATH`` (of gpudoctor's environment and of each
  target's). glibc ld.so(8): a library's DT_RPATH is searched before
  ``LD_LIBRARY_PATH``, DT_RUNPATH after it, then the ld.so cache, then the
  default dirs; ``PATH`` is never searched for libraries.
- ``cuda_wheels``: the ``nvidia-*`` pip wheels of each target (CUDA 12 layout
  ``site-packages/nvidia/<component>/lib``, CUDA 13 ``site-packages/nvidia/cu13/lib``)
  and torch's own ``torch/lib``.
"""

from __future__ import annotations

from gpudoctor.facts.base import Unavailable, domain
from gpudoctor.records import frozen_dataclass


@frozen_dataclass
class LibraryFile:
    """A CUDA-related shared library file in a directory.

    Attributes:
        name: file name, e.g. ``libcudnn.so.8``.
        path: full path (inside the root).
        link_target: where a symlink points (as written), or None for a regular file.
    """

    name: str
    path: str
    link_target: str | None = None


@frozen_dataclass
class LibraryDir:
    """One directory and the CUDA libraries in it.

    Attributes:
        path: the directory (inside the root).
        origin: why it was looked at: ``LD_LIBRARY_PATH``, ``PATH``, ``wheel`` or ``torch``.
        exists: it is a directory.
        libraries: CUDA-related libraries in it (libcudnn*, libcudart*, libcublas*,
            libnccl*, libcuda.so*, libnvrtc*, ...), sorted by name.
    """

    path: str
    origin: str
    exists: bool
    libraries: tuple[LibraryFile, ...] = ()


@frozen_dataclass
class LdconfigEntry:
    """One line of ``ldconfig -p``: ``libcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1``."""

    name: str
    flags: str
    path: str


@domain("loader")
@frozen_dataclass
class LoaderFacts:
    """Where the dynamic loader would find CUDA libraries.

    Attributes:
        ld_library_path: entries of gpudoctor's ``LD_LIBRARY_PATH`` in order
            (an empty entry means the current directory).
        ld_preload: entries of ``LD_PRELOAD``.
        ldconfig: CUDA-related entries of ``ldconfig -p``, or Unavailable.
        dirs: every ``LD_LIBRARY_PATH`` and ``PATH`` directory (of gpudoctor and
            of each target) that holds CUDA libraries, or that is on
            ``LD_LIBRARY_PATH`` (even empty or missing).
    """

    ld_library_path: tuple[str, ...]
    ld_preload: tuple[str, ...]
    ldconfig: tuple[LdconfigEntry, ...] | Unavailable
    dirs: tuple[LibraryDir, ...] = ()


@frozen_dataclass
class WheelDist:
    """An installed ``nvidia-*`` distribution, e.g. ``nvidia-cudnn-cu12 9.1.0.70``."""

    name: str
    version: str


@frozen_dataclass
class TargetWheels:
    """The CUDA wheels of one target.

    Attributes:
        label: the target's label (as in the ``targets`` domain).
        site_packages: the directories searched.
        dists: ``nvidia-*`` distributions found (from ``*.dist-info`` names).
        lib_dirs: ``nvidia/<component>/lib``, ``nvidia/cu13/lib`` and ``torch/lib``
            directories with the CUDA libraries in each.
    """

    label: str
    site_packages: tuple[str, ...] = ()
    dists: tuple[WheelDist, ...] = ()
    lib_dirs: tuple[LibraryDir, ...] = ()


@domain("cuda_wheels")
@frozen_dataclass
class CudaWheelsFacts:
    """CUDA libraries installed by pip for each probed target."""

    targets: tuple[TargetWheels, ...]
