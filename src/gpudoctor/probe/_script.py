"""gpudoctor probe: run by the TARGET interpreter, prints one JSON document.

Standard library only, and written for every Python 3 still in the field
(3.6+, ``gpudoctor.probe.MIN_PYTHON``; tests/test_probe_script.py parses it
with the 3.6 grammar): this file is executed by interpreters gpudoctor does
not control. One file, two levels (``--level light|full``; ``full`` when no
level is given, as inside a Jupyter kernel, which runs :func:`main` from
this source):

- ``light`` imports NO framework: torch's version and CUDA build come from
  distribution metadata read as text and ``torch/version.py`` parsed as
  text; CUDA itself is asked through the driver API (``libcuda.so.1`` via
  ctypes: ``cuInit``, ``cuDriverGetVersion``, ``cuDeviceGetCount``, per
  device the name, compute capability, total memory and a context
  create/destroy); the cuDNN sub-libraries get a real ``dlopen`` test. That
  is what ``torch.cuda.is_available()`` boils down to, at a fraction of the
  cost of ``import torch``. What only an import can tell (import errors,
  arch list, mapped libraries, Triton, compilers) is reported as unavailable.
- ``full`` additionally imports torch, once: the only place torch is
  imported. Every step is guarded: a torch that fails to import (an OSError
  about a missing .so, say) comes back as data. The GPU provider libraries
  of the other frameworks are dlopened in child interpreters (a crash names
  the library); torch's own are checked in this process after its import,
  so torch's libraries are loaded once per target, not twice. ``--deep``
  adds the functional smoke test (``_smoke.py`` beside this file).

Output: one line of JSON on stdout, framed by the marker below, so that
noise printed by sitecustomize or torch itself cannot corrupt it. Both
levels print the same header keys; ``level`` says which one ran.
"""

import json
import os
import sys
import time

PROBE_VERSION = 1
MARKER = "@@gpudoctor-probe@@"
#: probe levels, cheapest first (``gpudoctor.probe.LEVELS`` names the same)
LEVELS = ("light", "full")

ENV_PREFIXES = ("CUDA_", "NVIDIA_", "PYTORCH_", "TORCH_", "NCCL_", "CUDNN_", "TRITON_", "CONDA_", "PIP_", "UV_")
DISTRIBUTIONS = ("ipykernel", "numba-cuda", "numba")  # reported as name -> version when installed
ENV_NAMES = (
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "PATH",
    "PYTHONPATH",
    "PYTHONHOME",
    "VIRTUAL_ENV",
    "JUPYTER_PATH",
    "JUPYTER_DATA_DIR",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "HOME",
    "LOADEDMODULES",
    "CC",
    "CXX",
    "LIBRARY_PATH",
)
NOT_IMPORTED = "the light probe does not import torch (run with --deep for the full probe)"

# CUdevice_attribute values (CUDA driver API, cuda.h)
_ATTR_PCI_BUS_ID = 33
_ATTR_PCI_DEVICE_ID = 34
_ATTR_CC_MAJOR = 75
_ATTR_CC_MINOR = 76
_ATTR_PCI_DOMAIN_ID = 50


def _err(exc):
    return ("%s: %s" % (type(exc).__name__, exc)).strip()


def _section(fn, *args):
    """Run one probe section; a crash becomes {"unavailable": reason} instead of losing the document."""
    try:
        return fn(*args)
    except BaseException as exc:
        return {"unavailable": "probe section %s failed: %s" % (fn.__name__, _err(exc))}


# --------------------------------------------------------------------------- distributions, from files


class _Dist:
    """A distribution found on sys.path: its metadata headers, read as text (``importlib.metadata``
    would import the email package: a third of the light probe's time, and it is 3.8+). ``path`` is a
    ``.dist-info``/``.egg-info`` directory, or an ``.egg-info`` file (distutils installs)."""

    def __init__(self, path, location):
        self.path = path
        self.location = location
        self.version = None
        self.requires = []
        metas = [path] if os.path.isfile(path) else [os.path.join(path, n) for n in ("METADATA", "PKG-INFO")]
        for meta in metas:
            if os.path.isfile(meta):
                with open(meta, encoding="utf-8", errors="replace") as fh:
                    for line in fh:
                        if not line.strip():
                            break  # the body (description) follows the headers
                        key, _sep, value = line.partition(":")
                        if key == "Version" and self.version is None:
                            self.version = value.strip()
                        elif key == "Requires-Dist":
                            self.requires.append(value.strip())
                break


_LISTINGS = {}


def _normalise(name):
    import re

    return re.sub(r"[-_.]+", "_", name).lower()


def _dist(name):
    """The first distribution called ``name`` on sys.path (the one importlib.metadata would find), or None."""
    want = _normalise(name)
    for entry in sys.path:
        d = entry or "."
        if d not in _LISTINGS:
            try:
                _LISTINGS[d] = sorted(os.listdir(d)) if os.path.isdir(d) else []
            except OSError:
                _LISTINGS[d] = []
        for item in _LISTINGS[d]:
            if item.endswith((".dist-info", ".egg-info")):
                stem = item.rsplit(".", 1)[0]
                if _normalise(stem.split("-", 1)[0]) == want:
                    return _Dist(os.path.join(d, item), d)
    return None


def _dist_info(name):
    """(installed, version, location) from package metadata, without importing: ``location`` is the
    sys.path entry holding the metadata (``importlib.metadata``'s ``locate_file("")``)."""
    d = _dist(name)
    if d is None:
        return False, None, None
    return True, d.version, d.location


def _package_dir(name):
    """Directory of a top-level package, found without importing it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        return None
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    if locations:
        return locations[0]
    return os.path.dirname(spec.origin) if spec.origin else None


def version_file(path):
    """Top-level ``NAME = 'text'`` / ``NAME: Optional[str] = None`` assignments of a version.py
    (torch/version.py), read as text: strings, None, True/False; other values are left out."""
    import re

    out = {}
    with open(path) as fh:
        for line in fh:
            m = re.match(
                r"""^([A-Za-z_]\w*)\s*(?::[^=]*)?=\s*(?:'([^'\\]*)'|"([^"\\]*)"|(None|True|False))\s*(?:#.*)?$""",
                line.rstrip("\n"),
            )
            if not m:
                continue
            if m.group(4) is not None:
                out[m.group(1)] = {"None": None, "True": True, "False": False}[m.group(4)]
            else:
                out[m.group(1)] = m.group(2) if m.group(2) is not None else m.group(3)
    return out


def cudnn_major_from_metadata(dist):
    """The cuDNN major torch's wheel depends on (``nvidia-cudnn-cuNN==9.x`` in Requires-Dist), else None."""
    import re

    for req in (getattr(dist, "requires", None) or []) if dist is not None else []:
        m = re.match(r"\s*nvidia-cudnn-cu\d+\s*\(?\s*==\s*(\d+)", req, re.IGNORECASE)
        if m:
            return int(m.group(1))
    for name in ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn-cu11"):
        d = _dist(name)
        if d is not None:
            try:
                return int(d.version.split(".")[0])
            except ValueError:
                return None
    return None


# --------------------------------------------------------------------------- CUDA driver API

_CU_ERRORS = {
    1: "CUDA_ERROR_INVALID_VALUE",
    2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED",
    4: "CUDA_ERROR_DEINITIALIZED",
    34: "CUDA_ERROR_STUB_LIBRARY",
    35: "CUDA_ERROR_INSUFFICIENT_DRIVER",
    46: "CUDA_ERROR_DEVICE_UNAVAILABLE",
    100: "CUDA_ERROR_NO_DEVICE",
    101: "CUDA_ERROR_INVALID_DEVICE",
    201: "CUDA_ERROR_INVALID_CONTEXT",
    304: "CUDA_ERROR_OPERATING_SYSTEM",
    802: "CUDA_ERROR_SYSTEM_NOT_READY",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    999: "CUDA_ERROR_UNKNOWN",
}


def _cu_error(lib, code):
    """``NAME (code): description`` for a CUresult, from cuGetErrorName/String when the driver has them."""
    import ctypes

    name, text = _CU_ERRORS.get(code), None
    for fn_name, slot in (("cuGetErrorName", "name"), ("cuGetErrorString", "text")):
        try:
            fn = getattr(lib, fn_name)
            out = ctypes.c_char_p()
            if fn(ctypes.c_int(code), ctypes.byref(out)) == 0 and out.value:
                if slot == "name":
                    name = out.value.decode("utf-8", "replace")
                else:
                    text = out.value.decode("utf-8", "replace")
        except Exception:
            pass
    head = "%s (%d)" % (name or "CUresult", code)
    return head + (": " + text if text else "")


def cuda_driver(context=True):
    """The CUDA driver API as the target process sees it (after CUDA_VISIBLE_DEVICES).

    Returns a dict: loaded, error, init_ok, init_error, driver_api_version,
    device_count, devices [{index, name, capability, total_memory_mib,
    pci_bus_id, uuid, context_ok, context_error}].
    """
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1", mode=getattr(os, "RTLD_NOW", 2))
    except OSError as exc:
        return {"loaded": False, "error": str(exc)}
    out = {"loaded": True}
    v = ctypes.c_int(0)
    try:
        if lib.cuDriverGetVersion(ctypes.byref(v)) == 0:
            out["driver_api_version"] = int(v.value)
    except AttributeError:
        pass
    rc = lib.cuInit(ctypes.c_uint(0))
    if rc != 0:
        out["init_ok"] = False
        out["init_error"] = _cu_error(lib, rc)
        out["device_count"] = 0
        return out
    out["init_ok"] = True
    n = ctypes.c_int(0)
    rc = lib.cuDeviceGetCount(ctypes.byref(n))
    if rc != 0:
        out["init_error"] = "cuDeviceGetCount: " + _cu_error(lib, rc)
        out["device_count"] = 0
        return out
    out["device_count"] = int(n.value)
    devices = []
    for i in range(int(n.value)):
        dev = ctypes.c_int(0)
        rec = {"index": i}
        rc = lib.cuDeviceGet(ctypes.byref(dev), ctypes.c_int(i))
        if rc != 0:
            rec["context_ok"] = False
            rec["context_error"] = "cuDeviceGet: " + _cu_error(lib, rc)
            devices.append(rec)
            continue
        buf = ctypes.create_string_buffer(256)
        if lib.cuDeviceGetName(buf, ctypes.c_int(256), dev) == 0:
            rec["name"] = buf.value.decode("utf-8", "replace")

        def attr(code, dev=dev):  # this device, bound now (B023)
            val = ctypes.c_int(0)
            return int(val.value) if lib.cuDeviceGetAttribute(ctypes.byref(val), ctypes.c_int(code), dev) == 0 else None

        major, minor = attr(_ATTR_CC_MAJOR), attr(_ATTR_CC_MINOR)
        if major is not None and minor is not None:
            rec["capability"] = "%d.%d" % (major, minor)
        bus, pdev, dom = attr(_ATTR_PCI_BUS_ID), attr(_ATTR_PCI_DEVICE_ID), attr(_ATTR_PCI_DOMAIN_ID)
        if bus is not None:
            rec["pci_bus_id"] = "%04x:%02x:%02x.0" % (dom or 0, bus, pdev or 0)
        mem = ctypes.c_size_t(0)
        fn = getattr(lib, "cuDeviceTotalMem_v2", None) or lib.cuDeviceTotalMem
        if fn(ctypes.byref(mem), dev) == 0:
            rec["total_memory_mib"] = int(mem.value) // (1024 * 1024)
        uuid = ctypes.create_string_buffer(16)
        getter = getattr(lib, "cuDeviceGetUuid_v2", None) or getattr(lib, "cuDeviceGetUuid", None)
        if getter is not None and getter(uuid, dev) == 0:
            h = uuid.raw.hex()
            rec["uuid"] = "GPU-%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])
        if context:
            ctx = ctypes.c_void_p()
            create = getattr(lib, "cuCtxCreate_v2", None) or lib.cuCtxCreate
            rc = create(ctypes.byref(ctx), ctypes.c_uint(0), dev)
            if rc == 0:
                destroy = getattr(lib, "cuCtxDestroy_v2", None) or lib.cuCtxDestroy
                destroy(ctx)
                rec["context_ok"] = True
            else:
                rec["context_ok"] = False
                rec["context_error"] = _cu_error(lib, rc)
        devices.append(rec)
    out["devices"] = devices
    return out


# --------------------------------------------------------------------------- libraries

#: basenames of the libraries reported from /proc/self/maps
MAPPED_PREFIXES = (
    "libcudnn",
    "libcudart",
    "libcublas",
    "libnccl",
    "libcuda.",
    "libnvrtc",
    "libcufft",
    "libcurand",
    "libcusolver",
    "libcusparse",
    "libnvJitLink",
    "libcupti",
    "libnvidia-ml",
    "libnvidia-ptxjitcompiler",
    "libtorch",
    "libc10",
)

#: cuDNN sub-libraries per major (PyTorch build_cuda.sh DEPS_LIST, cuDNN 8 and 9 builds)
CUDNN_SUBLIBS = {
    8: (
        "libcudnn_ops_infer.so.8",
        "libcudnn_ops_train.so.8",
        "libcudnn_cnn_infer.so.8",
        "libcudnn_cnn_train.so.8",
        "libcudnn_adv_infer.so.8",
        "libcudnn_adv_train.so.8",
    ),
    9: (
        "libcudnn_graph.so.9",
        "libcudnn_engines_precompiled.so.9",
        "libcudnn_engines_runtime_compiled.so.9",
        "libcudnn_ops.so.9",
        "libcudnn_cnn.so.9",
        "libcudnn_adv.so.9",
        "libcudnn_heuristic.so.9",
    ),
}


def mapped_libraries(prefixes=MAPPED_PREFIXES, maps_path="/proc/self/maps"):
    """Distinct full paths of mapped files whose basename starts with one of ``prefixes``, sorted
    (address order in the maps file changes from run to run with ASLR)."""
    with open(maps_path) as fh:
        text = fh.read()
    seen = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        path = parts[5].strip()
        if path.endswith(" (deleted)"):  # no str.removesuffix before Python 3.9 (the probe runs on 3.6+)
            path = path[: -len(" (deleted)")]
        base = os.path.basename(path)
        if ".so" in base and base.startswith(prefixes) and path not in seen:
            seen.append(path)
    return sorted(seen)


def _dlopen(name_or_path):
    """(ok, error) of a real dlopen through ctypes; the error is dlerror() verbatim."""
    import ctypes

    try:
        ctypes.CDLL(name_or_path, mode=getattr(os, "RTLD_NOW", 2) | getattr(ctypes, "RTLD_LOCAL", 0))
    except OSError as exc:
        return False, str(exc)
    return True, None


def cudnn_load_test(major, search_dirs):
    """dlopen every cuDNN ``major`` sub-library: from the first of ``search_dirs``
    holding the file (by full path), else by bare name through the loader's own
    search (LD_LIBRARY_PATH, ld.so cache). Returns a list of load records."""
    results = []
    for name in CUDNN_SUBLIBS.get(major, ()):
        target = name
        for d in search_dirs:
            candidate = os.path.join(d, name)
            if os.path.lexists(candidate):
                target = candidate
                break
        ok, error = _dlopen(target)
        results.append({"name": name, "ok": ok, "path": target if os.sep in target else None, "error": error})
    try:
        mapped = mapped_libraries(("libcudnn",))
    except OSError:
        mapped = []
    for rec in results:
        if rec["ok"] and rec["path"] is None:
            rec["path"] = next((m for m in mapped if os.path.basename(m).startswith(rec["name"])), None)
    return results


def _wheel_lib_dirs(component):
    """``nvidia/<component>/lib`` and ``nvidia/cu13/lib`` directories on sys.path."""
    out = []
    for entry in sys.path:
        for sub in (("nvidia", component, "lib"), ("nvidia", "cu13", "lib")):
            d = os.path.join(entry or ".", *sub)
            if os.path.isdir(d) and d not in out:
                out.append(d)
    return out


def cudnn_runtime_version(path):
    """``cudnnGetVersion()`` of the library at ``path`` (already mapped: no new copy is loaded)."""
    import ctypes

    lib = ctypes.CDLL(path)
    fn = lib.cudnnGetVersion
    fn.restype = ctypes.c_size_t
    return int(fn())


def cudnn_without_torch():
    """The nvidia-cudnn wheel's cuDNN when torch is absent or does not import (onnxruntime-gpu,
    ctranslate2, tensorflow... use it too): version of its shim and the sub-library load test."""
    import re

    for d in _wheel_lib_dirs("cudnn"):
        majors = sorted(int(m.group(1)) for m in (re.match(r"libcudnn\.so\.(\d+)$", n) for n in os.listdir(d)) if m)
        if not majors:
            continue
        major = majors[-1]
        shim = os.path.join(d, "libcudnn.so.%d" % major)
        out = {
            "applicable": True,
            "reason": "torch-free: the cuDNN of the nvidia-cudnn wheel",
            "expected_major": major,
            "library_path": shim,
            "loaded_paths": [shim],
            "search_dirs": [d],
        }
        try:
            out["runtime_version"] = cudnn_runtime_version(shim)
        except Exception as exc:
            out["runtime_error"] = _err(exc)
        out["sublibraries"] = cudnn_load_test(major, [d])
        return out
    return None


def _without_cudnn(torch_facts, imported):
    """The cuDNN record when torch loads none (both levels): the nvidia-cudnn wheel's own cuDNN when
    torch is absent or did not import (``imported`` False), else why cuDNN does not apply; None
    when torch is a CUDA build whose cuDNN is to be tested."""
    if not torch_facts.get("installed") or not imported:
        wheel = cudnn_without_torch()
        if wheel is not None:
            return wheel
    if not torch_facts.get("installed"):
        return {"applicable": False, "reason": "torch is not installed, so no cuDNN is loaded"}
    if not imported:
        return {"applicable": False, "reason": "torch does not import, so no cuDNN is loaded"}
    if torch_facts.get("hip"):
        return {"applicable": False, "reason": "ROCm builds use MIOpen, not cuDNN"}
    if not torch_facts.get("cuda"):
        return {
            "applicable": False,
            "reason": "torch %s is a CPU-only build: it uses no cuDNN" % torch_facts.get("version"),
        }
    return None


def probe_libcuda():
    """``dlopen("libcuda.so.1")`` and ``cuDriverGetVersion`` (the same record as the full probe's)."""
    import ctypes

    ok, error = _dlopen("libcuda.so.1")
    if not ok:
        return {"loaded": False, "error": error}
    out = {"loaded": True}
    try:
        out["path"] = next((p for p in mapped_libraries(("libcuda.",))), None)
    except OSError:
        pass
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        v = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(v)) == 0:
            out["driver_api_version"] = int(v.value)
    except Exception:
        pass
    return out


# --------------------------------------------------------------------------- the light level


def probe_torch_light(driver):
    """TorchFacts without ``import torch``: metadata, torch/version.py, and the driver API for
    ``cuda_available``/``device_count``/``devices`` (what torch.cuda would report on a CUDA build)."""
    installed, dist_version, _loc = _dist_info("torch")
    location = _package_dir("torch")
    out = {"installed": installed or location is not None, "dist_version": dist_version, "import_tried": False}
    if not out["installed"]:
        return out
    out["location"] = location
    vf = os.path.join(location, "version.py") if location else None
    if vf and os.path.isfile(vf):
        try:
            values = version_file(vf)
        except Exception as exc:
            out["cuda_error"] = "cannot read %s: %s" % (vf, _err(exc))
            values = {}
        out["version"] = str(values["__version__"]) if values.get("__version__") else dist_version
        out["cuda"] = values.get("cuda") if isinstance(values.get("cuda"), str) else None
        out["hip"] = values.get("hip") if isinstance(values.get("hip"), str) else None
    else:
        out["version"] = dist_version
    if out.get("hip"):
        return out
    if not out.get("cuda"):
        out["cuda_available"] = False
        out["device_count"] = 0
        return out
    if isinstance(driver, dict) and driver.get("driver_api_version"):
        out["driver_api_version"] = driver["driver_api_version"]
    if not isinstance(driver, dict) or not driver.get("loaded"):
        out["cuda_available"], out["device_count"] = False, 0
        out["cuda_error"] = "libcuda.so.1 cannot be loaded: %s" % (
            (driver or {}).get("error") or (driver or {}).get("unavailable")
        )
        return out
    if not driver.get("init_ok") or driver.get("init_error"):
        out["cuda_available"], out["device_count"] = False, 0
        out["cuda_error"] = "cuInit: %s" % driver.get("init_error")
        return out
    need = int(str(out["cuda"]).split(".")[0]) * 1000
    if driver.get("driver_api_version") and driver["driver_api_version"] < need:
        out["cuda_available"], out["device_count"] = False, 0
        out["cuda_error"] = "the driver supports CUDA %d.%d; this torch's CUDA %s runtime needs %d.0 or newer" % (
            driver["driver_api_version"] // 1000,
            driver["driver_api_version"] % 1000 // 10,
            out["cuda"],
            need // 1000,
        )
        return out
    count = int(driver.get("device_count") or 0)
    out["device_count"] = count
    out["cuda_available"] = count > 0
    out["devices"] = [
        {k: d[k] for k in ("index", "name", "capability", "pci_bus_id", "uuid") if k in d}
        for d in driver.get("devices", [])
        if d.get("name") and d.get("capability")
    ]
    return out


def probe_cudnn_light(torch_facts, torch_dist):
    """cuDNN without importing torch: the shim ``libcudnn.so.N`` resolved as libtorch's loader would
    (LD_LIBRARY_PATH first, then the wheel's directory that torch's RUNPATH names, then the ld.so
    cache), its ``cudnnGetVersion()``, and the same sub-library dlopen test as the full probe.
    Without torch, the nvidia-cudnn wheel's cuDNN (as the full probe reports it)."""
    no_cudnn = _without_cudnn(torch_facts, imported=True)
    if no_cudnn is not None:
        return no_cudnn
    major = cudnn_major_from_metadata(torch_dist)
    if major is None:
        return {"applicable": False, "reason": "this torch build names no cuDNN in its metadata"}
    out = {"applicable": True, "expected_major": major}
    shim = "libcudnn.so.%d" % major
    ld_dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    dirs = []
    for d in (
        ld_dirs
        + _wheel_lib_dirs("cudnn")
        + ([os.path.join(torch_facts["location"], "lib")] if torch_facts.get("location") else [])
    ):
        if d not in dirs and os.path.isdir(d):
            dirs.append(d)
    target = next((os.path.join(d, shim) for d in dirs if os.path.lexists(os.path.join(d, shim))), shim)
    ok, error = _dlopen(target)
    if ok:
        path = target if os.sep in target else next(iter(mapped_libraries(("libcudnn.so",))), None)
        out["library_path"] = path
        out["loaded_paths"] = [path] if path else []
        try:
            out["runtime_version"] = cudnn_runtime_version(target)
        except Exception as exc:
            out["runtime_error"] = _err(exc)
    else:
        out["runtime_error"] = error
    search = ([os.path.dirname(out["library_path"])] if out.get("library_path") else []) + dirs
    out["search_dirs"] = [d for i, d in enumerate(search) if d not in search[:i]]
    out["sublibraries"] = cudnn_load_test(major, out["search_dirs"])
    return out


# --------------------------------------------------------------------------- the full level


def probe_torch():
    """(TorchFacts, the torch module or None): ``import torch``, guarded, and what torch says of CUDA."""
    import warnings

    installed, dist_version, _location = _dist_info("torch")
    out = {"installed": installed, "dist_version": dist_version}
    if not installed:
        # a torch importable from PYTHONPATH without metadata still counts
        import importlib.util

        try:
            spec = importlib.util.find_spec("torch")
        except Exception:
            spec = None
        if spec is None:
            return out, None
        out["installed"] = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import torch
    except BaseException as exc:  # OSError for a missing .so, ImportError, even SystemExit
        out["import_ok"] = False
        out["import_error"] = _err(exc)
        return out, None
    out["import_ok"] = True
    out["location"] = os.path.dirname(getattr(torch, "__file__", "") or "") or None
    out["version"] = str(getattr(torch, "__version__", "")) or None
    version_mod = getattr(torch, "version", None)
    out["cuda"] = getattr(version_mod, "cuda", None)
    out["hip"] = getattr(version_mod, "hip", None)
    messages = []  # import-time warnings (e.g. NumPy missing) are not about CUDA
    try:
        out["cudnn_version"] = torch.backends.cudnn.version()
    except Exception as exc:
        messages.append("torch.backends.cudnn.version(): " + _err(exc))
    try:
        cv = torch._C._cudnn.getCompileVersion()  # present on CUDA builds only
        out["cudnn_compile_version"] = ".".join(str(x) for x in cv)
    except Exception:
        pass
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out["cuda_available"] = bool(torch.cuda.is_available())
        except Exception as exc:
            messages.append("torch.cuda.is_available(): " + _err(exc))
        try:
            out["device_count"] = int(torch.cuda.device_count())
        except Exception as exc:
            messages.append("torch.cuda.device_count(): " + _err(exc))
    messages.extend(str(w.message) for w in caught)
    try:
        out["arch_list"] = list(torch.cuda.get_arch_list())
    except Exception:
        out["arch_list"] = []
    if out.get("cuda"):
        try:
            out["driver_api_version"] = int(torch._C._cuda_getDriverVersion())
        except Exception:
            pass
    if messages:
        out["cuda_error"] = "\n".join(dict.fromkeys(m.strip() for m in messages if m.strip()))
    return out, torch


def probe_cudnn(torch_facts, torch_mod, mapped):
    """cuDNN after ``import torch``: the mapped shim's version and the sub-library dlopen test."""
    no_cudnn = _without_cudnn(torch_facts, torch_mod is not None)
    if no_cudnn is not None:
        return no_cudnn
    major = None
    compiled = torch_facts.get("cudnn_compile_version")
    if compiled:
        major = int(compiled.split(".")[0])
    elif torch_facts.get("cudnn_version"):
        v = int(torch_facts["cudnn_version"])
        major = v // 10000 if v >= 90000 else v // 1000
    out = {"applicable": True, "expected_major": major}
    cudnn_paths = [p for p in mapped if os.path.basename(p).startswith("libcudnn")]
    shims = [p for p in cudnn_paths if os.path.basename(p).startswith("libcudnn.so")]
    out["loaded_paths"] = cudnn_paths
    if shims:
        out["library_path"] = shims[0]
        try:
            out["runtime_version"] = cudnn_runtime_version(shims[0])
        except Exception as exc:
            out["runtime_error"] = _err(exc)
    else:
        out["runtime_error"] = "no libcudnn.so is mapped into the process after import torch"
    if major is None:
        if not shims:
            return {"applicable": False, "reason": "this torch build reports no cuDNN"}
        return out
    dirs = []
    if shims:
        dirs.append(os.path.dirname(shims[0]))
    dirs.extend(_wheel_lib_dirs("cudnn"))
    loc = torch_facts.get("location")
    if loc:
        dirs.append(os.path.join(loc, "lib"))
    dirs = [d for i, d in enumerate(dirs) if d not in dirs[:i] and os.path.isdir(d)]
    out["search_dirs"] = dirs
    out["sublibraries"] = cudnn_load_test(major, dirs)
    return out


#: GPU frameworks: (key, distribution names, provider library globs relative to site-packages).
#: Mirrors gpudoctor/data/frameworks.toml (a test keeps the two equal); the probe is stdlib-only.
GPU_FRAMEWORKS = (
    (
        "torch",
        ("torch",),
        (
            "torch/lib/libtorch_global_deps.so",
            "torch/lib/libtorch_cuda.so",
            "torch/lib/libtorch_cuda_linalg.so",
            "torch/lib/libc10_cuda.so",
        ),
    ),
    ("onnxruntime-gpu", ("onnxruntime-gpu",), ("onnxruntime/capi/libonnxruntime_providers_cuda.so",)),
    (
        "tensorflow",
        ("tensorflow", "tensorflow-gpu", "tf-nightly"),
        ("tensorflow/libtensorflow_framework.so.2", "tensorflow/libtensorflow_cc.so.2"),
    ),
    (
        "jax",
        ("jax-cuda12-plugin", "jax-cuda13-plugin", "jaxlib"),
        (
            "jax_plugins/xla_cuda12/xla_cuda_plugin.so",
            "jax_plugins/xla_cuda13/xla_cuda_plugin.so",
            "jax_cuda12_plugin/*.so",
            "jax_cuda13_plugin/*.so",
        ),
    ),
    (
        "cupy",
        ("cupy-cuda12x", "cupy-cuda11x", "cupy-cuda13x"),
        ("cupy_backends/cuda/api/*.so", "cupy/cuda/*.so", "cupy_backends/cuda/libs/*.so"),
    ),
    ("ctranslate2", ("ctranslate2",), ("ctranslate2.libs/libctranslate2*.so*", "ctranslate2/*.so")),
    (
        "paddlepaddle-gpu",
        ("paddlepaddle-gpu",),
        ("paddle/base/libpaddle.so", "paddle/fluid/libpaddle.so", "paddle/libs/*.so*"),
    ),
    (
        "tensorrt",
        ("tensorrt-cu12-libs", "tensorrt-cu11-libs", "tensorrt-cu13-libs", "tensorrt-libs"),
        ("tensorrt_libs/libnvinfer.so.*", "tensorrt_libs/libnvinfer_plugin.so.*"),
    ),
)

_LOAD_CHILD = (
    "import ctypes, json, os, sys\n"
    "for p in sys.argv[1:]:\n"
    "    sys.stdout.write(json.dumps({'start': p}) + '\\n'); sys.stdout.flush()\n"
    "    try:\n"
    "        ctypes.CDLL(p, mode=getattr(os, 'RTLD_NOW', 2))\n"
    "        r = {'name': os.path.basename(p), 'ok': True, 'path': p}\n"
    "    except OSError as e:\n"
    "        r = {'name': os.path.basename(p), 'ok': False, 'path': p, 'error': str(e)}\n"
    "    sys.stdout.write(json.dumps(r) + '\\n'); sys.stdout.flush()\n"
)


def _framework_libraries(dists, patterns):
    """(dist, version, provider library paths) of the first installed of ``dists``, or None."""
    import glob

    for dist in dists:
        ok, version, location = _dist_info(dist)
        if ok:
            paths = []
            for pattern in patterns:
                for p in sorted(glob.glob(os.path.join(location or "", pattern))):
                    if p not in paths:
                        paths.append(p)
            return dist, version, paths
    return None


def _load_child(rec, paths):
    """Start the child interpreter that dlopens ``paths`` (None, with ``rec["error"]``, when it cannot start)."""
    import subprocess

    try:
        return subprocess.Popen(
            [sys.executable, "-c", _LOAD_CHILD] + paths, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    except OSError as exc:
        rec["error"] = _err(exc)
        return None


def framework_load_start(deferred=()):
    """Start the load test (:func:`framework_load_test`) without waiting: one child interpreter
    per installed framework that has GPU provider libraries, except the frameworks named in
    ``deferred`` (the full probe defers torch: it is about to be imported in this process).
    Returns the pending records ``[(record, child or None, paths)]`` for
    :func:`framework_load_finish`; the probe starts them before it imports torch, so the dlopens
    run while torch imports."""
    pending = []
    for key, dists, patterns in GPU_FRAMEWORKS:
        found = _framework_libraries(dists, patterns)
        if not found:
            continue
        dist, version, paths = found
        rec = {"name": key, "dist": dist, "version": version or "?", "loads": []}
        proc = _load_child(rec, paths) if paths and key not in deferred else None
        pending.append((rec, proc, paths if key in deferred else []))
    return pending


def framework_load_finish(pending, timeout_s=60.0, imported=()):
    """Wait for the children of :func:`framework_load_start` (each at most ``timeout_s`` s more,
    then killed) and return one record per framework: ``name``, ``dist``, ``version``, ``loads``
    (``name``, ``ok``, ``path``, ``error``) and ``error`` when a child hung or died (naming the
    library it was loading). A deferred framework named in ``imported`` (imported in this process,
    so its libraries are mapped here already) is tested here with the same dlopen: its libraries
    are not loaded a second time in a child; any other deferred one gets its child now."""
    import subprocess

    started = []
    for rec, proc, paths in pending:
        if paths and rec["name"] in imported:
            for p in paths:
                ok, error = _dlopen(p)
                load = {"name": os.path.basename(p), "ok": ok, "path": p}
                if not ok:
                    load["error"] = error
                rec["loads"].append(load)
        elif paths:
            proc = _load_child(rec, paths)
        started.append((rec, proc))
    out = []
    for rec, proc in started:
        if proc is not None:
            try:
                stdout, _err_text = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, _err_text = proc.communicate()
                rec["error"] = "the load test did not finish within %g s" % timeout_s
            started_lib = None
            for line in stdout.decode("utf-8", "replace").splitlines():
                try:
                    item = json.loads(line)
                except ValueError:
                    continue
                if "start" in item:
                    started_lib = item["start"]
                else:
                    rec["loads"].append(item)
                    started_lib = None
            if started_lib and "error" not in rec:
                rec["error"] = "the load test died (exit status %s) while loading %s" % (proc.returncode, started_lib)
        out.append(rec)
    return out


def framework_load_test(timeout_s=60.0):
    """dlopen (RTLD_NOW) every GPU provider library of every installed framework, one child
    interpreter per framework; a crash names the library being loaded."""
    return framework_load_finish(framework_load_start(), timeout_s)


def _which(name):
    try:
        from shutil import which
    except ImportError:  # pragma: no cover
        return None
    return which(name)


def probe_toolchain(include_dir):
    import glob

    header = os.path.join(include_dir, "Python.h")
    out = {"python_h": os.path.isfile(header), "python_h_path": header}
    for key, env_name, names in (("cc", "CC", ("gcc", "cc", "clang")), ("cxx", "CXX", ("g++", "c++", "clang++"))):
        found = None
        env_value = os.environ.get(env_name, "").split()
        if env_value:
            found = _which(env_value[0])
        for n in names:
            if found:
                break
            found = _which(n)
        out[key] = found
    others = []
    for d in sorted(glob.glob("/usr/include/python3*")):
        if os.path.isfile(os.path.join(d, "Python.h")) and os.path.realpath(d) != os.path.realpath(include_dir):
            others.append(d)
    out["other_python_headers"] = others
    return out


def probe_triton(torch_mod):
    installed, version = False, None
    for name in ("triton", "pytorch-triton"):
        ok, v, _loc = _dist_info(name)
        if ok:
            installed, version = True, v
            break
    out = {"installed": installed, "version": version}
    if not installed or torch_mod is None:
        return out
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import triton  # noqa: F401
        out["import_ok"] = True
    except BaseException as exc:
        out["import_error"] = _err(exc)
    return out


def probe_devices(torch):
    devices = []
    for i in range(int(torch.cuda.device_count())):
        props = torch.cuda.get_device_properties(i)
        dev = {"index": i, "name": str(props.name), "capability": "%d.%d" % (props.major, props.minor)}
        bus = getattr(props, "pci_bus_id", None)
        if bus is not None:
            dev["pci_bus_id"] = "%04x:%02x:%02x.0" % (
                int(getattr(props, "pci_domain_id", 0) or 0),
                int(bus),
                int(getattr(props, "pci_device_id", 0) or 0),
            )
        uuid = getattr(props, "uuid", None)
        if uuid is not None:
            text = str(uuid)
            dev["uuid"] = text if text.startswith(("GPU-", "MIG-")) else "GPU-" + text
        devices.append(dev)
    return devices


def _mount_of(path, mounts_text):
    """(mount point, fs type) of the mount holding ``path``: the longest mount point that prefixes it."""
    best = ("/", "")
    for line in mounts_text.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) >= len(best[0]):
            best = (point, parts[2])
    return best


def probe_compile_caches(mounts_path="/proc/self/mounts"):
    """Where torch.compile's Triton and Inductor caches go in this process, and whether they can: the
    directory (TRITON_CACHE_DIR, else ~/.triton/cache; TORCHINDUCTOR_CACHE_DIR, else
    <tempdir>/torchinductor_<user>, as torch and Triton compute them), the nearest existing directory,
    whether this user may create files there, its file system type and the free space."""
    import getpass
    import tempfile

    try:
        user = getpass.getuser()
    except Exception:
        user = str(os.getuid())
    home = os.environ.get("TRITON_HOME") or os.path.expanduser("~")
    wanted = [
        ("triton", "TRITON_CACHE_DIR", os.path.join(home, ".triton", "cache")),
        ("inductor", "TORCHINDUCTOR_CACHE_DIR", os.path.join(tempfile.gettempdir(), "torchinductor_" + user)),
    ]
    try:
        with open(mounts_path) as fh:
            mounts = fh.read()
    except OSError:
        mounts = ""
    out = []
    for name, var, default in wanted:
        path = os.environ.get(var) or default
        source = var if os.environ.get(var) else "default"
        checked = os.path.abspath(path)
        while not os.path.exists(checked) and os.path.dirname(checked) != checked:
            checked = os.path.dirname(checked)
        real = os.path.realpath(checked)
        is_dir = os.path.isdir(real)
        free = None
        try:
            st = os.statvfs(real if is_dir else os.path.dirname(real))
            free = st.f_bavail * st.f_frsize
        except OSError:
            pass
        point, fstype = _mount_of(real, mounts)
        out.append(
            {
                "name": name,
                "path": path,
                "source": source,
                "exists": os.path.isdir(path),
                "checked": checked,
                "writable": bool(is_dir and os.access(real, os.W_OK | os.X_OK)),
                "fstype": fstype or None,
                "mount": point if fstype else None,
                "free_bytes": free,
            }
        )
    return out


def probe_limits():
    """RLIMIT_NOFILE and RLIMIT_MEMLOCK of this (the target) process; -1 (RLIM_INFINITY) -> None."""
    import resource

    def one(which):
        soft, hard = resource.getrlimit(which)
        return {
            "soft": None if soft == resource.RLIM_INFINITY else soft,
            "hard": None if hard == resource.RLIM_INFINITY else hard,
        }

    return {
        "source": "probe of %s (getrlimit)" % sys.executable,
        "nofile": one(resource.RLIMIT_NOFILE),
        "memlock": one(resource.RLIMIT_MEMLOCK),
    }


def header():
    """The interpreter part of the document (shared shape with the full probe)."""
    import sysconfig

    env = {}
    for key, value in os.environ.items():
        if key.startswith(ENV_PREFIXES) or key in ENV_NAMES:
            env[key] = value
    prefix = sys.prefix
    base_prefix = getattr(sys, "base_prefix", getattr(sys, "real_prefix", prefix))
    return {
        "probe_version": PROBE_VERSION,
        "executable": sys.executable,
        "python_version": "%d.%d.%d" % sys.version_info[:3],
        "implementation": sys.implementation.name,
        "prefix": prefix,
        "base_prefix": base_prefix,
        "is_venv": prefix != base_prefix,
        "is_conda": os.path.isdir(os.path.join(prefix, "conda-meta")),
        "include_dir": sysconfig.get_paths().get("include", ""),
        "env": env,
    }


def parse_args(argv):
    """(level, deep) from ``argv``: ``--level light|full`` (or ``--level=...``; ``full`` without it)
    and ``--deep``. Anything else is ignored: inside a Jupyter kernel the kernel's own argv is there."""
    level, deep = "full", False
    args = list(argv)
    for i, arg in enumerate(args):
        if arg == "--deep":
            deep = True
        elif arg.startswith("--level="):
            level = arg.split("=", 1)[1]
        elif arg == "--level" and i + 1 < len(args):
            level = args[i + 1]
    if level not in LEVELS:
        raise SystemExit("gpudoctor probe: unknown level %r (known: %s)" % (level, ", ".join(LEVELS)))
    return level, deep


def light_sections(doc):
    """The light level's sections: the driver API, torch from files, cuDNN by dlopen; no framework import."""
    driver = _section(cuda_driver)
    doc["cuda_driver"] = driver
    torch_facts = _section(probe_torch_light, driver)
    if "unavailable" in torch_facts:
        torch_facts = {"installed": True, "import_tried": False, "cuda_error": torch_facts["unavailable"]}
    doc["torch"] = torch_facts
    doc["site_packages"] = [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")]
    doc["mapped_libraries"] = {"unavailable": NOT_IMPORTED}
    doc["cudnn"] = _section(probe_cudnn_light, torch_facts, _dist("torch"))
    doc["libcuda"] = _section(probe_libcuda)
    doc["toolchain"] = {"unavailable": NOT_IMPORTED}
    doc["triton"] = {"unavailable": NOT_IMPORTED}


def full_sections(doc, deep=False):
    """The full level's sections: ``import torch`` (once) and what it maps, plus the driver API."""
    import traceback

    loading = _section(framework_load_start, ("torch",))  # the dlopen children run while torch imports
    try:
        torch_facts, _torch = probe_torch()
    except BaseException:  # never lose the document
        torch_facts = {
            "installed": True,
            "import_ok": False,
            "import_error": "probe failure: " + traceback.format_exc().strip().splitlines()[-1],
        }
        _torch = None
    if _torch is not None and torch_facts.get("cuda_available"):
        devices = _section(probe_devices, _torch)
        if isinstance(devices, list):
            torch_facts["devices"] = devices
        else:
            torch_facts["cuda_error"] = ((torch_facts.get("cuda_error") or "") + "\n" + devices["unavailable"]).strip()
    doc["torch"] = torch_facts
    if deep:  # gpudoctor check --deep: the functional smoke test (probe/_smoke.py)
        if _torch is not None and torch_facts.get("cuda_available"):
            import _smoke

            doc["smoke"] = _section(_smoke.run, _torch)
        else:
            doc["smoke"] = {"unavailable": "no CUDA device visible to torch in this interpreter"}
    doc["site_packages"] = [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")]
    mapped = _section(mapped_libraries)
    doc["mapped_libraries"] = mapped
    doc["cudnn"] = _section(probe_cudnn, torch_facts, _torch, mapped if isinstance(mapped, list) else [])
    doc["libcuda"] = _section(probe_libcuda)
    doc["toolchain"] = _section(probe_toolchain, doc["include_dir"])
    doc["triton"] = _section(probe_triton, _torch)
    doc["limits"] = _section(probe_limits)
    doc["compile_caches"] = _section(probe_compile_caches)
    if isinstance(loading, list):
        doc["frameworks"] = _section(framework_load_finish, loading, 60.0, ("torch",) if _torch is not None else ())
    else:
        doc["frameworks"] = loading
    doc["cuda_driver"] = _section(cuda_driver)


def main(argv=()):
    """Probe this interpreter at the level ``argv`` names (:func:`parse_args`) and print the document."""
    start = time.time()
    level, deep = parse_args(argv)
    doc = header()
    doc["level"] = level
    if level == "light":
        light_sections(doc)
    else:
        full_sections(doc, deep)
    doc["distributions"] = {}
    for name in DISTRIBUTIONS:
        found, version, _loc = _dist_info(name)
        if found:
            doc["distributions"][name] = version or "?"
    doc["duration_ms"] = round((time.time() - start) * 1000.0, 3)
    sys.stdout.write("\n" + MARKER + json.dumps(doc) + MARKER + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
