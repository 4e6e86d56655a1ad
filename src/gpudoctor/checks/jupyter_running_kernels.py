"""Check ``jupyter.running-kernels`` (``--deep``): did a running kernel change CUDA_VISIBLE_DEVICES after CUDA started?

CUDA reads ``CUDA_VISIBLE_DEVICES`` once, when it initialises (CUDA
Programming Guide, "Environment variables"); setting
``os.environ['CUDA_VISIBLE_DEVICES']`` in a notebook cell afterwards changes
nothing until the kernel restarts; the same holds for ``CUDA_DEVICE_ORDER``. Each
running kernel is asked (facts ``jupyter_running``): when CUDA is initialised and
either variable now differs from the value the process started with, and the devices torch
enumerated do not show the new value (their count, their PCI order) -> ``warn``
naming the kernel (and its notebook when known), the devices torch enumerated,
and "restart the kernel and set it first"; a kernel that does not answer -> ``info``; ``ok``
otherwise; ``skip`` without ``--deep`` or without running kernels.
"""

from __future__ import annotations

from gpudoctor.checks import SkipCheck, require
from gpudoctor.facts import Facts
from gpudoctor.facts.jupyter import RunningKernel, RunningKernelsFacts
from gpudoctor.model import Check, Finding, Status

CHECK_ID = "jupyter.running-kernels"


def _label(k: RunningKernel) -> str:
    kid = k.connection_file.rsplit("/", 1)[-1][len("kernel-") : -len(".json")]
    name = f"{k.kernel_name} " if k.kernel_name else ""
    return f"{name}kernel {kid}" + (f" (pid {k.pid})" if k.pid else "") + (f" of {k.notebook}" if k.notebook else "")


def _show(v: object) -> str:
    return "unset" if v is None else repr(v)


def _visible_count(value: str) -> int:
    return len([e for e in value.split(",") if e.strip()]) if value.strip() not in ("-1", "none", "void") else 0


def _ineffective(k: RunningKernel) -> list[tuple[str, str | None, str | None]]:
    """The variables changed in the kernel whose new value CUDA did not take: (name, now, at start).

    A change made in a cell *before* CUDA started is in effect, one made after is not; the devices torch
    enumerated tell them apart where they can: as many devices as the new ``CUDA_VISIBLE_DEVICES`` names
    (the new value is in effect), or the PCI bus ids in ascending order under ``CUDA_DEVICE_ORDER=PCI_BUS_ID``.
    Without that evidence (an older kernel answer, a torch without ``pci_bus_id``) a change counts as late."""
    out: list[tuple[str, str | None, str | None]] = []
    if k.cvd_now != k.cvd_at_start:
        took = k.device_count is not None and k.cvd_now is not None and k.device_count == _visible_count(k.cvd_now)
        if not took:
            out.append(("CUDA_VISIBLE_DEVICES", k.cvd_now, k.cvd_at_start))
    order = (k.order_now or "FASTEST_FIRST", k.order_at_start or "FASTEST_FIRST")
    if order[0] != order[1]:
        buses = list(k.device_buses)
        took = bool(buses) and (buses == sorted(buses)) == (order[0] == "PCI_BUS_ID")
        if not took:
            out.append(("CUDA_DEVICE_ORDER", k.order_now, k.order_at_start))
    return out


def evaluate(facts: Facts) -> list[Finding]:
    running = require(facts, RunningKernelsFacts)
    if not running.kernels:
        raise SkipCheck("no running kernels (no kernel-*.json in Jupyter's runtime directory)")
    out: list[Finding] = []
    for k in running.kernels:
        if k.error:
            out.append(
                Finding(
                    check=CHECK_ID,
                    status=Status.INFO,
                    summary=f"{_label(k)} did not answer: {k.error}",
                    evidence={"connection_file": k.connection_file},
                )
            )
        elif k.cuda_initialized and (changed := _ineffective(k)):
            what = "; ".join(
                f"{var} is {_show(now)} now, but CUDA was initialised with {_show(start)}"
                for var, now, start in changed
            )
            names = " and ".join(f"`{var}`" for var, _n, _s in changed)
            enumerated = (
                f" torch enumerated {k.device_count} device(s) at initialisation, numbered by the start values."
                if k.device_count is not None
                else ""
            )
            out.append(
                Finding(
                    check=CHECK_ID,
                    status=Status.WARN,
                    summary=f"{_label(k)}: {what}: the change has no effect; restart the kernel and set it first",
                    explanation=(
                        f"CUDA reads {names} once, at initialisation; this kernel changed "
                        f"{'it' if len(changed) == 1 else 'them'} afterwards (a cell like "
                        f"`os.environ['{changed[0][0]}'] = ...`), so it still uses the GPUs (and the device order) "
                        f"of the values it started with.{enumerated}\n\nRestart the kernel and set the variable in "
                        "the first cell, before `import torch`, or in the kernelspec's `env` (kernel.json), so every "
                        "start gets it."
                    ),
                    evidence={
                        "connection_file": k.connection_file,
                        "pid": k.pid,
                        "now": k.cvd_now,
                        "at_start": k.cvd_at_start,
                        "order_now": k.order_now,
                        "order_at_start": k.order_at_start,
                        "devices_enumerated": k.device_count,
                        "device_buses": list(k.device_buses),
                        "kernel_name": k.kernel_name,
                    },
                )
            )
        else:
            in_effect = k.cuda_initialized and (k.cvd_now != k.cvd_at_start or k.order_now != k.order_at_start)
            state = (
                "CUDA initialised after the kernel set its CUDA variables: they are in effect"
                if in_effect
                else "CUDA initialised"
                if k.cuda_initialized
                else ("torch imported, CUDA not initialised" if k.torch_imported else "no torch imported")
            )
            out.append(
                Finding(
                    check=CHECK_ID,
                    status=Status.OK,
                    summary=f"{_label(k)}: {state}; CUDA_VISIBLE_DEVICES {_show(k.cvd_now)}",
                    evidence={"connection_file": k.connection_file, "pid": k.pid},
                )
            )
    return sorted(out, key=lambda f: -f.status.severity)


CHECK = Check(
    id=CHECK_ID,
    title="Running kernels use the CUDA_VISIBLE_DEVICES they show (asked with --deep)",
    needs=("jupyter_running",),
    evaluate=evaluate,
)
