"""DataLoader probe, search: which configurations to measure within the budget (adaptive or exhaustive).

Part of the script the target interpreter runs (see :mod:`gpudoctor.probe._dataloader`):
standard library only at module level, no import of gpudoctor.
"""

import time

if __package__:  # imported as part of gpudoctor (gpudoctor.dataloader, the tests)
    from gpudoctor.probe._dataloader_measure import (
        ProbeFailure,
        cpu_info,
        loader_kwargs,
        measure,
    )
    from gpudoctor.probe._dataloader_report import (
        STALL_OK,
        WITHIN,
        call_text,
        choose,
        group_rates,
        limits,
        pick_group,
        recommended_config,
    )
else:  # run in the target interpreter as a script: this directory is sys.path[0]
    from _dataloader_measure import ProbeFailure, cpu_info, loader_kwargs, measure
    from _dataloader_report import (
        STALL_OK,
        WITHIN,
        call_text,
        choose,
        group_rates,
        limits,
        pick_group,
        recommended_config,
    )

RESULT_VERSION = 1

#: Prefetch factors of the exhaustive grid (PyTorch's default is 2).
GRID_PREFETCH = (1, 2, 4)
#: The most workers the search will try, whatever the CPU count.
MAX_WORKERS = 64
#: Two measurements closer than this fraction are within measurement noise: one
#: 1.5 s measurement of the same configuration varied by up to ~20 % between runs
#: on a 2-CPU machine shared with other jobs (gpudoctor's own benchmark runs).
NOISE = 0.20
#: Rungs of the worker ladder without a gain, each within NOISE of the best,
#: after which the adaptive search stops climbing.
PATIENCE = 2


def cuda_usable():
    """Whether ``torch.cuda.is_available()`` is True here; False when torch or CUDA cannot say
    (torch is imported inside, so this module stays standard-library only at import)."""
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def loader_config(w, pf=2, persistent=False, pin=False):
    """The configuration dict measured: ``num_workers``, ``prefetch_factor``, ``persistent_workers``, ``pin_memory``."""
    return {
        "num_workers": w,
        "prefetch_factor": pf if w > 0 else None,
        "persistent_workers": bool(persistent) if w > 0 else False,
        "pin_memory": bool(pin),
    }


def worker_ladder(usable):
    """0, 1, 2, 4, 8 ... and ``usable`` itself, never above ``usable``."""
    top = max(0, min(int(usable), MAX_WORKERS))
    ws, w = [0], 1
    while w <= top:
        ws.append(w)
        w *= 2
    if top not in ws:
        ws.append(top)
    return sorted(set(ws))


def grid(usable, cuda):
    """Every configuration of the exhaustive grid."""
    out = [loader_config(0, pin=p) for p in ((False, True) if cuda else (False,))]
    for w in range(1, max(0, min(int(usable), MAX_WORKERS)) + 1):
        for pf in GRID_PREFETCH:
            for persistent in (False, True):
                for pin in (False, True) if cuda else (False,):
                    out.append(loader_config(w, pf, persistent, pin))
    return out


def _adaptive(results, run, ladder, pin):
    """The adaptive search (see :func:`search`); ``run(cfg, remaining, again, share)`` measures.

    1. Climb the worker ladder with num_workers=0, 1, 2, 4 ... at prefetch_factor=2.
       A rung that gains more than WITHIN becomes the best; the climb stops
       when the loader keeps up (stall <= STALL_OK), at a rung clearly worse
       than the best (below it by more than NOISE), or after PATIENCE rungs
       without a gain (a rung within noise of the best does not end a short
       ladder on one unlucky measurement). Before stopping it looks once
       between the best and the next rung tried.
    2. While the loader still stalls, try prefetch_factor=4 on the best worker
       count AND on the runner-up worker count when that is within NOISE of
       the best: a deeper queue can favour either, and one measurement cannot
       separate two counts that close.
    3. Confirmation round: the group :func:`choose` would pick (the cheapest
       within WITHIN of the best mean) and its rival (the best group with
       another worker count when one is within NOISE of the best, else the
       best other group within NOISE, or the best group itself when that is
       not the pick) are re-measured alternately, with persistent_workers=True (the variant recommended,
       whose restart time is reported). :func:`choose` then decides on each
       group's mean.

    Steps 2 and 3 are four half-slice measurements: together they cost two
    configurations' share of the budget, what the search spent before it
    had them (one prefetch_factor=4 and one persistent-workers measurement).
    """
    best = None
    misses = 0
    stop_after = None  # the first rung tried after the best, for the look in between
    for i, w in enumerate(ladder):
        r = run(loader_config(w, pin=pin), len(ladder) - i + 2)
        if r is None:
            return
        if best is None or r["samples_per_s"] > best["samples_per_s"] * (1 + WITHIN):
            best, misses, stop_after = r, 0, None
            if r["stall_fraction"] <= STALL_OK:
                break  # the loader keeps up: more workers cannot help
            continue
        if w <= 1:
            continue  # one worker only overlaps loading with the step; judge from two up
        misses += 1
        if stop_after is None:
            stop_after = w
        if r["samples_per_s"] < best["samples_per_s"] * (1 - NOISE) or misses >= PATIENCE:
            break
    if best is None:
        return
    bw = best["config"]["num_workers"]
    if stop_after is not None and bw < (bw + stop_after) // 2 < stop_after:
        mid = run(loader_config((bw + stop_after) // 2, pin=pin), 3)
        if mid is not None and mid["samples_per_s"] > best["samples_per_s"] * (1 + WITHIN):
            best = mid
    if best["stall_fraction"] > STALL_OK:
        by_workers = {}
        for r in results:
            w = r["config"]["num_workers"]
            if w > 0 and r["samples_per_s"] > by_workers.get(w, 0.0):
                by_workers[w] = r["samples_per_s"]
        order = sorted(by_workers, key=lambda w: -by_workers[w])
        top = order[:1] + [w for w in order[1:2] if by_workers[w] >= (1 - NOISE) * by_workers[order[0]]]
        for k, w in enumerate(top):
            if run(loader_config(w, 4, False, pin), 2 - 0.5 * k, share=0.5) is None:
                return
    rates = group_rates(results)
    if not rates:
        return
    ranked = sorted(rates, key=lambda g: -rates[g][0])
    pick = pick_group(rates)
    close = [g for g in ranked if g != pick and rates[g][0] >= (1 - NOISE) * rates[ranked[0]][0]]
    # the rival: the best other group, but a close group with another worker count first
    # (the worker count moves throughput most; prefetch variants of one count share its CPUs)
    other = [g for g in close if g[0] != pick[0]]
    rival = ranked[0] if pick != ranked[0] and ranked[0][0] != pick[0] else (other or close or [None])[0]
    pair = [pick] + ([rival] if rival is not None else [])  # alone: a clear winner, its persistent variant
    for k, g in enumerate(pair):
        w, pf, gpin = g
        if w == 0 and len(pair) == 1:
            break  # nothing to confirm: num_workers=0 has no persistent variant
        if run(loader_config(w, pf or 2, w > 0, gpin), 1 - 0.5 * k, again=True, share=0.5) is None:
            return
    rates = group_rates(results)
    w, pf, gpin = g = pick_group(rates)
    if w > 0 and not any(results[i]["config"].get("persistent_workers") for i in rates[g][1]):
        run(loader_config(w, pf or 2, True, gpin), 0.5, share=0.5)  # the recommended variant's restart time


def search(
    dataset,
    batch_size,
    step,
    budget_s=30.0,
    exhaustive=False,
    config_s=None,
    collate_fn=None,
    cuda=False,
    gpu_index=None,
    max_workers=None,
    progress=None,
    cpus=None,
    gpu_usable=None,
):
    """Find DataLoader settings that remove the data stall, within ``budget_s`` seconds.

    ``step(batch)`` is one training step. ``config_s`` fixes the seconds spent on
    each configuration (default: the budget split over the planned
    configurations, 0.3–5 s). ``progress(done, planned, config, result)`` is
    called after each configuration. Returns the result document (dict, see
    module doc); raises ProbeFailure for dataset/step/worker failures, with
    ``partial`` results attached as ``exc.results``. The adaptive search (the
    default) is described in :func:`_adaptive`; ``exhaustive=True`` measures
    every configuration of :func:`grid` once. ``gpu_usable``: whether a CUDA
    device is usable in this interpreter (default: ``cuda`` or, when that is
    False, ``torch.cuda.is_available()``, guarded); it decides whether the
    limits may advise decoding on the GPU.
    """
    start = time.monotonic()
    deadline = start + float(budget_s)
    cpus = cpus or cpu_info()
    usable = cpus["usable"] if max_workers is None else max(0, min(cpus["usable"], int(max_workers)))
    results = []
    budget_exhausted = [False]
    ladder = worker_ladder(usable)
    # adaptive: the ladder, then a refinement with two configurations' share of the
    # budget in four half-length measurements (prefetch_factor=4 on two worker
    # counts, the confirmation round)
    planned = len(grid(usable, cuda)) if exhaustive else len(ladder) + 4

    def slice_for(remaining_configs):
        if config_s is not None:
            return float(config_s)
        left = deadline - time.monotonic()
        return max(0.3, min(5.0, 0.8 * left / max(1.0, remaining_configs)))

    def run(cfg, remaining, again=False, share=1.0):
        if not again and any(r["config"] == cfg for r in results):
            return next(r for r in results if r["config"] == cfg)
        left = deadline - time.monotonic()
        if left < 0.5:
            budget_exhausted[0] = True
            return None
        try:
            r = measure(
                dataset,
                batch_size,
                cfg,
                step,
                min(max(0.3, share * slice_for(remaining)), left * 0.7),
                deadline,
                collate_fn=collate_fn,
                gpu_index=gpu_index,
            )
        except ProbeFailure as exc:
            exc.results = results
            raise
        results.append(r)
        if progress:
            progress(len(results), planned, cfg, r)
        return r

    if exhaustive:
        configs = grid(usable, cuda)
        for i, cfg in enumerate(configs):
            if run(cfg, len(configs) - i) is None:
                break
    else:
        _adaptive(results, run, ladder, pin=bool(cuda))
    rec = choose(results)
    if gpu_usable is None:
        gpu_usable = True if cuda else cuda_usable()
    doc = {
        "version": RESULT_VERSION,
        "mode": "exhaustive" if exhaustive else "adaptive",
        "batch_size": batch_size,
        "budget_s": budget_s,
        "elapsed_s": round(time.monotonic() - start, 3),
        "budget_exhausted": budget_exhausted[0],
        "cpus": cpus,
        "cuda": bool(cuda),
        "results": results,
        "recommended": rec,
        "kwargs": loader_kwargs(recommended_config(results, rec)) if rec is not None else None,
        "call": call_text(recommended_config(results, rec), batch_size) if rec is not None else None,
        "gpu_usable": gpu_usable,
        "limits": limits(results, rec, dict(cpus, usable=usable), budget_exhausted[0], gpu_usable=gpu_usable),
    }
    return doc
