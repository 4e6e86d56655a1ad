"""Collectors for the ``loader`` and ``cuda_wheels`` domains.

- ``loader``: ``ldconfig -p`` parsed in Python (``ldconfig -p -C <root>/etc/ld.so.cache``
  under ``--root``), ``LD_LIBRARY_PATH``/``LD_PRELOAD`` entries, and the CUDA
  libraries in every ``LD_LIBRARY_PATH`` and ``PATH`` directory of gpudoctor's
  environment and of each probed target's.
- ``cuda_wheels``: per target, the ``nvidia-*`` dists and library directories in
  its site-packages (``nvidia/<component>/lib``; CUDA 13 wheels share
  ``nvidia/cu13/lib``) plus ``torch/lib``.

Both read files only through ``ctx.system.files`` and run ldconfig only
through the runner.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts import Unavailable
from gpudoctor.facts.loader import (
    CudaWheelsFacts,
    LdconfigEntry,
    LibraryDir,
    LibraryFile,
    LoaderFacts,
    TargetWheels,
    WheelDist,
)
from gpudoctor.facts.targets import ProbeFacts, TargetsFacts
from gpudoctor.system import Files

#: basename prefixes of the libraries this module reports
CUDA_LIB_PREFIXES = (
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
)

_LDCONFIG_RE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S.*?)\s*$")
_DIST_INFO_RE = re.compile(r"^(nvidia[_-][A-Za-z0-9_.-]+?)-(\d[^-]*)\.dist-info$")


def is_cuda_library(name: str) -> bool:
    """True for a shared-library file name of a CUDA component (``libcudnn_ops.so.9``...)."""
    return ".so" in name and name.startswith(CUDA_LIB_PREFIXES)


def split_path_list(value: str) -> tuple[str, ...]:
    """``a:b::c`` -> (``a``, ``b``, ``""``, ``c``); an empty value -> ()."""
    return tuple(value.split(":")) if value else ()


def parse_ldconfig(text: str) -> tuple[LdconfigEntry, ...]:
    """CUDA-related entries of ``ldconfig -p`` output, in cache order."""
    out: list[LdconfigEntry] = []
    for line in text.splitlines():
        m = _LDCONFIG_RE.match(line)
        if m and is_cuda_library(m.group(1)):
            out.append(LdconfigEntry(name=m.group(1), flags=m.group(2), path=m.group(3)))
    return tuple(out)


def scan_dir(files: Files, path: str, origin: str) -> LibraryDir:
    """The CUDA libraries in ``path`` (inside the root), symlink targets kept."""
    if not path or not files.is_dir(path):
        return LibraryDir(path=path, origin=origin, exists=False)
    try:
        names = files.listdir(path)
    except OSError:
        return LibraryDir(path=path, origin=origin, exists=True)
    libs = [
        LibraryFile(name=n, path=f"{path.rstrip('/')}/{n}", link_target=files.readlink(f"{path}/{n}"))
        for n in sorted(names)
        if is_cuda_library(n)
    ]
    return LibraryDir(path=path, origin=origin, exists=True, libraries=tuple(libs))


def _probes(facts: Mapping[str, object]) -> list[tuple[str, ProbeFacts]]:
    targets = facts.get("targets")
    if not isinstance(targets, TargetsFacts):
        return []
    return [(t.label, t.probe) for t in targets.targets if isinstance(t.probe, ProbeFacts)]


def _ldconfig(ctx: CollectContext) -> tuple[LdconfigEntry, ...] | Unavailable:
    files = ctx.system.files
    extra: list[str] = []
    if not files.is_live:
        cache = "/etc/ld.so.cache"
        if not files.exists(cache):
            return Unavailable(f"{cache} does not exist in the root (ldconfig never ran in this image)")
        extra = ["-C", str(files.host_path(cache))]
    failures = []
    for exe in ("ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"):
        result = ctx.system.runner.run([exe, "-p", *extra], timeout_s=10.0)
        if result.ok:
            return parse_ldconfig(result.stdout)
        failures.append(result.describe_failure())
        if result.error != "not-found":
            break
    return Unavailable("ldconfig -p gave no answer: " + "; ".join(failures))


def collect_loader(ctx: CollectContext) -> LoaderFacts:
    ldconfig = _ldconfig(ctx)  # first: it does not need the probes, so it runs while they do
    env = ctx.system.env
    files = ctx.system.files
    ld_path = split_path_list(env.get("LD_LIBRARY_PATH", ""))
    preload = tuple(p for p in re.split(r"[:\s]+", env.get("LD_PRELOAD", "")) if p)
    wanted: dict[tuple[str, str], None] = {}
    envs: list[Mapping[str, str]] = [env] + [p.env for _label, p in _probes(ctx.facts)]
    for e in envs:
        for d in split_path_list(e.get("LD_LIBRARY_PATH", "")):
            wanted[(d, "LD_LIBRARY_PATH")] = None
    for e in envs:
        for d in split_path_list(e.get("PATH", "")):
            if (d, "LD_LIBRARY_PATH") not in wanted:
                wanted[(d, "PATH")] = None
    dirs = []
    for d, origin in wanted:
        if not d:
            continue
        scanned = scan_dir(files, d, origin)
        if origin == "LD_LIBRARY_PATH" or scanned.libraries:
            dirs.append(scanned)
    return LoaderFacts(ld_library_path=ld_path, ld_preload=preload, ldconfig=ldconfig, dirs=tuple(dirs))


def _wheels_of(files: Files, label: str, sites: Iterable[str]) -> TargetWheels:
    dists: list[WheelDist] = []
    lib_dirs: list[LibraryDir] = []
    sites = tuple(dict.fromkeys(sites))
    for site in sites:
        if not files.is_dir(site):
            continue
        try:
            entries = files.listdir(site)
        except OSError:
            continue
        for name in sorted(entries):
            m = _DIST_INFO_RE.match(name)
            if m:
                dists.append(WheelDist(name=m.group(1).replace("_", "-").lower(), version=m.group(2)))
        nvidia = f"{site}/nvidia"
        if files.is_dir(nvidia):
            try:
                components = sorted(files.listdir(nvidia))
            except OSError:
                components = []
            for comp in components:
                lib = f"{nvidia}/{comp}/lib"
                if files.is_dir(lib):
                    lib_dirs.append(scan_dir(files, lib, "wheel"))
        torch_lib = f"{site}/torch/lib"
        if files.is_dir(torch_lib):
            lib_dirs.append(scan_dir(files, torch_lib, "torch"))
    return TargetWheels(label=label, site_packages=sites, dists=tuple(dists), lib_dirs=tuple(lib_dirs))


def collect_cuda_wheels(ctx: CollectContext) -> CudaWheelsFacts | Unavailable:
    targets = ctx.facts.get("targets")
    if not isinstance(targets, TargetsFacts):
        reason = targets.reason if isinstance(targets, Unavailable) else "no targets were probed"
        return Unavailable(f"no target interpreter to look in: {reason}")
    out = [_wheels_of(ctx.system.files, label, probe.site_packages) for label, probe in _probes(ctx.facts)]
    return CudaWheelsFacts(targets=tuple(out))


COLLECTORS = (
    Collector(domain="loader", collect=collect_loader, requires=("targets",), timeout_s=20.0),
    Collector(domain="cuda_wheels", collect=collect_cuda_wheels, requires=("targets",), timeout_s=20.0),
)
