"""gpudoctor probe: run by the TARGET interpreter, prints one JSON document.

Standard library only, and written for every Python 3 still in the field:
this file is executed by interpreters gpudoctor does not control. The oldest
Python it runs on is ``gpudoctor.probe.MIN_PYTHON`` (this file alone needs 3.3:
``sys.implementation`` and ``subprocess`` timeouts; newer modules are imported
with fallbacks; ``_light.py`` is written for 3.6); update that constant if
this file starts to need more.
It is the only place torch is imported. Every step is guarded: a torch that
fails to import (an OSError about a missing .so, say) comes back as data.

Output: one line of JSON on stdout, framed by the marker below, so that
noise printed by sitecustomize or torch itself cannot corrupt it.
"""

import json
import os
import sys
import time
import traceback
import warnings

PROBE_VERSION = 1
MARKER = "@@gpudoctor-probe@@"

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


def _err(exc):
    text = "%s: %s" % (type(exc).__name__, exc)
    return text.strip()


def _dist_info(name):
    """(installed, version, location) from package metadata, without importing."""
    try:
        from importlib import metadata  # 3.8+
    except ImportError:  # pragma: no cover - 3.6/3.7
        try:
            import pkg_resources  # type: ignore

            d = pkg_resources.get_distribution(name)
            return True, d.version, d.location
        except Exception:
            return False, None, None
    try:
        dist = metadata.distribution(name)
    except Exception:
        return False, None, None
    location = None
    try:
        location = str(dist.locate_file(""))
    except Exception:
        pass
    return True, dist.version, location


def probe_torch():
    installed, dist_version, location = _dist_info("torch")
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


def probe_cudnn(torch_facts, torch_mod, mapped):
    if torch_mod is None:
        wheel = cudnn_without_torch()
        if wheel is not None:
            return wheel
    if not torch_facts.get("installed"):
        return {"applicable": False, "reason": "torch is not installed, so no cuDNN is loaded"}
    if torch_mod is None:
        return {"applicable": False, "reason": "torch does not import, so no cuDNN is loaded"}
    if torch_facts.get("hip"):
        return {"applicable": False, "reason": "ROCm builds use MIOpen, not cuDNN"}
    if not torch_facts.get("cuda"):
        return {
            "applicable": False,
            "reason": "torch %s is a CPU-only build: it uses no cuDNN" % torch_facts.get("version"),
        }
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


def probe_libcuda():
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


def framework_load_start():
    """Start the load test (:func:`framework_load_test`) without waiting: one child interpreter
    per installed framework that has GPU provider libraries. Returns the pending records
    ``[(record, child or None)]`` for :func:`framework_load_finish`; the probe starts them before
    it imports torch, so the dlopens run while torch imports."""
    import glob
    import subprocess

    pending = []
    for key, dists, patterns in GPU_FRAMEWORKS:
        found = None
        for dist in dists:
            ok, version, location = _dist_info(dist)
            if ok:
                found = (dist, version, location)
                break
        if not found:
            continue
        dist, version, location = found
        paths = []
        for pattern in patterns:
            for p in sorted(glob.glob(os.path.join(location or "", pattern))):
                if p not in paths:
                    paths.append(p)
        rec = {"name": key, "dist": dist, "version": version or "?", "loads": []}
        proc = None
        if paths:
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-c", _LOAD_CHILD] + paths, stdout=subprocess.PIPE, stderr=subprocess.PIPE
                )
            except OSError as exc:
                rec["error"] = _err(exc)
        pending.append((rec, proc))
    return pending


def framework_load_finish(pending, timeout_s=60.0):
    """Wait for the children of :func:`framework_load_start` (each at most ``timeout_s`` s more,
    then killed) and return one record per framework: ``name``, ``dist``, ``version``, ``loads``
    (``name``, ``ok``, ``path``, ``error``) and ``error`` when a child hung or died (naming the
    library it was loading)."""
    import subprocess

    out = []
    for rec, proc in pending:
        if proc is not None:
            try:
                stdout, _err_text = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, _err_text = proc.communicate()
                rec["error"] = "the load test did not finish within %g s" % timeout_s
            started = None
            for line in stdout.decode("utf-8", "replace").splitlines():
                try:
                    item = json.loads(line)
                except ValueError:
                    continue
                if "start" in item:
                    started = item["start"]
                else:
                    rec["loads"].append(item)
                    started = None
            if started and "error" not in rec:
                rec["error"] = "the load test died (exit status %s) while loading %s" % (proc.returncode, started)
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


def _section(fn, *args):
    """Run one probe section; a crash becomes {"unavailable": reason} instead of losing the document."""
    try:
        return fn(*args)
    except BaseException as exc:
        return {"unavailable": "probe section %s failed: %s" % (fn.__name__, _err(exc))}


def probe_cuda_driver():
    """The light probe's CUDA driver API section (``_light.py`` beside this file), so both levels
    report the same driver facts. Unavailable when this source runs without its file (in a kernel)."""
    try:
        here = os.path.dirname(os.path.abspath(__file__))
    except NameError:
        return {"unavailable": "the driver API section is not run inside a kernel"}
    path = os.path.join(here, "_light.py")
    ns = {"__name__": "gpudoctor_light"}
    with open(path) as fh:
        exec(compile(fh.read(), path, "exec"), ns)
    return ns["cuda_driver"]()


def main():
    start = time.time()
    import sysconfig

    env = {}
    for key, value in os.environ.items():
        if key.startswith(ENV_PREFIXES) or key in ENV_NAMES:
            env[key] = value
    prefix = sys.prefix
    base_prefix = getattr(sys, "base_prefix", getattr(sys, "real_prefix", prefix))
    doc = {
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
    loading = _section(framework_load_start)  # the dlopen children run while torch imports
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
    if "--deep" in sys.argv[1:]:  # gpudoctor check --deep: the functional smoke test (probe/_smoke.py)
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
        doc["frameworks"] = _section(framework_load_finish, loading)
    else:
        doc["frameworks"] = loading
    doc["cuda_driver"] = _section(probe_cuda_driver)
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
