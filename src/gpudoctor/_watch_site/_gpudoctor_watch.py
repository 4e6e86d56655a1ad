"""The DataLoader recorder of ``gpudoctor watch``: runs INSIDE the watched job.

Loaded by the ``sitecustomize`` next to it (``gpudoctor watch`` puts this directory
first on the job's ``PYTHONPATH``) or imported by :func:`gpudoctor.watch` in a
notebook. Standard library only, no import of gpudoctor: the job may run another
interpreter than the doctor's.

When ``torch.utils.data.dataloader`` is imported, three methods are wrapped
(never replaced in behaviour): ``DataLoader.__init__`` (the settings and where
the loader was made), ``DataLoader.__iter__`` (iterator creation: worker
start-up, counted as waiting) and ``_BaseDataLoaderIter.__next__`` (the wait
for each batch; the time between two batches of one iterator is the step).
Per process (rank: ``RANK``/``LOCAL_RANK``), the sums are appended as JSON
lines to ``$GPUDOCTOR_WATCH_DIR/rec-<pid>.jsonl`` at most every
:data:`FLUSH_S` seconds, at the end of each epoch and at exit: one
``os.write`` per line, nothing printed, every internal error swallowed (the
recorder then switches itself off). A forked child starts with empty sums.

Records (``"k"`` is the kind)::

    {"k": "proc", "pid", "ppid", "rank", "local_rank", "world_size", "t"}
    {"k": "loader", "pid", "id", "site", "dataset", "batch_size", "num_workers",
     "pin_memory", "prefetch_factor", "persistent_workers", "drop_last"}
    {"k": "iter", "pid", "id", "s", "new", "workers": [pids], "t"}
    {"k": "batches", "pid", "id", "n", "samples", "wait_s", "step_s", "max_wait_s",
     "first_wait_s", "wait_cpu_s", "cpu_sampled_s" (num_workers=0: CPU time of the loop's
     thread during the CPU-timed waits, and those waits' wall time), "t"}
"""

import json
import os
import sys
import threading
import time
import weakref

__all__ = ["ENV_DIR", "FLUSH_S", "Recorder", "install", "install_import_hook", "recorder"]

#: The environment variable naming the run directory the records go to.
ENV_DIR = "GPUDOCTOR_WATCH_DIR"
#: The longest the sums wait in memory before they are written, seconds.
FLUSH_S = 0.5
_TARGET = "torch.utils.data.dataloader"
_perf = time.perf_counter
_cpu = time.thread_time
#: With num_workers=0, one wait in this many is CPU-timed (``thread_time`` costs up to
#: half a millisecond in a process with many threads).
CPU_EVERY = 16


def _int_env(name):
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


class _Sums:
    __slots__ = ("n", "samples", "wait", "step", "max_wait", "first_wait", "wait_cpu", "cpu_sampled")

    def __init__(self):
        self.n = self.samples = 0
        self.wait = self.step = self.max_wait = self.first_wait = self.wait_cpu = self.cpu_sampled = 0.0


class Recorder:
    """Per-process sums of the loaders seen; written by :meth:`flush` to ``path``
    (a JSON-lines file) or kept in :attr:`lines` when ``path`` is None (in process)."""

    def __init__(self, path=None, only=None):
        self.path = path
        self.only = only  # a loader object: record this one only (gpudoctor.watch(loader))
        self.lines = []
        self.enabled = True
        self._lock = threading.Lock()
        self._reset()

    def _reset(self):
        self.pid = os.getpid()
        self._ids = weakref.WeakKeyDictionary()  # type: weakref.WeakKeyDictionary[object, int]
        self._info = {}  # id -> loader record (settings)
        self._sums = {}  # id -> _Sums since the last flush
        self._pending = []  # records waiting for the next flush
        self._last_flush = _perf()
        self._proc_written = False
        self._next_id = 0

    def after_fork(self):
        """In a forked child: nothing of the parent's is written twice."""
        self._lock = threading.Lock()
        self._reset()

    # ----------------------------------------------------------------- events

    def loader_id(self, loader):
        i = self._ids.get(loader)
        if i is None:
            i = self._next_id = self._next_id + 1
            self._ids[loader] = i
            self._info[i] = self._describe(loader, i, None)
        return i

    def _describe(self, loader, i, site):
        def get(name):
            v = getattr(loader, name, None)
            return v if v is None or isinstance(v, (bool, int, float, str)) else str(v)

        dataset = getattr(loader, "dataset", None)
        return {
            "k": "loader",
            "pid": self.pid,
            "id": i,
            "site": site,
            "dataset": type(dataset).__name__ if dataset is not None else None,
            "batch_size": get("batch_size"),
            "num_workers": get("num_workers"),
            "pin_memory": get("pin_memory"),
            "prefetch_factor": get("prefetch_factor"),
            "persistent_workers": get("persistent_workers"),
            "drop_last": get("drop_last"),
        }

    def created(self, loader, site):
        i = self.loader_id(loader)
        self._info[i]["site"] = site

    def iterated(self, loader, it, seconds, new):
        if self.only is not None and loader is not self.only:
            return
        i = self.loader_id(loader)
        try:
            # loader id, end of the last next(), first batch pending, loading in this process
            # and how many batches it has yielded (every CPU_EVERY-th wait is CPU-timed)
            it._gpudoctor_watch = [i, None, True, not getattr(it, "_num_workers", 0), 0]
        except Exception:
            return
        workers = [getattr(w, "pid", None) for w in (getattr(it, "_workers", None) or [])]
        with self._lock:
            s = self._sums.setdefault(i, _Sums())
            s.wait += seconds
            self._pending.append(
                {
                    "k": "iter",
                    "pid": self.pid,
                    "id": i,
                    "s": round(seconds, 6),
                    "new": bool(new),
                    "workers": [w for w in workers if w],
                    "t": round(time.time(), 3),
                }
            )

    def batch(self, it, t0, t1, batch, ok, cpu=None):
        state = getattr(it, "_gpudoctor_watch", None)
        if state is None:
            return
        i, last, first = state[0], state[1], state[2]
        wait = t1 - t0
        with self._lock:
            s = self._sums.get(i)
            if s is None:
                s = self._sums[i] = _Sums()
            s.wait += wait
            if cpu is not None:
                s.wait_cpu += cpu
                s.cpu_sampled += wait
            if last is not None:
                s.step += t0 - last
            if ok:
                s.n += 1
                s.samples += _size(batch, self._info.get(i))
                if wait > s.max_wait:
                    s.max_wait = wait
                if first:
                    s.first_wait += wait
        state[1] = t1 if ok else None
        state[2] = False
        if not ok or t1 - self._last_flush >= FLUSH_S:
            self.flush()

    # ----------------------------------------------------------------- output

    def records(self):
        """Everything since the last flush, as records (and clears the sums); [] when nothing
        was seen (a process without a loader leaves no file)."""
        with self._lock:
            out = []
            for info in self._info.values():
                if not info.get("_written"):
                    info["_written"] = True
                    out.append({k: v for k, v in info.items() if k != "_written"})
            out.extend(self._pending)
            self._pending = []
            now = round(time.time(), 3)
            for i, s in self._sums.items():
                if s.n or s.wait or s.step:
                    out.append(
                        {
                            "k": "batches",
                            "pid": self.pid,
                            "id": i,
                            "n": s.n,
                            "samples": s.samples,
                            "wait_s": round(s.wait, 6),
                            "step_s": round(s.step, 6),
                            "max_wait_s": round(s.max_wait, 6),
                            "first_wait_s": round(s.first_wait, 6),
                            "wait_cpu_s": round(s.wait_cpu, 6),
                            "cpu_sampled_s": round(s.cpu_sampled, 6),
                            "t": now,
                        }
                    )
            self._sums = {}
            self._last_flush = _perf()
            if out and not self._proc_written:
                self._proc_written = True
                out.insert(
                    0,
                    {
                        "k": "proc",
                        "pid": self.pid,
                        "ppid": os.getppid(),
                        "rank": _int_env("RANK"),
                        "local_rank": _int_env("LOCAL_RANK"),
                        "world_size": _int_env("WORLD_SIZE"),
                        "t": round(time.time(), 3),
                    },
                )
            return out

    def flush(self):
        if not self.enabled or os.getpid() != self.pid:
            return
        try:
            recs = self.records()
            if not recs:
                return
            data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in recs)
            if self.path is None:
                self.lines.extend(recs)
                return
            fd = os.open(self.path % self.pid, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, data.encode("utf-8"))
            finally:
                os.close(fd)
        except Exception:
            self.enabled = False  # never again: the job must not notice us


def _size(batch, info):
    """Samples in a batch: the loader's batch_size, else the first dimension of its first tensor."""
    if info is not None and isinstance(info.get("batch_size"), int):
        n = info["batch_size"]
        if not info.get("drop_last"):
            shape = _first_shape(batch)
            if shape:
                return int(shape[0])
        return n
    shape = _first_shape(batch)
    return int(shape[0]) if shape else 1


def _first_shape(batch, depth=0):
    shape = getattr(batch, "shape", None)
    if shape is not None:
        return tuple(shape) or None
    if depth > 3:
        return None
    if isinstance(batch, dict):
        batch = list(batch.values())[:1]
    if isinstance(batch, (list, tuple)) and batch:
        return _first_shape(batch[0], depth + 1)
    return None


def _site():
    """file:line of the first frame outside torch and this module (where the loader was made)."""
    f = sys._getframe(2)
    while f is not None:
        fn = f.f_code.co_filename
        if os.sep + "torch" + os.sep not in fn and not fn.endswith(("_gpudoctor_watch.py", "loop_watch.py")):
            return "%s:%d" % (fn, f.f_lineno)
        f = f.f_back  # type: ignore[assignment]
    return None


_recorder = None
_patched = {}  # type: dict


def recorder():
    """The process's recorder (None before :func:`install`)."""
    return _recorder


def install(module, rec):
    """Wrap the methods of ``module`` (``torch.utils.data.dataloader``) so ``rec`` records.
    Idempotent; :func:`uninstall` restores the originals."""
    global _recorder
    _recorder = rec
    if _patched:
        return
    DataLoader = module.DataLoader
    Base = module._BaseDataLoaderIter
    init, iter_, next_ = DataLoader.__init__, DataLoader.__iter__, Base.__next__

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        r = _recorder
        if r is not None and r.enabled and (r.only is None or r.only is self):
            try:
                r.created(self, _site())
            except Exception:
                pass

    def __iter__(self):
        r = _recorder
        if r is None or not r.enabled:
            return iter_(self)
        old = getattr(self, "_iterator", None)
        t0 = _perf()
        it = iter_(self)
        t1 = _perf()
        try:
            r.iterated(self, it, t1 - t0, it is not old)
        except Exception:
            r.enabled = False
        return it

    def __next__(self):
        r = _recorder
        state = getattr(self, "_gpudoctor_watch", None)
        if r is None or not r.enabled or state is None:
            return next_(self)
        timed = False
        if state[3]:  # loading in this thread: how much of the wait is CPU work (sampled: the clock is slow)
            state[4] += 1
            timed = state[4] % CPU_EVERY == 1
        c0 = _cpu() if timed else 0.0
        t0 = _perf()
        try:
            batch = next_(self)
        except BaseException:
            try:
                r.batch(self, t0, _perf(), None, False)
            except Exception:
                r.enabled = False
            raise
        t1 = _perf()
        try:
            r.batch(self, t0, t1, batch, True, _cpu() - c0 if timed else None)
        except Exception:
            r.enabled = False
        return batch

    for cls, name, new, old in (
        (DataLoader, "__init__", __init__, init),
        (DataLoader, "__iter__", __iter__, iter_),
        (Base, "__next__", __next__, next_),
    ):
        for attr in ("__doc__", "__name__", "__qualname__", "__module__", "__wrapped__"):
            try:
                setattr(new, attr, getattr(old, attr) if attr != "__wrapped__" else old)
            except AttributeError:
                pass
        setattr(cls, name, new)
        _patched[(cls, name)] = old


def uninstall():
    """Restore the wrapped methods (after :func:`gpudoctor.watch`)."""
    global _recorder
    for (cls, name), old in _patched.items():
        setattr(cls, name, old)
    _patched.clear()
    _recorder = None


class _Finder:
    """A one-shot meta-path finder: wraps the loader of ``torch.utils.data.dataloader`` so the
    methods are wrapped right after the module runs."""

    def __init__(self, rec):
        self.rec = rec

    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            try:
                spec = find(name, path, target)
            except Exception:
                spec = None
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module
        rec = self.rec

        def exec_and_install(module):
            exec_module(module)
            try:
                install(module, rec)
            except Exception:
                pass

        try:
            loader.exec_module = exec_and_install
        except Exception:
            pass
        return spec


def install_import_hook(run_dir):
    """Set up the recorder of this process for ``run_dir`` (from ``sitecustomize``)."""
    rec = Recorder(os.path.join(run_dir, "rec-%d.jsonl"))
    if _TARGET in sys.modules:  # already imported (not at start-up; an embedding host)
        install(sys.modules[_TARGET], rec)
    else:
        sys.meta_path.insert(0, _Finder(rec))
    global _recorder
    _recorder = rec
    import atexit

    atexit.register(lambda: _recorder is not None and _recorder.flush())
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=lambda: _recorder is not None and _recorder.after_fork())
    return rec
