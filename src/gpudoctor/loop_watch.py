"""``with gpudoctor.watch(loader) as w:``: the ``gpudoctor watch`` verdict for one loop.

Runs in the CALLER's process, which already has torch (like :mod:`gpudoctor.dataloader`;
the ``gpudoctor`` CLI never imports this module). The same recorder as ``gpudoctor watch``
(:mod:`gpudoctor._watch_site._gpudoctor_watch`) records this one loader, the same sampler
(:mod:`gpudoctor.stall_sampler`) samples the machine, the same analysis
(:func:`gpudoctor.stall.analyse`) gives the verdict.

Example::

    with gpudoctor.watch(loader) as w:
        for x, y in loader:
            train_step(x, y)
    print(w)                       # the verdict, as text
    w.stall_fraction, w.recommendation["call"], w.result   # the numbers, the JSON document
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["LoopWatch"]


def _recorder_module() -> Any:
    """The recorder module: the one ``gpudoctor watch``'s sitecustomize already loaded, if any
    (so the methods are never wrapped twice)."""
    loaded = sys.modules.get("_gpudoctor_watch")
    if loaded is not None:
        return loaded
    from gpudoctor._watch_site import _gpudoctor_watch

    return _gpudoctor_watch


class LoopWatch:
    """Context manager: records ``loader`` between ``__enter__`` and ``__exit__``.

    Attributes (after the block): ``result`` (the ``gpudoctor watch --format json``
    document), ``stall_fraction``, ``gpu_busy_percent``, ``limits``, ``recommendation``.
    """

    def __init__(self, loader: Any, interval_s: float = 0.5, gpu: bool | None = None):
        from torch.utils.data import DataLoader

        if not isinstance(loader, DataLoader):
            raise TypeError(f"gpudoctor.watch() takes a torch DataLoader, not {type(loader).__name__}")
        self.loader = loader
        self.interval_s = interval_s
        self.gpu = gpu
        self.result: dict[str, Any] | None = None
        self._mod: Any = None
        self._prev: Any = None
        self._rec: Any = None
        self._sampler: Any = None

    def __enter__(self) -> LoopWatch:
        import torch.utils.data.dataloader as dl

        from gpudoctor.stall_sampler import MachineSampler, nvml_may_answer

        mod = self._mod = _recorder_module()
        self._prev = mod.recorder()
        self._rec = mod.Recorder(None, only=self.loader)
        mod.install(dl, self._rec)
        gpu = nvml_may_answer() if self.gpu is None else self.gpu
        self._sampler = MachineSampler(self.interval_s, nvml=gpu)
        self._sampler.watch_pid(os.getpid())
        self._sampler.start()
        return self

    def __exit__(self, *exc: object) -> None:
        from gpudoctor import stall
        from gpudoctor.probe._dataloader_measure import cpu_info

        self._rec.flush()
        if self._prev is not None:
            self._mod.install(None, self._prev)  # back to the job-wide recorder of `gpudoctor watch`
        else:
            self._mod.uninstall()
        self._sampler.stop()
        self.result = stall.analyse(self._rec.lines, self._sampler.summary(), cpu_info())

    # ------------------------------------------------------------------ the verdict

    def _get(self, key: str) -> Any:
        if self.result is None:
            raise RuntimeError("the verdict is known when the `with gpudoctor.watch(loader)` block has ended")
        return self.result[key]

    @property
    def stall_fraction(self) -> float | None:
        """Share of the loop's step time spent waiting for data (0–1)."""
        return self._get("stall_fraction")

    @property
    def gpu_busy_percent(self) -> float | None:
        return self._get("gpu_busy_percent")

    @property
    def limits(self) -> list[dict[str, str]]:
        return self._get("limits")

    @property
    def recommendation(self) -> dict[str, Any] | None:
        """``kwargs``, ``call`` and ``expected_stall_fraction`` of the settings to use."""
        return self._get("recommendation")

    def __str__(self) -> str:
        from gpudoctor import stall

        return stall.render_text(self.result) if self.result is not None else "gpudoctor.watch: still watching"
