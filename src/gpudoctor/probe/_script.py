"""gpudoctor probe: run by the TARGET interpreter, prints one JSON document.

Standard library only, and written for every Python 3 still in the field
(3.6+): this file is executed by interpreters gpudoctor does not control.
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
DISTRIBUTIONS = ("ipykernel",)  # reported as name -> version when installed
ENV_NAMES = ("LD_LIBRARY_PATH", "LD_PRELOAD", "PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV",
             "JUPYTER_PATH", "JUPYTER_DATA_DIR", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "HOME")


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
            import torch  # noqa: F401  (the point of the probe)
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
    try:
        torch_facts, _torch = probe_torch()
    except BaseException:  # never lose the document
        torch_facts = {"installed": True, "import_ok": False,
                       "import_error": "probe failure: " + traceback.format_exc().strip().splitlines()[-1]}
    doc["torch"] = torch_facts
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
