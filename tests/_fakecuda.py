"""Fake CUDA stacks for probe tests: a gcc-built libcuda.so.1 and cuDNN, and a fake
CUDA build of torch (a package with version.py, dist-info metadata and a small
torch.cuda that asks the fake driver through ctypes, as the real one asks the real driver).

``build_fake_cuda(tmp)`` returns (site_dir, lib_dir) or raises ``GccMissing``.
Run a probe with ``PYTHONPATH=site_dir`` and ``LD_LIBRARY_PATH=lib_dir``.
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

HERE = Path(__file__).with_name("fakecuda")

CUDNN9_SUBLIBS = (
    "libcudnn_graph.so.9",
    "libcudnn_engines_precompiled.so.9",
    "libcudnn_engines_runtime_compiled.so.9",
    "libcudnn_ops.so.9",
    "libcudnn_cnn.so.9",
    "libcudnn_adv.so.9",
    "libcudnn_heuristic.so.9",
)

FAKE_TORCH_INIT = '''
"""A fake CUDA build of torch for gpudoctor's tests (no real kernels)."""
import ctypes as _ct
import os as _os
from torch import version  # noqa: F401
from torch.version import __version__  # noqa: F401

_here = _os.path.dirname(_os.path.abspath(__file__))
# the real wheel loads its cuDNN through RUNPATH when libtorch_cuda.so is loaded
_CUDNN = _ct.CDLL(_os.path.join(_here, "..", "nvidia", "cudnn", "lib", "libcudnn.so.9"))
_CUDNN.cudnnGetVersion.restype = _ct.c_size_t


def _lib():
    return _ct.CDLL("libcuda.so.1")


class _Props:
    def __init__(self, i):
        lib, dev = _lib(), _ct.c_int(i)
        buf = _ct.create_string_buffer(256)
        lib.cuDeviceGetName(buf, 256, dev)
        self.name = buf.value.decode()
        vals = {}
        for code in (75, 76, 33, 34, 50):
            v = _ct.c_int(0)
            lib.cuDeviceGetAttribute(_ct.byref(v), code, dev)
            vals[code] = v.value
        self.major, self.minor = vals[75], vals[76]
        self.pci_bus_id, self.pci_device_id, self.pci_domain_id = vals[33], vals[34], vals[50]
        raw = _ct.create_string_buffer(16)
        lib.cuDeviceGetUuid(raw, dev)
        h = raw.raw.hex()
        self.uuid = "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


class cuda:
    @staticmethod
    def _count():
        try:
            lib = _lib()
        except OSError:
            return 0
        drv = _ct.c_int(0)
        lib.cuDriverGetVersion(_ct.byref(drv))
        if lib.cuInit(0) != 0 or drv.value < int(version.cuda.split(".")[0]) * 1000:
            return 0
        n = _ct.c_int(0)
        lib.cuDeviceGetCount(_ct.byref(n))
        return n.value

    @staticmethod
    def is_available():
        return cuda._count() > 0

    @staticmethod
    def device_count():
        return cuda._count()

    @staticmethod
    def get_arch_list():
        return ["sm_80", "sm_90"] if cuda._count() else []

    @staticmethod
    def get_device_properties(i):
        return _Props(i)


class _C:
    class _cudnn:
        @staticmethod
        def getCompileVersion():
            return (9, 1, 0)

    @staticmethod
    def _cuda_getDriverVersion():
        v = _ct.c_int(0)
        _lib().cuDriverGetVersion(_ct.byref(v))
        return v.value


class backends:
    class cudnn:
        @staticmethod
        def version():
            return int(_CUDNN.cudnnGetVersion())
'''


class GccMissing(RuntimeError):
    """gcc is not installed: the fake native libraries cannot be built."""


def _cc(out: Path, source: Path, soname: str) -> None:
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O0", f"-Wl,-soname,{soname}", "-o", str(out), str(source)],
        check=True,
        capture_output=True,
        text=True,
    )


def build_fake_cuda(tmp: Path, torch_version: str = "2.4.0+cu124", cuda: str = "12.4") -> tuple:
    """Build the fake stack under ``tmp``: returns (site_dir, lib_dir)."""
    if shutil.which("gcc") is None:
        raise GccMissing("gcc is not installed")
    lib_dir = tmp / "driver"
    lib_dir.mkdir(parents=True)
    _cc(lib_dir / "libcuda.so.1", HERE / "fake_libcuda.c", "libcuda.so.1")
    site = tmp / "site"
    cudnn = site / "nvidia" / "cudnn" / "lib"
    cudnn.mkdir(parents=True)
    _cc(cudnn / "libcudnn.so.9", HERE / "fake_libcudnn.c", "libcudnn.so.9")
    empty = tmp / "empty.c"
    empty.write_text("int gpudoctor_fake_sublib;\n")
    for name in CUDNN9_SUBLIBS:
        _cc(cudnn / name, empty, name)
    pkg = site / "torch"
    pkg.mkdir()
    (pkg / "version.py").write_text(
        textwrap.dedent(f"""\
        from typing import Optional

        __all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']
        __version__ = '{torch_version}'
        debug = False
        cuda: Optional[str] = {cuda!r}
        git_version = '0123456789abcdef'
        hip: Optional[str] = None
        """)
    )
    (pkg / "__init__.py").write_text(FAKE_TORCH_INIT)
    dist = site / f"torch-{torch_version.split('+')[0]}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        textwrap.dedent(f"""\
        Metadata-Version: 2.1
        Name: torch
        Version: {torch_version}
        Requires-Dist: filelock
        Requires-Dist: nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux"
        """)
    )
    (dist / "RECORD").write_text("")
    return site, lib_dir
