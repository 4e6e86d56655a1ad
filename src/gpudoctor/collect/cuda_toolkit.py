"""Collector for the ``cuda_toolkit`` domain: the toolkit on disk (nvcc, version.json).

PyTorch wheels bundle their own CUDA runtime, so a toolkit is only needed to
build extensions; its version is reported, not required (NVIDIA CUDA
Installation Guide for Linux: /usr/local/cuda is a symlink to the default
toolkit; ``version.json`` since CUDA 11.1, ``version.txt`` before).
"""

from __future__ import annotations

import json
import re

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts import Unavailable
from gpudoctor.facts.cuda import CudaToolkitFacts, HostCompiler, ToolkitDir

_NVCC_RE = re.compile(r"release (\d+\.\d+)")
_CLANG_RE = re.compile(r"clang version (\d+\.\d+(?:\.\d+)?)")
#: "g++ (Ubuntu 13.2.0-23ubuntu4) 13.2.0"; Red Hat/Fedora add the date and the package:
#: "g++ (GCC) 12.2.1 20221121 (Red Hat 12.2.1-4)"
_GCC_RE = re.compile(r"\)\s+(\d+\.\d+(?:\.\d+)?)(?:\s+\d{8})?(?:\s+\(.*\))?\s*$")
#: where an extension build gets nvcc's host compiler, in the order it is used: torch.utils.cpp_extension
#: passes ``-ccbin $CC``; else nvcc reads ``NVCC_CCBIN``; else it calls ``g++`` from PATH. Then the compilers
#: other steps use: ``CXX`` (the C++ compiler of the extension's .cpp files, which a PyTorch binary build checks
#: against the same CUDA bounds first) and ``CUDAHOSTCXX`` (CMake's CMAKE_CUDA_HOST_COMPILER).
HOST_COMPILER_SOURCES = ("CC", "NVCC_CCBIN", "PATH", "CXX", "CUDAHOSTCXX")


def parse_compiler_version(text: str) -> tuple[str | None, str | None]:
    """(kind, version) from ``<compiler> --version``: ``("gcc", "13.2.0")``, ``("clang", "17.0.6")``."""
    m = _CLANG_RE.search(text)
    if m:
        return "clang", m.group(1)
    first = text.strip().splitlines()[0] if text.strip() else ""
    m = _GCC_RE.search(first)
    if m and ("Free Software Foundation" in text or "gcc" in first.lower() or "g++" in first.lower()):
        return "gcc", m.group(1)
    return None, None


def host_compilers(ctx: CollectContext) -> tuple[HostCompiler, ...]:
    """Every host compiler an extension build may give nvcc (see ``HOST_COMPILER_SOURCES``), with its version."""
    env = ctx.system.env
    out: list[HostCompiler] = []
    seen: set[str] = set()
    for source in HOST_COMPILER_SOURCES:
        words = ("g++",) if source == "PATH" else tuple((env.get(source) or "").split())
        words = tuple(w for w in words if w not in ("ccache", "sccache"))
        if not words or words[0] in seen:
            continue
        command = words[0]
        seen.add(command)
        kind: str | None = None
        version: str | Unavailable = Unavailable("not run inside an image root (--root)")
        if ctx.system.commands_live:
            result = ctx.system.runner.run([command, "--version"], timeout_s=10.0)
            if result.ok:
                kind, found = parse_compiler_version(result.stdout)
                version = found or Unavailable(f"{command} --version printed no version")
            else:
                version = Unavailable(result.describe_failure())
        out.append(HostCompiler(command, source, kind, version))
    return tuple(out)


def _version_in(files, home: str) -> str | None:
    text = files.read_text_or_none(f"{home}/version.json")
    if text:
        try:
            return str(json.loads(text)["cuda"]["version"])
        except (ValueError, KeyError, TypeError):
            pass
    text = files.read_text_or_none(f"{home}/version.txt")
    if text:
        m = re.search(r"(\d+\.\d+(?:\.\d+)?)", text)
        if m:
            return m.group(1)
    return None


def _path_nvcc(files, env) -> str | None:
    """The first ``nvcc`` on the environment's ``PATH`` (inside the root), as ``shutil.which`` finds it."""
    for d in (env.get("PATH") or "").split(":"):
        d = d.rstrip("/")
        if d.startswith("/") and files.is_file(f"{d}/nvcc"):
            return f"{d}/nvcc"
    return None


def _has_headers(files, home: str) -> bool:
    """Does ``home`` hold the CUDA runtime headers a build includes (``include/`` or conda's ``targets/*/include/``)?"""
    if files.exists(f"{home}/include/cuda_runtime_api.h"):
        return True
    return any(True for _ in files.glob(home, "targets/*/include/cuda_runtime_api.h"))


def _toolkits(files) -> tuple[ToolkitDir, ...]:
    """Every ``/usr/local/cuda-X.Y`` with a ``bin/nvcc``, by version."""
    try:
        names = files.listdir("/usr/local")
    except OSError:
        return ()
    found = [
        ToolkitDir(f"/usr/local/{name}", _version_in(files, f"/usr/local/{name}"))
        for name in names
        if name.startswith("cuda-") and files.exists(f"/usr/local/{name}/bin/nvcc")
    ]

    def key(t: ToolkitDir) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", t.version or t.path.rsplit("-", 1)[-1]))

    return tuple(sorted(found, key=key))


def collect(ctx: CollectContext) -> CudaToolkitFacts:
    files, env = ctx.system.files, ctx.system.env
    cuda_home = env.get("CUDA_HOME") or env.get("CUDA_PATH") or None
    # resolve inside the root first: in CUDA images /usr/local/cuda is an absolute link
    # (-> /etc/alternatives/cuda -> /usr/local/cuda-X.Y) that the host cannot follow under --root
    resolved = files.realpath("/usr/local/cuda")
    default_path = resolved if files.exists(resolved) else None
    # a stale CUDA_HOME (no such directory) must not hide a toolkit in the standard place
    stale = bool(cuda_home) and not files.is_dir(cuda_home or "")
    # torch.utils.cpp_extension._find_cuda_home: CUDA_HOME / CUDA_PATH, else `which nvcc`, else /usr/local/cuda
    path_nvcc = _path_nvcc(files, env)
    home, source = None, ""
    if cuda_home and not stale:
        home, source = cuda_home, "CUDA_HOME" if env.get("CUDA_HOME") else "CUDA_PATH"
    elif path_nvcc:
        home, source = files.realpath(path_nvcc.rsplit("/", 2)[0] or "/"), "PATH"
    elif default_path:
        home, source = default_path, "/usr/local/cuda"
    version: str | Unavailable = Unavailable("no CUDA toolkit found (CUDA_HOME unset and no /usr/local/cuda)")
    nvcc = None
    nvcc_version: str | Unavailable = Unavailable("nvcc not found")
    if home:
        found = _version_in(files, home)
        version = found or Unavailable(f"{home} has no version.json or version.txt")
        if files.exists(f"{home}/bin/nvcc"):
            nvcc = f"{home}/bin/nvcc"
    if nvcc and ctx.system.commands_live:
        result = ctx.system.runner.run([nvcc, "--version"], timeout_s=10.0)
        if result.ok:
            m = _NVCC_RE.search(result.stdout)
            nvcc_version = m.group(1) if m else Unavailable("nvcc --version printed no release number")
        else:
            nvcc_version = Unavailable(result.describe_failure())
    elif nvcc:
        nvcc_version = Unavailable("nvcc is not run inside an image root (--root)")
    if isinstance(version, Unavailable) and isinstance(nvcc_version, str):
        version = nvcc_version
    return CudaToolkitFacts(
        cuda_home,
        default_path,
        version,
        nvcc,
        nvcc_version,
        cuda_home_missing=stale,
        host_compilers=host_compilers(ctx) if nvcc else (),
        nvcc_source=source if nvcc else "",
        path_nvcc=path_nvcc,
        toolkits=_toolkits(files),
        headers=_has_headers(files, home) if nvcc and home else None,
    )


COLLECTOR = Collector(domain="cuda_toolkit", collect=collect, timeout_s=15.0)
