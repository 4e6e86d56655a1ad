"""Pure helpers shared by the GPU-stack checks (``cuda.*``, ``cudnn.load``,
``torch.compile``): the compatibility rules and the lookups in the data tables.

Rules and their sources:

- Driver vs CUDA runtime (NVIDIA CUDA Toolkit Release Notes, Tables 2 and 3):
  a build for CUDA X.Y runs with every feature on a driver >= the X.Y toolkit
  driver; with CUDA minor-version compatibility on a driver >= the floor of
  major X (11.x: 450.80.02, 12.x: 525.60.13, 13.x: 580); below that it does not
  run at all (unless the cuda-compat forward-compatibility package is used on
  a data-center GPU).
- Compute capability vs arch list (CUDA Programming Guide, "Binary
  Compatibility"; NVIDIA blog "Navigating GPU Architecture Support"): a cubin
  ``sm_XY`` runs on a GPU of the same major X with minor >= Y; PTX
  ``compute_XY`` is JIT-compiled by the driver for any GPU with capability >=
  X.Y; arch-specific ``sm_XYa`` runs only on exactly X.Y; family ``sm_XYf`` on
  the same major with minor >= Y.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gpudoctor.checks import require
from gpudoctor.checks._common import (
    distinct_targets,
    driver_version,
    split_local,
    wheel_variants,
)
from gpudoctor.data import load_table
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.nvidia import NvidiaDriverFacts, PciGpuFacts
from gpudoctor.facts.targets import ProbeFacts, TargetFacts, TargetsFacts
from gpudoctor.model import Finding, Status
from gpudoctor.records import frozen_dataclass
from gpudoctor.versions import cuda_from_int, cudnn_from_int, v

__all__ = [
    "ArchEntry",
    "DriverVerdict",
    "GpuDevice",
    "arch_name",
    "cc_tuple",
    "coverage",
    "cuda_build_skip",
    "decode_cudnn",
    "driver_max_cuda",
    "first_covering",
    "fmt_cudnn",
    "forward_compat_supported",
    "gpu_devices",
    "has_nvidia_gpu",
    "judge_driver",
    "major_floor",
    "parse_arch_list",
    "table_arch_list",
    "target_probes",
    "toolkit_driver",
    "v",
    "variant_for",
]


def cc_tuple(cc: str) -> tuple[int, int]:
    """``"8.6"`` -> (8, 6). Raises ValueError on other shapes."""
    major, _, minor = cc.partition(".")
    return int(major), int(minor or 0)


# --------------------------------------------------------------------------- driver


def toolkit_driver(cuda: str) -> str | None:
    """Table 3 driver of CUDA ``X.Y`` (the newest listed release <= X.Y of the same major), or None."""
    target = v(cuda)
    rows = [
        r
        for r in load_table("cuda_drivers")["release"]
        if v(r["cuda"]).major == target.major and v(r["cuda"]) <= target
    ]
    return max(rows, key=lambda r: v(r["cuda"]))["toolkit_driver"] if rows else None


def major_floor(major: int) -> str | None:
    """Table 2 minor-version-compatibility floor of a CUDA major, or None when there is none."""
    for r in load_table("cuda_drivers")["major"]:
        if r["major"] == major:
            return r["min_driver"] or None
    return None


@frozen_dataclass
class DriverVerdict:
    """How a driver fits a CUDA runtime.

    Attributes:
        fit: ``full`` (>= toolkit driver), ``minor-compat`` (>= major floor only),
            ``too-old``, or ``unknown`` (CUDA release not in the table).
        driver: the driver version judged.
        cuda: the runtime's CUDA ``X.Y``.
        toolkit_driver: the X.Y toolkit driver (Table 3), if known.
        floor: the minimum driver that runs it at all (Table 2 floor, or the
            toolkit driver for CUDA 10.x), if known.
    """

    fit: str
    driver: str
    cuda: str
    toolkit_driver: str | None
    floor: str | None


def judge_driver(driver: str, cuda: str) -> DriverVerdict:
    """Judge ``driver`` (e.g. ``470.86``) against CUDA ``cuda`` (e.g. ``12.1``)."""
    full = toolkit_driver(cuda)
    floor = major_floor(v(cuda).major) or full
    if floor is None:
        return DriverVerdict("unknown", driver, cuda, full, floor)
    if full is not None and v(driver) >= v(full):
        return DriverVerdict("full", driver, cuda, full, floor)
    if v(driver) >= v(floor):
        return DriverVerdict("minor-compat", driver, cuda, full, floor)
    return DriverVerdict("too-old", driver, cuda, full, floor)


def driver_max_cuda(facts: Facts, probe: ProbeFacts | None = None) -> str | None:
    """The newest CUDA the driver supports, ``X.Y``: NVML, else the target's
    ``cuDriverGetVersion`` (libcuda load test), else torch's driver API version."""
    nv = facts.of(NvidiaDriverFacts)
    if not isinstance(nv, Unavailable) and isinstance(nv.cuda_driver_version, str):
        return nv.cuda_driver_version
    if probe is not None:
        raw = None
        if not isinstance(probe.libcuda, Unavailable) and probe.libcuda.driver_api_version:
            raw = probe.libcuda.driver_api_version
        elif probe.torch.driver_api_version:
            raw = probe.torch.driver_api_version
        if raw:
            return cuda_from_int(raw)
    return None


def forward_compat_supported(gpu_name: str) -> bool | None:
    """Whether the cuda-compat package is supported on this GPU (by name), None when unknown."""
    for row in load_table("cuda_drivers")["forward_compat"]:
        if re.search(row["name_regex"], gpu_name):
            return bool(row["supported"])
    return None


def variant_for(torch_version: str | None, driver: str | None) -> dict[str, Any] | None:
    """The wheel variant to reinstall with: the newest-CUDA variant the driver
    runs (by minor-compat floor) that published ``torch_version`` (public part);
    failing that, the newest-CUDA variant the driver runs, for its newest torch.
    None when the driver runs no variant in the table."""
    rows = [r for r in wheel_variants() if driver is None or v(driver) >= v(r["min_driver"])]
    if not rows:
        return None
    if torch_version:
        public = v(split_local(torch_version)[0])
        published = [r for r in rows if v(r["first_torch"]) <= public <= v(r["newest_torch"])]
        if published:
            return published[-1]
    newest = max(v(r["newest_torch"]) for r in rows)
    return [r for r in rows if v(r["newest_torch"]) == newest][-1]


# --------------------------------------------------------------------------- arch


@frozen_dataclass
class ArchEntry:
    """One ``torch.cuda.get_arch_list()`` entry: ``sm_86`` (cubin), ``compute_90`` (PTX),
    ``sm_90a`` (arch-specific cubin), ``sm_100f`` (family cubin)."""

    text: str
    ptx: bool
    major: int
    minor: int
    suffix: str = ""

    def runs_on(self, cc: tuple[int, int]) -> bool:
        """True when code of this entry can run on a GPU of capability ``cc``."""
        if self.ptx:
            return cc >= (self.major, self.minor) and self.suffix == ""
        if self.suffix == "a":
            return cc == (self.major, self.minor)
        return cc[0] == self.major and cc[1] >= self.minor


_ARCH_RE = re.compile(r"^(sm|compute)_(\d+?)(\d)([af]?)$")


def parse_arch_list(items: Iterable[str]) -> list[ArchEntry]:
    """Parse ``sm_XY``/``compute_XY`` entries (unknown shapes are ignored)."""
    out = []
    for item in items:
        m = _ARCH_RE.match(item.strip())
        if m:
            out.append(ArchEntry(item.strip(), m.group(1) == "compute", int(m.group(2)), int(m.group(3)), m.group(4)))
    return out


def coverage(cc: tuple[int, int], entries: Sequence[ArchEntry]) -> tuple[ArchEntry | None, ArchEntry | None]:
    """(best cubin, best PTX) that run on ``cc`` — the highest applicable of each, or None."""
    cubins = [e for e in entries if not e.ptx and e.runs_on(cc)]
    ptxs = [e for e in entries if e.ptx and e.runs_on(cc)]

    def best(es: list[ArchEntry]) -> ArchEntry | None:
        return max(es, key=lambda e: (e.major, e.minor)) if es else None

    return best(cubins), best(ptxs)


def _expand(arch_list: str) -> list[str]:
    """``"8.6;9.0+PTX"`` -> ``["sm_86", "sm_90", "compute_90"]``."""
    out: list[str] = []
    for part in arch_list.split(";"):
        part = part.strip()
        ptx = part.endswith("+PTX")
        num = part[:-4] if ptx else part
        code = num.replace(".", "")
        out.append(f"sm_{code}")
        if ptx:
            out.append(f"compute_{code}")
    return out


def _variant_name(torch_version: str, cuda: str | None) -> str | None:
    """The wheel variant (``cu121``) of an official build: its local tag, or for an untagged PyPI
    wheel its CUDA. None for builds the table does not describe: another local tag (NVIDIA's NGC
    containers ``2.6.0a0+ecf3bae40a.nv25.01``, source builds ``+git...``) or a pre-release
    (nightlies ``2.9.0.dev20250601+cu128`` have their own arch lists)."""
    public, local = split_local(torch_version)
    if v(public).is_prerelease or v(public).is_devrelease:
        return None
    if local.startswith("cu"):
        return local
    if local:
        return None
    if cuda:
        return "cu" + cuda.replace(".", "")
    return None


def table_arch_list(torch_version: str, cuda: str | None) -> list[str] | None:
    """Arch list of an official wheel from ``torch_wheels.toml`` [[build]], or None if not listed."""
    variant = _variant_name(torch_version, cuda)
    minor = ".".join(split_local(torch_version)[0].split(".")[:2])
    for row in load_table("torch_wheels")["build"]:
        if row["variant"] == variant and minor in row["torch"]:
            return _expand(row["arch_list"])
    return None


def first_covering(cc: tuple[int, int]) -> list[tuple[str, str]]:
    """(torch minor, variant) of every official build covering ``cc``, oldest torch first."""
    hits = []
    for row in load_table("torch_wheels")["build"]:
        entries = parse_arch_list(_expand(row["arch_list"]))
        cubin, ptx = coverage(cc, entries)
        if cubin or ptx:
            for t in row["torch"]:
                hits.append((t, row["variant"]))
    variants = {r["name"]: v(r["cuda"]) for r in wheel_variants()}
    return sorted(set(hits), key=lambda h: (v(h[0]), variants.get(h[1], v("0"))))


def arch_name(cc: str) -> str:
    """``"12.0"`` -> ``"Blackwell (GB20x)"``; "" when unknown."""
    for row in load_table("gpu_arch")["arch"]:
        if row["cc"] == cc:
            return str(row["name"])
    return ""


def last_driver_branch(cc: str) -> int | None:
    """The newest driver branch whose libcuda still runs compute capability ``cc`` (``"3.7"`` ->
    470: Kepler was dropped in R495); None when no branch has dropped it (data: gpu_arch.toml)."""
    for row in load_table("gpu_arch")["arch"]:
        if row["cc"] == cc and "last_branch" in row:
            return int(row["last_branch"])
    return None


# --------------------------------------------------------------------------- devices


@frozen_dataclass
class GpuDevice:
    """A GPU as gpudoctor knows it: NVML index (nvidia-smi order), name, capability, PCI bus id."""

    index: int
    name: str
    cc: str | None
    pci_bus_id: str = ""
    uuid: str = ""
    mig: bool | None = None


def gpu_devices(facts: Facts, probe: ProbeFacts | None = None) -> list[GpuDevice]:
    """GPUs from NVML; else the target's CUDA devices; else none."""
    nv = facts.of(NvidiaDriverFacts)
    if not isinstance(nv, Unavailable) and nv.devices:
        return [
            GpuDevice(
                d.index,
                d.name,
                d.compute_capability if isinstance(d.compute_capability, str) else None,
                d.pci_bus_id,
                d.uuid,
                d.mig_mode if isinstance(d.mig_mode, bool) else None,
            )
            for d in nv.devices
        ]
    if probe is not None and probe.torch.devices:
        return [GpuDevice(d.index, d.name, d.capability, d.pci_bus_id or "", d.uuid or "") for d in probe.torch.devices]
    return []


def wsl_driver(facts: Facts) -> bool:
    """WSL 2 with the Windows driver's ``libcuda.so.1`` in ``/usr/lib/wsl/lib``: a GPU is there even
    though WSL shows no NVIDIA PCI function and no ``/proc/driver/nvidia`` (CUDA on WSL User Guide)."""
    from gpudoctor.facts.host import OsFacts

    os_facts = facts.of(OsFacts)
    if isinstance(os_facts, Unavailable) or not os_facts.wsl:
        return False  # (before the library facts' module is imported: the gate does not load it)
    from gpudoctor.facts.libraries import CudaLibrariesFacts

    cl = facts.of(CudaLibrariesFacts)
    if isinstance(cl, Unavailable):
        return False
    return not isinstance(cl.wsl_lib, Unavailable) and "libcuda.so.1" in cl.wsl_lib


def has_nvidia_gpu(facts: Facts) -> bool | None:
    """True: a GPU or driver is seen (WSL 2: the Windows driver's libcuda); False: PCI bus readable,
    no NVIDIA GPU, no driver;
    None: no driver and the PCI bus could not be listed."""
    nv = facts.of(NvidiaDriverFacts)
    if driver_version(facts) is not None or (not isinstance(nv, Unavailable) and nv.devices):
        return True
    if wsl_driver(facts):
        return True
    pci = facts.of(PciGpuFacts)
    if isinstance(pci, Unavailable) or not pci.sysfs_readable:
        return None
    return bool(pci.devices)


def target_probes(facts: Facts) -> list[tuple[TargetFacts, ProbeFacts | None]]:
    """(target, probe or None when the probe failed) for every distinct target
    (see :func:`gpudoctor.checks._common.distinct_targets`)."""
    targets = facts.of(TargetsFacts)
    if isinstance(targets, Unavailable):
        return []
    return [(t, t.probe if isinstance(t.probe, ProbeFacts) else None) for t in distinct_targets(targets)]


def per_target(
    check_id: str, assess: Callable[[Facts, TargetFacts, ProbeFacts], Finding]
) -> Callable[[Facts], list[Finding]]:
    """An ``evaluate`` that runs ``assess`` once per probed target.

    Targets whose probe failed get a ``skip`` naming the interpreter (the
    failure itself is reported by ``torch.install``). Raises SkipCheck when
    the targets domain is unavailable.
    """

    def evaluate(facts: Facts) -> list[Finding]:
        require(facts, TargetsFacts)
        out = []
        for t, probe in target_probes(facts):
            if probe is None:
                out.append(
                    Finding(
                        check=check_id,
                        status=Status.SKIP,
                        summary=f"the probe of {t.python} failed (see torch.install)",
                        target=t.label,
                    )
                )
            else:
                out.append(assess(facts, t, probe))
        return out

    return evaluate


def cuda_build_skip(probe: ProbeFacts) -> str | None:
    """Why a CUDA-build check does not apply to this target's torch, or None when it does."""
    tf = probe.torch
    if not tf.installed:
        return f"torch is not installed in {probe.executable} (see torch.install)"
    if tf.import_failed:
        return f"torch does not import in {probe.executable} (see torch.install)"
    if tf.hip:
        return f"torch {tf.version} is a ROCm build; CUDA checks do not apply"
    if not tf.cuda:
        return f"torch {tf.version} in {probe.executable} is a CPU-only build: no CUDA runtime, cuDNN or kernels"
    return None


# --------------------------------------------------------------------------- cuDNN


def decode_cudnn(value: int) -> tuple[int, int, int]:
    """cuDNN version integer -> (major, minor, patch): cuDNN 9 ``90100`` = 9.1.0
    (major*10000 + minor*100 + patch), cuDNN <= 8 ``8902`` = 8.9.2 (major*1000 + minor*100 + patch)."""
    return cudnn_from_int(value) or (0, 0, 0)


def fmt_cudnn(value: int) -> str:
    """``8003`` -> ``8.0.3``."""
    return ".".join(str(x) for x in decode_cudnn(value))
