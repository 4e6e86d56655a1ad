"""Benchmark: what ``gpudoctor watch`` costs the job and the machine, against baselines in the same run.

1. The recorder's overhead per step, measured twice. First the wrapped ``__next__`` alone:
   a stand-in loader class whose ``__next__`` returns a ready batch is iterated in a tight
   loop with and without the wrappers (the same wrappers, installed on the stand-in), in
   alternating rounds; the difference per call is the recorder's cost, free of the
   loader's own noise. Then a real DataLoader over an in-memory dataset (tiny
   batches: the loader's own cost is as small as it gets, so the recorder's share is
   the largest) is iterated with and without the recorder's wrappers, in alternating
   rounds (``--rounds``, ``--batches`` each); the per-batch difference of the medians is
   the overhead, printed in microseconds and as a fraction of a 20 ms step (goal <= 0.02).
   With ``--workers N`` the loader has N workers (the wrapped ``__next__`` is the same).
   The same comparison is then made on a loop with a real 20 ms step (``time.sleep``):
   the median time in ``next()`` with and without the wrappers (the sleep itself is left
   out: its jitter on a shared machine is larger than the whole overhead).
2. The sampler's CPU use. :class:`gpudoctor.stall_sampler.MachineSampler` watches this
   process for ``--seconds`` at its default interval (1 s) and at its fastest (0.2 s);
   the process's CPU time in that window minus the same window idle (the baseline)
   is the sampler's, printed as a fraction of one CPU and per sample.

Needs torch (run it with the interpreter that has it)::

    python benchmarks/watch.py --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import time


def loop_time(loader, batches: int, step_s: float = 0.0) -> float:
    """Seconds for ``batches`` batches (a new epoch when the loader runs out)."""
    n = 0
    t0 = time.perf_counter()
    while n < batches:
        for _ in loader:
            if step_s:
                time.sleep(step_s)
            n += 1
            if n >= batches:
                break
    return time.perf_counter() - t0


def wrapper_cost(args) -> float:
    """Seconds the wrappers add to one ``next()`` (tight loop on a stand-in loader)."""
    import types

    from gpudoctor._watch_site import _gpudoctor_watch as gw

    batch = [[0.0, 1.0]]

    class Base:
        _num_workers = 0

        def __next__(self):
            return batch

    class DataLoader:
        batch_size, num_workers, pin_memory, drop_last = 2, 0, False, False

        def __init__(self):
            pass

        def __iter__(self):
            return Base()

    module = types.SimpleNamespace(DataLoader=DataLoader, _BaseDataLoaderIter=Base)
    n = args.batches * 20

    def per_call() -> float:
        it = iter(DataLoader())
        t0 = time.perf_counter()
        for _ in range(n):
            next(it)
        return (time.perf_counter() - t0) / n

    diffs = []
    for _ in range(args.rounds):
        plain = per_call()
        gw.install(module, gw.Recorder(None))
        watched = per_call()
        gw.uninstall()
        diffs.append(watched - plain)
    cost = statistics.median(diffs)
    print(f"recorder, wrapped next() alone ({args.rounds} rounds of {n} calls):")
    print(f"  overhead per step: {cost * 1e6:.2f} us = {cost / 0.020:.5f} of a 20 ms step (goal <= 0.02)")
    return cost


def recorder_overhead(args) -> None:
    import torch
    import torch.utils.data.dataloader as dl
    from torch.utils.data import DataLoader, TensorDataset

    from gpudoctor._watch_site import _gpudoctor_watch as gw

    torch.set_num_threads(1)
    data = TensorDataset(torch.arange(4096, dtype=torch.float32).reshape(-1, 1))
    kw = {"num_workers": args.workers, "persistent_workers": True} if args.workers else {}
    loader = DataLoader(data, batch_size=2, **kw)
    loop_time(loader, 64)  # warm-up (workers started, caches filled)
    plain, watched = [], []
    for r in range(args.rounds):
        for instrumented in (r % 2 == 0, r % 2 != 0):  # the order swaps every round
            if instrumented:
                gw.install(dl, gw.Recorder(None))
            t = loop_time(loader, args.batches) / args.batches
            if instrumented:
                gw.uninstall()
            (watched if instrumented else plain).append(t)
    p, w = statistics.median(plain), statistics.median(watched)
    overhead = w - p
    print(f"recorder, a real DataLoader, num_workers={args.workers}, {args.rounds} rounds of {args.batches} batches:")
    print(
        f"  per batch: plain {p * 1e6:.1f} us, instrumented {w * 1e6:.1f} us (medians; the loader's own noise included)"
    )
    print(f"  overhead per step: {overhead * 1e6:.1f} us = {overhead / 0.020:.4f} of a 20 ms step")
    # in a loop with a real 20 ms step (time.sleep): the time in next() alone, since the
    # sleep's own jitter on a shared machine (hundreds of microseconds) would swamp the rest
    steps = args.steps
    nexts: dict[bool, list[float]] = {False: [], True: []}
    for r in range(max(3, args.rounds // 2)):
        for instrumented in (r % 2 == 0, r % 2 != 0):  # the order swaps every round
            if instrumented:
                gw.install(dl, gw.Recorder(None))
            it = iter(loader)
            for _ in range(steps):
                t0 = time.perf_counter()
                try:
                    next(it)
                except StopIteration:
                    it = iter(loader)
                    continue
                nexts[instrumented].append(time.perf_counter() - t0)
                time.sleep(0.020)
            if instrumented:
                gw.uninstall()
    p20, w20 = statistics.median(nexts[False]), statistics.median(nexts[True])
    print(
        f"  loop with a 20 ms step ({len(nexts[True])} steps each): next() plain {p20 * 1e6:.1f} us, "
        f"instrumented {w20 * 1e6:.1f} us (medians): overhead {(w20 - p20) / 0.020:.4f} of the step"
    )


def sampler_cpu(args) -> None:
    import os

    from gpudoctor.stall_sampler import MachineSampler

    def cpu_in(seconds: float, sampler: MachineSampler | None) -> tuple[float, int]:
        c0, t0 = time.process_time(), time.monotonic()
        if sampler is not None:
            sampler.watch_pid(os.getpid())
            sampler.start()
        time.sleep(seconds)
        n = 0
        if sampler is not None:
            sampler.stop()
            n = sampler.samples
        return (time.process_time() - c0) / (time.monotonic() - t0), n

    base, _ = cpu_in(args.seconds, None)
    print(f"sampler, {args.seconds:g} s each (baseline: this process idle, {base:.5f} of a CPU):")
    for interval in (1.0, 0.2):
        used, n = cpu_in(args.seconds, MachineSampler(interval))
        extra = max(0.0, used - base)
        per = extra * args.seconds / max(1, n)
        print(
            f"  interval {interval:g} s: {extra:.5f} of one CPU above the baseline "
            f"({n} samples, {per * 1000:.2f} ms CPU per sample)"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batches", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--steps", type=int, default=100, help="steps of the 20 ms loop per measurement")
    args = ap.parse_args()
    wrapper_cost(args)
    recorder_overhead(args)
    sampler_cpu(args)


if __name__ == "__main__":
    main()
