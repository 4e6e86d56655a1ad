"""Hardening: termination signals end every child, grandchildren holding pipes are no
hang, collectors wait for the probe as long as --probe-timeout, plug-ins cannot take
the doctor down, redaction at every exit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpudoctor.collect import CollectOptions, Collector
from gpudoctor.engine import collect_facts, evaluate
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.model import Check, Finding, Status
from gpudoctor.system import Files, SubprocessRunner, System
from gpudoctor.testing import ScriptedRunner, not_found

from _foundation import GPUDOCTOR, env_with


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

@pytest.mark.parametrize("sig, code, word", [(signal.SIGTERM, 143, "terminated"), (signal.SIGHUP, 129, "hung up"),
                                             (signal.SIGINT, 130, "interrupted")])
def test_termination_signals_kill_every_probe_group(tmp_path, sig, code, word):
    pidfile = tmp_path / "pids"
    hang = tmp_path / "python-that-hangs"
    # the fake interpreter starts a grandchild and records both pids, then hangs
    hang.write_text(f"#!/bin/sh\nsleep 300 &\necho $$ $! > {pidfile}\nwait\n")
    hang.chmod(0o755)
    proc = subprocess.Popen([*GPUDOCTOR, "check", "torch.install", "--python", str(hang)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_with())
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
    script = "import os, subprocess, sys; subprocess.Popen(['sleep', '60']); print('done'); sys.stdout.flush(); os._exit(0)"
    start = time.monotonic()
    r = SubprocessRunner().run([sys.executable, "-c", script], timeout_s=30)
    assert r.error is None and r.returncode == 0 and r.stdout == "done\n"
    assert time.monotonic() - start < 20


# --------------------------------------------------------------------------- probe budget

def test_a_collector_waiting_for_the_probe_waits_as_long_as_probe_timeout(tmp_path):
    def slow_probe(ctx):
        time.sleep(1.5)  # stands in for a 25 s torch import
        return {"ok": True}

    collectors = {"targets": Collector("targets", slow_probe, timeout_s=0.5, runs_probes=True),
                  "loader": Collector("loader", lambda ctx: dict(ctx.facts["targets"]), requires=("targets",),
                                      timeout_s=0.5)}
    system = System(runner=ScriptedRunner(default=not_found()), files=Files(tmp_path), env={})
    facts, errors = collect_facts(["targets", "loader"], system, CollectOptions(probe_timeout_s=5.0), collectors)
    assert errors == []
    assert facts.domains["loader"] == {"ok": True}
    # with the default probe timeout too short, the same probe is an error naming the budget
    facts, errors = collect_facts(["targets"], system, CollectOptions(probe_timeout_s=0.0),
                                  {"targets": Collector("targets", lambda c: time.sleep(40), timeout_s=0.5,
                                                        runs_probes=True)})
    assert [e.check for e in errors] == ["collect.targets"] and "30 s" in errors[0].summary


# --------------------------------------------------------------------------- plug-ins

def _check(cid, fn):
    return Check(id=cid, title=cid, needs=(), evaluate=fn)


def _raises(exc):
    def fn(facts):
        raise exc
    return fn


@pytest.mark.parametrize("cid, fn, expect", [
    ("p.exit", _raises(SystemExit(3)), "SystemExit"),
    ("p.kbd", _raises(KeyboardInterrupt()), "KeyboardInterrupt"),
    ("p.generator", _raises(GeneratorExit()), "GeneratorExit"),
    ("p.none", lambda facts: None, "NoneType"),
    ("p.str", lambda facts: "all good", "str"),
    ("p.dicts", lambda facts: [{"status": "ok"}], "dict"),
    ("p.int", lambda facts: 42, "int"),
])
def test_a_broken_check_is_an_error_finding_naming_it(cid, fn, expect):
    good = _check("p.good", lambda facts: [Finding("p.good", Status.OK, "fine")])
    findings = evaluate([_check(cid, fn), good], Facts(domains={}))
    assert [f.check for f in findings] == [cid, "p.good"]
    bad = findings[0]
    assert bad.status is Status.ERROR and expect in bad.summary
    assert bad.evidence["provider"].startswith("test_hardening.")
    assert findings[1].status is Status.OK


def test_a_check_past_its_budget_is_abandoned():
    findings = evaluate([_check("p.slow", lambda facts: time.sleep(30)),
                         _check("p.good", lambda facts: [Finding("p.good", Status.OK, "fine")])],
                        Facts(domains={}), check_timeout_s=0.3)
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
    facts, errors = collect_facts(["x", "y"], system, CollectOptions(),
                                  {"x": Collector("x", boom), "y": Collector("y", lambda ctx: {"fine": 1})})
    assert isinstance(facts.domains["x"], Unavailable) and facts.domains["y"] == {"fine": 1}
    assert errors[0].check == "collect.x" and type(exc).__name__ in errors[0].summary
