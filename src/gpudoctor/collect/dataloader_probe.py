"""Collector for ``dataloader_probe``: the result saved by ``gpudoctor probe dataloader``.

Read through the rooted Files from ``gpudoctor/dataloader-probe.json`` in the user's
cache directory (``$XDG_CACHE_HOME`` when it is an absolute path, else ``<home>/.cache``:
platformdirs' ``user_cache_dir`` on Linux; ``--root`` aware). Missing or unreadable -> Unavailable, so ``dataloader.shm``
falls back to its stated default estimate.
"""

from __future__ import annotations

import json

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.facts import Unavailable
from gpudoctor.facts.dataloader import DataLoaderProbeFacts

#: Path of the saved result, relative to the user's cache directory.
SAVED_RESULT = "gpudoctor/dataloader-probe.json"


def saved_result_file(home: str, env) -> str:
    """The saved result's path inside the root: ``$XDG_CACHE_HOME/gpudoctor/...`` when that is
    absolute (the XDG Base Directory rule), else ``<home>/.cache/gpudoctor/...``."""
    cache = (env.get("XDG_CACHE_HOME") or "").strip()
    if not cache.startswith("/"):
        cache = f"{home.rstrip('/')}/.cache"
    return f"{cache.rstrip('/')}/{SAVED_RESULT}"


def collect_dataloader_probe(ctx: CollectContext) -> DataLoaderProbeFacts | Unavailable:
    path = saved_result_file(ctx.system.home, ctx.system.env)
    text = ctx.system.files.read_text_or_none(path)
    if text is None:
        return Unavailable("no saved `gpudoctor probe dataloader` result (run it to measure a batch)")
    try:
        doc = json.loads(text)
        return DataLoaderProbeFacts(
            batch_bytes=int(doc["batch_bytes"]),
            num_workers=int(doc["num_workers"]),
            prefetch_factor=int(doc.get("prefetch_factor") or 0),
            batch_size=int(doc.get("batch_size") or 0),
            python=str(doc.get("python", "")),
            measured_at=str(doc.get("measured_at", "")),
            source=path,
        )
    except (ValueError, KeyError, TypeError) as exc:
        return Unavailable(f"{path} is not a gpudoctor probe result: {exc}")


COLLECTOR = Collector(domain="dataloader_probe", collect=collect_dataloader_probe, timeout_s=5.0)
