"""DataLoader starvation probe: runs INSIDE the target interpreter (it imports torch).

Two ways in:

- ``python _dataloader.py '<json config>'`` — what ``gpudoctor probe
  dataloader`` runs in the target interpreter. Progress goes to stderr as
  ``@@gpudoctor-progress@@ {json}`` lines; the result is one JSON document on
  stdout framed by ``@@gpudoctor-dataloader@@``. It never prints a traceback
  for a user error: a missing factory, a dataset that raises in
  ``__getitem__``, a worker killed by a signal come back as ``error`` data.
- :func:`search` — imported by :mod:`gpudoctor.dataloader` in a training
  script or notebook that already has torch.

gpudoctor's own process never imports this module (DESIGN.md: the doctor
never imports torch). Only the standard library is imported at module level;
torch is imported inside the functions that need it.

The probe is split by job; the script is run by path, so its directory is
``sys.path[0]`` in the target and the sibling modules are imported by their
top-level names there (and as ``gpudoctor.probe.*`` when imported in
process). Every one of them is standard-library only and imports no other
part of gpudoctor:

- :mod:`gpudoctor.probe._dataloader_measure` — measurement: one
  configuration's samples/s, data stall, first batch, RSS, /dev/shm, GPU
  utilisation; usable CPUs; :class:`ProbeFailure`;
- :mod:`gpudoctor.probe._dataloader_search` — search: the worker ladder,
  the adaptive and exhaustive searches, :func:`search`;
- :mod:`gpudoctor.probe._dataloader_report` — report: choosing the
  recommendation, the ``DataLoader(...)`` call, what still limits it;
- this module — the workload (synthetic images, user factories, steps) and
  the script entry; it re-exports the names above, so
  ``gpudoctor.probe._dataloader`` remains the one place to import from.

The doctor side (starting the script, rendering its result) is
:mod:`gpudoctor.cli.probe`.
"""

import importlib
import json
import os
import sys
import time
import traceback

if __package__:  # imported as part of gpudoctor (gpudoctor.dataloader, the tests)
    from gpudoctor.probe._dataloader_measure import (
        ProbeFailure,
        batch_stats,
        cgroup_quota_cpus,
        cpu_info,
        loader_kwargs,
        measure,
        user_frame,
    )
    from gpudoctor.probe._dataloader_report import (
        STALL_OK,
        WITHIN,
        call_text,
        choose,
        config_group,
        cost_key,
        group_rates,
        limits,
        pick_group,
        recommended_config,
    )
    from gpudoctor.probe._dataloader_search import (
        GRID_PREFETCH,
        MAX_WORKERS,
        NOISE,
        PATIENCE,
        RESULT_VERSION,
        grid,
        loader_config,
        search,
        worker_ladder,
    )
else:  # run in the target interpreter as a script: this directory is sys.path[0]
    from _dataloader_measure import (
        ProbeFailure,
        batch_stats,
        cgroup_quota_cpus,
        cpu_info,
        loader_kwargs,
        measure,
        user_frame,
    )
    from _dataloader_report import (
        STALL_OK,
        WITHIN,
        call_text,
        choose,
        config_group,
        cost_key,
        group_rates,
        limits,
        pick_group,
        recommended_config,
    )
    from _dataloader_search import (
        GRID_PREFETCH,
        MAX_WORKERS,
        NOISE,
        PATIENCE,
        RESULT_VERSION,
        grid,
        loader_config,
        search,
        worker_ladder,
    )

__all__ = [
    "GRID_PREFETCH",
    "MARKER",
    "MAX_WORKERS",
    "NOISE",
    "PATIENCE",
    "PROGRESS",
    "RESULT_VERSION",
    "STALL_OK",
    "WITHIN",
    "ProbeFailure",
    "SyntheticImages",
    "batch_stats",
    "burn_cpu",
    "call_text",
    "cgroup_quota_cpus",
    "choose",
    "config_group",
    "cost_key",
    "cpu_info",
    "grid",
    "group_rates",
    "limits",
    "load_factory",
    "loader_config",
    "loader_kwargs",
    "main",
    "measure",
    "model_step",
    "pick_group",
    "recommended_config",
    "search",
    "sleep_step",
    "unwrap_loader",
    "user_frame",
    "worker_ladder",
]

MARKER = "@@gpudoctor-dataloader@@"
#: The least the search measures for when start-up (importing torch) ate the budget, seconds:
#: enough for the first configuration, so the result is never empty for lack of time alone.
MIN_SEARCH_S = 1.0
PROGRESS = "@@gpudoctor-progress@@"


def burn_cpu(ms):
    """Spend ``ms`` milliseconds of this thread's CPU time (a decode/augment stand-in)."""
    if ms <= 0:
        return
    end = time.thread_time() + ms / 1000.0
    x = 0
    while time.thread_time() < end:
        for i in range(200):
            x += i * i
    return x


class SyntheticImages:
    """Decoded-image-like samples: (uint8 tensor 3×size×size converted to float, label).

    Each ``__getitem__`` burns ``cost_ms`` of CPU time first, like JPEG decode
    plus augmentation. A map-style dataset (``__len__`` + ``__getitem__``).
    """

    def __init__(self, length=100000, size=64, cost_ms=5.0):
        self.length = int(length)
        self.size = int(size)
        self.cost_ms = float(cost_ms)

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        import torch

        burn_cpu(self.cost_ms)
        img = torch.full((3, self.size, self.size), index % 251, dtype=torch.uint8)
        return img.float().div_(255.0), index % 1000


def load_factory(spec, what):
    """Import ``MODULE:CALLABLE`` (the current directory is importable) and call it.

    Raises ProbeFailure(kind="factory") with a one-line message."""
    if ":" not in spec:
        raise ProbeFailure("factory", "%s %s: expected MODULE:CALLABLE" % (what, spec))
    mod_name, _, attr = spec.partition(":")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(mod_name)
    except ImportError as exc:
        raise ProbeFailure("factory", "%s %s: cannot import %s (%s)" % (what, spec, mod_name, exc)) from exc
    except Exception as exc:
        raise ProbeFailure(
            "factory",
            "%s %s: importing %s raised %s: %s" % (what, spec, mod_name, type(exc).__name__, exc),
            where=user_frame(sys.exc_info()[2]),
        ) from exc
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ProbeFailure("factory", "%s %s: module %s has no attribute %r" % (what, spec, mod_name, part))
        obj = getattr(obj, part)
    if not callable(obj):
        raise ProbeFailure("factory", "%s %s: %s is not callable" % (what, spec, attr))
    try:
        return obj()
    except Exception as exc:
        raise ProbeFailure(
            "factory",
            "%s %s: calling it raised %s: %s" % (what, spec, type(exc).__name__, exc),
            where=user_frame(sys.exc_info()[2]),
        ) from exc


def unwrap_loader(obj):
    """(dataset, collate_fn, batch_size) from a Dataset or a DataLoader."""
    try:
        from torch.utils.data import DataLoader
    except Exception:  # pragma: no cover - torch is required here
        DataLoader = ()
    if isinstance(obj, DataLoader):
        return obj.dataset, obj.collate_fn, obj.batch_size
    if not hasattr(obj, "__getitem__") and not hasattr(obj, "__iter__"):
        raise ProbeFailure(
            "factory", "the dataset factory returned %s, not a Dataset or DataLoader" % type(obj).__name__
        )
    return obj, None, None


def sleep_step(ms):
    """A step that takes ``ms`` of wall time without using the CPU (a GPU step stand-in)."""
    seconds = ms / 1000.0

    def step(batch):
        time.sleep(seconds)

    step.description = "fixed %g ms step" % ms
    return step


def model_step(model, device):
    """Forward + backward of ``model`` on the batch's first tensor, on ``device``."""
    import torch

    model = model.to(device)
    model.train()
    cuda = device.startswith("cuda")

    def step(batch):
        x = _first_tensor(batch)
        if x is None:
            raise ProbeFailure("step", "the batch holds no tensor to feed the model")
        x = x.to(device, non_blocking=True)
        model.zero_grad(set_to_none=True)
        out = model(x)
        if isinstance(out, (tuple, list)):
            out = out[0]
        out.float().mean().backward()
        if cuda:
            torch.cuda.synchronize()

    step.description = "%s forward+backward on %s" % (type(model).__name__, device)
    return step


def _first_tensor(batch):
    import torch

    if isinstance(batch, torch.Tensor):
        return batch
    if isinstance(batch, dict):
        batch = list(batch.values())
    if isinstance(batch, (list, tuple)):
        for item in batch:
            t = _first_tensor(item)
            if t is not None:
                return t
    return None


def _emit_progress(done, planned, config, result):
    sys.stderr.write(
        "%s %s\n"
        % (
            PROGRESS,
            json.dumps(
                {
                    "done": done,
                    "planned": planned,
                    "config": config,
                    "samples_per_s": result.get("samples_per_s"),
                    "stall_fraction": result.get("stall_fraction"),
                }
            ),
        )
    )
    sys.stderr.flush()


def _environment(device):
    import multiprocessing

    import torch

    return {
        "python": sys.executable,
        "python_version": "%d.%d.%d" % sys.version_info[:3],
        "torch": str(torch.__version__),
        "device": device,
        "start_method": multiprocessing.get_start_method(allow_none=True) or "default",
    }


def main(argv):
    """Entry point of the script: ``argv[1]`` is the JSON configuration from the CLI."""
    started = time.monotonic()
    doc = {"version": RESULT_VERSION}
    try:
        cfg = json.loads(argv[1])
        try:
            import torch
        except Exception as exc:
            raise ProbeFailure(
                "usage", "torch cannot be imported in %s: %s: %s" % (sys.executable, type(exc).__name__, exc)
            ) from exc
        want = cfg.get("device", "auto")
        cuda_ok = False
        try:
            cuda_ok = bool(torch.cuda.is_available())
        except Exception:
            cuda_ok = False
        if want == "cuda" and not cuda_ok:
            raise ProbeFailure("usage", "--device cuda: torch.cuda.is_available() is False in %s" % sys.executable)
        device = "cuda" if (want == "cuda" or (want == "auto" and cuda_ok)) else "cpu"
        collate = None
        doc["mode"] = "exhaustive" if cfg.get("exhaustive") else "adaptive"
        if cfg.get("dataset"):
            obj = load_factory(cfg["dataset"], "--dataset")
            dataset, collate, loader_bs = unwrap_loader(obj)
            batch_size = cfg.get("batch_size") or loader_bs or 32
        else:
            dataset = SyntheticImages(cfg.get("samples", 100000), cfg.get("image_size", 64), cfg.get("cost_ms", 5.0))
            batch_size = cfg.get("batch_size") or 32
        doc["batch_size"] = int(batch_size)
        if cfg.get("model"):
            model = load_factory(cfg["model"], "--model")
            if not hasattr(model, "parameters"):
                raise ProbeFailure(
                    "factory", "--model %s returned %s, not a torch.nn.Module" % (cfg["model"], type(model).__name__)
                )
            step = model_step(model, device)
        else:
            step = sleep_step(float(cfg.get("step_ms", 20.0)))
        doc["step"] = getattr(step, "description", "")
        # the budget counts from the start of the script (torch import included)
        doc["startup_s"] = round(time.monotonic() - started, 3)
        budget = float(cfg.get("budget_s", 30.0)) - (time.monotonic() - started)
        doc.update(
            search(
                dataset,
                int(batch_size),
                step,
                budget_s=max(MIN_SEARCH_S, budget),
                exhaustive=bool(cfg.get("exhaustive")),
                config_s=cfg.get("config_s"),
                collate_fn=collate,
                cuda=device == "cuda",
                gpu_index=0 if device == "cuda" else None,
                max_workers=cfg.get("max_workers"),
                progress=_emit_progress if cfg.get("progress", True) else None,
                gpu_usable=cuda_ok,
            )
        )
        doc["budget_s"] = float(cfg.get("budget_s", 30.0))
        doc["elapsed_s"] = round(time.monotonic() - started, 3)
        doc["step"] = getattr(step, "description", "")
        doc["environment"] = _environment(device)
        doc["error"] = None
    except ProbeFailure as exc:
        doc.update(
            {
                "error": exc.to_json(),
                "results": getattr(exc, "results", []),
                "elapsed_s": round(time.monotonic() - started, 3),
            }
        )
    except KeyboardInterrupt:
        doc.update({"error": {"kind": "interrupted", "message": "interrupted", "where": None, "config": None}})
    except Exception as exc:  # a bug in the probe itself: still data, with the traceback's last frame
        doc.update(
            {
                "error": {
                    "kind": "internal",
                    "message": "%s: %s" % (type(exc).__name__, exc),
                    "where": user_frame(sys.exc_info()[2]),
                    "config": None,
                    "traceback": traceback.format_exc()[-4000:],
                }
            }
        )
    sys.stdout.write("\n%s%s%s\n" % (MARKER, json.dumps(doc), MARKER))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
