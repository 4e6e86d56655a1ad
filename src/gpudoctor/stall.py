"""The verdict of ``gpudoctor watch``: from the recorder's records and the machine samples
to the data stall, what limits it and the DataLoader settings to use.

Pure functions of data (no clock, no /proc): the records are what the recorder in the job
(:mod:`gpudoctor._watch_site._gpudoctor_watch`) wrote, the machine summary is
:meth:`gpudoctor.stall_sampler.MachineSampler.summary`. The doctor never imports torch:
this module does not either.

The settings come from the recommender of ``gpudoctor probe dataloader``
(:func:`gpudoctor.probe._dataloader_report.choose`, ``recommended_config``,
``call_text``): the watched run measured one configuration, so the other
configurations of the probe's worker ladder are predicted from it by a queueing
model (:func:`predict`) and the recommender chooses among the predictions, the
cheapest within 5 % of the best throughput, with the stall it expects.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.probe._dataloader_measure import loader_kwargs
from gpudoctor.probe._dataloader_report import (
    STALL_OK,
    call_text,
    choose,
    cpu_bound_advice,
    recommended_config,
)
from gpudoctor.probe._dataloader_search import MAX_WORKERS, loader_config, worker_ladder

__all__ = [
    "WATCH_SCHEMA_VERSION",
    "LoaderStats",
    "RecordReader",
    "analyse",
    "loader_stats",
    "main_loader",
    "predict",
    "recommend",
    "watch_schema",
]

#: Version of the ``--format json`` document.
WATCH_SCHEMA_VERSION = 1
#: A rank whose stall exceeds the others' median by this many points (and waits 1.5× as long
#: per batch) is named as the slow rank.
SLOW_RANK_POINTS = 0.10
#: Worker CPU busy (fraction of one CPU per worker) below which loading is not CPU work.
CPU_LIGHT = 0.5
#: Whole-machine CPU busy at or above which every CPU counts as busy.
HOST_BUSY = 0.85
#: I/O pressure (share of time some task waited for I/O) that marks I/O-bound input.
IO_PRESSURE = 0.10


_SUMMED = ("n", "samples", "wait_s", "step_s", "first_wait_s", "wait_cpu_s", "cpu_sampled_s")


class RecordReader:
    """Reads the recorder's ``rec-<pid>.jsonl`` files in a run directory incrementally:
    :meth:`read` returns the records added since the last call (a line still being
    written is kept for the next call). :attr:`records` holds everything read, compacted
    (one ``batches`` and one ``iter`` record per loader and process), so memory does not
    grow with the length of the run."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        self._offsets: dict[str, int] = {}
        self._other: list[dict[str, Any]] = []
        self._batches: dict[tuple[Any, Any], dict[str, Any]] = {}
        self._iters: dict[tuple[Any, Any], dict[str, Any]] = {}

    @property
    def records(self) -> list[dict[str, Any]]:
        return [*self._other, *self._iters.values(), *self._batches.values()]

    def _keep(self, rec: dict[str, Any]) -> None:
        key = (rec.get("pid"), rec.get("id"))
        try:
            if rec["k"] == "batches":
                cur = self._batches.get(key)
                if cur is None:
                    self._batches[key] = dict(rec)
                    return
                for f in _SUMMED:
                    cur[f] = (cur.get(f) or 0) + (rec.get(f) or 0)
                cur["max_wait_s"] = max(cur.get("max_wait_s") or 0.0, rec.get("max_wait_s") or 0.0)
                return
            if rec["k"] == "iter":
                cur = self._iters.get(key)
                if cur is None:
                    cur = self._iters[key] = {
                        "k": "iter",
                        "pid": rec.get("pid"),
                        "id": rec.get("id"),
                        "count": 0,
                        "new_count": 0,
                        "s": 0.0,
                        "workers": [],
                    }
                cur["count"] += 1
                cur["new_count"] += 1 if rec.get("new") else 0
                cur["s"] += float(rec.get("s") or 0.0)
                cur["workers"] = (cur["workers"] + [w for w in rec.get("workers") or [] if w not in cur["workers"]])[
                    -256:
                ]
                return
        except (TypeError, ValueError):
            return
        self._other.append(rec)

    def read(self) -> list[dict[str, Any]]:
        new: list[dict[str, Any]] = []
        try:
            names = sorted(n for n in os.listdir(self.run_dir) if n.startswith("rec-") and n.endswith(".jsonl"))
        except OSError:
            return new
        for name in names:
            path = os.path.join(self.run_dir, name)
            start = self._offsets.get(name, 0)
            try:
                with open(path, "rb") as fh:
                    fh.seek(start)
                    data = fh.read()
            except OSError:
                continue
            end = data.rfind(b"\n") + 1
            self._offsets[name] = start + end
            for line in data[:end].splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict) and "k" in rec:
                    new.append(rec)
                    self._keep(rec)
        return new


@dataclass
class LoaderStats:
    """One DataLoader in one process (rank), summed over the run."""

    pid: int
    id: int
    rank: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    batches: int = 0
    samples: int = 0
    wait_s: float = 0.0
    step_s: float = 0.0
    first_wait_s: float = 0.0
    wait_cpu_s: float = 0.0
    cpu_sampled_s: float = 0.0
    max_wait_s: float = 0.0
    iterations: int = 0
    new_iterators: int = 0
    iter_s: float = 0.0
    workers: list[int] = field(default_factory=list)

    @property
    def stall_fraction(self) -> float:
        total = self.wait_s + self.step_s
        return self.wait_s / total if total > 0 else 0.0

    @property
    def restarts(self) -> int:
        """Worker start-ups after the first (num_workers > 0 without persistent workers)."""
        return max(0, self.new_iterators - 1) if (self.settings.get("num_workers") or 0) > 0 else 0

    def per_batch(self) -> tuple[float, float]:
        """(steady wait, step) seconds per batch: the first batch of each epoch and the
        iterator creation (worker start-up) left out of the wait."""
        steady_n = max(1, self.batches - self.iterations)
        steps_n = max(1, self.batches - self.iterations)
        wait = max(0.0, self.wait_s - self.first_wait_s - self.iter_s) / steady_n
        return wait, self.step_s / steps_n

    def to_json(self) -> dict[str, Any]:
        wait, step = self.per_batch()
        return {
            "pid": self.pid,
            "loader": self.id,
            "rank": self.rank,
            "site": self.settings.get("site"),
            "dataset": self.settings.get("dataset"),
            "settings": {
                k: self.settings.get(k)
                for k in ("batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers")
            },
            "batches": self.batches,
            "samples": self.samples,
            "epochs": self.iterations,
            "wait_s": round(self.wait_s, 4),
            "step_s": round(self.step_s, 4),
            "stall_fraction": round(self.stall_fraction, 4),
            "wait_ms_per_batch": round(1000 * wait, 3),
            "step_ms_per_batch": round(1000 * step, 3),
            "max_wait_ms": round(1000 * self.max_wait_s, 3),
            "worker_startups": self.new_iterators if (self.settings.get("num_workers") or 0) > 0 else 0,
            "worker_restarts": self.restarts,
            "startup_s": round(self.iter_s + self.first_wait_s, 4),
            "worker_pids": list(self.workers),
        }


def loader_stats(records: Iterable[dict[str, Any]]) -> list[LoaderStats]:
    """Sum the records per (process, loader); loaders that never yielded a batch are left out."""
    ranks: dict[int, int | None] = {}
    out: dict[tuple[int, int], LoaderStats] = {}

    def get(rec: dict[str, Any]) -> LoaderStats:
        key = (int(rec.get("pid") or 0), int(rec.get("id") or 0))
        if key not in out:
            out[key] = LoaderStats(pid=key[0], id=key[1])
        return out[key]

    for rec in records:
        k = rec.get("k")
        try:
            if k == "proc":
                ranks[int(rec["pid"])] = rec.get("rank")
            elif k == "loader":
                get(rec).settings = {x: rec.get(x) for x in rec if x not in ("k", "pid", "id")}
            elif k == "iter":
                s = get(rec)
                s.iterations += int(rec.get("count", 1))  # a compacted record counts several
                s.iter_s += float(rec.get("s") or 0.0)
                s.new_iterators += int(rec["new_count"]) if "new_count" in rec else 1 if rec.get("new") else 0
                for w in rec.get("workers") or []:
                    if isinstance(w, int) and w not in s.workers:
                        s.workers.append(w)
            elif k == "batches":
                s = get(rec)
                s.batches += int(rec.get("n") or 0)
                s.samples += int(rec.get("samples") or 0)
                s.wait_s += float(rec.get("wait_s") or 0.0)
                s.step_s += float(rec.get("step_s") or 0.0)
                s.first_wait_s += float(rec.get("first_wait_s") or 0.0)
                s.wait_cpu_s += float(rec.get("wait_cpu_s") or 0.0)
                s.cpu_sampled_s += float(rec.get("cpu_sampled_s") or 0.0)
                s.max_wait_s = max(s.max_wait_s, float(rec.get("max_wait_s") or 0.0))
        except (TypeError, ValueError, KeyError):
            continue  # a malformed record (a job writing into the run directory): skipped
    for s in out.values():
        s.rank = ranks.get(s.pid)
    return sorted((s for s in out.values() if s.batches), key=lambda s: (s.rank is None, s.rank or 0, s.pid, s.id))


# --------------------------------------------------------------------------- the model


def predict(
    load_s: float, step_s: float, workers: int, cpu_per_load: float, cpus_for_workers: float, batch_size: int
) -> dict[str, Any]:
    """Steady state of a loader with ``workers`` workers (0: loading in the loop's process).

    ``load_s``: one batch's loading time in one process; ``step_s``: the step per batch;
    ``cpu_per_load``: the CPU share of a load (1 = pure CPU work, near 0 = waiting on I/O
    or a sleep); ``cpus_for_workers``: the CPUs the workers can share. Workers overlap
    loading with the step: a batch arrives every ``load / parallelism`` seconds, where the
    parallelism is the worker count capped by the CPUs when loading is CPU work.
    """
    if workers == 0:
        period = load_s + step_s
    else:
        parallel = float(workers)
        if cpu_per_load > 0:
            parallel = min(parallel, max(1.0, cpus_for_workers / cpu_per_load))
        period = max(step_s, load_s / parallel)
    stall = (period - step_s) / period if period > 0 else 0.0
    return {
        "samples_per_s": round(batch_size / period, 2) if period > 0 else 0.0,
        "stall_fraction": round(max(0.0, stall), 4),
    }


def recommend(
    s: LoaderStats, cpus: dict[str, Any], worker_cpu_busy: float | None, gpu: bool, ranks_per_node: int = 1
) -> dict[str, Any] | None:
    """The settings for loader ``s`` from the probe's recommender, over predicted measurements
    of the probe's worker ladder; None when the loader yielded too few batches to model."""
    if s.batches < 2:
        return None
    wait, step = s.per_batch()
    w = int(s.settings.get("num_workers") or 0)
    usable = max(1, int(cpus.get("usable") or 1) // max(1, ranks_per_node))
    for_workers = max(1.0, usable - 1.0) if usable > 1 else 1.0
    cpu_share = 1.0 if worker_cpu_busy is None else min(1.0, max(0.0, worker_cpu_busy))
    if w == 0:
        load = wait
    else:
        parallel = float(w)
        if cpu_share > 0:
            parallel = min(parallel, max(1.0, for_workers / cpu_share))
        # stalled: batches arrive every wait + step; keeping up: loading takes at most that
        load = parallel * (wait + step)
    batch_size = int(s.settings.get("batch_size") or 0) or max(1, s.samples // max(1, s.batches))
    top = usable if cpu_share >= CPU_LIGHT else min(MAX_WORKERS, 2 * usable)
    ladder = sorted(set(worker_ladder(top)) | {w})
    pf = int(s.settings.get("prefetch_factor") or 2)
    results = []
    for n in ladder:
        cfg = loader_config(n, pf if n == w and n > 0 else 2, persistent=n > 0, pin=gpu)
        r = {"config": cfg, **predict(load, step, n, cpu_share, for_workers, batch_size)}
        results.append(r)
    index = choose(results)
    if index is None:
        return None
    cfg = recommended_config(results, index)
    current = next((r for r in results if r["config"]["num_workers"] == w), None)
    return {
        "kwargs": loader_kwargs(cfg),
        "call": call_text(cfg, batch_size),
        "expected_stall_fraction": results[index]["stall_fraction"],
        "expected_samples_per_s": results[index]["samples_per_s"],
        "current_model_stall_fraction": current["stall_fraction"] if current else None,
        "model": {
            "load_ms_per_batch": round(1000 * load, 3),
            "step_ms_per_batch": round(1000 * step, 3),
            "cpu_share_of_load": round(cpu_share, 3),
            "cpus_for_workers": for_workers,
            "predicted": results,
        },
    }


# --------------------------------------------------------------------------- the verdict


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def _limits(
    main: LoaderStats,
    stats: list[LoaderStats],
    machine: dict[str, Any],
    cpus: dict[str, Any],
    worker_busy: float | None,
    gpu: bool,
    ranks_per_node: int,
) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    stall = main.stall_fraction
    w = int(main.settings.get("num_workers") or 0)
    usable = max(1, int(cpus.get("usable") or 1) // max(1, ranks_per_node))
    host = machine.get("cpu_busy")
    io = machine.get("io_pressure_some")
    where = f" ({main.settings['site']})" if main.settings.get("site") else ""
    if stall <= STALL_OK:
        out.append(
            {
                "kind": "step-bound",
                "summary": f"the loop waits for data only {_pct(stall)} of the time: the loader keeps up",
                "detail": "the training step is the bottleneck; a faster step (mixed precision, "
                "torch.compile, a larger batch) speeds training up, more loader tuning does not",
            }
        )
    else:
        all_busy = host is not None and host >= HOST_BUSY
        light = worker_busy is not None and worker_busy < CPU_LIGHT
        others = ""
        job = machine.get("job_cpu_cores")
        if all_busy and job is not None and host is not None:
            share = job / max(1.0, float(cpus.get("usable") or 1))
            if share < host - 0.25:
                others = f"; other processes keep the CPUs busy (the job uses {job:.1f} CPUs)"
        if w == 0:
            out.append(
                {
                    "kind": "too-few-workers",
                    "summary": f"num_workers=0{where}: batches are loaded in the training loop's own process, "
                    f"which waits for data {_pct(stall)} of the time",
                    "detail": "worker processes load the next batches while the step runs; use the settings "
                    "below" + others,
                }
            )
        elif not light and (all_busy or w >= max(1, usable - 1)):
            out.append(
                {
                    "kind": "cpu-bound",
                    "summary": f"CPU-bound loading: {w} workers"
                    + ("" if worker_busy is None else f" {_pct(worker_busy)} busy each")
                    + (f", every CPU busy ({_pct(host)})" if all_busy and host is not None else "")
                    + f"; the loop waits for data {_pct(stall)} of the time"
                    + others,
                    "detail": cpu_bound_advice(gpu),
                }
            )
        elif w < max(1, usable - 1):
            out.append(
                {
                    "kind": "too-few-workers",
                    "summary": f"num_workers={w}{where} with {usable} usable CPUs"
                    + (f" per rank ({ranks_per_node} ranks)" if ranks_per_node > 1 else "")
                    + f": the loop waits for data {_pct(stall)} of the time while CPUs are free"
                    + ("" if host is None else f" (machine {_pct(host)} busy)"),
                    "detail": "more workers load batches in parallel with the step; use the settings below",
                }
            )
        else:
            busy_text = "" if worker_busy is None else f" (workers {_pct(worker_busy)} busy)"
            io_text = "" if io is None else f"; tasks waited for I/O {_pct(io)} of the time"
            what = "I/O-bound input" if io is not None and io >= IO_PRESSURE else "I/O- or latency-bound input"
            out.append(
                {
                    "kind": "io-bound",
                    "summary": f"{what}: the workers mostly wait{busy_text} while CPUs are free{io_text}",
                    "detail": "read from faster local storage or RAM, use larger sequential files "
                    "(WebDataset-style shards), or cache the dataset; more workers than CPUs can "
                    "help an I/O-bound loader",
                }
            )
    if gpu and not main.settings.get("pin_memory"):
        out.append(
            {
                "kind": "pin-memory-off",
                "summary": f"pin_memory is off{where} on a machine with a GPU",
                "detail": "pin_memory=True lets the host-to-GPU copy run asynchronously "
                "(tensor.to('cuda', non_blocking=True)) instead of through pageable memory",
            }
        )
    if main.restarts >= 1:
        cost = main.iter_s + main.first_wait_s
        out.append(
            {
                "kind": "workers-restarted",
                "summary": f"the {w} workers were started {main.new_iterators} times (every epoch), "
                f"{cost:.2f} s of start-up in all",
                "detail": "persistent_workers=True keeps the workers (and their dataset copies) between epochs",
            }
        )
    slow = slow_rank(stats)
    if slow is not None:
        rank, s, median = slow
        out.append(
            {
                "kind": "slow-rank",
                "summary": f"rank {rank} is slower: it waits for data {_pct(s.stall_fraction)} of its step "
                f"time, the other ranks {_pct(median)}",
                "detail": f"every rank waits for the slowest at each gradient all-reduce, so rank {rank}'s "
                "input sets the pace: check its data shard (size, storage, decode cost) and the CPUs and "
                "disk of its node",
            }
        )
    return out


def slow_rank(stats: list[LoaderStats]) -> tuple[int, LoaderStats, float] | None:
    """(rank, its main loader, the other ranks' median stall) when one rank's loader stalls
    clearly more than the others', else None."""
    by_rank: dict[int, LoaderStats] = {}
    for s in stats:
        if s.rank is None:
            continue
        cur = by_rank.get(s.rank)
        if cur is None or s.wait_s + s.step_s > cur.wait_s + cur.step_s:
            by_rank[s.rank] = s
    if len(by_rank) < 2:
        return None
    worst_rank = max(by_rank, key=lambda r: by_rank[r].stall_fraction)
    worst = by_rank[worst_rank]
    others = sorted(by_rank[r].stall_fraction for r in by_rank if r != worst_rank)
    median = (
        others[len(others) // 2] if len(others) % 2 else (others[len(others) // 2 - 1] + others[len(others) // 2]) / 2
    )
    other_wait = sorted(by_rank[r].per_batch()[0] for r in by_rank if r != worst_rank)[len(others) // 2]
    if worst.stall_fraction - median < SLOW_RANK_POINTS or worst.per_batch()[0] < 1.5 * other_wait:
        return None
    return worst_rank, worst, median


def main_loader(stats: list[LoaderStats]) -> LoaderStats | None:
    """The training loop's loader: among the loaders that took at least 80 % of the longest
    loop time (a validation loader takes less; ranks of one job take about the same, as
    they wait for each other), the one that stalls most (the rank that sets the pace)."""
    if not stats:
        return None
    longest = max(s.wait_s + s.step_s for s in stats)
    return max((s for s in stats if s.wait_s + s.step_s >= 0.8 * longest), key=lambda s: s.stall_fraction)


def load_cpu_share(s: LoaderStats, machine: dict[str, Any]) -> float | None:
    """How much of loading is CPU work (0–1): with num_workers=0 the loop thread's CPU time
    during the waits the recorder CPU-timed, over those waits; with workers their mean
    busy share from the machine samples; None when unknown."""
    if not (s.settings.get("num_workers") or 0):
        return round(min(1.0, s.wait_cpu_s / s.cpu_sampled_s), 3) if s.cpu_sampled_s > 0 else None
    per_pid = machine.get("process_cpu_busy") or {}
    vals = [per_pid[str(p)] for p in s.workers if per_pid.get(str(p)) is not None]
    return round(sum(vals) / len(vals), 3) if vals else None


def analyse(
    records: list[dict[str, Any]],
    machine: dict[str, Any],
    cpus: dict[str, Any],
    command: list[str] | None = None,
    exit_code: int | None = None,
    elapsed_s: float | None = None,
    final: bool = True,
) -> dict[str, Any]:
    """The ``--format json`` document: per-loader measurements, the machine summary, the
    limits, the recommendation."""
    stats = loader_stats(records)
    gpus = machine.get("gpus") or []
    gpu = bool(gpus) or bool(machine.get("gpu_present"))
    gpu_busy = machine.get("gpu_busy_percent")
    ranks = sorted({s.rank for s in stats if s.rank is not None})
    ranks_per_node = max(1, len({s.pid for s in stats}))
    main = main_loader(stats)
    worker_busy = None if main is None else load_cpu_share(main, machine)
    doc: dict[str, Any] = {
        "schema_version": WATCH_SCHEMA_VERSION,
        "kind": "watch",
        "final": final,
        "command": list(command) if command else None,
        "exit_code": exit_code,
        "elapsed_s": None if elapsed_s is None else round(elapsed_s, 3),
        "instrumented": bool(stats),
        "stall_fraction": round(main.stall_fraction, 4) if main else None,
        "gpu_busy_percent": gpu_busy,
        "main_loader": None if main is None else {"pid": main.pid, "loader": main.id, "rank": main.rank},
        "loaders": [
            dict(
                s.to_json(),
                load_cpu_share=load_cpu_share(s, machine),
                recommendation=recommend(s, cpus, load_cpu_share(s, machine), gpu, ranks_per_node),
            )
            for s in stats
        ],
        "ranks": [
            {"rank": r, "stall_fraction": round(max(s.stall_fraction for s in stats if s.rank == r), 4)} for r in ranks
        ],
        "worker_cpu_busy": worker_busy,
        "cpus": cpus,
        "machine": machine,
        "limits": [],
        "recommendation": None,
    }
    if main is None:
        doc["limits"] = [
            {
                "kind": "no-dataloader",
                "summary": "no torch DataLoader yielded a batch in this run",
                "detail": "watch instruments Python processes that iterate a torch.utils.data.DataLoader; "
                "a job started with `python -I`/`-E`/`-S` ignores PYTHONPATH and is not instrumented",
            }
        ]
        return doc
    doc["limits"] = _limits(main, stats, machine, cpus, worker_busy, gpu, ranks_per_node)
    doc["recommendation"] = recommend(main, cpus, worker_busy, gpu, ranks_per_node)
    return doc


def render_text(doc: dict[str, Any]) -> str:
    """The console verdict, plain text (the caller writes it to stderr or a file)."""
    lines = []
    head = "gpudoctor watch: " + ("verdict" if doc.get("final", True) else "so far")
    if doc.get("elapsed_s") is not None:
        head += f" after {doc['elapsed_s']:.1f} s"
    if doc.get("exit_code") is not None:
        head += f" (the command exited with status {doc['exit_code']})"
    elif doc.get("killed_after_s") is not None:
        head += f" (the command was still running {doc['killed_after_s']:g} s after Ctrl-C: gpudoctor watch killed it)"
    lines.append(head)
    stall = doc.get("stall_fraction")
    gpu = doc.get("gpu_busy_percent")
    if stall is not None:
        ml = doc.get("main_loader") or {}
        line = f"  waiting for data: {100 * stall:.0f} % of step time" + (
            f" (rank {ml['rank']}, the slowest)"
            if ml.get("rank") is not None and len(doc.get("ranks") or []) > 1
            else ""
        )
        if gpu is not None:
            line += f"; GPU busy: {gpu:.0f} %"
        lines.append(line)
    elif gpu is not None:
        lines.append(f"  GPU busy: {gpu:.0f} %")
    for lo in doc.get("loaders") or []:
        st = lo["settings"]
        who = f"rank {lo['rank']}" if lo.get("rank") is not None else f"pid {lo['pid']}"
        lines.append(
            f"  {who}, loader {lo['loader']}"
            + (f" ({lo['site']})" if lo.get("site") else "")
            + f": {lo['batches']} batches, wait {lo['wait_ms_per_batch']:.1f} ms, step "
            f"{lo['step_ms_per_batch']:.1f} ms per batch, stall {100 * lo['stall_fraction']:.0f} %; "
            f"num_workers={st.get('num_workers')} pin_memory={st.get('pin_memory')} "
            f"prefetch_factor={st.get('prefetch_factor')} persistent_workers={st.get('persistent_workers')} "
            f"batch_size={st.get('batch_size')}"
        )
    m = doc.get("machine") or {}
    facts = []
    if m.get("cpu_busy") is not None:
        facts.append(f"CPU {100 * m['cpu_busy']:.0f} % busy of {doc.get('cpus', {}).get('usable')} usable")
    if m.get("job_cpu_cores") is not None:
        facts.append(f"the job's processes {m['job_cpu_cores']:.1f} CPUs")
    if doc.get("worker_cpu_busy") is not None:
        facts.append(f"loading process(es) {100 * doc['worker_cpu_busy']:.0f} % of a CPU each")
    if m.get("io_pressure_some") is not None:
        facts.append(f"I/O pressure {100 * m['io_pressure_some']:.0f} %")
    if m.get("shm_used_mib_max") is not None:
        facts.append(f"/dev/shm peak {m['shm_used_mib_max']:.0f} MiB")
    if m.get("mem_available_mib_min") is not None:
        facts.append(f"memory available min {m['mem_available_mib_min']:.0f} MiB")
    for g in m.get("gpus") or []:
        if g.get("memory_used_mib_max") is not None:
            facts.append(
                f"GPU {g['index']} {g.get('util_percent_mean')} % busy, memory peak {g['memory_used_mib_max']}"
                f" of {g.get('memory_total_mib')} MiB"
            )
    if facts:
        lines.append("  machine: " + ", ".join(facts))
    for lim in doc.get("limits") or []:
        lines.append(f"  limit ({lim['kind']}): {lim['summary']}")
        lines.append(f"    {lim['detail']}")
    rec = doc.get("recommendation")
    if rec:
        lines.append(
            f"  use: {rec['call']}  (expected stall {100 * rec['expected_stall_fraction']:.0f} %; keep your "
            "other arguments such as shuffle, sampler, collate_fn)"
        )
    return "\n".join(lines) + "\n"


def watch_schema() -> dict[str, Any]:
    """JSON Schema of the ``gpudoctor watch --format json`` document (:func:`analyse`);
    published as ``schemas/watch.schema.json``."""
    num = {"type": ["number", "null"]}
    limit = {
        "type": "object",
        "required": ["kind", "summary", "detail"],
        "properties": {
            "kind": {
                "enum": [
                    "step-bound",
                    "too-few-workers",
                    "cpu-bound",
                    "io-bound",
                    "pin-memory-off",
                    "workers-restarted",
                    "slow-rank",
                    "no-dataloader",
                ]
            },
            "summary": {"type": "string"},
            "detail": {"type": "string"},
        },
    }
    recommendation = {
        "type": ["object", "null"],
        "required": ["kwargs", "call", "expected_stall_fraction", "expected_samples_per_s", "model"],
        "properties": {
            "kwargs": {"type": "object", "description": "DataLoader keyword arguments to use"},
            "call": {"type": "string", "description": "the DataLoader(...) call to paste"},
            "expected_stall_fraction": {"type": "number", "minimum": 0, "maximum": 1},
            "expected_samples_per_s": {"type": "number", "minimum": 0},
            "current_model_stall_fraction": num,
            "model": {"type": "object", "description": "the measured load and step per batch, the predictions"},
        },
    }
    loader = {
        "type": "object",
        "required": [
            "pid",
            "loader",
            "rank",
            "settings",
            "batches",
            "samples",
            "epochs",
            "wait_s",
            "step_s",
            "stall_fraction",
            "wait_ms_per_batch",
            "step_ms_per_batch",
            "worker_startups",
            "worker_restarts",
            "load_cpu_share",
            "recommendation",
        ],
        "properties": {
            "pid": {"type": "integer"},
            "loader": {"type": "integer", "description": "the loader's number in its process"},
            "rank": {"type": ["integer", "null"], "description": "RANK of the process (null: not distributed)"},
            "site": {"type": ["string", "null"], "description": "file:line where the DataLoader was made"},
            "dataset": {"type": ["string", "null"]},
            "settings": {"type": "object"},
            "batches": {"type": "integer", "minimum": 0},
            "samples": {"type": "integer", "minimum": 0},
            "epochs": {"type": "integer", "minimum": 0},
            "wait_s": {"type": "number", "minimum": 0},
            "step_s": {"type": "number", "minimum": 0},
            "stall_fraction": {"type": "number", "minimum": 0, "maximum": 1},
            "wait_ms_per_batch": {"type": "number"},
            "step_ms_per_batch": {"type": "number"},
            "max_wait_ms": {"type": "number"},
            "worker_startups": {"type": "integer"},
            "worker_restarts": {"type": "integer"},
            "startup_s": {"type": "number"},
            "worker_pids": {"type": "array", "items": {"type": "integer"}},
            "load_cpu_share": num,
            "recommendation": recommendation,
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://gpudoctor.invalid/schemas/watch.schema.json",
        "title": "gpudoctor watch --format json",
        "type": "object",
        "required": [
            "schema_version",
            "kind",
            "final",
            "command",
            "exit_code",
            "instrumented",
            "stall_fraction",
            "gpu_busy_percent",
            "loaders",
            "ranks",
            "cpus",
            "machine",
            "limits",
            "recommendation",
        ],
        "properties": {
            "schema_version": {"const": WATCH_SCHEMA_VERSION},
            "kind": {"const": "watch"},
            "final": {"type": "boolean", "description": "false for a --live verdict so far"},
            "interrupted": {"type": "boolean", "description": "present and true after Ctrl-C"},
            "killed_after_s": {
                "type": "number",
                "description": "present when the command was still running this many seconds after a forwarded"
                " Ctrl-C/SIGTERM/SIGHUP and gpudoctor killed it (exit_code is then null)",
            },
            "command": {"type": ["array", "null"], "items": {"type": "string"}},
            "exit_code": {"type": ["integer", "null"]},
            "elapsed_s": num,
            "instrumented": {"type": "boolean", "description": "whether any DataLoader batch was recorded"},
            "stall_fraction": {**num, "description": "the judged loop's share of step time waiting for data"},
            "gpu_busy_percent": {**num, "description": "mean NVML utilisation over the GPUs (null: no GPU)"},
            "main_loader": {"type": ["object", "null"]},
            "loaders": {"type": "array", "items": loader},
            "ranks": {"type": "array", "items": {"type": "object", "required": ["rank", "stall_fraction"]}},
            "worker_cpu_busy": num,
            "cpus": {"type": "object", "required": ["usable"]},
            "machine": {"type": "object", "description": "the samples summarised (MachineSampler.summary)"},
            "limits": {"type": "array", "items": limit},
            "recommendation": recommendation,
        },
    }
