"""The ``--deep`` functional smoke test's results (``probe/_smoke.py``), part of
``ProbeFacts.smoke`` in the ``targets`` domain."""

from __future__ import annotations

from gpudoctor.facts.base import Unavailable
from gpudoctor.records import frozen_dataclass


@frozen_dataclass
class SmokeDevice:
    """The ``--deep`` smoke test of one CUDA device (``probe/_smoke.py``).

    Attributes:
        index: CUDA ordinal (as torch numbers the visible devices).
        device: ``cuda:N``.
        matmul_ok: a 512x512 float32 product (TF32 off) matched the CPU result
            within a relative error of 1e-3; Unavailable when it did not run.
        matmul_rel_error: max |device - cpu| / max |cpu|.
        h2d_pageable_gbps, d2h_pageable_gbps: host<->device copy of 64 MiB from
            ordinary (pageable) host memory, GB/s (1e9 bytes/s), best of 3.
        h2d_pinned_gbps, d2h_pinned_gbps: the same from page-locked (pinned) memory.
        d2d_gbps: a copy within the device, GB/s counting read + write.
        matmul_tflops: precision (``fp32``, ``tf32``, ``fp16``, ``bf16``) -> TFLOP/s
            (1e12 floating-point operations per second, 2*n^3 per n x n product) of a timed
            matrix product in that precision; a precision the device or build refused is absent.
        errors: ``step: Exception: message`` for each step that raised.
        skipped: steps not started because the time budget was spent.
    """

    index: int
    device: str
    matmul_ok: bool | Unavailable = Unavailable("did not run")
    matmul_rel_error: float | Unavailable = Unavailable("did not run")
    h2d_pageable_gbps: float | Unavailable = Unavailable("did not run")
    d2h_pageable_gbps: float | Unavailable = Unavailable("did not run")
    h2d_pinned_gbps: float | Unavailable = Unavailable("did not run")
    d2h_pinned_gbps: float | Unavailable = Unavailable("did not run")
    d2d_gbps: float | Unavailable = Unavailable("did not run")
    matmul_tflops: dict[str, float] | Unavailable = Unavailable("did not run")
    errors: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()


@frozen_dataclass
class SmokePeer:
    """Peer access and a copy checked by content from device ``src`` to ``dst``.

    Attributes:
        can_access: ``torch.cuda.can_device_access_peer(src, dst)``.
        copy_ok: 1 MiB copied src -> dst arrived intact (through the host when
            there is no peer access).
        errors: what raised.
    """

    src: int
    dst: int
    can_access: bool | Unavailable = Unavailable("did not run")
    copy_ok: bool | Unavailable = Unavailable("did not run")
    errors: tuple[str, ...] = ()


@frozen_dataclass
class SmokeFacts:
    """The ``--deep`` functional smoke test of every visible CUDA device.

    Attributes:
        devices: one entry per device. peers: one per ordered pair.
        budget_s: the time budget, s. duration_ms: what it took, ms.
    """

    devices: tuple[SmokeDevice, ...] = ()
    peers: tuple[SmokePeer, ...] = ()
    budget_s: float = 0.0
    duration_ms: float = 0.0
