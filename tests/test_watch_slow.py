"""`gpudoctor watch` on real training loops (torch 2.13 CPU, a tiny model): datasets that sleep
a known time per item, steps that sleep a known time, DataLoader workers, torchrun ranks
over gloo. Each test starts torch in one or more fresh interpreters (seconds each on a
shared machine): marked ``slow``, run them apart with ``-m slow``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_watch import valid

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "watch"
GPUDOCTOR = [sys.executable, "-m", "gpudoctor"]
#: The data stall watch measures may differ from the loop's own timing by this much (issue 30).
POINTS = 0.05


def watch(cmd, out: Path, env=None, timeout=300):
    argv = [*GPUDOCTOR, "watch", "--no-gpu", "--interval", "0.2", "--format", "json", "-o", str(out), "--", *cmd]
    r = subprocess.run(argv, capture_output=True, env=env, timeout=timeout)
    return r, json.loads(out.read_text())


def loaders_env(**values):
    base = {"D_MS": "10", "S_MS": "10", "ITEMS": "64", "EPOCHS": "3"}
    base.update(values)
    return dict(os.environ, **base)


def test_stall_matches_the_loops_own_timing_and_the_recommendation_lowers_it(tmp_path):
    configs = [{"num_workers": 0}, {"num_workers": 2}, {"num_workers": 4}]
    truth_file = tmp_path / "truth.json"
    r, doc = watch(
        [sys.executable, str(FIXTURES / "loaders.py"), json.dumps(configs), str(truth_file)],
        tmp_path / "first.json",
        env=loaders_env(),
    )
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    valid(doc)
    truth = json.loads(truth_file.read_text())
    by_workers = {lo["settings"]["num_workers"]: lo for lo in doc["loaders"]}
    assert sorted(by_workers) == [0, 2, 4]
    for w, lo in by_workers.items():
        assert lo["batches"] == 3 * 16
        assert abs(lo["stall_fraction"] - truth[str(w)]) <= POINTS, (w, lo["stall_fraction"], truth)
        assert lo["site"].endswith("loaders.py:34")
    # num_workers=0: the loop loads in its own thread, which barely uses the CPU (sleeps)
    first = by_workers[0]
    assert first["load_cpu_share"] < 0.5
    rec = first["recommendation"]
    assert rec["kwargs"]["num_workers"] >= 2 and rec["expected_stall_fraction"] < first["stall_fraction"]
    # the next run, with the recommended settings
    r2, doc2 = watch(
        [sys.executable, str(FIXTURES / "loaders.py"), json.dumps([rec["kwargs"]]), str(tmp_path / "t2.json")],
        tmp_path / "second.json",
        env=loaders_env(),
    )
    assert r2.returncode == 0
    (again,) = doc2["loaders"]
    assert again["settings"]["num_workers"] == rec["kwargs"]["num_workers"]
    # the workers start once (persistent) and then keep up: what is left is mostly their start-up
    assert again["stall_fraction"] < first["stall_fraction"] - 0.05, (again, first)


def test_a_failing_job_with_workers_prints_the_same_bytes_and_its_batches_are_counted(tmp_path):
    cmd = [sys.executable, str(FIXTURES / "deterministic.py")]
    plain = subprocess.run(cmd, capture_output=True, timeout=300)
    watched, doc = watch(cmd, tmp_path / "v.json")
    assert plain.returncode == 1 and watched.returncode == 1
    assert watched.stdout == plain.stdout and plain.stdout.count(b"\n") == 16  # 2 epochs x 8 losses
    assert watched.stderr == plain.stderr and b"RuntimeError: the job fails after training" in plain.stderr
    (lo,) = doc["loaders"]
    assert (lo["batches"], lo["epochs"], lo["settings"]["num_workers"]) == (16, 2, 2)
    assert lo["worker_startups"] == 2 and len(lo["worker_pids"]) == 4
    assert "workers-restarted" in [lim["kind"] for lim in doc["limits"]]


@pytest.mark.skipif(shutil.which("torchrun", path=str(Path(sys.executable).parent)) is None, reason="no torchrun")
def test_torchrun_names_the_rank_with_the_slow_data(tmp_path):
    torchrun = str(Path(sys.executable).parent / "torchrun")
    cmd = [torchrun, "--standalone", "--nproc-per-node", "2", str(FIXTURES / "ranks.py")]
    r, doc = watch(cmd, tmp_path / "v.json", env=dict(os.environ, SLOW_RANK="1", OMP_NUM_THREADS="1"), timeout=400)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    assert sorted(lo["rank"] for lo in doc["loaders"]) == [0, 1]
    slow = [lim for lim in doc["limits"] if lim["kind"] == "slow-rank"]
    assert slow and slow[0]["summary"].startswith("rank 1 is slower"), doc["limits"]


def test_in_process_watch_of_one_loop(tmp_path):
    import torch
    from torch.utils.data import DataLoader, Dataset

    import gpudoctor

    class Sleepy(Dataset):
        def __len__(self):
            return 40

        def __getitem__(self, i):
            time.sleep(0.004)
            return torch.zeros(4)

    other = DataLoader(Sleepy(), batch_size=4)
    loader = DataLoader(Sleepy(), batch_size=4)
    with gpudoctor.watch(loader, interval_s=0.2, gpu=False) as w:
        step = 0.0
        t0 = time.perf_counter()
        for _ in loader:
            a = time.perf_counter()
            time.sleep(0.01)
            step += time.perf_counter() - a
        truth = 1.0 - step / (time.perf_counter() - t0)
        next(iter(other))  # another loader in the block is not this loop's
    assert abs(w.stall_fraction - truth) <= POINTS, (w.stall_fraction, truth)
    (lo,) = w.result["loaders"]
    assert lo["batches"] == 10
    assert w.limits[0]["kind"] == "too-few-workers"
    assert w.recommendation["kwargs"]["num_workers"] >= 1
    assert "waiting for data" in str(w)
    # after the block the DataLoader is torch's own again
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    assert not hasattr(_BaseDataLoaderIter.__next__, "__wrapped__")


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU (runs where one is lent)")
def test_on_a_gpu_the_verdict_gives_gpu_busy_next_to_the_stall(tmp_path):
    out = tmp_path / "v.json"
    argv = [*GPUDOCTOR, "watch", "--interval", "0.2", "--format", "json", "-o", str(out), "--"]
    r = subprocess.run([*argv, sys.executable, str(FIXTURES / "gpu_loop.py")], capture_output=True, timeout=600)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    doc = json.loads(out.read_text())
    assert doc["gpu_busy_percent"] is not None and doc["machine"]["gpus"], doc["machine"]
    assert doc["stall_fraction"] > 0.05
    kinds = [lim["kind"] for lim in doc["limits"]]
    assert "too-few-workers" in kinds and "pin-memory-off" in kinds
    assert doc["recommendation"]["kwargs"]["pin_memory"] is True
