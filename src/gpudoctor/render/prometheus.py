"""``--format prometheus``: the report as Prometheus metrics (text exposition format).

Written for node_exporter's textfile collector (``--collector.textfile.directory``):
``gpudoctor check --format prometheus -o /var/lib/node_exporter/textfile/gpudoctor.prom``
writes the file atomically (prometheus_client's ``write_to_textfile``: a
temporary file, then a rename), so the collector never reads half a file.

Metrics (all gauges):

- ``gpudoctor_check_status{check,target,status}``: 1 for the status the check has,
  0 for the others (a state set: alert on ``{status="fail"} == 1``);
- ``gpudoctor_check_severity{check,target}``: 0 ok, 1 info, 2 skip, 3 warn, 4 fail, 5 error;
- ``gpudoctor_findings{status}``: findings per status;
- ``gpudoctor_healthy``: gate verdict (1 healthy, 0 not), only from ``gpudoctor gate``;
- ``gpudoctor_nvidia_driver_info{driver_version,cuda_version}``: 1, when a driver is seen;
- ``gpudoctor_gpu_count``: GPUs (CUDA driver API in the target, else NVML);
- ``gpudoctor_gpu_memory_total_bytes{gpu,name}``: per GPU, when known;
- ``gpudoctor_data_stall_ratio{check,target}``: share of time the GPU waited for data,
  when a finding measured it (evidence ``data_stall_fraction``);
- ``gpudoctor_last_run_timestamp_seconds``, ``gpudoctor_run_duration_seconds``;
- ``gpudoctor_info{version,hostname}``: 1.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from typing import Any

from gpudoctor import __version__
from gpudoctor.engine import Report
from gpudoctor.facts import Unavailable
from gpudoctor.model import Status

__all__ = ["prometheus_registry", "render_prometheus", "write_prometheus"]

_STALL_KEYS = ("data_stall_fraction", "stall_fraction")


def _gpus(report: Report) -> list[tuple[str, int | None]]:
    """(name, memory MiB) per GPU: the reference target's driver API, else NVML."""
    from gpudoctor.facts.nvidia import NvidiaDriverFacts
    from gpudoctor.facts.targets import CudaDriverProbe, ProbeFacts, TargetsFacts

    facts = report.facts
    if "targets" in facts.domains:
        targets = facts.of(TargetsFacts)
        if not isinstance(targets, Unavailable) and targets.targets:
            probe = targets.targets[0].probe
            if (
                isinstance(probe, ProbeFacts)
                and isinstance(probe.cuda_driver, CudaDriverProbe)
                and probe.cuda_driver.init_ok
            ):
                return [(d.name or f"cuda:{d.index}", d.total_memory_mib) for d in probe.cuda_driver.devices]
    if "nvidia" in facts.domains:
        nv = facts.of(NvidiaDriverFacts)
        if not isinstance(nv, Unavailable):
            return [(d.name, d.memory_total_mib if isinstance(d.memory_total_mib, int) else None) for d in nv.devices]
    return []


def prometheus_registry(report: Report, gate: Mapping[str, Any] | None = None) -> Any:
    """A prometheus_client ``CollectorRegistry`` holding the report's metrics (see the module doc).

    ``gate``: the gate's status document (adds ``gpudoctor_healthy``).
    """
    from prometheus_client import CollectorRegistry, Gauge

    reg = CollectorRegistry()
    status = Gauge(
        "gpudoctor_check_status",
        "1 for the status a gpudoctor check has, 0 for the others",
        ["check", "target", "status"],
        registry=reg,
    )
    severity = Gauge(
        "gpudoctor_check_severity",
        "Worst status of a check: 0 ok, 1 info, 2 skip, 3 warn, 4 fail, 5 error",
        ["check", "target"],
        registry=reg,
    )
    worst: dict[tuple[str, str], Status] = {}
    for f in report.findings:
        key = (f.check, f.target or "")
        if key not in worst or f.status > worst[key]:
            worst[key] = f.status
    for (check, target), st in worst.items():
        for s in Status:
            status.labels(check, target, s.value).set(1 if s == st else 0)
        severity.labels(check, target).set(st.severity)
    counts = Gauge("gpudoctor_findings", "Findings per status", ["status"], registry=reg)
    for name, n in report.counts().items():
        counts.labels(name).set(n)
    if gate is not None:
        Gauge("gpudoctor_healthy", "1 when gpudoctor gate found the node healthy, else 0", registry=reg).set(
            1 if gate.get("healthy") else 0
        )
    facts = report.facts
    if "nvidia" in facts.domains:
        from gpudoctor.facts.nvidia import NvidiaDriverFacts

        nv = facts.of(NvidiaDriverFacts)
        if not isinstance(nv, Unavailable) and isinstance(nv.driver_version, str):
            cuda = nv.cuda_driver_version if isinstance(nv.cuda_driver_version, str) else ""
            Gauge(
                "gpudoctor_nvidia_driver_info",
                "NVIDIA driver version (value is always 1)",
                ["driver_version", "cuda_version"],
                registry=reg,
            ).labels(nv.driver_version, cuda).set(1)
    if "nvidia" in facts.domains or "targets" in facts.domains:
        gpus = _gpus(report)
        Gauge("gpudoctor_gpu_count", "GPUs visible (CUDA driver API in the target, else NVML)", registry=reg).set(
            len(gpus)
        )
        mem = Gauge("gpudoctor_gpu_memory_total_bytes", "Total memory per GPU", ["gpu", "name"], registry=reg)
        for i, (name, mib) in enumerate(gpus):
            if mib is not None:
                mem.labels(str(i), name).set(mib * 1024 * 1024)
    stall = None
    for f in report.findings:
        for stall_key in _STALL_KEYS:
            value = f.evidence.get(stall_key) if isinstance(f.evidence, Mapping) else None
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                if stall is None:
                    stall = Gauge(
                        "gpudoctor_data_stall_ratio",
                        "Share of step time the GPU waited for input data",
                        ["check", "target"],
                        registry=reg,
                    )
                stall.labels(f.check, f.target or "").set(float(value))
    Gauge("gpudoctor_last_run_timestamp_seconds", "When gpudoctor ran (Unix time)", registry=reg).set(time.time())
    Gauge("gpudoctor_run_duration_seconds", "Wall time of collection and evaluation", registry=reg).set(
        report.duration_ms / 1000.0
    )
    Gauge(
        "gpudoctor_info", "gpudoctor version and host (value is always 1)", ["version", "hostname"], registry=reg
    ).labels(__version__, socket.gethostname()).set(1)
    return reg


def render_prometheus(report: Report, gate: Mapping[str, Any] | None = None) -> str:
    """The metrics in the text exposition format (what node_exporter's textfile collector reads)."""
    from prometheus_client import generate_latest

    return generate_latest(prometheus_registry(report, gate)).decode("utf-8")


def write_prometheus(path: str, report: Report, gate: Mapping[str, Any] | None = None) -> None:
    """Write the metrics to ``path`` atomically through the one output writer
    (:func:`gpudoctor.output.write_text`), as node_exporter's textfile collector expects.
    Raises OSError."""
    from gpudoctor.output import write_text

    write_text(path, render_prometheus(report, gate))
