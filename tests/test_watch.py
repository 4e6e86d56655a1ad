"""`gpudoctor watch -- CMD` and its parts, without torch in the job (fast): the command runs
unchanged (argv, stdin, stdout, stderr, exit status, signals), the sitecustomize chains to
the job's own one and leaves sys.path as it was, the verdict from records (each limit, its
neighbour and the healthy twin), the NVML samples from the fake libnvidia-ml.so.1.

The real training loops (torch, DataLoader workers, torchrun ranks) are in
tests/test_watch_slow.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpudoctor import stall
from gpudoctor.explain_run import exit_status
from gpudoctor.stall_sampler import MachineSampler, nvml_may_answer
from nvml_lib import build_fake_nvml

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "watch"
PLAIN = str(FIXTURES / "plain.py")
GPUDOCTOR = [sys.executable, "-m", "gpudoctor"]


def valid(doc):
    """``doc`` checked against the published schemas/watch.schema.json; returned."""
    from jsonschema import Draft202012Validator

    from gpudoctor.schemas import published_schema

    schema = published_schema("watch.schema.json")
    Draft202012Validator.check_schema(schema)
    Draft202012Validator(schema).validate(doc)
    return doc


def run(argv, env=None, stdin=b"hello\n"):
    return subprocess.run(argv, input=stdin, capture_output=True, env=env, timeout=120)


def watch_argv(*cmd, out=None, fmt="json"):
    argv = [*GPUDOCTOR, "watch", "--no-gpu", "--interval", "0.2", "--format", fmt]
    if out is not None:
        argv += ["-o", str(out)]
    return [*argv, "--", *cmd]


# ------------------------------------------------------------------ the command passes through


@pytest.mark.parametrize("how", ["0", "3", "kill:TERM"])
def test_output_and_exit_are_byte_identical(tmp_path, how):
    plain = run([sys.executable, PLAIN, how, "two words"])
    watched = run(watch_argv(sys.executable, PLAIN, how, "two words", out=tmp_path / "v.json"))
    assert watched.stdout == plain.stdout and b"hello" in plain.stdout
    assert watched.stderr == plain.stderr == b"to stderr\n"
    assert watched.returncode == exit_status(plain.returncode)
    if how == "kill:TERM":
        assert plain.returncode == -signal.SIGTERM and watched.returncode == 128 + signal.SIGTERM
    doc = valid(json.loads((tmp_path / "v.json").read_text()))
    assert doc["exit_code"] == watched.returncode
    assert doc["instrumented"] is False and doc["limits"][0]["kind"] == "no-dataloader"


def test_verdict_goes_to_stderr_after_the_commands_own(tmp_path):
    plain = run([sys.executable, PLAIN, "0"])
    watched = run(watch_argv(sys.executable, PLAIN, "0", fmt="console"))
    assert watched.stdout == plain.stdout
    assert watched.stderr.startswith(plain.stderr)
    assert b"gpudoctor watch: verdict" in watched.stderr[len(plain.stderr) :]


def test_sitecustomize_chains_and_sys_path_is_unchanged(tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("MARK = 'the job own sitecustomize ran'\n")
    env = dict(os.environ, PYTHONPATH=str(own))
    plain = run([sys.executable, PLAIN, "0"], env=env)
    watched = run(watch_argv(sys.executable, PLAIN, "0", out=tmp_path / "v.json"), env=env)
    assert b"the job own sitecustomize ran" in plain.stdout
    assert watched.stdout == plain.stdout  # sys.path printed by the job included


def test_a_job_sent_sigterm_through_gpudoctor_gets_it(tmp_path):
    script = tmp_path / "wait.py"
    script.write_text(
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('got TERM', flush=True), sys.exit(7)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen(watch_argv(sys.executable, str(script), out=tmp_path / "v.json"), stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert (out, proc.returncode) == (b"got TERM\n", 7)
    assert json.loads((tmp_path / "v.json").read_text())["exit_code"] == 7


@pytest.mark.parametrize(
    ("args", "code", "text"),
    [
        (["watch"], 2, "give the command to watch after `--`"),
        (["watch", "--"], 2, "nothing to run after `--`"),
        (["watch", "python"], 2, "give the command to watch after `--`"),
        (["watch", "--", "no-such-command-here"], 127, "cannot start no-such-command-here"),
        (["watch", "--no-gpu", "--", "/"], 126, "cannot start /: is a directory"),
        (["watch", "--no-gpu", "-o", "/", "--", "true"], 2, "-o /: is a directory"),
    ],
)
def test_bad_input_is_one_line(args, code, text):
    r = run([*GPUDOCTOR, *args], stdin=b"")
    assert r.returncode == code
    err = r.stderr.decode()
    assert text in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_help_has_examples():
    r = run([*GPUDOCTOR, "watch", "--help"], stdin=b"")
    assert r.returncode == 0 and b"gpudoctor watch -- python train.py" in r.stdout


# ------------------------------------------------------------------ the verdict from records


def records(rank, wait_ms, step_ms, n=50, pid=None, workers=0, pin=False, persistent=False, epochs=1, **extra):
    """Recorder records of one loader of one process: ``n`` batches of ``wait_ms`` + ``step_ms``."""
    pid = pid or 1000 + (rank or 0)
    out = [
        {"k": "proc", "pid": pid, "rank": rank, "local_rank": rank, "world_size": 2},
        {
            "k": "loader",
            "pid": pid,
            "id": 1,
            "site": "train.py:40",
            "dataset": "Images",
            "batch_size": 32,
            "num_workers": workers,
            "pin_memory": pin,
            "prefetch_factor": 2 if workers else None,
            "persistent_workers": persistent,
            "drop_last": False,
        },
    ]
    for e in range(epochs):
        new = e == 0 or not persistent
        out.append({"k": "iter", "pid": pid, "id": 1, "s": 0.2 if new and workers else 0.0, "new": new, "workers": []})
        out.append(
            {
                "k": "batches",
                "pid": pid,
                "id": 1,
                "n": n,
                "samples": 32 * n,
                "wait_s": n * wait_ms / 1000,
                "step_s": (n - 1) * step_ms / 1000,
                "max_wait_s": wait_ms / 1000,
                "first_wait_s": wait_ms / 1000,
                **extra,
            }
        )
    return out


CPUS = {"logical": 16, "affinity": 16, "quota_cpus": None, "usable": 16}


def kinds(doc):
    return [lim["kind"] for lim in doc["limits"]]


def test_slow_rank_is_named():
    doc = valid(stall.analyse(records(0, 2, 20) + records(1, 30, 20), {}, CPUS))
    slow = next(lim for lim in doc["limits"] if lim["kind"] == "slow-rank")
    assert slow["summary"].startswith("rank 1 is slower")
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]


def test_ranks_alike_name_no_rank():
    doc = stall.analyse(records(0, 10, 20) + records(1, 11, 20), {}, CPUS)
    assert "slow-rank" not in kinds(doc)


def test_healthy_loader_is_step_bound_and_keeps_its_settings():
    doc = stall.analyse(records(None, 0.1, 20, workers=4, persistent=True), {"cpu_busy": 0.3}, CPUS)
    assert kinds(doc) == ["step-bound"]
    assert doc["stall_fraction"] < 0.05
    assert doc["recommendation"]["expected_stall_fraction"] == 0.0


def test_no_workers_says_too_few_and_recommends_workers():
    # loading is CPU work in the loop's thread (the recorder CPU-timed 4 of the waits)
    recs = records(None, 30, 20, wait_cpu_s=4 * 0.030, cpu_sampled_s=4 * 0.030)
    doc = valid(stall.analyse(recs, {"cpu_busy": 0.1}, CPUS))
    assert kinds(doc)[0] == "too-few-workers"
    rec = doc["recommendation"]
    assert rec["kwargs"]["num_workers"] >= 2 and rec["kwargs"]["persistent_workers"] is True
    assert rec["expected_stall_fraction"] < doc["stall_fraction"]
    assert rec["call"].startswith("DataLoader(dataset, batch_size=32, num_workers=")


def test_cpu_bound_with_every_cpu_busy():
    recs = records(None, 15, 20, workers=8, persistent=True)
    machine = {"cpu_busy": 0.97, "job_cpu_cores": 7.5, "process_cpu_busy": {}}
    doc = stall.analyse(recs, machine, {"logical": 8, "affinity": 8, "quota_cpus": None, "usable": 8})
    assert kinds(doc)[0] == "cpu-bound"
    assert "no CUDA device is usable" in doc["limits"][0]["detail"]


def test_io_bound_when_workers_wait_with_cpus_free():
    recs = records(None, 15, 20, workers=4, persistent=True)
    recs[2]["workers"] = [2001, 2002, 2003, 2004]
    machine = {
        "cpu_busy": 0.2,
        "io_pressure_some": 0.4,
        "process_cpu_busy": {str(p): 0.05 for p in (2001, 2002, 2003, 2004)},
    }
    doc = stall.analyse(recs, machine, {"logical": 4, "affinity": 4, "quota_cpus": None, "usable": 4})
    assert kinds(doc)[0] == "io-bound"
    assert "I/O-bound input" in doc["limits"][0]["summary"]
    # loading that barely uses the CPU may use more workers than CPUs
    assert doc["recommendation"]["kwargs"]["num_workers"] > 4


def test_pin_memory_off_is_said_only_with_a_gpu():
    recs = records(None, 0.1, 20, workers=2, persistent=True)
    with_gpu = stall.analyse(recs, {"gpus": [{"index": 0, "util_percent_mean": 40.0}], "gpu_busy_percent": 40.0}, CPUS)
    assert "pin-memory-off" in kinds(with_gpu) and with_gpu["gpu_busy_percent"] == 40.0
    assert with_gpu["recommendation"]["kwargs"]["pin_memory"] is True
    assert "pin-memory-off" not in kinds(stall.analyse(recs, {}, CPUS))
    pinned = records(None, 0.1, 20, workers=2, persistent=True, pin=True)
    assert "pin-memory-off" not in kinds(stall.analyse(pinned, {"gpus": [{"index": 0}]}, CPUS))


def test_workers_restarted_every_epoch_and_persistent_twin():
    restarted = stall.analyse(records(None, 1, 20, workers=2, epochs=3), {}, CPUS)
    lim = next(lim for lim in restarted["limits"] if lim["kind"] == "workers-restarted")
    assert "started 3 times" in lim["summary"]
    kept = stall.analyse(records(None, 1, 20, workers=2, epochs=3, persistent=True), {}, CPUS)
    assert "workers-restarted" not in kinds(kept)


def test_reader_keeps_a_half_written_line(tmp_path):
    f = tmp_path / "rec-7.jsonl"
    f.write_bytes(b'{"k":"proc","pid":7}\n{"k":"batches","pid":7,"id":1,"n":2')
    reader = stall.RecordReader(str(tmp_path))
    assert [r["k"] for r in reader.read()] == ["proc"]
    with f.open("ab") as fh:
        fh.write(b',"wait_s":0.1,"step_s":0.1}\nnot json\n')
    assert [r["k"] for r in reader.read()] == ["batches"]
    assert stall.loader_stats(reader.records)[0].batches == 2


# ------------------------------------------------------------------ the recorder in process (no torch)


def test_recorder_sums_and_a_forked_child_writes_nothing_of_its_parent(tmp_path):
    from gpudoctor._watch_site import _gpudoctor_watch as gw

    rec = gw.Recorder(str(tmp_path / "rec-%d.jsonl"))

    class It:
        pass

    class Loader:
        batch_size, num_workers, pin_memory, drop_last = 4, 0, False, False

    loader, it = Loader(), It()
    rec.iterated(loader, it, 0.0, True)
    rec.batch(it, 0.0, 0.010, [[0] * 4], True)
    rec.batch(it, 0.030, 0.040, None, True)  # 20 ms of step between the two
    pid = os.fork()
    if pid == 0:  # the child: its copy of the sums must never reach a file
        rec.after_fork()
        rec.flush()
        os._exit(0)
    os.waitpid(pid, 0)
    rec.flush()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [f"rec-{os.getpid()}.jsonl"]
    reader = stall.RecordReader(str(tmp_path))
    reader.read()
    (s,) = stall.loader_stats(reader.records)
    assert (s.batches, round(s.wait_s, 6), round(s.step_s, 6)) == (2, 0.02, 0.02)


# ------------------------------------------------------------------ GPU samples from the fake NVML


def test_gpu_busy_comes_from_the_nvml_worker(tmp_path):
    lib = build_fake_nvml(tmp_path / "lib", DEVICE_COUNT=2, UTIL_GPU=37, UTIL_MEM=12)
    env = dict(os.environ, LD_LIBRARY_PATH=str(lib))
    assert nvml_may_answer(env)
    sampler = MachineSampler(0.2, nvml=True, env=env)
    sampler.watch_pid(os.getpid())
    with sampler:
        deadline = time.monotonic() + 30
        while not sampler.summary()["gpus"] and time.monotonic() < deadline:
            time.sleep(0.1)
    summary = sampler.summary()
    assert [g["index"] for g in summary["gpus"]] == [0, 1]
    assert summary["gpus"][0]["util_percent_mean"] == 37.0 and summary["gpu_busy_percent"] == 37.0
    assert summary["gpus"][0]["memory_total_mib"] == 81559
    doc = valid(stall.analyse(records(None, 1, 20, workers=2), summary, CPUS))
    assert doc["gpu_busy_percent"] == 37.0
    assert "GPU busy: 37 %" in stall.render_text(doc)


def test_without_a_driver_no_nvml_worker_is_started(tmp_path):
    env = dict(os.environ, LD_LIBRARY_PATH=str(tmp_path))
    if Path("/proc/driver/nvidia").exists() or Path("/dev/nvidiactl").exists():
        pytest.skip("this machine has an NVIDIA driver")
    assert not nvml_may_answer(env)
    summary = MachineSampler(0.2).summary()
    assert summary["gpus"] == [] and summary["gpu_busy_percent"] is None


# ------------------------------------------------------------------ --live and Ctrl-C


def test_live_gives_the_verdict_so_far_while_the_command_runs(tmp_path):
    script = tmp_path / "slow.py"
    script.write_text("import time\nprint('start', flush=True)\ntime.sleep(3.5)\nprint('end')\n")
    r = run([*GPUDOCTOR, "watch", "--no-gpu", "--live", "1", "--", sys.executable, str(script)], stdin=b"")
    assert r.returncode == 0 and r.stdout == b"start\nend\n"
    err = r.stderr.decode()
    assert err.count("gpudoctor watch: so far") >= 1
    assert err.rstrip().splitlines()[0].startswith("gpudoctor watch: so far")
    assert err.count("gpudoctor watch: verdict") == 1 and err.index("so far") < err.index("verdict")


def test_ctrl_c_gives_the_verdict_and_the_commands_status(tmp_path):
    script = tmp_path / "wait.py"
    script.write_text("import time\nprint('ready', flush=True)\ntime.sleep(60)\n")
    out = tmp_path / "v.json"
    proc = subprocess.Popen(
        [*watch_argv(sys.executable, str(script), out=out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in the terminal does: the whole group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()[-2000:]
    assert b"KeyboardInterrupt" in err  # the job's own traceback, passed through
    doc = valid(json.loads(out.read_text()))
    assert doc["interrupted"] is True and doc["exit_code"] == 130


def test_a_command_that_ignores_ctrl_c_is_killed_and_the_verdict_says_so(tmp_path):
    """After Ctrl-C the command gets KILL_GRACE_S (10 s) to end; watch's own SIGKILL is not
    reported as the command's exit status, and watch ends with 130 as for Ctrl-C."""
    script = tmp_path / "deaf.py"
    script.write_text(
        "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('ready', flush=True)\ntime.sleep(60)\n"
    )
    out = tmp_path / "v.json"
    proc = subprocess.Popen(
        [*watch_argv(sys.executable, str(script), out=out)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()[-2000:]
    doc = valid(json.loads(out.read_text()))
    assert doc["interrupted"] is True and doc["exit_code"] is None and doc["killed_after_s"] == 10
    from gpudoctor import stall

    assert "gpudoctor watch killed it" in stall.render_text(doc)


def test_the_training_loader_is_judged_not_a_short_validation_loader():
    train = records(None, 0.5, 20, n=200, pid=1000)
    val = [dict(r, id=2) for r in records(None, 30, 5, n=10, pid=1000) if r["k"] != "proc"]
    doc = stall.analyse(train + val, {}, CPUS)
    assert doc["main_loader"] == {"pid": 1000, "loader": 1, "rank": None}
    assert [lo["loader"] for lo in doc["loaders"]] == [1, 2]
    assert kinds(doc) == ["step-bound"]


def test_with_ranks_the_slowest_rank_is_the_one_judged():
    doc = stall.analyse(records(0, 2, 48) + records(1, 30, 20), {}, CPUS)
    assert doc["main_loader"]["rank"] == 1
    assert "(rank 1, the slowest)" in stall.render_text(doc)


def test_reader_memory_does_not_grow_with_the_run(tmp_path):
    lines = [{"k": "proc", "pid": 9, "rank": None}]
    lines += [{"k": "iter", "pid": 9, "id": 1, "s": 0.5, "new": True, "workers": [20 + e]} for e in range(3)]
    lines += [
        {
            "k": "batches",
            "pid": 9,
            "id": 1,
            "n": 10,
            "samples": 40,
            "wait_s": 0.1,
            "step_s": 0.2,
            "max_wait_s": 0.02 + i / 1000,
        }
        for i in range(100)
    ]
    (tmp_path / "rec-9.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    reader = stall.RecordReader(str(tmp_path))
    assert len(reader.read()) == 104
    assert len(reader.records) == 3
    (s,) = stall.loader_stats(reader.records)
    assert (s.batches, s.samples, s.iterations, s.new_iterators, s.workers) == (1000, 4000, 3, 3, [20, 21, 22])
    assert (round(s.wait_s, 6), round(s.step_s, 6), round(s.max_wait_s, 6)) == (10.0, 20.0, 0.119)


def test_some_workers_with_cpus_free_is_too_few_workers():
    recs = records(None, 15, 20, workers=2, persistent=True)
    recs[2]["workers"] = [3001, 3002]
    machine = {"cpu_busy": 0.3, "process_cpu_busy": {"3001": 0.95, "3002": 0.97}}
    doc = stall.analyse(recs, machine, CPUS)
    assert kinds(doc)[0] == "too-few-workers"
    assert "num_workers=2 (train.py:40) with 16 usable CPUs" in doc["limits"][0]["summary"]
    assert doc["recommendation"]["kwargs"]["num_workers"] > 2


def test_busy_workers_on_every_usable_cpu_are_cpu_bound_even_with_the_machine_idle_elsewhere():
    recs = records(None, 15, 20, workers=3, persistent=True)
    recs[2]["workers"] = [4001, 4002, 4003]
    machine = {"cpu_busy": 0.6, "process_cpu_busy": {"4001": 0.9, "4002": 0.92, "4003": 0.88}}
    doc = stall.analyse(recs, machine, {"logical": 4, "affinity": 4, "quota_cpus": None, "usable": 4})
    assert kinds(doc)[0] == "cpu-bound" and "3 workers 90 % busy each" in doc["limits"][0]["summary"]
    # the CPUs cap the workers that help: the recommendation stays within them
    assert doc["recommendation"]["kwargs"]["num_workers"] <= 4


def test_output_to_a_fifo_is_refused_before_the_command_runs_and_dash_means_stderr(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    marker = tmp_path / "ran"
    r = run([*GPUDOCTOR, "watch", "--no-gpu", "-o", str(fifo), "--", "touch", str(marker)], stdin=b"")
    err = r.stderr.decode()
    assert r.returncode == 2 and "is a FIFO (named pipe)" in err and "`-o -` writes to stderr" in err
    assert not marker.exists() and len(err.strip().splitlines()) == 1
