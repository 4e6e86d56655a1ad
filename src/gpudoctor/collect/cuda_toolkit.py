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
from gpudoctor.facts.cuda import CudaToolkitFacts

_NVCC_RE = re.compile(r"release (\d+\.\d+)")


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


def collect(ctx: CollectContext) -> CudaToolkitFacts:
    files, env = ctx.system.files, ctx.system.env
    cuda_home = env.get("CUDA_HOME") or env.get("CUDA_PATH") or None
    # resolve inside the root first: in CUDA images /usr/local/cuda is an absolute link
    # (-> /etc/alternatives/cuda -> /usr/local/cuda-X.Y) that the host cannot follow under --root
    resolved = files.realpath("/usr/local/cuda")
    default_path = resolved if files.exists(resolved) else None
    # a stale CUDA_HOME (no such directory) must not hide a toolkit in the standard place
    stale = bool(cuda_home) and not files.is_dir(cuda_home or "")
    home = default_path if stale else (cuda_home or default_path)
    version: str | Unavailable = Unavailable("no CUDA toolkit found (CUDA_HOME unset and no /usr/local/cuda)")
    nvcc = None
    nvcc_version: str | Unavailable = Unavailable("nvcc not found")
    if home:
        found = _version_in(files, home)
        version = found or Unavailable(f"{home} has no version.json or version.txt")
        if files.exists(f"{home}/bin/nvcc"):
            nvcc = f"{home}/bin/nvcc"
    if nvcc and files.is_live:
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
    return CudaToolkitFacts(cuda_home, default_path, version, nvcc, nvcc_version, cuda_home_missing=stale)


COLLECTOR = Collector(domain="cuda_toolkit", collect=collect, timeout_s=15.0)
