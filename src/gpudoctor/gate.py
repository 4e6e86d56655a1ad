"""The container entrypoint health gate.

``gpudoctor gate -- python train.py``: run the checks tagged ``gate`` with
short timeouts, on the *light* probe (no ``import torch`` in the target:
metadata, version files and the CUDA driver API; ``--deep`` uses the full
probe); add the operator's requirements (``--require-gpus N``,
``--min-gpu-memory-gib X``); if anything blocks, print one line per blocking
finding to stderr and exit 1 without starting the job; if healthy, replace
this process with the job (``os.execvp``), so signals and the exit status are
the job's own. With no command it is a probe for Docker HEALTHCHECK /
Kubernetes: exit 0 healthy, 1 not. ``--wait`` retries until healthy or the
time is up; ``--status-file`` leaves the verdict (JSON, written atomically)
for other processes.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from gpudoctor import catalogue
from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.engine import Report, machine_id, run, select_checks
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.model import Check, Finding, Status
from gpudoctor.records import frozen_dataclass
from gpudoctor.system import System
from gpudoctor.words import plural

__all__ = [
    "BUILTIN_DEEP_ONLY",
    "BUILTIN_GATE_IDS",
    "GATE_TAG",
    "GateOptions",
    "GateResult",
    "blocking_line",
    "gate_checks",
    "gate_until_healthy",
    "load_gate_registry",
    "requirement_findings",
    "run_gate",
    "status_document",
    "write_status_file",
]

GATE_TAG = "gate"

#: gpudoctor's own gate checks (``gate`` in ``data/checks.toml``), so the gate imports only these of its
#: own checks; plug-in checks are always loaded (they may be gate checks)
BUILTIN_GATE_IDS = catalogue.gate_ids()


#: the built-in gate checks that need the full probe or a costly collector (``gate = "deep"``): only
#: ``--deep`` runs them
BUILTIN_DEEP_ONLY = catalogue.gate_ids() - catalogue.gate_ids(deep=False)


def load_gate_registry(ids: Sequence[str] = (), deep: bool = False):
    """The registry the gate needs: without fixes, and (when no ``ids`` are named) only the built-in
    checks in :data:`BUILTIN_GATE_IDS` imported (less :data:`BUILTIN_DEEP_ONLY` unless ``deep``).
    ``Registry.check_ids`` still lists every id."""
    from gpudoctor.registry import load_registry

    if ids:
        return load_registry(load_fixes=False)
    wanted = BUILTIN_GATE_IDS if deep else BUILTIN_GATE_IDS - BUILTIN_DEEP_ONLY
    return load_registry(load_fixes=False, check_filter=lambda cid, own: not own or cid in wanted)


@frozen_dataclass
class GateOptions:
    """What the operator asks of the node.

    Attributes:
        require_gpus: at least this many CUDA devices visible to the job. ``None`` (not said):
            at least one, so a node where no GPU is visible is never healthy by default; 0: a CPU
            node is expected (no GPU is fine, and the healthy line says none is visible).
        min_gpu_memory_gib: every visible GPU has at least this much memory, GiB (0: none).
        strict: warnings block too.
        timeout_s: timeout of the target probe, seconds.
        deep: use the full probe (imports torch: arch list, mapped libraries, import errors).
        light_model: without ``deep``, replace the collectors in :data:`COSTLY_DOMAINS` by an
            Unavailable naming ``--deep`` (the CLI turns it off when ``--checks`` names checks).
    """

    require_gpus: int | None = None
    min_gpu_memory_gib: float = 0.0
    strict: bool = False
    timeout_s: float = 20.0
    deep: bool = False
    light_model: bool = True


@frozen_dataclass
class GateResult:
    """Outcome of the gate: ``healthy`` plus the findings that decided it.

    Attributes:
        healthy: no blocking finding.
        blocking: (reason, finding) pairs; reason is ``failed``, ``error`` (a broken
            check cannot vouch for the node), ``warning`` (with strict) or
            ``required`` (an operator requirement not met: a required GPU that is
            absent blocks as ``required``, it is not a ``skip``).
        report: the full report (requirement findings included).
        left_out: gate checks not run at this probe level (need ``--deep``).
    """

    healthy: bool
    blocking: tuple[tuple[str, Finding], ...]
    report: Report
    left_out: tuple[str, ...] = ()


def _unavailable(why: str) -> Callable[[CollectContext], Unavailable]:
    """A collector that reports ``why`` without touching the machine."""
    return lambda ctx: Unavailable(why)


def skip_ids(skip: Sequence[str]):
    """The deep-only built-in ids that the ``--skip`` patterns leave out."""
    return {
        cid for cid in BUILTIN_DEEP_ONLY for s in skip if cid == s.rstrip(".") or cid.startswith(s.rstrip(".") + ".")
    }


def gate_checks(
    checks: dict[str, Check],
    skip: Sequence[str] = (),
    ids: Sequence[str] = (),
    deep: bool = False,
    known_ids: Sequence[str] | None = None,
    unloaded: Mapping[str, str] | None = None,
) -> tuple[list[Check], list[str]]:
    """The checks the gate runs and the gate checks it leaves out.

    With ``ids``: exactly those (any check, by id or prefix; the engine then probes
    at the level they need). Without: the checks tagged ``gate``; unless ``deep``,
    only those served by the light probe (the rest are returned as left out).
    Raises :class:`~gpudoctor.engine.SelectionError` for an id in ``ids`` or
    ``skip`` that matches no check (of ``known_ids`` when given: every registered id,
    loaded or not); ``unloaded`` (id -> why) names a registered check that failed to load.
    """
    if ids:
        return select_checks(checks, ids, skip, unloaded), []
    # unknown --skip ids are a usage error, as in `check`
    select_checks(
        {cid: Check(cid, cid, (), lambda facts: []) for cid in (known_ids if known_ids is not None else checks)},
        (),
        skip,
    )
    tagged = {cid: c for cid, c in checks.items() if GATE_TAG in c.tags}
    chosen = select_checks(
        tagged,
        (),
        [s for s in skip if any(cid == s.rstrip(".") or cid.startswith(s.rstrip(".") + ".") for cid in tagged)],
    )
    if deep:
        return chosen, []
    light = [
        c for c in chosen if ("targets" not in c.needs or c.probe_level == "light") and c.id not in BUILTIN_DEEP_ONLY
    ]
    deep_only = [cid for cid in BUILTIN_DEEP_ONLY if cid not in checks and cid not in skip_ids(skip)]
    return light, [c.id for c in chosen if c not in light] + sorted(deep_only)


def _reference_probe(facts: Facts):
    from gpudoctor.facts.targets import ProbeFacts, TargetsFacts

    targets = facts.of(TargetsFacts) if "targets" in facts.domains else None
    if targets is None or isinstance(targets, Unavailable) or not targets.targets:
        return None
    probe = targets.targets[0].probe
    return probe if isinstance(probe, ProbeFacts) else None


def _visible_gpus(facts: Facts) -> tuple[list[tuple[str, int | None]] | None, str]:
    """(name, memory MiB) of each GPU the job would see, and the source (:data:`COUNTED_BY_CUDA`,
    :data:`COUNTED_BY_NVML`, else why no GPU can be counted); None when unknown.

    Source order: the CUDA driver API inside the target (after CUDA_VISIBLE_DEVICES),
    else NVML (every GPU on the node)."""
    from gpudoctor.facts.nvidia import NvidiaDriverFacts
    from gpudoctor.facts.targets import CudaDriverProbe

    probe = _reference_probe(facts)
    if probe is not None and isinstance(probe.cuda_driver, CudaDriverProbe):
        drv = probe.cuda_driver
        if drv.loaded and drv.init_ok:
            return [(d.name or f"cuda:{d.index}", d.total_memory_mib) for d in drv.devices], COUNTED_BY_CUDA
        if drv.loaded:
            return [], f"cuInit failed in the job's interpreter: {drv.init_error}"
    nv = facts.of(NvidiaDriverFacts) if "nvidia" in facts.domains else None
    if nv is not None and not isinstance(nv, Unavailable) and nv.devices:
        return [
            (d.name, d.memory_total_mib if isinstance(d.memory_total_mib, int) else None) for d in nv.devices
        ], COUNTED_BY_NVML
    if probe is not None and isinstance(probe.cuda_driver, CudaDriverProbe) and not probe.cuda_driver.loaded:
        return [], f"libcuda.so.1 cannot be loaded in the job's interpreter ({probe.cuda_driver.error})"
    if nv is not None and not isinstance(nv, Unavailable):
        return [], "the NVIDIA driver enumerates no GPU"
    return None, "no NVIDIA driver and no libcuda.so.1 on this node"


#: the sources of a GPU count (else ``source`` says why there is none)
COUNTED_BY_CUDA = "the CUDA driver API in the job's interpreter"
COUNTED_BY_NVML = "NVML"


def _whence(source: str) -> str:
    """``source`` in a summary: "(counted by NVML)" for a count, ": why" when there is none."""
    return f" (counted by {source})" if source in (COUNTED_BY_CUDA, COUNTED_BY_NVML) else f": {source}"


def requirement_findings(facts: Facts, opts: GateOptions) -> list[Finding]:
    """Findings for the operator's requirements (pure): ``gate.gpus`` and ``gate.gpu-memory``."""
    out: list[Finding] = []
    gpus, source = _visible_gpus(facts)
    count = len(gpus) if gpus is not None else 0
    evidence = {"source": source, "visible": [f"{n} ({m} MiB)" if m is not None else n for n, m in gpus or []]}
    if opts.require_gpus is None:  # not said: a GPU node is expected
        if count:
            out.append(
                Finding(
                    check="gate.gpus",
                    status=Status.OK,
                    summary=f"{plural(count, 'GPU')} visible{_whence(source)}",
                    evidence=evidence,
                )
            )
        else:
            out.append(
                Finding(
                    check="gate.gpus",
                    status=Status.FAIL,
                    summary=f"no GPU is visible{_whence(source)}; a CPU node must be declared with --require-gpus 0",
                    explanation=(
                        "The gate guards GPU jobs, so a node without a visible GPU is not healthy unless it is "
                        "expected to have none. On a CPU node: `gpudoctor gate --require-gpus 0` "
                        "(`GPUDOCTOR_REQUIRE_GPUS=0`, or `require-gpus = 0` in the `[gate]` table of "
                        "gpudoctor.toml). On a GPU node check `nvidia-smi -L`, the container's GPU request "
                        "(`--gpus all`, `resources.limits: nvidia.com/gpu`) and `CUDA_VISIBLE_DEVICES`."
                    ),
                    evidence={**evidence, "required": "at least 1 (not declared)"},
                )
            )
    elif opts.require_gpus == 0 and not count:
        out.append(
            Finding(
                check="gate.gpus",
                status=Status.INFO,
                summary=f"no GPU visible: a CPU node, as --require-gpus 0 declares{_whence(source)}",
                evidence={**evidence, "required": 0},
            )
        )
    if opts.require_gpus:
        if count < opts.require_gpus:
            out.append(
                Finding(
                    check="gate.gpus",
                    status=Status.FAIL,
                    summary=f"{count} of the {opts.require_gpus} required GPUs are visible{_whence(source)}",
                    explanation=(
                        "The job asked for GPUs this node does not give it. Check `nvidia-smi -L`, the "
                        "container's GPU request (`--gpus all`, `resources.limits: nvidia.com/gpu`) and "
                        "`CUDA_VISIBLE_DEVICES`."
                    ),
                    evidence={**evidence, "required": opts.require_gpus},
                )
            )
        else:
            out.append(
                Finding(
                    check="gate.gpus",
                    status=Status.OK,
                    summary=f"{count} GPUs visible (≥ {opts.require_gpus} required)",
                    evidence=evidence,
                )
            )
    if opts.min_gpu_memory_gib:
        need_mib = int(opts.min_gpu_memory_gib * 1024)
        small = [(n, m) for n, m in gpus or [] if m is None or m < need_mib]
        if gpus and not small:
            out.append(
                Finding(
                    check="gate.gpu-memory",
                    status=Status.OK,
                    summary=f"every GPU has ≥ {opts.min_gpu_memory_gib:g} GiB",
                    evidence=evidence,
                )
            )
        elif gpus:
            shown = ", ".join(f"{n}: {m / 1024:.1f} GiB" if m is not None else f"{n}: unknown" for n, m in small)
            out.append(
                Finding(
                    check="gate.gpu-memory",
                    status=Status.FAIL,
                    summary=f"GPU memory below the required {opts.min_gpu_memory_gib:g} GiB: {shown}",
                    explanation="Schedule the job on a node with larger GPUs, or lower `--min-gpu-memory-gib`.",
                    evidence={**evidence, "required_mib": need_mib},
                )
            )
        elif opts.require_gpus == 0:
            out.append(
                Finding(
                    check="gate.gpu-memory",
                    status=Status.FAIL,
                    summary=f"no GPU is visible, so none has the required {opts.min_gpu_memory_gib:g} GiB{_whence(source)}",
                    explanation="Check `nvidia-smi -L` and the container's GPU request.",
                    evidence=evidence,
                )
            )
    return out


def _reason(f: Finding, strict: bool) -> str | None:
    if f.check.startswith("gate.") and f.status == Status.FAIL:
        return "required"
    if f.status == Status.FAIL:
        return "failed"
    if f.status == Status.ERROR:
        return "error"
    if strict and f.status == Status.WARN:
        return "warning"
    return None


#: domains whose collectors cost more than an entrypoint should pay, and why (the light gate
#: leaves them Unavailable; ``--deep`` and ``gpudoctor check`` collect them)
COSTLY_DOMAINS = {
    "cuda_libraries": "the light gate does not build the CUDA library model (ELF reads of every framework "
    "library); `gpudoctor gate --deep` and `gpudoctor check` do",
    "jupyter": "Jupyter kernels were not looked for (the gate leaves them out: it probes the job's interpreter)",
}


def _gate_collectors(checks: Sequence[Check], opts: GateOptions):
    from gpudoctor.collect import Collector, collectors_for

    stand_ins = {}
    if opts.light_model and not opts.deep:  # not even imported: the gate does not pay for their modules
        stand_ins = {dom: Collector(domain=dom, collect=_unavailable(why)) for dom, why in COSTLY_DOMAINS.items()}
    return collectors_for([d for c in checks for d in c.needs], stand_ins)


def collect_options(opts: GateOptions) -> CollectOptions:
    """How the gate collects: offline, no Jupyter kernels, the light probe unless ``deep``."""
    return CollectOptions(
        offline=True,
        probe_timeout_s=opts.timeout_s,
        kernels=False,
        probe_level="full" if opts.deep else "light",
        probe_level_fixed=opts.deep,
    )


def run_gate(
    checks: Sequence[Check], system: System, opts: GateOptions | None = None, left_out: Sequence[str] = ()
) -> GateResult:
    """Evaluate the gate once: offline, no Jupyter kernels, light probe unless ``opts.deep``."""
    opts = opts or GateOptions()
    options = collect_options(opts)
    # the requirements (the GPU count, always) read the target's driver API and NVML
    checks = list(checks) + [
        Check(
            id="gate.requirements",
            title="",
            needs=("targets", "nvidia"),
            evaluate=lambda facts: [],
            probe_level="light",
        )
    ]
    report = run(checks, system, options, collectors=_gate_collectors(checks, opts), light_helpers=not opts.deep)
    findings = [f for f in report.findings if f.check != "gate.requirements"]
    findings += requirement_findings(report.facts, opts)
    report = replace(report, findings=tuple(findings))
    blocking = root_blocking([(r, f) for f in findings for r in [_reason(f, opts.strict)] if r])
    return GateResult(not blocking, blocking, report, tuple(left_out))


def root_blocking(blocking: Sequence[tuple[str, Finding]]) -> tuple[tuple[str, Finding], ...]:
    """The blocking findings less those another blocking finding explains (the cause graph of
    :mod:`gpudoctor.causes`): a headline whose root cause blocks too, a finding whose ``caused_by``
    blocks. One line per cause; never empty when ``blocking`` is not."""
    checks = {(f.check, f.target) for _r, f in blocking}

    def blocks(check: object, f: Finding) -> bool:
        return (check, f.target) in checks or (check, None) in checks

    kept = tuple(
        (r, f)
        for r, f in blocking
        if not blocks(f.evidence.get("root_cause_check"), f)
        and not any(blocks(c, f) and c != f.check for c in f.caused_by)
    )
    return kept or tuple(blocking)


def gate_until_healthy(
    attempt: Callable[[], GateResult],
    wait_s: float,
    interval_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[GateResult, float], None] | None = None,
) -> tuple[GateResult, int]:
    """Run ``attempt`` until healthy or ``wait_s`` seconds have passed; returns (last result, attempts).

    Never sleeps past the deadline; ``wait_s`` 0 means one attempt.
    """
    deadline = clock() + max(0.0, wait_s)
    tries = 0
    while True:
        result = attempt()
        tries += 1
        left = deadline - clock()
        if result.healthy or left <= 0:
            return result, tries
        if on_retry:
            on_retry(result, left)
        sleep(min(interval_s, left))


def blocking_line(reason: str, f: Finding) -> str:
    """One compact stderr line: reason, check, target, cause, and the first remedy command."""
    target = f" [{f.target}]" if f.target and f.target != "current" else ""
    remedy = remedy_of(f)
    return f"gpudoctor gate: {reason}: {f.check}{target}: {f.summary}" + (f" -> {remedy}" if remedy else "")


def remedy_of(f: Finding) -> str:
    """The finding's first command (:attr:`Finding.commands`) on one line, or ""."""
    if not f.commands:
        return ""
    return " ".join(ln.rstrip("\\").strip() for ln in f.commands[0].text.splitlines() if ln.strip())


def status_document(result: GateResult, attempts: int = 1, now: float | None = None) -> dict:
    """The status file's JSON: healthy, time (UTC ISO 8601), hostname, checks {id: status}, failures."""
    import datetime as dt

    when = dt.datetime.fromtimestamp(time.time() if now is None else now, dt.timezone.utc)
    checks: dict[str, str] = {}
    for f in result.report.findings:
        prev = checks.get(f.check)
        if prev is None or Status(prev) < f.status:
            checks[f.check] = f.status.value
    return {
        "healthy": result.healthy,
        "time": when.isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "machine_id": machine_id(),
        "attempts": attempts,
        "checks": checks,
        "failures": [
            {
                "reason": r,
                "check": f.check,
                "status": f.status.value,
                "target": f.target,
                "summary": f.summary,
                "remedy": remedy_of(f),
            }
            for r, f in result.blocking
        ],
        "left_out": list(result.left_out),
    }


def write_atomic(path: str, text: str, mode: int = 0o644) -> None:
    """Write ``text`` to ``path`` atomically through the one output writer
    (:func:`gpudoctor.output.write_text`: regular files only, redacted). Raises OSError."""
    from gpudoctor.output import write_text

    write_text(path, text, mode)


def write_status_file(path: str, doc: dict) -> None:
    """Write the status document to ``path`` atomically (see :func:`write_atomic`)."""
    write_atomic(path, json.dumps(doc, indent=2) + "\n")
