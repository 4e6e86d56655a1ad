"""The machine side of ``gpudoctor watch``: samples the machine while the job runs.

At a bounded rate (one sample per ``interval_s``, at least :data:`MIN_INTERVAL_S`) a
thread reads

- ``/proc/stat``: busy share of each CPU and of the machine;
- ``/proc/<pid>/stat`` of the job's process tree: CPU seconds per process (the
  DataLoader workers included), so each process's busy share is known;
- ``/proc/pressure/io``: the share of time some task waited for I/O (PSI ``some total``);
- ``/proc/diskstats``: bytes read per second from whole disks;
- ``/proc/meminfo`` (available memory) and ``statvfs('/dev/shm')`` (used);
- GPU utilisation and memory per device from the NVML worker (``python -m
  gpudoctor.nvml_worker --sample S``, a child of the doctor's interpreter in its own
  process group: the doctor never loads the NVML library itself).

Only running sums, extremes and the latest sample are kept (memory does not grow with
the run); :meth:`MachineSampler.summary` gives what :func:`gpudoctor.stall.analyse` reads.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["MIN_INTERVAL_S", "MachineSampler", "nvml_may_answer"]

#: The fastest the machine is sampled, seconds.
MIN_INTERVAL_S = 0.2


def nvml_may_answer(env: dict | None = None) -> bool:
    """Whether the NVML worker may find a driver here (no worker is started on a machine
    without NVIDIA's driver: :func:`gpudoctor.collect.nvidia.nvml_worth_trying`)."""
    from gpudoctor.collect import CollectContext, CollectOptions
    from gpudoctor.collect.nvidia import nvml_worth_trying
    from gpudoctor.system import System

    ctx = CollectContext(System(env=dict(os.environ if env is None else env)), CollectOptions())
    return nvml_worth_trying(ctx) is None


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _cpu_times(root: str) -> dict[str, tuple[int, int]]:
    """{"cpu": (busy, total), "cpu0": ...} jiffies from /proc/stat."""
    out: dict[str, tuple[int, int]] = {}
    for line in (_read(root + "proc/stat") or "").splitlines():
        if not line.startswith("cpu"):
            break
        parts = line.split()
        try:
            vals = [int(v) for v in parts[1:]]
        except ValueError:
            continue
        idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
        total = sum(vals[:8])  # guest time is already counted in user/nice
        out[parts[0]] = (total - idle, total)
    return out


def _proc_table(root: str) -> dict[int, tuple[int, float]]:
    """{pid: (ppid, cpu seconds)} of every process."""
    tick = float(os.sysconf("SC_CLK_TCK"))
    out: dict[int, tuple[int, float]] = {}
    try:
        names = os.listdir(root + "proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        text = _read(f"{root}proc/{name}/stat")
        if not text:
            continue
        try:
            fields = text.rsplit(")", 1)[1].split()
            out[int(name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
        except (IndexError, ValueError):
            continue
    return out


def _descendants(table: dict[int, tuple[int, float]], pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for p, (pp, _) in table.items():
        children.setdefault(pp, []).append(p)
    out, stack = set(), [pid]
    while stack:
        p = stack.pop()
        if p in out:
            continue
        out.add(p)
        stack.extend(children.get(p, ()))
    return out


def _io_pressure_us(root: str) -> int | None:
    """PSI ``some total=`` microseconds of /proc/pressure/io (None: no PSI)."""
    for line in (_read(root + "proc/pressure/io") or "").splitlines():
        if line.startswith("some "):
            for part in line.split():
                if part.startswith("total="):
                    try:
                        return int(part[6:])
                    except ValueError:
                        return None
    return None


def _disk_read_bytes(root: str) -> int | None:
    """Bytes read from whole disks (``/sys/block`` names, loop and ram devices left out)."""
    try:
        disks = {d for d in os.listdir(root + "sys/block") if not d.startswith(("loop", "ram", "zram"))}
    except OSError:
        return None
    total = 0
    for line in (_read(root + "proc/diskstats") or "").splitlines():
        parts = line.split()
        if len(parts) > 5 and parts[2] in disks:
            try:
                total += int(parts[5]) * 512
            except ValueError:
                continue
    return total


def _mem_available_mib(root: str) -> float | None:
    for line in (_read(root + "proc/meminfo") or "").splitlines():
        if line.startswith("MemAvailable:"):
            try:
                return int(line.split()[1]) / 1024.0
            except (IndexError, ValueError):
                return None
    return None


def _shm_used_mib(root: str) -> float | None:
    try:
        st = os.statvfs(root + "dev/shm")
    except OSError:
        return None
    return (st.f_blocks - st.f_bfree) * st.f_frsize / 1048576.0


class _Stat:
    """Running mean, minimum and maximum of one quantity."""

    __slots__ = ("n", "sum", "min", "max")

    def __init__(self) -> None:
        self.n, self.sum = 0, 0.0
        self.min: float | None = None
        self.max: float | None = None

    def add(self, v: float | None) -> None:
        if v is None:
            return
        self.n += 1
        self.sum += v
        self.min = v if self.min is None else min(self.min, v)
        self.max = v if self.max is None else max(self.max, v)

    def mean(self, digits: int = 3) -> float | None:
        return round(self.sum / self.n, digits) if self.n else None


class MachineSampler:
    """Samples the machine in a thread from :meth:`start` to :meth:`stop`.

    ``job_pid`` (set with :meth:`watch_pid`): the job's process; its process tree is
    followed. ``nvml``: start the NVML worker (the caller decides whether NVML may answer
    here, see :func:`gpudoctor.collect.nvidia.nvml_worth_trying`). ``root``: a fake root
    for /proc and /sys (tests)."""

    def __init__(self, interval_s: float = 1.0, nvml: bool = False, root: str = "/", env: dict | None = None):
        self.interval_s = max(MIN_INTERVAL_S, float(interval_s))
        self.root = root.rstrip("/") + "/"
        self._nvml_wanted = nvml
        self._env = env
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._job: int | None = None
        self.samples = 0
        self._cpu = _Stat()
        self._cores: dict[str, _Stat] = {}
        self._job_cores = _Stat()
        self._io = _Stat()
        self._disk = _Stat()
        self._mem = _Stat()
        self._shm = _Stat()
        self._proc_busy: dict[int, _Stat] = {}
        self._gpu: dict[int, dict[str, _Stat]] = {}
        self._nvml_error: str | None = None
        self._nvml_proc: subprocess.Popen | None = None
        self._nvml_thread: threading.Thread | None = None
        self._prev: dict[str, Any] = {}

    def watch_pid(self, pid: int) -> None:
        self._job = pid

    # ------------------------------------------------------------------ life cycle

    def start(self) -> MachineSampler:
        if self._nvml_wanted:
            self._start_nvml()
        self._prev = self._snapshot()
        self._thread = threading.Thread(target=self._run, name="gpudoctor-watch-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        proc = self._nvml_proc
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if self._nvml_thread is not None:
            self._nvml_thread.join(2.0)

    def __enter__(self) -> MachineSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample_once()
        self.sample_once()  # the tail since the last tick

    # ------------------------------------------------------------------ sampling

    def _snapshot(self) -> dict[str, Any]:
        snap: dict[str, Any] = {
            "t": time.monotonic(),
            "cpu": _cpu_times(self.root),
            "io": _io_pressure_us(self.root),
            "disk": _disk_read_bytes(self.root),
        }
        if self._job is not None:
            table = _proc_table(self.root)
            tree = _descendants(table, self._job)
            snap["procs"] = {p: table[p][1] for p in tree if p in table}
        return snap

    def sample_once(self) -> None:
        """Take one sample now (the thread calls this every ``interval_s``)."""
        snap = self._snapshot()
        prev, self._prev = self._prev, snap
        dt = snap["t"] - prev.get("t", snap["t"])
        with self._lock:
            self.samples += 1
            for name, (busy, total) in snap["cpu"].items():
                b0, t0 = prev.get("cpu", {}).get(name, (busy, total))
                if total > t0:
                    share = (busy - b0) / float(total - t0)
                    (self._cpu if name == "cpu" else self._cores.setdefault(name, _Stat())).add(share)
            if dt > 0:
                if snap["io"] is not None and prev.get("io") is not None:
                    self._io.add(min(1.0, (snap["io"] - prev["io"]) / 1e6 / dt))
                if snap["disk"] is not None and prev.get("disk") is not None:
                    self._disk.add((snap["disk"] - prev["disk"]) / 1048576.0 / dt)
                procs, before = snap.get("procs") or {}, prev.get("procs") or {}
                if procs:
                    total_cpu = 0.0
                    for pid, secs in procs.items():
                        if pid in before:
                            busy = max(0.0, secs - before[pid]) / dt
                            total_cpu += busy
                            self._proc_busy.setdefault(pid, _Stat()).add(min(1.0, busy))
                    self._job_cores.add(total_cpu)
            self._mem.add(_mem_available_mib(self.root))
            self._shm.add(_shm_used_mib(self.root))

    # ------------------------------------------------------------------ NVML

    def _start_nvml(self) -> None:
        env = dict(self._env if self._env is not None else os.environ)
        pkg_parent = str(Path(__file__).resolve().parents[1])
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join([pkg_parent] + [p for p in paths if p != pkg_parent])
        try:
            self._nvml_proc = subprocess.Popen(
                [sys.executable, "-m", "gpudoctor.nvml_worker", "--sample", str(self.interval_s)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            self._nvml_error = f"the NVML worker could not be started: {exc.strerror or exc}"
            return
        self._nvml_thread = threading.Thread(target=self._read_nvml, name="gpudoctor-watch-nvml", daemon=True)
        self._nvml_thread.start()

    def _read_nvml(self) -> None:
        proc = self._nvml_proc
        assert proc is not None and proc.stdout is not None
        for raw in proc.stdout:
            try:
                doc = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(doc, dict):
                continue
            if not doc.get("ok"):
                self._nvml_error = str(doc.get("error") or "NVML failed")
                return
            with self._lock:
                for d in doc.get("devices") or []:
                    stats = self._gpu.setdefault(int(d.get("index", 0)), {})
                    for key in ("util_gpu", "util_mem", "mem_used_mib"):
                        stats.setdefault(key, _Stat()).add(d.get(key))
                    if d.get("mem_total_mib") is not None:
                        stats.setdefault("mem_total_mib", _Stat()).add(d["mem_total_mib"])

    # ------------------------------------------------------------------ result

    def summary(self) -> dict[str, Any]:
        """Means and extremes so far (JSON-ready); busy shares are fractions 0–1."""
        with self._lock:
            gpus = []
            for i in sorted(self._gpu):
                st = self._gpu[i]
                gpus.append(
                    {
                        "index": i,
                        "samples": st["util_gpu"].n if "util_gpu" in st else 0,
                        "util_percent_mean": st["util_gpu"].mean(1) if "util_gpu" in st else None,
                        "util_percent_min": st["util_gpu"].min if "util_gpu" in st else None,
                        "util_percent_max": st["util_gpu"].max if "util_gpu" in st else None,
                        "memory_util_percent_mean": st["util_mem"].mean(1) if "util_mem" in st else None,
                        "memory_used_mib_max": st["mem_used_mib"].max if "mem_used_mib" in st else None,
                        "memory_total_mib": st["mem_total_mib"].max if "mem_total_mib" in st else None,
                    }
                )
            utils = [g["util_percent_mean"] for g in gpus if g["util_percent_mean"] is not None]
            return {
                "samples": self.samples,
                "interval_s": self.interval_s,
                "cpu_busy": self._cpu.mean(),
                "cpu_busy_max": None if self._cpu.max is None else round(self._cpu.max, 3),
                "cpu_busy_per_core": {name: st.mean() for name, st in sorted(self._cores.items())},
                "job_cpu_cores": self._job_cores.mean(),
                "job_cpu_cores_max": None if self._job_cores.max is None else round(self._job_cores.max, 3),
                "process_cpu_busy": {str(pid): st.mean() for pid, st in sorted(self._proc_busy.items())},
                "io_pressure_some": self._io.mean(),
                "io_pressure_some_max": None if self._io.max is None else round(self._io.max, 3),
                "disk_read_mib_s": self._disk.mean(2),
                "disk_read_mib_s_max": None if self._disk.max is None else round(self._disk.max, 2),
                "mem_available_mib_min": None if self._mem.min is None else round(self._mem.min, 1),
                "shm_used_mib_max": None if self._shm.max is None else round(self._shm.max, 1),
                "gpus": gpus,
                "gpu_busy_percent": round(sum(utils) / len(utils), 1) if utils else None,
                "nvml_error": self._nvml_error,
            }
