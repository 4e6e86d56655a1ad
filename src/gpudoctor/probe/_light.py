"""gpudoctor light probe: run by the TARGET interpreter, prints one JSON document.

The entrypoint gate's probe. Standard library only (Python 3.6+), and it
imports NO framework: torch's version and CUDA build come from distribution
metadata (``importlib.metadata``) and ``torch/version.py`` parsed as text;
CUDA itself is asked through the driver API (``libcuda.so.1`` via ctypes:
``cuInit``, ``cuDriverGetVersion``, ``cuDeviceGetCount``, per device the
name, compute capability, total memory and a context create/destroy); the
cuDNN sub-libraries get the same real ``dlopen`` test as in the full probe.
That is what ``torch.cuda.is_available()`` boils down to, at a fraction of
the cost of ``import torch`` (about a second and hundreds of MiB).

The document has the full probe's shape (``level: "light"``); what only an
import can tell (import errors, arch list, mapped libraries, Triton,
compilers) is reported as unavailable. The full probe (``_script.py``) runs
:func:`cuda_driver` from this file too, so both levels carry the same driver facts.
"""

import json
import os
import sys
import time

PROBE_VERSION = 1
MARKER = "@@gpudoctor-probe@@"

ENV_PREFIXES = ("CUDA_", "NVIDIA_", "PYTORCH_", "TORCH_", "NCCL_", "CUDNN_", "TRITON_", "CONDA_", "PIP_", "UV_")
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
)
DISTRIBUTIONS = ("ipykernel",)
NOT_IMPORTED = "the light probe does not import torch (run with --deep for the full probe)"

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

# CUdevice_attribute values (CUDA driver API, cuda.h)
_ATTR_PCI_BUS_ID = 33
_ATTR_PCI_DEVICE_ID = 34
_ATTR_CC_MAJOR = 75
_ATTR_CC_MINOR = 76
_ATTR_PCI_DOMAIN_ID = 50


def _err(exc):
    return ("%s: %s" % (type(exc).__name__, exc)).strip()


class _Dist:
    """A distribution found on sys.path: its metadata headers, read as text (``importlib.metadata``
    would import the email package: a third of this probe's time)."""

    def __init__(self, path, location):
        self.path = path
        self.location = location
        self.version = None
        self.requires = []
        for name in ("METADATA", "PKG-INFO"):
            meta = os.path.join(path, name)
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
    """(installed, version, location) from package metadata, without importing."""
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


def mapped_libraries(prefixes, maps_path="/proc/self/maps"):
    """Distinct full paths of mapped files whose basename starts with one of ``prefixes``, sorted."""
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
    import ctypes

    try:
        ctypes.CDLL(name_or_path, mode=getattr(os, "RTLD_NOW", 2) | getattr(ctypes, "RTLD_LOCAL", 0))
    except OSError as exc:
        return False, str(exc)
    return True, None


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


def _wheel_lib_dirs(component):
    out = []
    for entry in sys.path:
        for sub in (("nvidia", component, "lib"), ("nvidia", "cu13", "lib")):
            d = os.path.join(entry or ".", *sub)
            if os.path.isdir(d) and d not in out:
                out.append(d)
    return out


def probe_cudnn_light(torch_facts, torch_dist):
    """cuDNN without importing torch: the shim ``libcudnn.so.N`` resolved as libtorch's loader would
    (LD_LIBRARY_PATH first, then the wheel's directory that torch's RUNPATH names, then the ld.so
    cache), its ``cudnnGetVersion()``, and the same sub-library dlopen test as the full probe."""
    import ctypes

    if not torch_facts.get("installed"):
        return {"applicable": False, "reason": "torch is not installed, so no cuDNN is loaded"}
    if torch_facts.get("hip"):
        return {"applicable": False, "reason": "ROCm builds use MIOpen, not cuDNN"}
    if not torch_facts.get("cuda"):
        return {
            "applicable": False,
            "reason": "torch %s is a CPU-only build: it uses no cuDNN" % torch_facts.get("version"),
        }
    major = cudnn_major_from_metadata(torch_dist)
    out = {"applicable": True, "expected_major": major}
    if major is None:
        return {"applicable": False, "reason": "this torch build names no cuDNN in its metadata"}
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
            fn = ctypes.CDLL(target).cudnnGetVersion
            fn.restype = ctypes.c_size_t
            out["runtime_version"] = int(fn())
        except Exception as exc:
            out["runtime_error"] = _err(exc)
    else:
        out["runtime_error"] = error
    search = ([os.path.dirname(out["library_path"])] if out.get("library_path") else []) + dirs
    search = [d for i, d in enumerate(search) if d not in search[:i]]
    out["search_dirs"] = search
    subs = []
    for name in CUDNN_SUBLIBS.get(major, ()):
        t = next((os.path.join(d, name) for d in search if os.path.lexists(os.path.join(d, name))), name)
        ok, error = _dlopen(t)
        subs.append({"name": name, "ok": ok, "path": t if os.sep in t else None, "error": error})
    out["sublibraries"] = subs
    return out


# --------------------------------------------------------------------------- torch, from files


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


def _section(fn, *args):
    try:
        return fn(*args)
    except BaseException as exc:
        return {"unavailable": "probe section %s failed: %s" % (fn.__name__, _err(exc))}


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


def main():
    start = time.time()
    doc = header()
    doc["level"] = "light"
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
    doc["distributions"] = {}
    for name in DISTRIBUTIONS:
        found, version, _loc = _dist_info(name)
        if found:
            doc["distributions"][name] = version or "?"
    doc["duration_ms"] = round((time.time() - start) * 1000.0, 3)
    sys.stdout.write("\n" + MARKER + json.dumps(doc) + MARKER + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
