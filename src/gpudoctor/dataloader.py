"""Python API: tune a DataLoader from inside a training script or notebook.

This module runs in the CALLER's process, which already has torch; the
``gpudoctor`` CLI never imports it (DESIGN.md: the doctor never imports
torch). The measurement code is shared with ``gpudoctor probe dataloader``
(:mod:`gpudoctor.probe._dataloader`).

Example::

    from gpudoctor.dataloader import recommend
    rec = recommend(train_set, batch_size=64, step=lambda batch: train_step(batch), budget_s=30)
    loader = DataLoader(train_set, batch_size=64, shuffle=True, **rec.kwargs)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import Any

from gpudoctor.probe import _dataloader as _impl
from gpudoctor.records import frozen_dataclass

__all__ = ["DataLoaderProbeError", "Recommendation", "recommend"]


class DataLoaderProbeError(RuntimeError):
    """The dataset, a worker or the step failed while measuring.

    Attributes:
        kind: ``dataset`` (``__getitem__``/collate raised), ``worker-killed``
            (a worker died by a signal: SIGBUS = /dev/shm too small, SIGKILL =
            usually the OOM killer), or ``step``.
        where: ``file:line in function`` of your code, when known.
        config: the configuration being measured (dict), when known.
        results: measurements completed before the failure.
    """

    def __init__(
        self,
        kind: str,
        message: str,
        where: str | None = None,
        config: dict[str, Any] | None = None,
        results: list[dict[str, Any]] | None = None,
    ):
        super().__init__(f"{kind}: {message}" + (f" (at {where})" if where else ""))
        self.kind, self.message, self.where = kind, message, where
        self.config = config
        self.results = results or []


@frozen_dataclass
class Recommendation:
    """What :func:`recommend` found.

    Attributes:
        kwargs: DataLoader keyword arguments to use (``num_workers``,
            ``pin_memory``, and for workers ``prefetch_factor``, ``persistent_workers``).
        call: the same as a ``DataLoader(dataset, batch_size=..., ...)`` string.
        samples_per_s: steady-state throughput of the recommendation, samples/s.
        stall_fraction: fraction of the loop's time spent waiting in ``next()`` (0–1).
        measurements: one dict per configuration tried (keys as in ``gpudoctor
            probe dataloader --format json``: ``samples``, ``elapsed_s``,
            ``samples_per_s``, ``stall_fraction``, ``time_to_first_batch_s``,
            ``restart_s``, ``worker_peak_rss_mib``, ``shm_peak_mib``,
            ``gpu_util_percent`` ...).
        limits: what still limits it: dicts with ``kind`` (``step-bound``,
            ``cpu-bound``, ``io-bound``, ``more-workers``, ``budget``), ``summary``, ``detail``.
        cpus: ``logical`` (os.cpu_count()), ``affinity``, ``quota_cpus``, ``usable``.
        elapsed_s: wall time the search took, seconds.
        document: the full result document.
    """

    kwargs: dict[str, Any]
    call: str
    samples_per_s: float
    stall_fraction: float
    measurements: list[dict[str, Any]]
    limits: list[dict[str, str]]
    cpus: dict[str, Any]
    elapsed_s: float
    document: dict[str, Any] = field(repr=False, default_factory=dict)


def recommend(
    dataset: Any,
    batch_size: int,
    step: Callable[[Any], Any] | float | None = None,
    budget_s: float = 30.0,
    *,
    exhaustive: bool = False,
    config_s: float | None = None,
    collate_fn: Callable | None = None,
    cuda: bool | None = None,
    max_workers: int | None = None,
) -> Recommendation:
    """Measure DataLoader configurations on ``dataset`` and return the cheapest within 5 % of the best.

    Args:
        dataset: a map-style or iterable Dataset (what you pass to DataLoader).
        batch_size: samples per batch.
        step: your training step ``step(batch)``, or a number of milliseconds to
            simulate it (``time.sleep``), or None for 20 ms.
        budget_s: the search stops within this many seconds (plus the shutdown
            of the last configuration's workers).
        exhaustive: measure the full grid (num_workers 0..usable CPUs ×
            prefetch_factor 1/2/4 × persistent_workers) instead of the adaptive search.
        config_s: seconds per configuration (default: the budget split over the planned ones).
        collate_fn: passed to every DataLoader.
        cuda: try ``pin_memory=True`` (default: ``torch.cuda.is_available()``).
        max_workers: cap on num_workers (default: usable CPUs from affinity and cgroup quota).

    Returns:
        :class:`Recommendation`.

    Raises:
        DataLoaderProbeError: the dataset raised, a worker was killed, or the step raised.
        ValueError: ``batch_size`` < 1 or ``budget_s`` <= 0.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    if budget_s <= 0:
        raise ValueError("budget_s must be positive")
    if step is None:
        step_fn = _impl.sleep_step(20.0)
    elif callable(step):
        step_fn = step
    else:
        step_fn = _impl.sleep_step(float(step))
    if cuda is None:
        import torch

        cuda = bool(torch.cuda.is_available())
    try:
        doc = _impl.search(
            dataset,
            int(batch_size),
            step_fn,
            budget_s=budget_s,
            exhaustive=exhaustive,
            config_s=config_s,
            collate_fn=collate_fn,
            cuda=cuda,
            max_workers=max_workers,
        )
    except _impl.ProbeFailure as exc:
        raise DataLoaderProbeError(exc.kind, exc.message, exc.where, exc.config, getattr(exc, "results", [])) from None
    rec = doc["recommended"]
    if rec is None:
        raise DataLoaderProbeError("budget", f"no configuration could be measured in {budget_s:g} s")
    r = doc["results"][rec]
    return Recommendation(
        kwargs=dict(doc["kwargs"]),
        call=doc["call"],
        samples_per_s=r["samples_per_s"],
        stall_fraction=r["stall_fraction"],
        measurements=list(doc["results"]),
        limits=list(doc["limits"]),
        cpus=dict(doc["cpus"]),
        elapsed_s=doc["elapsed_s"],
        document=doc,
    )
