"""Facts of the ``cuda_libraries`` domain: the dynamic loader's choices, modelled.

For each probed target, gpudoctor reads (never loads) the GPU libraries of the
frameworks installed there and follows their ``DT_NEEDED`` entries the way
glibc's ld.so(8) does, in its real order:

1. an object with the same SONAME that is already loaded (``LD_PRELOAD`` first,
   then everything loaded earlier in breadth-first order);
2. ``DT_RPATH`` of the consumer and of its loaders (only when the consumer has
   no ``DT_RUNPATH``);
3. ``LD_LIBRARY_PATH`` of the target;
4. ``DT_RUNPATH`` of the consumer (``$ORIGIN`` expanded);
5. the ld.so cache (``ldconfig -p``), only entries whose architecture tag
   matches the consumer (``libc6,x86-64`` ...);
6. the default directories (``/lib``, ``/usr/lib`` and their multiarch and
   ``lib64`` forms).

Files of another ELF class or machine are skipped as ld.so skips them. The
ELF dynamic section, symbol versions (``.gnu.version_d``/``_r``) and dynamic
symbols are read with pyelftools in the doctor, through the rooted files.
Sources: glibc ld.so(8), ``elf/dl-load.c``; System V ABI gABI "Dynamic
Section"; LSB "Symbol Versioning".
"""

from __future__ import annotations

from gpudoctor.facts.base import Unavailable, domain
from gpudoctor.records import frozen_dataclass


@frozen_dataclass
class LibraryCopy:
    """One file of a CUDA library family that the loader could find.

    Attributes:
        path: the path as found (directory + file name), inside the root.
        real_path: ``path`` with symlinks resolved inside the root.
        name: the file name (``libnvJitLink.so.12``).
        family: ``cudart``, ``cublas``, ``cublasLt``, ``cufft``, ``curand``,
            ``cusolver``, ``cusparse``, ``nvJitLink``, ``nvrtc``, ``cupti``,
            ``cudnn``, ``nccl``, ``nvshmem``, ``tensorrt`` (``libnvinfer*``), ``libcuda``, ``nvml``.
        directory: the directory holding it.
        origin: why that directory is searched: ``LD_PRELOAD``,
            ``LD_LIBRARY_PATH``, ``RUNPATH``, ``RPATH``, ``ld.so cache``,
            ``ld.so.conf.d``, ``wheel``, ``conda``, ``wsl`` or ``default``.
        soname: ``DT_SONAME`` from the ELF dynamic section; None when the file
            has none or could not be read (see ``error``).
        version: the library's own version, or None when unknown.
        version_source: where ``version`` came from: ``file name`` (the
            versioned file the link points to), ``wheel metadata <dist>``
            (``*.dist-info/RECORD`` lists the file), or ``symbol versions``
            (highest ``_X_Y`` suffix of its exported symbols, e.g.
            ``__nvJitLinkComplete_12_4``).
        elf_class: 32 or 64; None when not an ELF file.
        machine: ``EM_X86_64`` ...; None when not an ELF file.
        error: why the file could not be read as ELF, else None.
    """

    path: str
    real_path: str
    name: str
    family: str
    directory: str
    origin: str
    soname: str | None = None
    version: str | None = None
    version_source: str | None = None
    elf_class: int | None = None
    machine: str | None = None
    error: str | None = None


@frozen_dataclass
class Resolution:
    """How the loader resolves one ``DT_NEEDED`` (or bare ``dlopen``) name.

    Attributes:
        consumer: the library (or ``dlopen``) that needs it.
        needed: the name asked for (``libnvJitLink.so.12``).
        family: its CUDA library family.
        path: the copy the loader picks, or None when none is found.
        via: the search step that found it: ``already loaded``, ``LD_PRELOAD``,
            ``RPATH``, ``LD_LIBRARY_PATH entry N``, ``RUNPATH``, ``ld.so cache``,
            ``default directory``, or ``not found``.
        directory: the directory of ``path`` (None when not found).
        without_env: the copy picked when ``LD_LIBRARY_PATH`` and
            ``LD_PRELOAD`` are unset (None when none).
        candidates: every other copy of that name the consumer can reach, in
            search order.
        bare: the copy a consumer without RPATH/RUNPATH (a ``dlopen`` by name
            from another framework) gets; None when none.
        missing: symbol versions / symbols the consumer needs from it that the
            picked copy lacks (``libnvJitLink.so.12:__nvJitLinkComplete_12_4``).
        framework: the framework (``data/frameworks.toml`` key) whose libraries asked
            first; "" when unknown (older snapshots).
        how: how the framework gets it: ``linked`` (``DT_NEEDED``), ``dlopen`` (opened
            by name at run time from ``consumer``, so that library's RUNPATH applies) or
            ``preload`` (the framework opens its wheel's copy by full path itself first).
        path_origin: where the winning directory was put on the search path, when the
            environment put it there (``LD_LIBRARY_PATH entry 1, set by
            /env/etc/conda/activate.d/env_vars.sh``); "" otherwise.
    """

    consumer: str
    needed: str
    family: str
    path: str | None
    via: str
    directory: str | None = None
    without_env: str | None = None
    candidates: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    bare: str | None = None
    framework: str = ""
    how: str = "linked"
    path_origin: str = ""


@frozen_dataclass
class LinkDir:
    """A directory the linker (``gcc ... -lcuda``, as Triton runs it) searches for ``libcuda.so``.

    Attributes:
        path: the directory.
        origin: ``TRITON_LIBCUDA_PATH``, ``ld.so cache``, ``LIBRARY_PATH`` or ``default``.
        unversioned: ``libcuda.so`` exists there.
        elf_class: ELF class of that ``libcuda.so`` (32/64); None when unknown.
        arch_tag: the ld.so cache tag of that entry, else of the directory's versioned ``libcuda.so.*``
            entry (``libc6,x86-64``; ``libc6`` = 32-bit x86); None when the cache lists neither.
    """

    path: str
    origin: str
    unversioned: bool
    elf_class: int | None = None
    arch_tag: str | None = None


@frozen_dataclass
class TargetLibraries:
    """The loader model of one target.

    Attributes:
        label: the target's label (as in ``targets``).
        roots: the framework GPU libraries the model starts from, as
            ``framework:path`` strings.
        ld_library_path: the target's ``LD_LIBRARY_PATH`` entries.
        ld_preload: the target's ``LD_PRELOAD`` entries.
        copies: every copy of every CUDA library family found on any search
            directory of this target, in search order.
        resolutions: the ``DT_NEEDED`` resolutions of the roots and of
            everything they pull in, in breadth-first load order.
        lookups: bare-name lookups a process makes by ``dlopen`` without a
            RUNPATH (``libcuda.so.1``, ``libcuda.so``, ``libnvidia-ml.so.1``).
        link_dirs: where ``gcc -lcuda`` would look for ``libcuda.so``.
        cache_source: ``ldconfig -p`` when the ld.so cache was read;
            ``ld.so.conf.d`` when it could not be and the configured
            directories stand in for it.
        ld_library_path_origins: for each ``ld_library_path`` entry, who put it
            there: ``environment`` (the target's process environment as probed),
            or ``<script>`` (a conda ``etc/conda/activate.d`` script the activation
            of this environment runs).
        activation: the activation scripts whose ``LD_LIBRARY_PATH`` changes were
            applied to model this environment as ``conda activate`` sets it (the
            probe ran the interpreter without activating it); () otherwise.
    """

    label: str
    roots: tuple[str, ...] = ()
    ld_library_path: tuple[str, ...] = ()
    ld_preload: tuple[str, ...] = ()
    copies: tuple[LibraryCopy, ...] = ()
    resolutions: tuple[Resolution, ...] = ()
    lookups: tuple[Resolution, ...] = ()
    link_dirs: tuple[LinkDir, ...] = ()
    cache_source: str = "ldconfig -p"
    ld_library_path_origins: tuple[str, ...] = ()
    activation: tuple[str, ...] = ()


@frozen_dataclass
class FrameworkInstall:
    """A GPU framework installed in a target, from its ``*.dist-info`` (not imported).

    Attributes:
        label: the target.
        name: the framework key of ``data/frameworks.toml`` (``torch``, ``onnxruntime-gpu`` ...).
        dist: the distribution name as installed.
        version: its version.
        cuda_major: the CUDA major its build needs (table row or local
            version tag ``+cu124``); None when unknown.
        cudnn_major: the cuDNN major it needs; None when unknown or none.
        source: the table row's source, or ``local version tag``.
        gpu_libs: its GPU provider libraries found in site-packages.
        pins: the ``nvidia-*`` wheels its metadata pins exactly (``Requires-Dist: nvidia-nccl-cu12==2.21.5``,
            requirements behind an ``extra`` left out), as ``dist==version``.
        pinned_installed: the installed versions of those pinned wheels, ``dist==version``
            (a pinned wheel that is not installed is absent).
        cuda_version: the CUDA ``X.Y`` its build targets (local version tag ``+cu124``,
            or the table row), None when only the major (or nothing) is known.
        known: False for a GPU package gpudoctor has no table row for (its name or
            its ``nvidia-*`` requirements say it uses CUDA); its needs are unknown.
        cudnn_min: the cuDNN ``X.Y`` it was built against (table row): the copy it loads must
            have that major and at least that minor; None when unknown.
    """

    label: str
    name: str
    dist: str
    version: str
    cuda_major: int | None = None
    cudnn_major: int | None = None
    source: str = ""
    gpu_libs: tuple[str, ...] = ()
    pins: tuple[str, ...] = ()
    pinned_installed: tuple[str, ...] = ()
    cuda_version: str | None = None
    known: bool = True
    cudnn_min: str | None = None


@domain("cuda_libraries")
@frozen_dataclass
class CudaLibrariesFacts:
    """Loader model and GPU frameworks for every probed target.

    Attributes:
        targets: one model per target.
        frameworks: GPU frameworks found in the targets' site-packages.
        wsl_lib: the files in ``/usr/lib/wsl/lib`` (WSL 2's driver libraries);
            Unavailable when the directory does not exist.
    """

    targets: tuple[TargetLibraries, ...] = ()
    frameworks: tuple[FrameworkInstall, ...] = ()
    wsl_lib: tuple[str, ...] | Unavailable = Unavailable("/usr/lib/wsl/lib does not exist")
