"""Facts saved by the last ``gpudoctor probe dataloader`` run (for ``dataloader.shm``)."""

from __future__ import annotations

from gpudoctor.facts.base import domain
from gpudoctor.records import frozen_dataclass


@domain("dataloader_probe")
@frozen_dataclass
class DataLoaderProbeFacts:
    """The batch the probe measured and the loader it recommended.

    Read from ``~/.cache/gpudoctor/dataloader-probe.json``, written by
    ``gpudoctor probe dataloader`` (``--no-save`` skips it).

    Attributes:
        batch_bytes: bytes of all tensors in one collated batch (what a worker
            puts in /dev/shm per batch).
        num_workers: recommended ``num_workers``.
        prefetch_factor: recommended ``prefetch_factor`` (0 with no workers).
        batch_size: samples per batch.
        python: the interpreter that was measured.
        measured_at: UTC time of the run, ISO 8601.
        source: the file the facts were read from.
    """

    batch_bytes: int
    num_workers: int
    prefetch_factor: int
    batch_size: int = 0
    python: str = ""
    measured_at: str = ""
    source: str = ""
