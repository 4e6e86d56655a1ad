"""Check ``jupyter.running-kernels`` (``--deep``): did a running kernel change CUDA_VISIBLE_DEVICES after CUDA started?

CUDA reads ``CUDA_VISIBLE_DEVICES`` once, when it initialises (CUDA
Programming Guide, "Environment variables"); setting
``os.environ['CUDA_VISIBLE_DEVICES']`` in a notebook cell afterwards changes
nothing until the kernel restarts. Each running kernel is asked (facts
``jupyter_running``): when CUDA is initialised and the variable now differs
from the value the process started with -> ``warn`` naming the kernel (and
its notebook when known); a kernel that does not answer -> ``info``; ``ok``
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
        elif k.cuda_initialized and k.cvd_now != k.cvd_at_start:
            out.append(
                Finding(
                    check=CHECK_ID,
                    status=Status.WARN,
                    summary=(
                        f"{_label(k)}: CUDA_VISIBLE_DEVICES is {_show(k.cvd_now)} now, but CUDA was initialised "
                        f"with {_show(k.cvd_at_start)}: the change has no effect"
                    ),
                    explanation=(
                        "CUDA reads `CUDA_VISIBLE_DEVICES` once, at initialisation; this kernel changed it "
                        "afterwards (a cell like `os.environ['CUDA_VISIBLE_DEVICES'] = ...`), so it still "
                        f"uses the GPUs of {_show(k.cvd_at_start)}.\n\nRestart the kernel and set the variable "
                        "in the first cell, before `import torch`, or in the kernelspec's `env` "
                        "(kernel.json), so every start gets it."
                    ),
                    evidence={
                        "connection_file": k.connection_file,
                        "pid": k.pid,
                        "now": k.cvd_now,
                        "at_start": k.cvd_at_start,
                        "kernel_name": k.kernel_name,
                    },
                )
            )
        else:
            state = (
                "CUDA initialised"
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
