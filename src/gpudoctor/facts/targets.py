"""Facts about target interpreters, gathered by the probe running inside each.

A *target* is one Python interpreter plus the environment it runs with: the
interpreter running gpudoctor (``current``), each ``--python PATH``, and each
Jupyter kernel. The probe (``gpudoctor/probe/_script.py``) prints a versioned
JSON document that maps onto :class:`ProbeFacts`.
"""

from __future__ import annotations

from dataclasses import field

from gpudoctor.facts.base import Unavailable, domain
from gpudoctor.facts.platform import ProcessLimits
from gpudoctor.facts.smoke import SmokeDevice as SmokeDevice  # re-exported
from gpudoctor.facts.smoke import SmokeFacts as SmokeFacts
from gpudoctor.facts.smoke import SmokePeer as SmokePeer
from gpudoctor.records import frozen_dataclass


@frozen_dataclass
class CudaDevice:
    """One CUDA device as torch enumerates it (CUDA order, after CUDA_VISIBLE_DEVICES).

    Attributes:
        index: the CUDA ordinal (``cuda:N``).
        name: ``torch.cuda.get_device_name(N)``.
        capability: compute capability ``major.minor``, e.g. ``8.6``.
        pci_bus_id: ``domain:bus:device.0`` from the device properties, or None
            when this torch does not report it.
        uuid: ``GPU-...`` from the device properties, or None.
    """

    index: int
    name: str
    capability: str
    pci_bus_id: str | None = None
    uuid: str | None = None


@frozen_dataclass
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
        devices: CUDA devices in CUDA order (only when CUDA is available).
        import_tried: the probe ran ``import torch`` (the full probe). False for the
            light probe, which reads metadata and ``torch/version.py`` as text and asks
            the CUDA driver API directly: ``import_ok``/``import_error``, the cuDNN
            versions and ``arch_list`` are then not known (not a verdict).
    """

    installed: bool
    dist_version: str | None = None
    location: str | None = None
    import_ok: bool = False
    import_error: str | None = None
    version: str | None = None
    cuda: str | None = None
    hip: str | None = None
    cudnn_version: int | None = None
    cudnn_compile_version: str | None = None
    cuda_available: bool | None = None
    cuda_error: str | None = None
    device_count: int | None = None
    arch_list: tuple[str, ...] = ()
    driver_api_version: int | None = None
    devices: tuple[CudaDevice, ...] = ()
    import_tried: bool = True

    @property
    def import_failed(self) -> bool:
        """``import torch`` was tried and failed (never True for the light probe)."""
        return self.import_tried and not self.import_ok

    @property
    def build_known(self) -> bool:
        """The build (version, CUDA/ROCm/CPU) is known: torch imported, or the light
        probe read it from ``torch/version.py``."""
        return self.installed and (self.import_ok or (not self.import_tried and self.version is not None))

    @property
    def is_cpu_build(self) -> bool:
        """True for a torch built without CUDA or ROCm (``+cpu``), imported or read from its version file."""
        return self.build_known and not self.cuda and not self.hip


@frozen_dataclass
class LibraryLoad:
    """One real ``dlopen`` made by the probe.

    Attributes:
        name: the file name asked for, e.g. ``libcudnn_ops.so.9``.
        ok: the loader opened it (and every library it needs).
        path: the file that was opened (full path asked for, or the mapped file
            after a bare-name load), or None.
        error: the loader's message verbatim (``dlerror()``), or None.
    """

    name: str
    ok: bool
    path: str | None = None
    error: str | None = None


@frozen_dataclass
class CudnnProbe:
    """cuDNN as the target process really loads it (after ``import torch``).

    Attributes:
        applicable: False for builds without cuDNN (CPU, ROCm); ``reason`` says why.
        reason: why not applicable ("" otherwise).
        expected_major: the cuDNN major torch was built for (8 or 9), or None.
        library_path: the ``libcudnn.so.N`` mapped into the process (from
            ``/proc/self/maps``), or None when none is mapped.
        loaded_paths: every distinct ``libcudnn*`` file mapped (two copies of the
            same SONAME from different directories is trouble).
        runtime_version: ``cudnnGetVersion()`` of the mapped library through
            ctypes (cuDNN 8: 8902 = 8.9.2; cuDNN 9: 90100 = 9.1.0), or None.
        runtime_error: why the runtime version could not be read, or None.
        search_dirs: directories the sub-library load test looked in, in order.
        sublibraries: the load test of every sub-library of ``expected_major``
            (cuDNN 8: ops/cnn/adv infer+train; cuDNN 9: graph, engines, ops, cnn,
            adv, heuristic), each with the loader error verbatim.
    """

    applicable: bool
    reason: str = ""
    expected_major: int | None = None
    library_path: str | None = None
    loaded_paths: tuple[str, ...] = ()
    runtime_version: int | None = None
    runtime_error: str | None = None
    search_dirs: tuple[str, ...] = ()
    sublibraries: tuple[LibraryLoad, ...] = ()


@frozen_dataclass
class LibcudaProbe:
    """The driver's ``libcuda.so.1`` loaded for real in the target (no ``cuInit``).

    Attributes:
        loaded: ``dlopen("libcuda.so.1")`` succeeded.
        path: the mapped file (e.g. ``/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15``), or None.
        error: the loader's message verbatim, or None.
        driver_api_version: ``cuDriverGetVersion()``: newest CUDA the driver
            supports, ``1000*major + 10*minor`` (12040 = 12.4), or None.
    """

    loaded: bool
    path: str | None = None
    error: str | None = None
    driver_api_version: int | None = None


@frozen_dataclass
class ToolchainFacts:
    """What ``torch.compile`` (inductor, Triton) needs to build its helpers.

    Attributes:
        python_h: ``Python.h`` exists in the target's include dir.
        python_h_path: where it was looked for (``<include_dir>/Python.h``).
        cc: the C compiler Triton would use (``$CC``, else gcc/cc/clang on PATH), or None.
        cxx: the C++ compiler inductor's CPU backend would use (``$CXX``, else g++/c++/clang++), or None.
        other_python_headers: other ``/usr/include/python3.*`` dirs that do hold a
            Python.h (e.g. only 3.9 headers installed for a 3.10 interpreter).
    """

    python_h: bool
    python_h_path: str
    cc: str | None = None
    cxx: str | None = None
    other_python_headers: tuple[str, ...] = ()


@frozen_dataclass
class TritonFacts:
    """Triton in the target (the GPU code generator behind ``torch.compile``).

    Attributes:
        installed: a ``triton`` or ``pytorch-triton`` distribution is present.
        version: its version, or None.
        import_ok: ``import triton`` succeeded (False when not attempted).
        import_error: ``Type: message`` verbatim, or None.
    """

    installed: bool
    version: str | None = None
    import_ok: bool = False
    import_error: str | None = None


@frozen_dataclass
class CudaDriverDevice:
    """One device as the CUDA driver API enumerates it in the target (after CUDA_VISIBLE_DEVICES).

    Attributes:
        index: CUDA ordinal.
        name: ``cuDeviceGetName``.
        capability: compute capability ``major.minor`` (``cuDeviceGetAttribute``
            COMPUTE_CAPABILITY_MAJOR/MINOR), or None.
        total_memory_mib: ``cuDeviceTotalMem`` in MiB, or None.
        pci_bus_id: ``domain:bus:device.0`` from the PCI attributes, or None.
        uuid: ``GPU-...`` from ``cuDeviceGetUuid``, or None.
        context_ok: ``cuCtxCreate`` + ``cuCtxDestroy`` succeeded (None: not tried).
        context_error: the CUresult name and text when it did not.
    """

    index: int
    name: str | None = None
    capability: str | None = None
    total_memory_mib: int | None = None
    pci_bus_id: str | None = None
    uuid: str | None = None
    context_ok: bool | None = None
    context_error: str | None = None


@frozen_dataclass
class CudaDriverProbe:
    """The CUDA driver API called through ctypes inside the target (NVIDIA CUDA Driver API reference).

    Attributes:
        loaded: ``libcuda.so.1`` could be opened.
        error: the loader's message when it could not.
        init_ok: ``cuInit(0)`` returned CUDA_SUCCESS (None: not reached).
        init_error: ``NAME (code): text`` of the failing CUresult (e.g. ``CUDA_ERROR_NO_DEVICE (100)``).
        driver_api_version: ``cuDriverGetVersion`` (12040 = CUDA 12.4), or None.
        device_count: ``cuDeviceGetCount`` (0 when cuInit failed), or None.
        devices: each visible device with its context create/destroy result.
    """

    loaded: bool
    error: str | None = None
    init_ok: bool | None = None
    init_error: str | None = None
    driver_api_version: int | None = None
    device_count: int | None = None
    devices: tuple[CudaDriverDevice, ...] = ()


@frozen_dataclass
class CompileCache:
    """One of torch.compile's on-disk caches as the target process would use it.

    Attributes:
        name: ``triton`` (compiled kernels) or ``inductor`` (generated code, FX graph cache).
        path: the directory (``TRITON_CACHE_DIR`` / ``TORCHINDUCTOR_CACHE_DIR``, else the default).
        source: the variable that set it, or ``default``.
        exists: the directory exists already.
        checked: the nearest existing directory (or file) on its path, whose permissions decide.
        writable: the target's user may create entries there (``os.access`` W_OK|X_OK on a directory).
        fstype: the file system type holding it (``/proc/self/mounts``), or None when unknown.
        mount: that file system's mount point, or None.
        free_bytes: free space for the user (``statvfs``), or None.
    """

    name: str
    path: str
    source: str
    exists: bool
    checked: str
    writable: bool
    fstype: str | None = None
    mount: str | None = None
    free_bytes: int | None = None


_NOT_PROBED = Unavailable("not reported by this probe version")


@frozen_dataclass
class FrameworkLoad:
    """The real ``dlopen`` test of one GPU framework's provider libraries (issue 11).

    Run by the probe in a child of the target interpreter (one per framework,
    so a crash or a library loaded first cannot leak into another's result).

    Attributes:
        name: framework key of ``data/frameworks.toml`` (``onnxruntime-gpu``...).
        dist: the installed distribution (from metadata, not imported).
        version: its version.
        loads: one record per GPU provider library found, loader error verbatim.
        error: why the test could not run (child crashed, timed out), else None.
    """

    name: str
    dist: str
    version: str
    loads: tuple[LibraryLoad, ...] = ()
    error: str | None = None


@frozen_dataclass
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
        site_packages: ``site-packages``/``dist-packages`` entries of ``sys.path``.
        mapped_libraries: full paths of the CUDA and torch libraries mapped into
            the process after ``import torch`` (``/proc/self/maps``), or Unavailable.
        cudnn: the cuDNN load test, or Unavailable.
        libcuda: the ``libcuda.so.1`` load test, or Unavailable.
        toolchain: C compiler and Python.h for this interpreter, or Unavailable.
        triton: Triton installed/importable, or Unavailable.
        distributions: name -> version of the few other distributions checks
            need to know about (``ipykernel`` for Jupyter kernels); a name is
            absent when not installed; None when the probe did not report them.
        limits: RLIMIT_NOFILE and RLIMIT_MEMLOCK of the target process
            (``resource.getrlimit`` inside it), or Unavailable.
        frameworks: the dlopen test of every installed GPU framework's provider
            libraries, or Unavailable (older probe, or the test could not run).
        smoke: the ``--deep`` smoke test (:class:`SmokeFacts`), or Unavailable
            (not run without ``--deep``, no CUDA device, or it failed).
        level: the probe's level (``_script.py --level``): ``full`` (imports torch) or ``light``
            (metadata, version files and the CUDA driver API, no framework import).
        cuda_driver: the CUDA driver API in the target (cuInit, devices, a context
            per device), or Unavailable.
        compile_caches: torch.compile's Triton and Inductor cache directories as the target
            would use them (full probe), or Unavailable.
        venv_creator: what made the target's venv, from its ``pyvenv.cfg``: ``uv`` (no pip in
            it: packages go in with ``uv pip install``), ``virtualenv`` or ``venv``; None when
            not a venv or not reported.
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
    env: dict[str, str] = field(default_factory=dict)
    duration_ms: float = 0.0
    site_packages: tuple[str, ...] = ()
    mapped_libraries: tuple[str, ...] | Unavailable = _NOT_PROBED
    cudnn: CudnnProbe | Unavailable = _NOT_PROBED
    libcuda: LibcudaProbe | Unavailable = _NOT_PROBED
    toolchain: ToolchainFacts | Unavailable = _NOT_PROBED
    triton: TritonFacts | Unavailable = _NOT_PROBED
    distributions: dict[str, str] | None = None
    limits: ProcessLimits | Unavailable = _NOT_PROBED
    frameworks: tuple[FrameworkLoad, ...] | Unavailable = _NOT_PROBED
    smoke: SmokeFacts | Unavailable = Unavailable("not run (gpudoctor check --deep runs it)")
    level: str = "full"
    cuda_driver: CudaDriverProbe | Unavailable = _NOT_PROBED
    compile_caches: tuple[CompileCache, ...] | Unavailable = _NOT_PROBED
    venv_creator: str | None = None


#: ``TargetFacts.kind`` of a Jupyter kernel's interpreter
KERNEL_KIND = "kernel"


@frozen_dataclass
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
        python_version: ``major.minor`` of the interpreter when the probe
            failed, from a one-line query that runs on Python 2 and 3
            (:data:`gpudoctor.probe.VERSION_CODE`); "" when the probe worked
            (see ``probe.python_version``) or the query failed too.
    """

    label: str
    python: str
    kind: str
    probe: ProbeFacts | Unavailable
    env_overrides: dict[str, str] = field(default_factory=dict)
    python_version: str = ""


@domain("targets")
@frozen_dataclass
class TargetsFacts:
    """All probed targets; the first is the reference (the current interpreter,
    or the first ``--python``)."""

    targets: tuple[TargetFacts, ...]
