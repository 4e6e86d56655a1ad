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

Measurement (per configuration, the lightweight in-process method of
../shared/reference/dataloader.md §6): the loop times the wait in
``next(iterator)`` separately from the step; data-stall fraction =
wait / (wait + step). Time to first batch = worker start-up + first batch.
Restart = time to the first batch of the next epoch (what
``persistent_workers`` saves). Worker peak RSS is ``VmHWM`` from
``/proc/<pid>/status``; shared-memory use is the peak rise of used bytes on
/dev/shm (``statvfs``) during the run; GPU utilisation is sampled through
NVML (``nvmlDeviceGetUtilizationRates``) when the step runs on CUDA.
"""

import importlib
import json
import math
import os
import sys
import threading
import time
import traceback

MARKER = "@@gpudoctor-dataloader@@"
PROGRESS = "@@gpudoctor-progress@@"
RESULT_VERSION = 1

#: The recommendation is the cheapest configuration within this fraction of the best throughput.
WITHIN = 0.05
#: A data-stall fraction at or below this means the loader keeps up with the step.
STALL_OK = 0.05
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


class ProbeFailure(Exception):
    """A user-facing failure: ``kind`` is ``factory``, ``dataset``, ``worker-killed``,
    ``step`` or ``usage``; ``where`` is the file:line in the user's code, if known."""

    def __init__(self, kind, message, where=None, config=None):
        Exception.__init__(self, message)
        self.kind = kind
        self.message = message
        self.where = where
        self.config = config

    def to_json(self):
        return {"kind": self.kind, "message": self.message, "where": self.where, "config": self.config}


# --------------------------------------------------------------------------- CPUs


def _read(path):
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


def cgroup_quota_cpus(root="/"):
    """CPU quota in CPUs from cgroup v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us`` /
    ``cpu.cfs_period_us`` (Linux kernel docs), or None when unlimited/unknown."""
    def p(rel):
        return os.path.join(root, rel.lstrip("/"))
    if os.path.exists(p("/sys/fs/cgroup/cgroup.controllers")):
        bases = []
        for line in (_read(p("/proc/self/cgroup")) or "").splitlines():
            if line.startswith("0::"):
                rel = line[3:].strip()
                if rel and rel != "/":
                    bases.append("/sys/fs/cgroup" + rel)
        bases.append("/sys/fs/cgroup")
        for base in bases:
            text = _read(p(base + "/cpu.max"))
            if not text or not text.split():
                continue
            parts = text.split()
            if parts[0] == "max":
                return None
            try:
                return int(parts[0]) / float(int(parts[1]) if len(parts) > 1 else 100000)
            except ValueError:
                return None
        return None
    for base in ("/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"):
        q, per = _read(p(base + "/cpu.cfs_quota_us")), _read(p(base + "/cpu.cfs_period_us"))
        if q is None or per is None:
            continue
        try:
            quota, period = int(q.strip()), int(per.strip())
        except ValueError:
            return None
        return None if quota < 0 or period <= 0 else quota / float(period)
    return None


def cpu_info():
    """{logical, affinity, quota_cpus, usable}: usable = min(affinity, ceil(quota))."""
    logical = os.cpu_count() or 1
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = logical
    quota = cgroup_quota_cpus()
    usable = affinity
    if quota is not None:
        usable = max(1, min(usable, int(math.ceil(quota - 1e-9))))
    return {"logical": logical, "affinity": affinity, "quota_cpus": quota, "usable": usable}


# --------------------------------------------------------------------------- datasets


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


class SyntheticImages(object):
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
        raise ProbeFailure("factory", "%s %s: cannot import %s (%s)" % (what, spec, mod_name, exc))
    except Exception as exc:
        raise ProbeFailure("factory", "%s %s: importing %s raised %s: %s" % (what, spec, mod_name,
                                                                              type(exc).__name__, exc),
                           where=_user_frame(sys.exc_info()[2]))
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
        raise ProbeFailure("factory", "%s %s: calling it raised %s: %s" % (what, spec, type(exc).__name__, exc),
                           where=_user_frame(sys.exc_info()[2]))


def _user_frame(tb):
    """file:line of the innermost frame outside torch and this file."""
    where = None
    for frame in traceback.extract_tb(tb):
        fn = frame.filename
        if os.sep + "torch" + os.sep in fn or fn == __file__ or fn.startswith("<frozen"):
            continue
        if "importlib" in fn:
            continue
        where = "%s:%s in %s" % (fn, frame.lineno, frame.name)
    return where


def unwrap_loader(obj):
    """(dataset, collate_fn, batch_size) from a Dataset or a DataLoader."""
    try:
        from torch.utils.data import DataLoader
    except Exception:  # pragma: no cover - torch is required here
        DataLoader = ()
    if isinstance(obj, DataLoader):
        return obj.dataset, obj.collate_fn, obj.batch_size
    if not hasattr(obj, "__getitem__") and not hasattr(obj, "__iter__"):
        raise ProbeFailure("factory", "the dataset factory returned %s, not a Dataset or DataLoader"
                           % type(obj).__name__)
    return obj, None, None


# --------------------------------------------------------------------------- steps


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


def batch_stats(batch):
    """(number of samples, bytes of all tensors) of a collated batch."""
    import torch
    total, n = 0, None
    stack = [batch]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            total += item.element_size() * item.nelement()
            if n is None and item.dim() > 0:
                n = int(item.shape[0])
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return (n or 1), total


# --------------------------------------------------------------------------- measurement


def _shm_used(path="/dev/shm"):
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def _proc_status_kb(pid, field):
    text = _read("/proc/%d/status" % pid) or ""
    for line in text.splitlines():
        if line.startswith(field + ":"):
            try:
                return int(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


def _host_cpu_times():
    """(busy, total) jiffies of all CPUs from /proc/stat, or None."""
    text = _read("/proc/stat") or ""
    for line in text.splitlines():
        if line.startswith("cpu "):
            vals = [int(v) for v in line.split()[1:]]
            idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
            return sum(vals) - idle, sum(vals)
    return None


def _cpu_seconds(pid):
    text = _read("/proc/%d/stat" % pid)
    if not text:
        return None
    try:
        fields = text.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))
    except (IndexError, ValueError):
        return None


class _GpuSampler(object):
    """Samples NVML GPU utilisation (percent of time a kernel ran) every 0.2 s in a thread."""

    def __init__(self, index):
        self.samples = []
        self._stop = threading.Event()
        self._thread = None
        self._handle = None
        try:
            import pynvml
            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:
            self._handle = None

    def __enter__(self):
        if self._handle is not None:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(0.2):
            try:
                self.samples.append(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu)
            except Exception:
                return

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1.0)

    def mean(self):
        return round(sum(self.samples) / float(len(self.samples)), 1) if self.samples else None


def _loader_kwargs(config):
    kw = {"num_workers": config["num_workers"], "pin_memory": bool(config.get("pin_memory"))}
    if config["num_workers"] > 0:
        kw["prefetch_factor"] = config.get("prefetch_factor") or 2
        kw["persistent_workers"] = bool(config.get("persistent_workers"))
    return kw


def _classify(exc, config):
    """Turn an exception raised while iterating into a ProbeFailure."""
    text = str(exc)
    if "killed by signal" in text or "exited unexpectedly" in text:
        first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        return ProbeFailure("worker-killed", first, config=config)
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if text.startswith("Caught ") and lines:
        # raised in a worker: torch re-raises with the original traceback as text
        message = lines[-1].strip()
        where = None
        for ln in lines:
            s = ln.strip()
            if s.startswith("File ") and os.sep + "torch" + os.sep not in s:
                where = s[5:].replace('"', "").replace(", line ", ":").replace(", in ", " in ")
        return ProbeFailure("dataset", message, where=where, config=config)
    return ProbeFailure("dataset", "%s: %s" % (type(exc).__name__, text.strip().splitlines()[0] if text.strip()
                                                else ""), where=_user_frame(sys.exc_info()[2]), config=config)


def _signal_name(num):
    import signal
    try:
        return signal.Signals(num).name
    except (ValueError, AttributeError):
        return "signal %d" % num


def _worker_deaths(it):
    """'pid N by SIGKILL' for each worker of iterator ``it`` that died by a signal."""
    out = []
    for w in getattr(it, "_workers", None) or []:
        code = getattr(w, "exitcode", None)
        if code is not None and code < 0:
            out.append("DataLoader worker (pid %s) was killed by %s" % (w.pid, _signal_name(-code)))
    return out


def measure(dataset, batch_size, config, step, slice_s, deadline, collate_fn=None, gpu_index=None):
    """Run one configuration for about ``slice_s`` seconds (never past ``deadline``,
    a ``time.monotonic()`` value). Returns a dict of measurements (units in the keys).

    Raises ProbeFailure for a dataset error, a killed worker or a failing step.
    """
    from torch.utils.data import DataLoader
    kw = _loader_kwargs(config)
    if collate_fn is not None:
        kw["collate_fn"] = collate_fn
    loader = DataLoader(dataset, batch_size=batch_size, **kw)
    state = {"it": None, "epochs": 0}
    shm_base = _shm_used()
    shm_peak = shm_base
    out = {"config": dict(config)}
    self_cpu0 = _cpu_seconds(os.getpid())

    def next_batch():
        try:
            if state["it"] is None:
                state["it"] = iter(loader)
            try:
                return next(state["it"])
            except StopIteration:
                state["epochs"] += 1
                state["it"] = iter(loader)
                try:
                    return next(state["it"])
                except StopIteration:
                    raise ProbeFailure("dataset", "the dataset yields no batch (is it empty, or shorter than "
                                       "batch_size with drop_last=True?)", config=config)
        except ProbeFailure:
            raise
        except Exception as exc:
            failure = _classify(exc, config)
            if failure.kind == "worker-killed":
                deaths = _worker_deaths(state["it"])
                if deaths:
                    failure = ProbeFailure("worker-killed", "; ".join(deaths), config=config)
            raise failure

    def workers():
        it = state["it"]
        return [w.pid for w in (getattr(it, "_workers", None) or []) if getattr(w, "pid", None)]

    sampler = _GpuSampler(gpu_index) if gpu_index is not None else None
    try:
        if sampler:
            sampler.__enter__()
        t = time.perf_counter()
        try:
            batch = next_batch()
        except ProbeFailure:
            raise
        except Exception as exc:
            raise _classify(exc, config)
        out["time_to_first_batch_s"] = round(time.perf_counter() - t, 4)
        n, nbytes = batch_stats(batch)
        out["batch_bytes"] = nbytes
        _run_step(step, batch, config)
        worker_cpu0 = dict((pid, _cpu_seconds(pid)) for pid in workers())
        host0 = _host_cpu_times()
        wait = busy = 0.0
        samples = batches = 0
        t0 = time.perf_counter()
        end = time.monotonic() + slice_s
        end = min(end, deadline)
        while time.monotonic() < end or batches == 0 and time.monotonic() < deadline:
            tw = time.perf_counter()
            try:
                batch = next_batch()
            except ProbeFailure:
                raise
            except Exception as exc:
                raise _classify(exc, config)
            ts = time.perf_counter()
            wait += ts - tw
            _run_step(step, batch, config)
            busy += time.perf_counter() - ts
            n, _ = batch_stats(batch)
            samples += n
            batches += 1
            if batches % 4 == 0:
                used = _shm_used()
                if used is not None and shm_peak is not None:
                    shm_peak = max(shm_peak, used)
        elapsed = time.perf_counter() - t0
        host1 = _host_cpu_times()
        host_busy = None
        if host0 and host1 and host1[1] > host0[1]:
            host_busy = round((host1[0] - host0[0]) / float(host1[1] - host0[1]), 3)
        pids = workers()
        rss = [_proc_status_kb(pid, "VmHWM") for pid in pids]
        rss = [r for r in rss if r is not None]
        cpu_used = 0.0
        for pid in pids:
            c0, c1 = worker_cpu0.get(pid), _cpu_seconds(pid)
            if c0 is not None and c1 is not None:
                cpu_used += c1 - c0
        if not pids:
            c1 = _cpu_seconds(os.getpid())
            cpu_used = (c1 - self_cpu0) if (c1 is not None and self_cpu0 is not None) else 0.0
        out.update({
            "samples": samples,
            "batches": batches,
            "elapsed_s": round(elapsed, 4),
            "samples_per_s": round(samples / elapsed, 2) if elapsed > 0 else 0.0,
            "stall_fraction": round(wait / (wait + busy), 4) if wait + busy > 0 else 0.0,
            "wait_s": round(wait, 4),
            "step_s": round(busy, 4),
            "epochs_completed": state["epochs"],
            "worker_peak_rss_mib": round(max(rss) / 1024.0, 1) if rss else None,
            "workers_cpu_busy": round(cpu_used / (elapsed * max(1, len(pids))), 3) if elapsed > 0 else None,
            "host_cpu_busy": host_busy,
            "shm_peak_mib": round((shm_peak - shm_base) / 1048576.0, 1) if shm_base is not None else None,
        })
        # next epoch's first batch: what persistent_workers saves each epoch
        if config["num_workers"] > 0 and time.monotonic() < deadline - 0.05:
            old = state["it"]
            if not config.get("persistent_workers") and old is not None and hasattr(old, "_shutdown_workers"):
                old._shutdown_workers()
            tr = time.perf_counter()
            try:
                state["it"] = iter(loader)
                next(state["it"])
            except Exception as exc:
                raise _classify(exc, config)
            out["restart_s"] = round(time.perf_counter() - tr, 4)
        else:
            out["restart_s"] = 0.0 if config["num_workers"] == 0 else None
    finally:
        if sampler:
            sampler.__exit__()
            out["gpu_util_percent"] = sampler.mean()
        it = state["it"]
        if it is not None and hasattr(it, "_shutdown_workers"):
            try:
                it._shutdown_workers()
            except Exception:
                pass
        state["it"] = None
        del loader
    return out


def _run_step(step, batch, config):
    try:
        step(batch)
    except ProbeFailure:
        raise
    except Exception as exc:
        raise ProbeFailure("step", "the step raised %s: %s" % (type(exc).__name__, exc),
                           where=_user_frame(sys.exc_info()[2]), config=config)


# --------------------------------------------------------------------------- search


def _config(w, pf=2, persistent=False, pin=False):
    return {"num_workers": w, "prefetch_factor": pf if w > 0 else None,
            "persistent_workers": bool(persistent) if w > 0 else False, "pin_memory": bool(pin)}


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
    out = [_config(0, pin=p) for p in ((False, True) if cuda else (False,))]
    for w in range(1, max(0, min(int(usable), MAX_WORKERS)) + 1):
        for pf in GRID_PREFETCH:
            for persistent in (False, True):
                for pin in ((False, True) if cuda else (False,)):
                    out.append(_config(w, pf, persistent, pin))
    return out


def cost_key(config):
    """Cheaper sorts first: fewer workers, smaller prefetch, no pinning; persistent
    workers do not change throughput and save the per-epoch start-up, so they win ties."""
    return (config["num_workers"], config.get("prefetch_factor") or 0, config.get("pin_memory", False),
            0 if config.get("persistent_workers") else 1)


def _group(cfg):
    return (cfg["num_workers"], cfg.get("prefetch_factor") or 0, bool(cfg.get("pin_memory")))


def group_rates(results):
    """{group: (mean samples/s, [indices])} over the successful measurements.

    A group is a configuration up to ``persistent_workers`` (:func:`_group`):
    persistence does not change steady-state throughput, it only removes the
    per-epoch worker start-up (``restart_s``). The group's rate is the MEAN of
    its measurements, not the best one: on a shared machine the maximum of
    several noisy measurements favours whichever group was measured most
    often or got a lucky slice.
    """
    idx = {}
    for i, r in enumerate(results):
        if r.get("samples_per_s"):
            idx.setdefault(_group(r["config"]), []).append(i)
    return dict((g, (sum(results[i]["samples_per_s"] for i in ii) / float(len(ii)), ii)) for g, ii in idx.items())


def _pick(rates):
    """The cheapest group whose mean rate is within WITHIN of the best group's mean."""
    best = max(m for m, _ in rates.values())
    return min(g for g, (m, _) in rates.items() if m >= (1 - WITHIN) * best)


def choose(results):
    """Index of the recommended measurement, or None when nothing was measured.

    Groups (:func:`group_rates`) are rated by the mean samples/s of their
    measurements. Among the groups within WITHIN of the best mean the cheapest
    (:func:`cost_key`: fewer workers, smaller prefetch, no pinning) wins; the
    index is that group's latest measurement (after the adaptive search's
    confirmation round, its persistent-workers re-measurement).
    """
    rates = group_rates(results)
    if not rates:
        return None
    return rates[_pick(rates)][1][-1]


def recommended_config(results, index):
    """The configuration to recommend: the chosen measurement's, with ``persistent_workers=True``
    when it has workers and a persistent variant was measured (start-up saved every epoch)."""
    cfg = dict(results[index]["config"])
    if cfg["num_workers"] > 0 and any(_group(r["config"]) == _group(cfg) and r["config"].get("persistent_workers")
                                      for r in results):
        cfg["persistent_workers"] = True
    return cfg


def call_text(config, batch_size):
    """The exact ``DataLoader(...)`` call to paste."""
    parts = ["dataset", "batch_size=%d" % batch_size, "num_workers=%d" % config["num_workers"]]
    if config["num_workers"] > 0:
        parts.append("prefetch_factor=%d" % (config.get("prefetch_factor") or 2))
        parts.append("persistent_workers=%s" % bool(config.get("persistent_workers")))
    parts.append("pin_memory=%s" % bool(config.get("pin_memory")))
    return "DataLoader(%s)" % ", ".join(parts)


def limits(results, rec_index, cpus, budget_exhausted):
    """What still limits the recommended configuration: a list of {kind, summary, detail}."""
    if rec_index is None:
        return []
    rec = results[rec_index]
    w = rec["config"]["num_workers"]
    stall = rec.get("stall_fraction", 0.0)
    busy = rec.get("workers_cpu_busy")
    out = []
    if stall <= STALL_OK:
        out.append({"kind": "step-bound",
                    "summary": "the training step is the bottleneck: the loader is not the problem",
                    "detail": "the loop waits for data only %.0f%% of the time with these settings; a faster "
                              "step (mixed precision, torch.compile, a larger batch) speeds training up, "
                              "more loader tuning does not" % (100 * stall)})
    host = rec.get("host_cpu_busy")
    saturated = w >= cpus["usable"] or (host is not None and host >= 0.85)
    if stall <= STALL_OK:
        pass
    elif saturated and not (busy is not None and busy < 0.3 and (host is None or host < 0.6)):
        out.append({"kind": "cpu-bound",
                    "summary": "CPU-bound decode with all %d usable CPUs busy: the loop still waits for "
                               "data %.0f%% of the time" % (cpus["usable"], 100 * stall),
                    "detail": "move decode/augmentation to the GPU (e.g. torchvision.io.decode_jpeg on "
                              "device='cuda', NVIDIA DALI) or pre-process offline into ready tensors; "
                              "or give the job more CPUs (cgroup quota / affinity)%s" % (
                                  "" if host is None else "; the whole machine was %.0f%% busy" % (100 * host))})
    elif busy is not None and busy < 0.5:
        out.append({"kind": "io-bound",
                    "summary": "the workers mostly wait (CPU busy %.0f%%) while CPUs are free: loading "
                               "is I/O-bound" % (100 * busy),
                    "detail": "read from faster local storage or RAM, use larger sequential files "
                              "(WebDataset-style shards), or cache the dataset; more workers than CPUs "
                              "can help an I/O-bound loader"})
    else:
        out.append({"kind": "more-workers",
                    "summary": "the loop still waits for data %.0f%% of the time with %d of %d usable CPUs "
                               "as workers" % (100 * stall, w, cpus["usable"]),
                    "detail": "the search stopped (budget or no gain); try --exhaustive or a larger --budget-s"})
    if budget_exhausted:
        out.append({"kind": "budget", "summary": "the time budget ran out before the search finished",
                    "detail": "run again with a larger --budget-s for a complete search"})
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
        r = run(_config(w, pin=pin), len(ladder) - i + 2)
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
        mid = run(_config((bw + stop_after) // 2, pin=pin), 3)
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
            if run(_config(w, 4, False, pin), 2 - 0.5 * k, share=0.5) is None:
                return
    rates = group_rates(results)
    if not rates:
        return
    ranked = sorted(rates, key=lambda g: -rates[g][0])
    pick = _pick(rates)
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
        if run(_config(w, pf or 2, w > 0, gpin), 1 - 0.5 * k, again=True, share=0.5) is None:
            return
    rates = group_rates(results)
    w, pf, gpin = g = _pick(rates)
    if w > 0 and not any(results[i]["config"].get("persistent_workers") for i in rates[g][1]):
        run(_config(w, pf or 2, True, gpin), 0.5, share=0.5)  # the recommended variant's restart time


def search(dataset, batch_size, step, budget_s=30.0, exhaustive=False, config_s=None, collate_fn=None,
           cuda=False, gpu_index=None, max_workers=None, progress=None, cpus=None):
    """Find DataLoader settings that remove the data stall, within ``budget_s`` seconds.

    ``step(batch)`` is one training step. ``config_s`` fixes the seconds spent on
    each configuration (default: the budget split over the planned
    configurations, 0.3–5 s). ``progress(done, planned, config, result)`` is
    called after each configuration. Returns the result document (dict, see
    module doc); raises ProbeFailure for dataset/step/worker failures, with
    ``partial`` results attached as ``exc.results``. The adaptive search (the
    default) is described in :func:`_adaptive`; ``exhaustive=True`` measures
    every configuration of :func:`grid` once.
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
            r = measure(dataset, batch_size, cfg, step, min(max(0.3, share * slice_for(remaining)), left * 0.7),
                        deadline, collate_fn=collate_fn, gpu_index=gpu_index)
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
        "kwargs": _loader_kwargs(recommended_config(results, rec)) if rec is not None else None,
        "call": call_text(recommended_config(results, rec), batch_size) if rec is not None else None,
        "limits": limits(results, rec, dict(cpus, usable=usable), budget_exhausted[0]),
    }
    return doc


# --------------------------------------------------------------------------- script entry


def _emit_progress(done, planned, config, result):
    sys.stderr.write("%s %s\n" % (PROGRESS, json.dumps({"done": done, "planned": planned, "config": config,
                                                          "samples_per_s": result.get("samples_per_s"),
                                                          "stall_fraction": result.get("stall_fraction")})))
    sys.stderr.flush()


def _environment(device):
    import torch
    import multiprocessing
    return {"python": sys.executable, "python_version": "%d.%d.%d" % sys.version_info[:3],
            "torch": str(torch.__version__), "device": device,
            "start_method": multiprocessing.get_start_method(allow_none=True) or "default"}


def main(argv):
    """Entry point of the script: ``argv[1]`` is the JSON configuration from the CLI."""
    started = time.monotonic()
    doc = {"version": RESULT_VERSION}
    try:
        cfg = json.loads(argv[1])
        try:
            import torch
        except Exception as exc:
            raise ProbeFailure("usage", "torch cannot be imported in %s: %s: %s"
                               % (sys.executable, type(exc).__name__, exc))
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
                raise ProbeFailure("factory", "--model %s returned %s, not a torch.nn.Module"
                                   % (cfg["model"], type(model).__name__))
            step = model_step(model, device)
        else:
            step = sleep_step(float(cfg.get("step_ms", 20.0)))
        doc["step"] = getattr(step, "description", "")
        # the budget counts from the start of the script (torch import included)
        budget = float(cfg.get("budget_s", 30.0)) - (time.monotonic() - started)
        doc.update(search(dataset, int(batch_size), step, budget_s=max(0.5, budget), exhaustive=bool(cfg.get("exhaustive")),
                     config_s=cfg.get("config_s"), collate_fn=collate, cuda=device == "cuda",
                     gpu_index=0 if device == "cuda" else None, max_workers=cfg.get("max_workers"),
                     progress=_emit_progress if cfg.get("progress", True) else None))
        doc["budget_s"] = float(cfg.get("budget_s", 30.0))
        doc["elapsed_s"] = round(time.monotonic() - started, 3)
        doc["step"] = getattr(step, "description", "")
        doc["environment"] = _environment(device)
        doc["error"] = None
    except ProbeFailure as exc:
        doc.update({"error": exc.to_json(), "results": getattr(exc, "results", []),
                    "elapsed_s": round(time.monotonic() - started, 3)})
    except KeyboardInterrupt:
        doc.update({"error": {"kind": "interrupted", "message": "interrupted", "where": None, "config": None}})
    except Exception as exc:  # a bug in the probe itself: still data, with the traceback's last frame
        doc.update({"error": {"kind": "internal", "message": "%s: %s" % (type(exc).__name__, exc),
                              "where": _user_frame(sys.exc_info()[2]), "config": None,
                              "traceback": traceback.format_exc()[-4000:]}})
    sys.stdout.write("\n%s%s%s\n" % (MARKER, json.dumps(doc), MARKER))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
