"""The ``--deep`` functional smoke test, run inside the probe child (never in the doctor).

Stdlib only at import; the target's torch module is passed in. Per visible
CUDA device: a matrix product compared with the CPU result, host<->device
copy bandwidth (pageable and pinned, GB/s = 1e9 bytes/s), a device-to-device
copy; between every pair of devices, peer access and a copy checked by
content. Every step is bounded: the whole test stops starting new steps once
``budget_s`` is spent (what is left is reported as skipped), and the probe's
own timeout kills the process group of a step that hangs inside CUDA.

The backend is abstract so the same code runs for real on ``cpu`` in tests
(no pinned memory there). Output: a dict that decodes to
:class:`gpudoctor.facts.targets.SmokeFacts`.
"""

import time

#: Matrix size for the product check (n x n float32).
MATMUL_N = 512
#: Largest relative error accepted between device and CPU products (float32, TF32 off).
MATMUL_RTOL = 1e-3
#: Bytes per bandwidth copy (64 MiB) and timed repetitions (the best one counts).
COPY_BYTES = 64 * 1024 * 1024
COPY_REPS = 3
#: Matrix size and timed repetitions of the per-precision throughput measurement (the best
#: repetition counts); a 4096^3 product is large enough to keep Tensor Cores busy.
PRECISION_N = 4096
PRECISION_REPS = 3
#: The precisions timed: name -> (torch dtype attribute, TF32 allowed).
PRECISIONS = (
    ("fp32", "float32", False),
    ("tf32", "float32", True),
    ("fp16", "float16", False),
    ("bf16", "bfloat16", False),
)


class CudaBackend:
    """The real thing: ``cuda:i`` devices of the target's torch."""

    pinned = True

    def __init__(self, torch):
        self.torch = torch

    def count(self):
        return int(self.torch.cuda.device_count())

    def device(self, i):
        return "cuda:%d" % i

    def sync(self, i):
        self.torch.cuda.synchronize(i)

    def can_access_peer(self, i, j):
        return bool(self.torch.cuda.can_device_access_peer(i, j))

    def matmul(self, a, b):
        return a @ b

    precision_n = PRECISION_N


def _err(exc):
    text = str(exc).strip().splitlines()
    return "%s: %s" % (type(exc).__name__, text[0] if text else "")


def _gbps(nbytes, seconds):
    return round(nbytes / seconds / 1e9, 3) if seconds and seconds > 0 else None


def _put(out, key, value):
    if value is not None:
        out[key] = value


def _timed_copy(backend, sync_index, dst, src):
    best = None
    for _ in range(COPY_REPS):
        backend.sync(sync_index)
        start = time.perf_counter()
        dst.copy_(src, non_blocking=False)
        backend.sync(sync_index)
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    return best


def _matmul_check(torch, backend, i):
    gen = torch.Generator().manual_seed(1234 + i)
    a = torch.randn(MATMUL_N, MATMUL_N, generator=gen)
    b = torch.randn(MATMUL_N, MATMUL_N, generator=gen)
    ref = a @ b
    tf32 = getattr(getattr(torch.backends, "cuda", None), "matmul", None)
    old = getattr(tf32, "allow_tf32", None)
    if old is not None:
        tf32.allow_tf32 = False
    try:
        dev = backend.device(i)
        out = backend.matmul(a.to(dev), b.to(dev))
        backend.sync(i)
        out = out.to("cpu")
    finally:
        if old is not None:
            tf32.allow_tf32 = old
    err = float((out - ref).abs().max() / ref.abs().max())
    return err <= MATMUL_RTOL and err == err, round(err, 9)


def _precision_tflops(torch, backend, i, deadline):
    """precision -> TFLOP/s of an n x n matrix product on device ``i``, best of
    :data:`PRECISION_REPS`; a precision the device or build refuses is left out."""
    n = getattr(backend, "precision_n", PRECISION_N)
    dev = backend.device(i)
    tf32 = getattr(getattr(torch.backends, "cuda", None), "matmul", None)
    old = getattr(tf32, "allow_tf32", None)
    out = {}
    try:
        for name, dtype_name, allow in PRECISIONS:
            if time.monotonic() > deadline:
                break
            if old is not None:
                tf32.allow_tf32 = allow
            elif allow:
                continue  # no TF32 switch in this build: the fp32 figure says it all
            try:
                dtype = getattr(torch, dtype_name)
                a = torch.ones(n, n, dtype=dtype, device=dev)
                b = torch.ones(n, n, dtype=dtype, device=dev)
                backend.matmul(a, b)  # warm-up: kernel selection, cuBLAS handle
                backend.sync(i)
                best = None
                for _ in range(PRECISION_REPS):
                    start = time.perf_counter()
                    backend.matmul(a, b)
                    backend.sync(i)
                    elapsed = time.perf_counter() - start
                    best = elapsed if best is None else min(best, elapsed)
            except Exception:  # a precision the device or build does not run: left out
                continue
            if best:
                out[name] = float("%.4g" % (2.0 * n**3 / best / 1e12))  # 4 significant digits
    finally:
        if old is not None:
            tf32.allow_tf32 = old
    return out


def _device_steps(torch, backend, i, deadline):
    """Smoke facts of device ``i`` (dict)."""
    dev = backend.device(i)
    out = {"index": i, "device": dev, "errors": [], "skipped": []}

    def step(name, fn):
        if time.monotonic() > deadline:
            if name not in out["skipped"]:
                out["skipped"].append(name)
            return None
        try:
            return fn()
        except Exception as exc:  # a device fault is a finding, not a probe crash
            out["errors"].append("%s: %s" % (name, _err(exc)))
            return None

    res = step("matmul", lambda: _matmul_check(torch, backend, i))
    if res is not None:
        out["matmul_ok"], out["matmul_rel_error"] = res
    rates = step("precision", lambda: _precision_tflops(torch, backend, i, deadline))
    if rates is not None:
        out["matmul_tflops"] = rates
    n = COPY_BYTES
    host = step("allocate", lambda: torch.empty(n, dtype=torch.uint8))
    devbuf = step("allocate", lambda: torch.empty(n, dtype=torch.uint8, device=dev))
    if host is None or devbuf is None:
        if out["skipped"]:
            out["skipped"].extend(["h2d_pageable", "d2h_pageable", "h2d_pinned", "d2h_pinned", "d2d"])
    else:
        t = step("h2d_pageable", lambda: _timed_copy(backend, i, devbuf, host))
        _put(out, "h2d_pageable_gbps", _gbps(n, t))
        t = step("d2h_pageable", lambda: _timed_copy(backend, i, host, devbuf))
        _put(out, "d2h_pageable_gbps", _gbps(n, t))
        if not backend.pinned:
            out["h2d_pinned_gbps"] = out["d2h_pinned_gbps"] = {"unavailable": "pinned memory needs CUDA"}
        else:
            pinned = step("pin_memory", lambda: host.pin_memory())
            if pinned is not None:
                t = step("h2d_pinned", lambda: _timed_copy(backend, i, devbuf, pinned))
                _put(out, "h2d_pinned_gbps", _gbps(n, t))
                t = step("d2h_pinned", lambda: _timed_copy(backend, i, pinned, devbuf))
                _put(out, "d2h_pinned_gbps", _gbps(n, t))
        other = step("allocate", lambda: torch.empty(n, dtype=torch.uint8, device=dev))
        if other is not None:
            t = step("d2d", lambda: _timed_copy(backend, i, other, devbuf))
            _put(out, "d2d_gbps", _gbps(2 * n, t))  # read + write
    return out


def _peer(torch, backend, i, j, deadline):
    out = {"src": i, "dst": j, "errors": []}
    if time.monotonic() > deadline:
        out["errors"].append("skipped: time budget spent")
        return out
    try:
        out["can_access"] = backend.can_access_peer(i, j)
        gen = torch.Generator().manual_seed(99)
        data = torch.randint(0, 255, (1024 * 1024,), dtype=torch.uint8, generator=gen)
        src = data.to(backend.device(i))
        dst = src.to(backend.device(j))
        backend.sync(i)
        backend.sync(j)
        out["copy_ok"] = bool(torch.equal(dst.to("cpu"), data))
    except Exception as exc:
        out["errors"].append(_err(exc))
    return out


def run(torch, budget_s=30.0, backend=None):
    """The smoke document for every device of ``backend`` (default: CUDA)."""
    backend = backend or CudaBackend(torch)
    start = time.monotonic()
    deadline = start + budget_s
    count = backend.count()
    devices = [_device_steps(torch, backend, i, deadline) for i in range(count)]
    peers = [_peer(torch, backend, i, j, deadline) for i in range(count) for j in range(count) if i != j]
    return {
        "devices": devices,
        "peers": peers,
        "budget_s": budget_s,
        "duration_ms": round((time.monotonic() - start) * 1000.0, 3),
    }
