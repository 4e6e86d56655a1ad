"""DataLoader probe, measurement: one configuration measured in the TARGET interpreter.

Part of the script the target interpreter runs (see :mod:`gpudoctor.probe._dataloader`):
standard library only at module level (torch is imported inside the
functions that need it), and no import of gpudoctor.

Measurement (per configuration, the lightweight in-process method of
../shared/reference/dataloader.md §6): the loop times the wait in
``next(iterator)`` separately from the step; data-stall fraction =
wait / (wait + step). Time to first batch = worker start-up + first batch.
Restart = time to the first batch of the next epoch (what
``persistent_workers`` saves). Worker peak RSS is ``VmHWM`` from
``/proc/<pid>/status``; shared-memory use is the peak rise of used bytes on
/dev/shm (``statvfs``) during the run; GPU utilisation is sampled through
NVML (``nvmlDeviceGetUtilizationRates``) when the step runs on CUDA.
Usable CPUs come from the affinity mask and the cgroup quota.
"""

import math
import os
import sys
import threading
import time
import traceback

#: The probe's own files (frames in them are not "the user's code").
_HERE = os.path.dirname(os.path.abspath(__file__))


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


def _is_probe_file(path):
    """Whether ``path`` is one of the probe's own modules (``_dataloader*.py`` here)."""
    return os.path.dirname(os.path.abspath(path)) == _HERE and os.path.basename(path).startswith("_dataloader")


def user_frame(tb):
    """file:line of the innermost frame outside torch and the probe's own files."""
    where = None
    for frame in traceback.extract_tb(tb):
        fn = frame.filename
        if os.sep + "torch" + os.sep in fn or _is_probe_file(fn) or fn.startswith("<frozen"):
            continue
        if "importlib" in fn:
            continue
        where = "%s:%s in %s" % (fn, frame.lineno, frame.name)
    return where


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


class _GpuSampler:
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


def loader_kwargs(config):
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
    return ProbeFailure(
        "dataset",
        "%s: %s" % (type(exc).__name__, text.strip().splitlines()[0] if text.strip() else ""),
        where=user_frame(sys.exc_info()[2]),
        config=config,
    )


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

    kw = loader_kwargs(config)
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
                    raise ProbeFailure(
                        "dataset",
                        "the dataset yields no batch (is it empty, or shorter than batch_size with drop_last=True?)",
                        config=config,
                    ) from None
        except ProbeFailure:
            raise
        except Exception as exc:
            failure = _classify(exc, config)
            if failure.kind == "worker-killed":
                deaths = _worker_deaths(state["it"])
                if deaths:
                    failure = ProbeFailure("worker-killed", "; ".join(deaths), config=config)
            raise failure from exc

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
            raise _classify(exc, config) from exc
        out["time_to_first_batch_s"] = round(time.perf_counter() - t, 4)
        n, nbytes = batch_stats(batch)
        out["batch_bytes"] = nbytes
        _run_step(step, batch, config)
        worker_cpu0 = {pid: _cpu_seconds(pid) for pid in workers()}
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
                raise _classify(exc, config) from exc
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
        out.update(
            {
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
            }
        )
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
                raise _classify(exc, config) from exc
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
        loader = None  # drop the DataLoader (and its worker handles) before returning
    return out


def _run_step(step, batch, config):
    try:
        step(batch)
    except ProbeFailure:
        raise
    except Exception as exc:
        raise ProbeFailure(
            "step",
            "the step raised %s: %s" % (type(exc).__name__, exc),
            where=user_frame(sys.exc_info()[2]),
            config=config,
        ) from exc
