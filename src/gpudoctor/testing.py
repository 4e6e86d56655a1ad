"""Test helpers for gpudoctor and for plug-in authors.

- :class:`ScriptedRunner`: a fake command runner with exact expected argv
  lists (flutter-doctor style); an unexpected command fails the test.
- Facts builders: small functions that build each domain with sensible
  defaults, so a test states only the facts that matter to it.
- :func:`fake_system`: a System rooted at a temporary directory.

These fake at gpudoctor's own boundary (runner, facts), never by patching
vendor libraries such as pynvml.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.host import ContainerFacts, CpuFacts, CpuQuota, OsFacts, ShmFacts
from gpudoctor.facts.nvidia import (
    GpuHealth,
    NvidiaDriverFacts,
    NvmlDevice,
    PciDevice,
    PciGpuFacts,
    SourceAttempt,
)
from gpudoctor.facts.targets import ProbeFacts, TargetFacts, TargetsFacts, TorchFacts
from gpudoctor.model import Finding, Status
from gpudoctor.system import Clock, CommandResult, Files, System

__all__ = [
    "ScriptedRunner",
    "UnexpectedCommand",
    "cpu_facts",
    "exits",
    "fake_system",
    "make_facts",
    "no_nvidia",
    "not_found",
    "nvidia_facts",
    "nvml_device",
    "ok",
    "os_facts",
    "pci_gpus",
    "probe_facts",
    "shm_facts",
    "target",
    "targets",
    "timed_out",
    "torch_facts",
    "write_tree",
]


class UnexpectedCommand(AssertionError):
    """The code under test ran a command the test did not script."""


Response = CommandResult | Callable[[tuple[str, ...]], CommandResult]


def ok(stdout: str = "", stderr: str = "") -> Callable[[tuple[str, ...]], CommandResult]:
    """A command that exits 0 with this output."""
    return lambda argv: CommandResult(argv, 0, stdout, stderr, 1.0)


def exits(code: int, stdout: str = "", stderr: str = "") -> Callable[[tuple[str, ...]], CommandResult]:
    """A command that exits with ``code``."""
    return lambda argv: CommandResult(argv, code, stdout, stderr, 1.0)


def not_found() -> Callable[[tuple[str, ...]], CommandResult]:
    """An executable that is not installed."""
    return lambda argv: CommandResult(argv, None, duration_ms=0.1, error="not-found")


def timed_out(after_s: float = 10.0) -> Callable[[tuple[str, ...]], CommandResult]:
    """A command that hung and was killed at its timeout."""
    return lambda argv: CommandResult(argv, None, duration_ms=after_s * 1000, error="timeout")


@dataclass
class ScriptedRunner:
    """A runner answering scripted argv lists.

    ``script`` maps an argv tuple to a response (a CommandResult or one of
    :func:`ok`, :func:`exits`, :func:`not_found`, :func:`timed_out`). Each call
    is recorded in ``calls`` as ``(argv, timeout_s, env)``. Any other
    command raises :class:`UnexpectedCommand` unless ``default`` is given.
    """

    script: dict[tuple[str, ...], Response] = field(default_factory=dict)
    default: Response | None = None
    calls: list[tuple[tuple[str, ...], float, Mapping[str, str] | None]] = field(default_factory=list)

    def run(
        self,
        argv: Sequence[str],
        timeout_s: float = 10.0,
        env: Mapping[str, str] | None = None,
        input_text: str | None = None,
    ) -> CommandResult:
        key = tuple(str(a) for a in argv)
        self.calls.append((key, timeout_s, env))
        response = self.script.get(key, self.default)
        if response is None:
            raise UnexpectedCommand(f"unexpected command: {list(key)}; scripted: {[list(k) for k in self.script]}")
        return response(key) if callable(response) else response


def fake_system(
    root: str | Path,
    env: Mapping[str, str] | None = None,
    runner: ScriptedRunner | None = None,
    home: str = "/home/user",
    host_commands: bool | None = None,
) -> System:
    """A System whose files live under ``root``, with a scripted runner (nothing scripted by default).
    ``host_commands=True``: the scripted commands speak for that root (a recorded machine's replay)."""
    return System(
        runner=runner or ScriptedRunner(),
        files=Files(Path(root)),
        env=dict(env or {}),
        clock=Clock(),
        home=home,
        host_commands=host_commands,
    )


def write_tree(root: str | Path, files: Mapping[str, str | bytes]) -> Path:
    """Create files under ``root``: {"/etc/pip.conf": "text", ...}. Returns ``root``."""
    root = Path(root)
    for path, content in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    return root


# --------------------------------------------------------------------------- facts builders


def os_facts(
    id: str = "debian",
    version: str = "12",
    codename: str = "bookworm",
    in_container: bool = False,
    kind: str | None = None,
    **kw: Any,
) -> OsFacts:
    pretty = kw.pop("pretty_name", f"{id} {version} ({codename})")
    return OsFacts(
        id=id,
        version=version,
        codename=codename,
        pretty_name=pretty,
        kernel=kw.pop("kernel", "6.1.0"),
        machine=kw.pop("machine", "x86_64"),
        container=ContainerFacts(in_container, kind, ("test marker",) if in_container else ()),
        **kw,
    )


def cpu_facts(
    logical: int = 8,
    affinity: int | Unavailable | None = None,
    quota_cpus: float | None = None,
    cgroup_version: int = 2,
    period_us: int = 100000,
) -> CpuFacts:
    quota: CpuQuota | None = None
    if quota_cpus is not None:
        source = "/sys/fs/cgroup/cpu.max" if cgroup_version == 2 else "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us"
        quota = CpuQuota(cgroup_version, int(quota_cpus * period_us), period_us, source)
    return CpuFacts(
        logical_cpus=logical,
        affinity_cpus=logical if affinity is None else affinity,
        cgroup_version=cgroup_version,
        quota=quota,
    )


def shm_facts(
    total_bytes: int | Unavailable = 16 * 1024**3, free_bytes: int | None = None, options: str = "rw,nosuid,nodev"
) -> ShmFacts:
    free = total_bytes if free_bytes is None else free_bytes
    return ShmFacts("/dev/shm", True, total_bytes, free, "tmpfs", options)


def pci_gpus(n: int = 1, driver: str | None = "nvidia", device_id: str = "0x2684") -> PciGpuFacts:
    return PciGpuFacts(
        tuple(PciDevice(f"0000:{i + 1:02x}:00.0", "0x10de", device_id, "0x030000", driver) for i in range(n))
    )


def nvml_device(
    index: int = 0,
    name: str = "NVIDIA GeForce RTX 4090",
    cc: str = "8.9",
    memory_mib: int = 24564,
    uuid: str | None = None,
    bus: str | None = None,
    mig: bool | Unavailable = False,
    health: GpuHealth | Unavailable | None = None,
) -> NvmlDevice:
    return NvmlDevice(
        index=index,
        name=name,
        uuid=uuid or f"GPU-{index:08d}-0000-0000-0000-000000000000",
        pci_bus_id=bus or f"00000000:{index + 1:02X}:00.0",
        compute_capability=cc,
        memory_total_mib=memory_mib,
        mig_mode=mig,
        health=health if health is not None else Unavailable("not queried"),
    )


def gpu_health(**overrides: Any) -> GpuHealth:
    """A healthy data-centre GPU at idle (H100 SXM values as NVML documents them: ECC on, no
    errors, idle clock reason, PCIe Gen5 x16, 41 °C of slowdown 92 / shutdown 97, 68 W of 700 W,
    persistence on, default compute mode, no processes); ``overrides`` replace fields."""
    base = GpuHealth(
        ecc_enabled=True,
        ecc_pending=True,
        ecc_volatile_corrected=0,
        ecc_volatile_uncorrected=0,
        ecc_aggregate_corrected=0,
        ecc_aggregate_uncorrected=0,
        retired_pages_sbe=0,
        retired_pages_dbe=0,
        retired_pages_pending=False,
        remapped_rows_correctable=0,
        remapped_rows_uncorrectable=0,
        remap_pending=False,
        remap_failure=False,
        clock_event_reasons=0x1,
        pcie_gen_current=5,
        pcie_gen_max=5,
        pcie_width_current=16,
        pcie_width_max=16,
        temperature_c=41,
        temperature_slowdown_c=92,
        temperature_shutdown_c=97,
        power_draw_w=68.1,
        power_limit_w=700.0,
        persistence_mode=True,
        compute_mode="default",
        processes=(),
        utilization_gpu_pct=0,
        utilization_memory_pct=0,
    )
    return dataclasses.replace(base, **overrides)


def nvidia_facts(
    driver: str = "550.54.15", cuda: str | None = "12.4", devices: Iterable[NvmlDevice] = (), source: str = "nvml"
) -> NvidiaDriverFacts:
    devs = tuple(devices)
    if source == "nvml":
        return NvidiaDriverFacts(
            driver,
            "nvml",
            cuda if cuda else Unavailable("not reported"),
            "ok",
            devs,
            (SourceAttempt("nvml", True, f"NVML reports driver {driver}"),),
        )
    reason = "libnvidia-ml.so.1 could not be loaded"
    return NvidiaDriverFacts(
        driver,
        source,
        Unavailable("NVML is needed: " + reason),
        Unavailable(reason),
        devs,
        (SourceAttempt("nvml", False, reason), SourceAttempt(source, True, f"read {driver}")),
    )


def no_nvidia() -> NvidiaDriverFacts:
    reason = "no NVIDIA driver found"
    return NvidiaDriverFacts(
        Unavailable(reason),
        "",
        Unavailable(reason),
        Unavailable("libnvidia-ml.so.1 missing"),
        (),
        (
            SourceAttempt("nvml", False, "libnvidia-ml.so.1 could not be loaded"),
            SourceAttempt("proc", False, "/proc/driver/nvidia/version does not exist"),
            SourceAttempt("sysmodule", False, "/sys/module/nvidia/version does not exist"),
        ),
    )


def torch_facts(version: str | None = "2.13.0+cpu", cuda: str | None = None, **kw: Any) -> TorchFacts:
    """Installed, importing torch; pass ``installed=False`` or ``import_error=`` for broken ones."""
    if kw.get("installed") is False:
        return TorchFacts(installed=False)
    if kw.get("import_error"):
        return TorchFacts(installed=True, dist_version=version, import_ok=False, import_error=kw["import_error"])
    kw.setdefault("cuda_available", bool(cuda))
    kw.setdefault("device_count", 0)
    return TorchFacts(installed=True, dist_version=version, import_ok=True, version=version, cuda=cuda, **kw)


def probe_facts(
    executable: str = "/home/user/venv/bin/python",
    torch: TorchFacts | None = None,
    python_version: str = "3.11.7",
    env: Mapping[str, str] | None = None,
    **kw: Any,
) -> ProbeFacts:
    prefix = kw.pop("prefix", executable.rsplit("/bin/", 1)[0])
    minor = ".".join(python_version.split(".")[:2])
    return ProbeFacts(
        probe_version=1,
        executable=executable,
        python_version=python_version,
        implementation="cpython",
        prefix=prefix,
        base_prefix=kw.pop("base_prefix", "/usr"),
        is_venv=kw.pop("is_venv", True),
        is_conda=kw.pop("is_conda", False),
        include_dir=kw.pop("include_dir", f"/usr/include/python{minor}"),
        torch=torch or torch_facts(),
        env=dict(env or {}),
        **kw,
    )


def target(
    probe: ProbeFacts | Unavailable | None = None,
    label: str = "current",
    kind: str = "current",
    python: str | None = None,
    **kw: Any,
) -> TargetFacts:
    probe = probe if probe is not None else probe_facts()
    py = python or (probe.executable if isinstance(probe, ProbeFacts) else "/usr/bin/python3")
    return TargetFacts(label=label, python=py, kind=kind, probe=probe, **kw)


def targets(*items: TargetFacts) -> TargetsFacts:
    return TargetsFacts(tuple(items) if items else (target(),))


def make_facts(**domains: Any) -> Facts:
    """Facts with the given domains (by domain name), e.g. ``make_facts(shm=shm_facts(64 * MiB))``."""
    return Facts(domains=domains, gpudoctor_version="test", collected_at="2026-01-01T00:00:00+00:00")


def load_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text())


def headline_problems(findings: Sequence[Finding]) -> list[str]:
    """What is wrong with the headlines (``cuda.available``) of one run, as sentences; empty when each
    is never better than the worst finding it summarises, says "CUDA works" only when no finding it
    summarises fails, and, with a root cause, names what was ruled out and a command to verify it."""
    from gpudoctor import catalogue, causes

    out: list[str] = []
    for head in findings:
        if head.check != causes.HEADLINE:
            continue
        summarised = causes.candidates(head, findings)
        worst = max((f.status for f in summarised if f.status >= Status.WARN), default=None)
        if worst is not None and head.status < worst:
            out.append(f"[{head.target}] headline {head.status.value} below a {worst.value} finding: {head.summary}")
        failing = [f.check for f in summarised if f.status is Status.FAIL]
        if head.summary.startswith("CUDA works") and failing:
            out.append(f"[{head.target}] 'CUDA works' beside failing {', '.join(failing)}")
        cause = head.evidence.get("root_cause_check")
        if cause:
            row = catalogue.row(str(cause))
            if row is not None and row.verify and not any(c.text == head.evidence.get("verify") for c in head.commands):
                out.append(f"[{head.target}] root cause {cause} without a verify command")
            if "ruled_out" not in head.evidence and any(f.status in (Status.OK, Status.INFO) for f in summarised):
                out.append(f"[{head.target}] root cause {cause} without what was ruled out")
    return out
