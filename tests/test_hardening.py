"""Hardening: termination signals end every child, grandchildren holding pipes are no
hang, collectors wait for the probe as long as --probe-timeout, plug-ins cannot take
the doctor down, redaction at every exit."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _foundation import GPUDOCTOR, env_with
from gpudoctor.collect import CollectOptions, Collector
from gpudoctor.engine import collect_facts, evaluate
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.model import Check, Finding, Status
from gpudoctor.system import Files, SubprocessRunner, System
from gpudoctor.testing import ScriptedRunner, not_found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_for(path: Path, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


# --------------------------------------------------------------------------- signals


@pytest.mark.parametrize(
    "sig, code, word",
    [(signal.SIGTERM, 143, "terminated"), (signal.SIGHUP, 129, "hung up"), (signal.SIGINT, 130, "interrupted")],
)
def test_termination_signals_kill_every_probe_group(tmp_path, sig, code, word):
    pidfile = tmp_path / "pids"
    hang = tmp_path / "python-that-hangs"
    # the fake interpreter starts a grandchild and records both pids, then hangs
    hang.write_text(f"#!/bin/sh\nsleep 300 &\necho $$ $! > {pidfile}\nwait\n")
    hang.chmod(0o755)
    proc = subprocess.Popen(
        [*GPUDOCTOR, "check", "torch.install", "--python", str(hang)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_with(),
    )
    pids = [int(p) for p in _wait_for(pidfile).split()]
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert word in err and "Traceback" not in err + out
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids), "a probe process survived the doctor"


def test_a_grandchild_holding_the_pipe_is_not_a_hang(tmp_path):
    # the command exits at once but leaves a daemon holding stdout: not a timeout
    script = (
        "import os, subprocess, sys; subprocess.Popen(['sleep', '60']); print('done'); sys.stdout.flush(); os._exit(0)"
    )
    start = time.monotonic()
    r = SubprocessRunner().run([sys.executable, "-c", script], timeout_s=30)
    assert r.error is None and r.returncode == 0 and r.stdout == "done\n"
    assert time.monotonic() - start < 20


# --------------------------------------------------------------------------- probe budget


def test_a_collector_waiting_for_the_probe_waits_as_long_as_probe_timeout(tmp_path):
    def slow_probe(ctx):
        time.sleep(1.5)  # stands in for a 25 s torch import
        return {"ok": True}

    collectors = {
        "targets": Collector("targets", slow_probe, timeout_s=0.5, runs_probes=True),
        "loader": Collector("loader", lambda ctx: dict(ctx.facts["targets"]), requires=("targets",), timeout_s=0.5),
    }
    system = System(runner=ScriptedRunner(default=not_found()), files=Files(tmp_path), env={})
    facts, errors = collect_facts(["targets", "loader"], system, CollectOptions(probe_timeout_s=5.0), collectors)
    assert errors == []
    assert facts.domains["loader"] == {"ok": True}
    # with the default probe timeout too short, the same probe is an error naming the budget
    facts, errors = collect_facts(
        ["targets"],
        system,
        CollectOptions(probe_timeout_s=0.0),
        {"targets": Collector("targets", lambda c: time.sleep(40), timeout_s=0.5, runs_probes=True)},
    )
    assert [e.check for e in errors] == ["collect.targets"] and "30 s" in errors[0].summary


# --------------------------------------------------------------------------- plug-ins


def _check(cid, fn):
    return Check(id=cid, title=cid, needs=(), evaluate=fn)


def _raises(exc):
    def fn(facts):
        raise exc

    return fn


@pytest.mark.parametrize(
    "cid, fn, expect",
    [
        ("p.exit", _raises(SystemExit(3)), "SystemExit"),
        ("p.kbd", _raises(KeyboardInterrupt()), "KeyboardInterrupt"),
        ("p.generator", _raises(GeneratorExit()), "GeneratorExit"),
        ("p.none", lambda facts: None, "NoneType"),
        ("p.str", lambda facts: "all good", "str"),
        ("p.dicts", lambda facts: [{"status": "ok"}], "dict"),
        ("p.int", lambda facts: 42, "int"),
    ],
)
def test_a_broken_check_is_an_error_finding_naming_it(cid, fn, expect):
    good = _check("p.good", lambda facts: [Finding("p.good", Status.OK, "fine")])
    findings = evaluate([_check(cid, fn), good], Facts(domains={}))
    assert [f.check for f in findings] == [cid, "p.good"]
    bad = findings[0]
    assert bad.status is Status.ERROR and expect in bad.summary
    assert bad.evidence["provider"].startswith("test_hardening.")
    assert findings[1].status is Status.OK


def test_a_check_past_its_budget_is_abandoned():
    findings = evaluate(
        [
            _check("p.slow", lambda facts: time.sleep(30)),
            _check("p.good", lambda facts: [Finding("p.good", Status.OK, "fine")]),
        ],
        Facts(domains={}),
        check_timeout_s=0.3,
    )
    assert findings[0].status is Status.ERROR and "did not finish within 0.3 s" in findings[0].summary
    assert findings[1].status is Status.OK


@pytest.mark.parametrize("value, word", [(None, "NoneType"), (object(), "object"), ({1, 2}, "set")])
def test_a_collector_returning_garbage_is_an_error(tmp_path, value, word):
    system = System(runner=ScriptedRunner(default=not_found()), files=Files(tmp_path), env={})
    facts, errors = collect_facts(["x"], system, CollectOptions(), {"x": Collector("x", lambda ctx: value)})
    assert isinstance(facts.domains["x"], Unavailable)
    assert errors[0].status is Status.ERROR and word in errors[0].summary
    json.dumps(facts.to_json())  # the snapshot still serialises


@pytest.mark.parametrize("exc", [SystemExit(0), KeyboardInterrupt(), MemoryError("x")])
def test_a_collector_raising_anything_is_an_error(tmp_path, exc):
    def boom(ctx):
        raise exc

    system = System(runner=ScriptedRunner(default=not_found()), files=Files(tmp_path), env={})
    facts, errors = collect_facts(
        ["x", "y"], system, CollectOptions(), {"x": Collector("x", boom), "y": Collector("y", lambda ctx: {"fine": 1})}
    )
    assert isinstance(facts.domains["x"], Unavailable) and facts.domains["y"] == {"fine": 1}
    assert errors[0].check == "collect.x" and type(exc).__name__ in errors[0].summary


# --------------------------------------------------------------------------- probe dataloader result cache


def test_saved_probe_result_lives_in_the_xdg_cache_dir(tmp_path, monkeypatch):
    from gpudoctor.cli.probe import saved_result_path
    from gpudoctor.collect import CollectContext
    from gpudoctor.collect.dataloader_probe import collect_dataloader_probe, saved_result_file
    from gpudoctor.facts.dataloader import DataLoaderProbeFacts
    from gpudoctor.testing import fake_system, write_tree

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    assert saved_result_path() == tmp_path / "xdg-cache" / "gpudoctor" / "dataloader-probe.json"
    # the collector reads the same place, inside the root, and falls back to ~/.cache
    assert saved_result_file("/home/u", {"XDG_CACHE_HOME": "/xdg"}) == "/xdg/gpudoctor/dataloader-probe.json"
    assert (
        saved_result_file("/home/u", {"XDG_CACHE_HOME": "relative"}) == "/home/u/.cache/gpudoctor/dataloader-probe.json"
    )
    doc = json.dumps({"batch_bytes": 1024, "num_workers": 2, "prefetch_factor": 2, "batch_size": 8})
    root = write_tree(tmp_path / "root", {"/xdg/gpudoctor/dataloader-probe.json": doc})
    got = collect_dataloader_probe(CollectContext(fake_system(root, env={"XDG_CACHE_HOME": "/xdg"}), CollectOptions()))
    assert isinstance(got, DataLoaderProbeFacts) and got.source == "/xdg/gpudoctor/dataloader-probe.json"


HANGING_DATASET = """
import time, torch

class Hangs:
    def __len__(self):
        return 1000
    def __getitem__(self, i):
        if i >= 4:
            time.sleep(1000)
        return torch.zeros(4)

def hangs():
    return Hangs()
"""


@pytest.mark.slow
def test_probe_dataloader_stops_at_its_budget_when_a_dataset_item_hangs(tmp_path):
    from gpudoctor.cli.probe import GRACE_S

    (tmp_path / "userdata.py").write_text(HANGING_DATASET)
    start = time.monotonic()
    proc = subprocess.run(
        [
            *GPUDOCTOR,
            "probe",
            "dataloader",
            "--dataset",
            "userdata:hangs",
            "--batch-size",
            "2",
            "--step-ms",
            "1",
            "--budget-s",
            "3",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env_with(HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache")),
        timeout=120,
    )
    wall = time.monotonic() - start
    # either the probe's own deadline ends the measurement (nothing measured) or the doctor kills it
    assert (proc.returncode == 1 and "a dataset item, collate_fn or worker hung" in proc.stderr) or (
        proc.returncode == 0 and "No configuration could be measured within the budget" in proc.stdout
    ), proc
    assert "Traceback" not in proc.stderr + proc.stdout
    assert (
        wall < 3 + GRACE_S + 40
    )  # the budget and its grace, plus interpreter start on a loaded machine; the item sleeps 1000 s
    assert not list(tmp_path.rglob("dataloader-probe.json"))


def test_main_called_in_process_gives_the_callers_signal_handlers_back():
    """An in-process main() used to leave SIGTERM/SIGHUP ignored: every process the caller
    started afterwards inherited SIG_IGN and could no longer be terminated."""
    from gpudoctor.cli import main

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    for argv in (["--version"], ["check", "--facts", "/nonexistent.json"], ["list"]):
        with pytest.raises(SystemExit):
            main(argv)
        assert {s: signal.getsignal(s) for s in before} == before, argv


def test_an_interrupted_in_process_main_lets_the_caller_run_commands_afterwards():
    """An interrupt stops new commands until that main() ends (so its own worker threads start
    nothing more); the caller's later commands run as before."""
    from gpudoctor.cli import main

    interrupt_parent = "import os, signal; os.kill(os.getppid(), signal.SIGINT)"
    with pytest.raises(SystemExit) as exited:
        main(["explain", "--no-check", "--", sys.executable, "-c", interrupt_parent])
    assert exited.value.code == 130
    r = SubprocessRunner().run([sys.executable, "-c", "print('after')"], timeout_s=60)
    assert r.ok and r.stdout == "after\n", r
