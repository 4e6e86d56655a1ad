"""Collector for the ``cuda_libraries`` domain: the loader model of every target.

Reads files only (through ``ctx.system.files``); the ld.so cache comes from
the ``loader`` domain. See :mod:`gpudoctor.facts.libraries` for the search
order modelled and its sources.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.collect.activation import Activation, replay
from gpudoctor.collect.elfread import ElfInfo, expand_origin, read_elf, warm_up
from gpudoctor.collect.loader import split_path_list
from gpudoctor.data import load_table
from gpudoctor.facts import Unavailable
from gpudoctor.facts.libraries import (
    CudaLibrariesFacts,
    FrameworkInstall,
    LibraryCopy,
    LinkDir,
    Resolution,
    TargetLibraries,
)
from gpudoctor.facts.loader import LdconfigEntry, LoaderFacts
from gpudoctor.facts.targets import ProbeFacts, TargetsFacts
from gpudoctor.system import Files
from gpudoctor.versions import parse as _v
from gpudoctor.versions import wheel_cuda

__all__ = ["DEFAULT_DIRS", "WSL_LIB", "LoaderModel", "collect_cuda_libraries", "exact_pins", "family_of"]

WSL_LIB = "/usr/lib/wsl/lib"

#: (file-name prefix, family), most specific first
FAMILIES = (
    ("libcublasLt.so", "cublasLt"),
    ("libcublas.so", "cublas"),
    ("libcudart.so", "cudart"),
    ("libcufft.so", "cufft"),
    ("libcufftw.so", "cufft"),
    ("libcurand.so", "curand"),
    ("libcusolverMg.so", "cusolver"),
    ("libcusolver.so", "cusolver"),
    ("libcusparse.so", "cusparse"),
    ("libnvJitLink.so", "nvJitLink"),
    ("libnvrtc-builtins.so", "nvrtc"),
    ("libnvrtc.so", "nvrtc"),
    ("libcupti.so", "cupti"),
    ("libcudnn", "cudnn"),
    ("libnccl.so", "nccl"),
    ("libnvshmem", "nvshmem"),
    ("libnvinfer", "tensorrt"),
    ("libcuda.so", "libcuda"),
    ("libnvidia-ml.so", "nvml"),
)

#: ld.so's built-in directories (glibc SYSTEM_DIRS; Debian adds the multiarch ones)
DEFAULT_DIRS = (
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
)

#: names a CUDA process dlopens by bare name (the runtime and cuDNN 8 open libcuda.so; NVML users libnvidia-ml.so.1)
BARE_LOOKUPS = ("libcuda.so.1", "libcuda.so", "libnvidia-ml.so.1")

_MACHINE_TAG = {"EM_X86_64": "x86-64", "EM_AARCH64": "AArch64", "EM_PPC64": "64bit", "EM_RISCV": "64bit"}
_DIST_INFO = re.compile(r"^([A-Za-z0-9_.]+?)-(\d[^-]*)\.dist-info$")
_SYMBOL_VERSION = re.compile(r"_(\d+)_(\d+)@")


#: every prefix of :data:`FAMILIES` in one tuple: one ``str.startswith`` call rejects the thousands of
#: other libraries in a system directory
_FAMILY_PREFIXES = tuple(prefix for prefix, _fam in FAMILIES)


def family_of(name: str) -> str | None:
    """``libnvJitLink.so.12`` -> ``nvJitLink``; None for a non-CUDA file name."""
    if ".so" not in name or not name.startswith(_FAMILY_PREFIXES):
        return None
    for prefix, fam in FAMILIES:
        if name.startswith(prefix):
            return fam
    return None


def _exists(files: Files, path: str) -> bool:
    """``path`` exists inside the root (absolute symlinks resolved inside it, not on the host)."""
    try:
        return files.exists(files.realpath(path))
    except OSError:
        return False


def _norm(path: str) -> str:
    return os.path.normpath(path) if path else path


def _arch_matches(flags: str, elf_class: int | None, machine: str | None) -> bool:
    """Does an ld.so cache entry's tag (``libc6,x86-64``) fit a consumer of this class/machine?"""
    tags = {t.strip() for t in flags.split(",")}
    tag = _MACHINE_TAG.get(machine or "")
    if tag:
        return tag in tags
    if elf_class == 32:
        return not ({"x86-64", "AArch64", "64bit"} & tags)
    return True


def _host_arch() -> tuple[int, str]:
    m = platform.machine()
    return (64, {"aarch64": "EM_AARCH64", "ppc64le": "EM_PPC64"}.get(m, "EM_X86_64"))


def ld_so_conf_dirs(files: Files, path: str = "/etc/ld.so.conf", depth: int = 0) -> list[str]:
    """Directories named by ``/etc/ld.so.conf`` and its ``include`` globs (ld.so.conf(5))."""
    text = files.read_text_or_none(path)
    if text is None or depth > 4:
        return []
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include "):
            pattern = line.split(None, 1)[1].strip()
            if not pattern.startswith("/"):
                pattern = os.path.join(os.path.dirname(path), pattern)
            base, pat = os.path.dirname(pattern), os.path.basename(pattern)
            if files.is_dir(base):
                for inc in files.glob(base, pat):
                    out.extend(ld_so_conf_dirs(files, inc, depth + 1))
        elif line.startswith("/"):
            out.append(line.split("=")[0])
    return list(dict.fromkeys(out))


@dataclass
class LoaderModel:
    """glibc ld.so's search, replayed over rooted files for one process environment.

    Args:
        files: the rooted files.
        ld_library_path: entries of ``LD_LIBRARY_PATH`` (empty entries are ignored).
        ld_preload: ``LD_PRELOAD`` entries (paths or names).
        executable: the program whose DT_RPATH ends every RPATH walk (the target's
            interpreter); None when unknown.
        cache: ld.so cache entries (name, arch tag, path), in cache order.
        default_dirs: ld.so's built-in directories.
    """

    files: Files
    ld_library_path: Sequence[str] = ()
    ld_preload: Sequence[str] = ()
    cache: Sequence[LdconfigEntry] = ()
    default_dirs: Sequence[str] = DEFAULT_DIRS
    executable: str | None = None
    loaded: dict[str, str] = field(default_factory=dict)
    preloaded: dict[str, str] = field(default_factory=dict)

    def elf(self, path: str, symbols: bool = False) -> ElfInfo:
        return read_elf(self.files, path, symbols)

    def search(
        self,
        name: str,
        consumer: str | None,
        chain: Sequence[str] = (),
        use_env: bool = True,
        arch: tuple[int | None, str | None] | None = None,
    ) -> list[tuple[str, str]]:
        """Every (path, step) that would satisfy ``name`` for ``consumer``, in ld.so's order.

        ``chain``: the objects that loaded ``consumer`` (executable first) for the
        DT_RPATH walk. Files of another ELF class/machine are skipped.
        """
        info = self.elf(consumer) if consumer else ElfInfo()
        cls, machine = arch if arch else (info.elf_class, info.machine)
        steps: list[tuple[str, str]] = []
        if "/" in name:
            return [(name, "path")] if self.files.exists(name) else []
        if consumer and not info.runpath:
            # DT_RPATH of the consumer, then of each object that loaded it, up to the executable
            # (an object with DT_RUNPATH contributes no RPATH; glibc elf/dl-load.c _dl_map_object)
            for obj in dict.fromkeys([consumer, *reversed(list(chain))]):
                oi = self.elf(obj)
                if oi.runpath:
                    continue
                steps += [(expand_origin(d, os.path.dirname(obj)), "RPATH") for d in oi.rpath]
        if use_env:
            steps += [(d, f"LD_LIBRARY_PATH entry {i + 1}") for i, d in enumerate(self.ld_library_path) if d]
        if consumer:
            steps += [(expand_origin(d, os.path.dirname(consumer)), "RUNPATH") for d in info.runpath]
        found: list[tuple[str, str]] = []
        seen = set()

        def consider(path: str, step: str) -> None:
            if not _exists(self.files, path):
                return
            real = self.files.realpath(path)
            if real in seen:
                return
            ci = self.elf(path)
            if ci.error is None and cls is not None and (ci.elf_class != cls or (machine and ci.machine != machine)):
                return
            seen.add(real)
            found.append((_norm(path), step))

        for d, step in steps:
            consider(f"{d.rstrip('/')}/{name}", step)
        for e in self.cache:
            if e.name == name and _arch_matches(e.flags, cls, machine):
                consider(e.path, "ld.so cache")
        for d in self.default_dirs:
            consider(f"{d}/{name}", "default directory")
        return found

    def resolve(
        self,
        name: str,
        consumer: str | None,
        chain: Sequence[str] = (),
        arch: tuple[int | None, str | None] | None = None,
    ) -> Resolution:
        """The copy ld.so picks for ``name`` needed by ``consumer`` (None = a bare ``dlopen``)."""
        fam = family_of(name) or ""
        hits = self.search(name, consumer, chain, arch=arch)
        quiet = self.search(name, consumer, chain, use_env=False, arch=arch)
        without = quiet[0][0] if quiet else None
        info = self.elf(consumer) if consumer else ElfInfo()
        plain = self.search(name, None, arch=arch or (info.elf_class, info.machine))
        bare = plain[0][0] if plain else None
        if name in self.loaded:
            path = self.loaded[name]
            via = "LD_PRELOAD" if name in self.preloaded else "already loaded"
        elif hits:
            path, via = hits[0]
        else:
            return Resolution(consumer or "dlopen", name, fam, None, "not found", None, without, (), (), bare)
        others = tuple(p for p, _s in hits if self.files.realpath(p) != self.files.realpath(path))
        missing: tuple[str, ...] = ()
        if consumer:
            missing = self.missing(consumer, name, path)
        return Resolution(
            consumer or "dlopen", name, fam, path, via, os.path.dirname(path), without, others, missing, bare
        )

    def missing(self, consumer: str, name: str, provider: str) -> tuple[str, ...]:
        """Symbol versions and versioned symbols ``consumer`` needs from ``name`` that ``provider`` lacks."""
        ci, pi = self.elf(consumer, True), self.elf(provider, True)
        if pi.error or not pi.defined_versions:
            return ()
        out: list[str] = []
        for ver in ci.needed_versions.get(name, ()):
            if ver not in pi.defined_versions:
                out.append(f"version {ver}")
        for lib, ver, sym in ci.needs:
            if lib == name and f"{sym}@{ver}" not in pi.defined:
                out.append(f"{sym}, version {ver}")
        return tuple(dict.fromkeys(out))

    def load(self, roots: Sequence[str], owners: Mapping[str, str] | None = None) -> list[Resolution]:
        """Resolve the CUDA ``DT_NEEDED`` entries of ``roots`` and of everything they pull in (BFS).

        ``owners``: root -> the framework it belongs to; each resolution names the framework whose
        root reached it first (``Resolution.framework``)."""
        owners = owners or {}
        for p in self.ld_preload:
            if "/" in p and self.files.exists(p):
                info = self.elf(p)
                for key in filter(None, (os.path.basename(p), info.soname)):
                    self.loaded.setdefault(key, p)
                    self.preloaded.setdefault(key, p)
        out: list[Resolution] = []
        start = (self.executable,) if self.executable else ()
        queue: list[tuple[str, tuple[str, ...], str]] = [(r, start, owners.get(r, "")) for r in roots]
        visited = {self.files.realpath(r) for r in roots}
        for r in roots:
            info = self.elf(r)
            self.loaded.setdefault(info.soname or os.path.basename(r), r)
        while queue:
            obj, chain, owner = queue.pop(0)
            for name in self.elf(obj).needed:
                if family_of(name) is None:
                    continue
                res = replace(self.resolve(name, obj, chain), framework=owner)
                out.append(res)
                if res.path:
                    self.loaded.setdefault(name, res.path)
                    real = self.files.realpath(res.path)
                    if real not in visited:
                        visited.add(real)
                        queue.append((res.path, chain + (obj,), owner))
        return out

    def open_by_name(self, name: str, caller: str | None, framework: str) -> Resolution:
        """``dlopen(name)`` called from ``caller`` at run time: an object with that SONAME already loaded
        wins, else the caller's RPATH/RUNPATH, ``LD_LIBRARY_PATH``, the cache and the default directories
        (glibc ``_dl_map_object`` with the caller as loader)."""
        chain = (self.executable,) if self.executable and caller else ()
        res = replace(self.resolve(name, caller, chain), framework=framework)
        res = replace(res, how="dlopen")
        if res.path:
            self.loaded.setdefault(name, res.path)
        return res


# --------------------------------------------------------------------------- copies and versions


def _wheel_records(files: Files, sites: Iterable[str]) -> dict[str, tuple[str, str]]:
    """Real path of every CUDA library listed in an ``nvidia-*`` dist's RECORD -> (dist, version)
    (those wheels carry the library's own version)."""
    out: dict[str, tuple[str, str]] = {}
    for site in sites:
        if not files.is_dir(site):
            continue
        for entry in files.listdir(site):
            m = _DIST_INFO.match(entry)
            if not m:
                continue
            dist = m.group(1).replace("_", "-").lower()
            if not dist.startswith("nvidia-"):
                continue  # torch's RECORD lists the cuDNN it bundles, but torch's version is not cuDNN's
            record = files.read_text_or_none(f"{site}/{entry}/RECORD") or ""
            for line in record.splitlines():
                rel = line.split(",", 1)[0]
                if ".so" in os.path.basename(rel) and family_of(os.path.basename(rel)):
                    out[files.realpath(_norm(f"{site}/{rel}"))] = (dist, m.group(2))
    return out


def _version_from_name(files: Files, path: str) -> str | None:
    for candidate in (os.path.basename(path), os.path.basename(files.realpath(path))):
        m = re.search(r"\.so\.(\d+(?:\.\d+){1,3})$", candidate)
        if m and m.group(1).count(".") >= 1:
            return m.group(1)
    return None


def _version_from_symbols(info: ElfInfo, name: str) -> str | None:
    major = re.search(r"\.so\.(\d+)", name)
    best: tuple[int, int] | None = None
    for sym in info.defined:
        m = _SYMBOL_VERSION.search(sym)
        if m and (not major or m.group(1) == major.group(1)):
            t = (int(m.group(1)), int(m.group(2)))
            best = max(best, t) if best else t
    return f"{best[0]}.{best[1]}" if best else None


def describe_copy(
    files: Files, path: str, origin: str, records: Mapping[str, tuple[str, str]], symbols: bool = False
) -> LibraryCopy:
    """A :class:`LibraryCopy` for ``path``: SONAME, class, version and its source."""
    name = os.path.basename(path)
    real = files.realpath(path)
    info = read_elf(files, path, symbols)
    version, source = _version_from_name(files, path), "file name"
    if version is None and real in records:
        dist, dv = records[real]
        version, source = dv, f"wheel metadata {dist}"
    if version is None and symbols and info.error is None:
        version, source = _version_from_symbols(info, name), "symbol versions"
    return LibraryCopy(
        path=_norm(path),
        real_path=real,
        name=name,
        family=family_of(name) or "",
        directory=_norm(os.path.dirname(path)),
        origin=origin,
        soname=info.soname,
        version=version,
        version_source=source if version else None,
        elf_class=info.elf_class,
        machine=info.machine,
        error=info.error,
    )


# --------------------------------------------------------------------------- frameworks


_PIN = re.compile(r"^\s*(nvidia-[A-Za-z0-9._-]+)\s*\(?\s*==\s*([0-9][^\s;),]*)\s*\)?\s*(?:;(.*))?$")


def exact_pins(metadata: str) -> tuple[str, ...]:
    """``dist==version`` of every ``nvidia-*`` requirement pinned with ``==`` in a METADATA header block
    (core metadata spec, ``Requires-Dist``); requirements that apply only with an ``extra`` are left out."""
    out = []
    for line in metadata.splitlines():
        if not line.strip():
            break  # the description follows the headers
        key, _sep, value = line.partition(":")
        if key != "Requires-Dist":
            continue
        m = _PIN.match(value)
        if m and "extra" not in (m.group(3) or ""):
            out.append(f"{m.group(1).replace('_', '-').lower()}=={m.group(2)}")
    return tuple(dict.fromkeys(out))


def _frameworks(files: Files, label: str, sites: Sequence[str]) -> list[FrameworkInstall]:
    table = load_table("frameworks")
    dists: dict[str, tuple[str, str]] = {}
    entries: dict[str, str] = {}
    for site in sites:
        if not files.is_dir(site):
            continue
        for entry in files.listdir(site):
            m = _DIST_INFO.match(entry)
            if m:
                name = m.group(1).replace("_", "-").lower()
                dists.setdefault(name, (m.group(2), site))
                entries.setdefault(name, f"{site}/{entry}")
    out: list[FrameworkInstall] = []
    for fw in table["framework"]:
        hit = next(((d, dists[d]) for d in fw["dists"] if d in dists), None)
        if hit is None:
            continue
        dist, (version, _site) = hit
        public, _, local = version.partition("+")
        cuda, source = None, ""
        post = re.search(r"\.(post\d+)$", public)
        if post and not local:
            local = post.group(1)
        if fw.get("cuda_from_local"):
            m = re.match(fw["cuda_from_local"], local or "")
            if m:
                cuda, source = int(m.group(1)), "local version tag"
            elif local and re.match(r"^(cpu|rocm|xpu)", local):
                continue  # a CPU / ROCm / XPU build is not a CUDA framework
        if fw.get("cuda_from_dist"):
            m = re.match(fw["cuda_from_dist"], dist)
            if m:
                cuda, source = int(m.group(1)), "distribution name"
        cuda_version = wheel_cuda(local) if cuda and re.match(r"^cu\d{3,}$", local or "") else None
        cudnn = None
        cudnn_min: str | None = None
        pv = _v(public.split(".post")[0])
        for row in table["requirement"]:
            if row["framework"] != fw["name"] or pv is None:
                continue
            from packaging.specifiers import SpecifierSet

            if pv in SpecifierSet(row["versions"]):
                cudnn = row.get("cudnn_major")
                if cuda is None and row.get("cuda_major"):
                    cuda = row["cuda_major"]
                if cuda_version is None and row.get("cuda_version"):
                    cuda_version = row["cuda_version"]
                cudnn_min = row.get("cudnn_min", cudnn_min)
                source = "; ".join(s for s in (source, row["source"]) if s)
        libs: list[str] = []
        for site in sites:
            for pattern in fw["gpu_libs"]:
                base, pat = os.path.dirname(f"{site}/{pattern}"), os.path.basename(pattern)
                if files.is_dir(base):
                    libs.extend(files.glob(base, pat))
        pins = exact_pins(files.read_text_or_none(f"{entries[dist]}/METADATA") or "")
        installed = tuple(f"{name}=={dists[name][0]}" for name in (p.split("==", 1)[0] for p in pins) if name in dists)
        out.append(
            FrameworkInstall(
                label=label,
                name=fw["name"],
                dist=dist,
                version=version,
                cuda_major=cuda,
                cudnn_major=cudnn,
                source=source,
                gpu_libs=tuple(dict.fromkeys(libs)),
                pins=pins,
                pinned_installed=installed,
                cuda_version=cuda_version,
                cudnn_min=cudnn_min,
            )
        )
    known = {d for fw in table["framework"] for d in fw["dists"]}
    for dist, (version, _site) in sorted(dists.items()):
        if dist in known or dist.startswith("nvidia-") or not _UNKNOWN_GPU.match(dist):
            continue
        if any(k.startswith(f"{dist}-") for k in known):  # tensorrt-cu12 beside tensorrt-cu12-libs: one framework
            continue
        m = re.search(r"-cu(?:da)?(\d{2})", dist)
        out.append(
            FrameworkInstall(
                label=label,
                name=dist,
                dist=dist,
                version=version,
                cuda_major=int(m.group(1)[:2]) if m else None,
                source="distribution name (not in gpudoctor's frameworks table)",
                known=False,
            )
        )
    return out


#: a distribution whose name says it is built for CUDA (``mxnet-cu112``, ``cudf-cu12``, ``jittor``...) but that
#: has no row in ``data/frameworks.toml``: reported as a framework of unknown needs, never as broken
_UNKNOWN_GPU = re.compile(r"^(?:[a-z0-9_.-]+-cu(?:da)?\d{2,3}x?|jittor|mxnet-cu\d+|cudf|cuml)$")


def load_rows(name: str, version: str) -> list[dict[str, object]]:
    """The ``[[load]]`` rows of ``data/frameworks.toml`` that apply to framework ``name`` at ``version``:
    the libraries it opens by name at run time (``how = "dlopen"``) from its ``caller`` library."""
    from packaging.specifiers import SpecifierSet

    pv = _v(version.partition("+")[0].split(".post")[0])
    if pv is None:
        return []
    return [
        row
        for row in load_table("frameworks").get("load", [])
        if row["framework"] == name and pv in SpecifierSet(str(row["versions"]))
    ]


# --------------------------------------------------------------------------- collector


def _probes(facts: Mapping[str, object]) -> list[tuple[str, ProbeFacts]]:
    targets = facts.get("targets")
    if not isinstance(targets, TargetsFacts):
        return []
    return [(t.label, t.probe) for t in targets.targets if isinstance(t.probe, ProbeFacts)]


def _kinds(facts: Mapping[str, object]) -> dict[str, str]:
    targets = facts.get("targets")
    return {t.label: t.kind for t in targets.targets} if isinstance(targets, TargetsFacts) else {}


def _scan(files: Files, directory: str) -> list[str]:
    if not directory or not files.is_dir(directory):
        return []
    try:
        return [f"{directory.rstrip('/')}/{n}" for n in files.listdir(directory) if family_of(n)]
    except OSError:
        return []


def _link_dirs(files: Files, env: Mapping[str, str], cache: Sequence[LdconfigEntry]) -> list[LinkDir]:
    """Directories ``gcc -lcuda`` searches, as Triton calls it (``-L`` from TRITON_LIBCUDA_PATH or
    from the ld.so cache's libcuda entries, then LIBRARY_PATH, then the linker's defaults)."""
    wanted: list[tuple[str, str]] = []
    if env.get("TRITON_LIBCUDA_PATH"):
        wanted.append((env["TRITON_LIBCUDA_PATH"], "TRITON_LIBCUDA_PATH"))
    for e in cache:
        if e.name.startswith("libcuda.so"):
            wanted.append((os.path.dirname(e.path), "ld.so cache"))
    wanted += [(d, "LIBRARY_PATH") for d in split_path_list(env.get("LIBRARY_PATH", "")) if d]
    wanted += [
        (d, "default")
        for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")
        if files.is_dir(d)
    ]
    out, seen = [], set()
    for d, origin in wanted:
        d = _norm(d)
        if d in seen:
            continue
        seen.add(d)
        path = f"{d}/libcuda.so"
        exists = _exists(files, path)
        info = read_elf(files, path, False) if exists else ElfInfo()
        # the tag of the unversioned entry, else of the directory's versioned libcuda (the ELF class of
        # the directory where no libcuda.so exists yet: RHEL keeps 32-bit copies in /usr/lib)
        tag = next((e.flags for e in cache if e.name == "libcuda.so" and _norm(e.path) == path), None) or next(
            (e.flags for e in cache if e.name.startswith("libcuda.so") and _norm(os.path.dirname(e.path)) == d), None
        )
        out.append(LinkDir(d, origin, exists, info.elf_class, tag))
    return out


def activation_of(files: Files, probe: ProbeFacts, kind: str) -> Activation | None:
    """``LD_LIBRARY_PATH`` as this target runs: a conda environment's ``activate.d`` scripts applied when the
    target is run through ``conda activate`` (not for a Jupyter kernel, whose launcher does not activate)."""
    prefix = probe.prefix if probe.is_conda else ""
    if not prefix or kind == "kernel":
        return None
    active = os.path.normpath(probe.env.get("CONDA_PREFIX", "") or "/") == os.path.normpath(prefix)
    site = probe.site_packages[0] if probe.site_packages else None
    return replay(files, prefix, probe.env, site, already_active=active)


def _caller(files: Files, sites: Sequence[str], pattern: str) -> str | None:
    """The first library matching ``pattern`` (relative to a site-packages directory; a glob, since
    auditwheel names vendored libraries with a hash: ``ctranslate2.libs/libctranslate2-<hash>.so.4``;
    ``a|b``: the first of several layouts a framework had across releases)."""
    if "|" in pattern:
        return next((c for p in pattern.split("|") if (c := _caller(files, sites, p)) is not None), None)
    for site in sites:
        path = f"{site}/{pattern}"
        if not any(c in pattern for c in "*?["):
            if _exists(files, path):
                return path
            continue
        if files.is_dir(site):
            found = next(iter(files.glob(site, pattern)), None)
            if found:
                return found
    return None


def _dlopens(
    files: Files, model: LoaderModel, probe: ProbeFacts, frameworks: Sequence[FrameworkInstall]
) -> list[Resolution]:
    """The libraries each framework opens by name at run time (``[[load]]`` rows, ``how = "dlopen"``),
    resolved from the caller library's RUNPATH, in framework order (one process: the first wins)."""
    out: list[Resolution] = []
    for fw in frameworks:
        for row in load_rows(fw.name, fw.version):
            if row.get("how") != "dlopen":
                continue
            if row.get("dists") and fw.dist not in row["dists"]:  # type: ignore[operator]
                continue
            caller: str | None = None
            if row.get("caller"):  # "" = opened from Python (ctypes): no library's RUNPATH applies
                caller = _caller(files, probe.site_packages, str(row["caller"]))
                if caller is None:
                    continue
            # "{version}": the framework's X.Y.Z (TensorRT opens libnvinfer_builder_resource.so.<its version>)
            release = ".".join(fw.version.partition("+")[0].split(".post")[0].split(".")[:3])
            for name in row["libraries"]:  # type: ignore[attr-defined]
                out.append(model.open_by_name(str(name).replace("{version}", release), caller, fw.name))
    # what the opened libraries link in turn (a cuSOLVER opened by name needs nvJitLink, ...)
    opened = {r.path: r.framework for r in out if r.path}
    seen = {(r.consumer, r.needed) for r in out}
    for r in model.load(list(opened), opened):
        if (r.consumer, r.needed) not in seen:
            seen.add((r.consumer, r.needed))
            out.append(r)
    return out


def model_target(
    files: Files,
    label: str,
    probe: ProbeFacts,
    cache: Sequence[LdconfigEntry],
    frameworks: Sequence[FrameworkInstall],
    cache_source: str = "ldconfig -p",
    kind: str = "current",
) -> TargetLibraries:
    """The :class:`TargetLibraries` of one target (pure over ``files``)."""
    env = probe.env
    act = activation_of(files, probe, kind)
    llp = act.ld_library_path if act else split_path_list(env.get("LD_LIBRARY_PATH", ""))
    llp_origins = act.origins if act else tuple("environment" for _e in llp)
    preload = tuple(p for p in re.split(r"[:\s]+", env.get("LD_PRELOAD", "")) if p)
    roots = [lib for fw in frameworks for lib in fw.gpu_libs]
    owners = {lib: fw.name for fw in reversed(frameworks) for lib in fw.gpu_libs}
    model = LoaderModel(files, llp, preload, cache, executable=probe.executable)
    resolutions = model.load(roots, owners)
    linked = {(r.consumer, r.needed) for r in resolutions}
    resolutions += [r for r in _dlopens(files, model, probe, frameworks) if (r.consumer, r.needed) not in linked]
    resolutions = [with_origin(r, llp_origins) for r in resolutions]
    arch = next(((i.elf_class, i.machine) for i in map(model.elf, roots) if i.error is None), _host_arch())
    bare = LoaderModel(files, llp, preload, cache)
    lookups = [bare.resolve(n, None, arch=arch) for n in BARE_LOOKUPS]
    records = _wheel_records(files, probe.site_packages)
    # every directory the loader could search, in its order, each with why
    dirs: list[tuple[str, str]] = [(os.path.dirname(p), "LD_PRELOAD") for p in preload if "/" in p]
    dirs += [(d, "LD_LIBRARY_PATH") for d in llp if d]
    for obj in roots + [r.path for r in resolutions if r.path]:
        info = model.elf(obj)
        dirs += [
            (expand_origin(d, os.path.dirname(obj)), "RUNPATH" if info.runpath else "RPATH")
            for d in (info.runpath or info.rpath)
        ]
    dirs += [(os.path.dirname(e.path), "ld.so cache") for e in cache]
    dirs += [(d, "ld.so.conf.d") for d in ld_so_conf_dirs(files)]
    for site in probe.site_packages:
        if files.is_dir(f"{site}/nvidia"):
            dirs += [(f"{site}/nvidia/{c}/lib", "wheel") for c in files.listdir(f"{site}/nvidia")]
    conda = env.get("CONDA_PREFIX") or (probe.prefix if probe.is_conda else "")
    if conda:
        dirs.append((f"{conda}/lib", "conda"))
    dirs.append((WSL_LIB, "wsl"))
    dirs += [(d, "default") for d in DEFAULT_DIRS]
    resolved = {r.path for r in list(resolutions) + lookups if r.path}
    copies: list[LibraryCopy] = []
    seen = set()
    for d, origin in dirs:
        d = _norm(d)
        for path in _scan(files, d):
            if path in seen:
                continue
            seen.add(path)
            copies.append(describe_copy(files, path, origin, records, symbols=path in resolved))
    for p in preload:
        if "/" in p and family_of(os.path.basename(p)) and _norm(p) not in seen and files.exists(p):
            copies.insert(0, describe_copy(files, p, "LD_PRELOAD", records, symbols=True))
    return TargetLibraries(
        label=label,
        roots=tuple(f"{fw.name}:{lib}" for fw in frameworks for lib in fw.gpu_libs),
        ld_library_path=llp,
        ld_preload=preload,
        copies=tuple(copies),
        resolutions=tuple(resolutions),
        lookups=tuple(lookups),
        link_dirs=tuple(_link_dirs(files, env, cache)),
        cache_source=cache_source,
        ld_library_path_origins=llp_origins,
        activation=act.scripts if act else (),
    )


def with_origin(res: Resolution, origins: Sequence[str]) -> Resolution:
    """``res`` with ``path_origin`` saying who put its ``LD_LIBRARY_PATH`` entry there."""
    m = re.match(r"LD_LIBRARY_PATH entry (\d+)$", res.via)
    if not m or int(m.group(1)) > len(origins):
        return res
    who = origins[int(m.group(1)) - 1]
    text = f"{res.via}, set by {who}" if who != "environment" else f"{res.via}, from the process environment"
    return replace(res, path_origin=text)


def _cache(ctx: CollectContext) -> tuple[list[LdconfigEntry], str]:
    loader = ctx.facts.get("loader")
    if isinstance(loader, LoaderFacts) and not isinstance(loader.ldconfig, Unavailable):
        return list(loader.ldconfig), "ldconfig -p"
    # no cache could be read: ldconfig would have cached the configured directories
    files = ctx.system.files
    tag = "libc6,x86-64" if _host_arch()[1] == "EM_X86_64" else "libc6"
    out = []
    for d in ld_so_conf_dirs(files):
        for path in _scan(files, d):
            out.append(LdconfigEntry(os.path.basename(path), tag, path))
    return out, "ld.so.conf.d"


def collect_cuda_libraries(ctx: CollectContext) -> CudaLibrariesFacts:
    warm_up()  # the ELF reader's imports, while the probes this collector waits for still run
    files = ctx.system.files
    cache, source = _cache(ctx)
    targets: list[TargetLibraries] = []
    frameworks: list[FrameworkInstall] = []
    kinds = _kinds(ctx.facts)
    for label, probe in _probes(ctx.facts):
        fws = _frameworks(files, label, probe.site_packages)
        frameworks += fws
        targets.append(
            model_target(files, label, probe, cache, [f for f in fws if f.known], source, kinds.get(label, "current"))
        )
    wsl = tuple(files.listdir(WSL_LIB)) if files.is_dir(WSL_LIB) else Unavailable(f"{WSL_LIB} does not exist")
    return CudaLibrariesFacts(targets=tuple(targets), frameworks=tuple(frameworks), wsl_lib=wsl)


COLLECTORS = (
    Collector(domain="cuda_libraries", collect=collect_cuda_libraries, requires=("targets", "loader"), timeout_s=60.0),
)
