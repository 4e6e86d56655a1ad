"""The engine with stub checks and collectors: passing, crashing, slow; selection; order; timings."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from gpudoctor.checks import SkipCheck, require
from gpudoctor.collect import CollectOptions, Collector, all_collectors
from gpudoctor.engine import (
    SelectionError,
    collect_facts,
    evaluate,
    needed_domains,
    run,
    select_checks,
)
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.model import Check, Finding, Status
from gpudoctor.registry import load_registry
from gpudoctor.system import Files, System
from gpudoctor.testing import ScriptedRunner, fake_system, make_facts, not_found, shm_facts


@pytest.fixture
def release():
    """An event that stalled stub collectors wait on; set at teardown so their threads end."""
    event = threading.Event()
    yield event
    event.set()


def ok_check(id_, needs=(), summary="fine"):
    return Check(
        id=id_,
        title=f"{id_} title",
        needs=tuple(needs),
        evaluate=lambda facts: [Check(id_, "", (), None).finding(Status.OK, summary)],
    )


def reads(id_, domain):
    """A check that reports the value of ``domain`` (skips when Unavailable)."""

    def evaluate(facts):
        value = facts.get(domain)
        if isinstance(value, Unavailable):
            raise SkipCheck(value.reason)
        return [Check(id_, "", (), None).finding(Status.OK, f"{domain}={value}")]

    return Check(id=id_, title=id_, needs=(domain,), evaluate=evaluate)


def crashing_check(id_):
    def evaluate(facts):
        raise ZeroDivisionError("division by zero in the check")

    return Check(id=id_, title=id_, needs=(), evaluate=evaluate)


def coll(domain, value=None, fn=None, requires=(), timeout_s=5.0):
    return Collector(domain=domain, collect=fn or (lambda ctx: value), requires=tuple(requires), timeout_s=timeout_s)


def system(tmp_path):
    return fake_system(tmp_path)


# ----------------------------------------------------------------- evaluation


def test_passing_crashing_skipping_and_empty_checks_in_given_order():
    checks = [
        ok_check("a.one"),
        crashing_check("b.crash"),
        reads("c.skip", "absent"),
        Check("d.empty", "Empty check", (), lambda facts: []),
        ok_check("e.after"),
    ]
    findings = evaluate(checks, make_facts())
    assert [(f.check, f.status) for f in findings] == [
        ("a.one", Status.OK),
        ("b.crash", Status.ERROR),
        ("c.skip", Status.SKIP),
        ("d.empty", Status.OK),
        ("e.after", Status.OK),
    ]
    crash = findings[1]
    assert crash.summary == "the check itself failed: ZeroDivisionError: division by zero in the check"
    assert "Traceback" in crash.evidence["traceback"] and "ZeroDivisionError" in crash.evidence["traceback"]
    assert findings[2].summary == "the absent facts were not collected"
    assert findings[3].summary == "Empty check: nothing to report"
    assert all(f.duration_ms >= 0 for f in findings)


def test_require_raises_skip_with_the_reason():
    from gpudoctor.facts.host import ShmFacts

    with pytest.raises(SkipCheck, match="statvfs failed"):
        require(make_facts(shm=Unavailable("statvfs failed")), ShmFacts)
    assert require(make_facts(shm=shm_facts()), ShmFacts) == shm_facts()


def test_slow_check_is_timed():
    def slow(facts):
        time.sleep(0.05)
        return [
            Check("s.slow", "", (), None).finding(Status.WARN, "slow"),
            Check("s.slow", "", (), None).finding(Status.INFO, "second"),
        ]

    findings = evaluate([Check("s.slow", "slow", (), slow)], make_facts())
    assert [f.status for f in findings] == [Status.WARN, Status.INFO]
    assert sum(f.duration_ms for f in findings) >= 50


# ----------------------------------------------------------------- collection


def test_only_needed_domains_are_collected_in_dependency_order(tmp_path):
    called = []

    def record(name, value):
        def fn(ctx):
            called.append(name)
            return value

        return fn

    collectors = {
        "base": coll("base", fn=record("base", 1)),
        # collectors start together; reading a required domain waits for it
        "derived": coll(
            "derived", fn=lambda ctx: (ctx.facts["base"] + 1, called.append("derived"))[0], requires=["base"]
        ),
        "unused": coll("unused", fn=record("unused", 0)),
    }
    checks = [reads("x.derived", "derived")]
    domains = needed_domains(checks, collectors)
    assert domains == ["base", "derived"]
    facts, errors = collect_facts(domains, system(tmp_path), CollectOptions(), collectors)
    assert errors == []
    assert facts.domains == {"base": 1, "derived": 2}
    assert called == ["base", "derived"]
    assert set(facts.durations_ms) == {"base", "derived"}


def test_dependency_cycle_is_reported():
    collectors = {"a": coll("a", requires=["b"]), "b": coll("b", requires=["a"])}
    with pytest.raises(RuntimeError, match="cycle"):
        needed_domains([reads("x.a", "a")], collectors)


def test_domain_without_collector_is_unavailable(tmp_path):
    facts, errors = collect_facts(["nobody"], system(tmp_path), CollectOptions(), {})
    assert errors == []
    assert facts.get("nobody") == Unavailable("no collector is installed for the nobody facts")


def test_crashing_collector_becomes_error_finding_and_its_checks_skip(tmp_path):
    def boom(ctx):
        raise KeyError("cpu.max")

    collectors = {"good": coll("good", "G"), "bad": coll("bad", fn=boom)}
    checks = [reads("a.good", "good"), reads("b.bad", "bad")]
    facts, errors = collect_facts(needed_domains(checks, collectors), system(tmp_path), CollectOptions(), collectors)
    (err,) = errors
    assert (err.check, err.status) == ("collect.bad", Status.ERROR)
    assert err.summary == "the bad collector crashed: KeyError: 'cpu.max'"
    assert "Traceback" in err.evidence["traceback"] and "boom" in err.evidence["traceback"]
    findings = evaluate(checks, facts)
    assert [(f.check, f.status, f.summary) for f in findings] == [
        ("a.good", Status.OK, "good=G"),
        ("b.bad", Status.SKIP, "the bad collector crashed: KeyError: 'cpu.max'"),
    ]


def test_collector_overrunning_its_timeout(tmp_path, release):
    collectors = {
        "slow": coll("slow", fn=lambda ctx: release.wait(30) and "late", timeout_s=0.3),
        "fast": coll("fast", "F"),
    }
    checks = [reads("a.slow", "slow"), reads("b.fast", "fast")]
    facts, errors = collect_facts(needed_domains(checks, collectors), system(tmp_path), CollectOptions(), collectors)
    (err,) = errors
    assert err.check == "collect.slow" and err.status is Status.ERROR
    assert err.summary == "collecting the slow facts timed out after 0.3 s"
    assert facts.get("slow") == Unavailable("collecting the slow facts took longer than 0.3 s")
    assert facts.get("fast") == "F"
    assert [f.status for f in evaluate(checks, facts)] == [Status.SKIP, Status.OK]


def test_collectors_of_a_wave_run_in_parallel(tmp_path):
    barrier = threading.Barrier(3, timeout=10)

    def meet(ctx):
        barrier.wait()  # only returns when all three run at once
        return "met"

    collectors = {d: coll(d, fn=meet) for d in ("x", "y", "z")}
    facts, errors = collect_facts(["x", "y", "z"], system(tmp_path), CollectOptions(), collectors)
    assert errors == [] and set(facts.domains.values()) == {"met"}


def test_durations_are_each_collectors_own(tmp_path, release):
    collectors = {"slow": coll("slow", fn=lambda ctx: (release.wait(0.5), "s")[1]), "fast": coll("fast", "f")}
    facts, _ = collect_facts(["slow", "fast"], system(tmp_path), CollectOptions(), collectors)
    assert facts.durations_ms["slow"] >= 400
    assert facts.durations_ms["fast"] < facts.durations_ms["slow"] / 2  # not the time spent waiting for "slow"


def test_run_puts_plugin_and_collector_errors_first(tmp_path, monkeypatch):
    from gpudoctor import engine
    from gpudoctor.model import Finding

    monkeypatch.setattr(engine, "all_collectors", lambda: {"bad": coll("bad", fn=lambda ctx: 1 / 0)})
    plugin = Finding("gpudoctor.plugins", Status.ERROR, "plug-in broke")
    report = run([ok_check("a.ok"), reads("b.bad", "bad")], system(tmp_path), CollectOptions(), extra_findings=[plugin])
    assert [(f.check, f.status) for f in report.findings] == [
        ("gpudoctor.plugins", Status.ERROR),
        ("collect.bad", Status.ERROR),
        ("a.ok", Status.OK),
        ("b.bad", Status.SKIP),
    ]
    assert report.worst is Status.ERROR
    assert report.exit_code() == 3  # incomplete verdict: not healthy, not a machine failure either


def test_run_replays_facts_without_collecting(tmp_path, monkeypatch):
    from gpudoctor import engine

    monkeypatch.setattr(engine, "all_collectors", lambda: pytest.fail("must not collect"))
    report = run([reads("a.x", "x")], system(tmp_path), CollectOptions(), facts=make_facts(x=5))
    assert [f.summary for f in report.findings] == ["x=5"]


def test_builtin_collectors_are_discovered():
    assert set(all_collectors()) >= {"gpu", "nvidia", "os", "cpu", "shm", "targets", "cuda_toolkit"}


# ----------------------------------------------------------------- exit codes


@pytest.mark.parametrize(
    "statuses, normal, strict",
    [
        ([Status.OK, Status.INFO, Status.SKIP], 0, 0),
        ([Status.OK, Status.WARN], 0, 1),
        ([Status.WARN, Status.FAIL], 1, 1),
        ([Status.ERROR], 3, 3),
        ([Status.ERROR, Status.WARN], 3, 1),
        ([Status.ERROR, Status.FAIL], 1, 1),
        ([], 4, 4),  # nothing judged: unknown (issue 32)
        ([Status.SKIP, Status.SKIP], 4, 4),
    ],
)
def test_report_exit_codes(statuses, normal, strict):
    from gpudoctor.engine import Report
    from gpudoctor.model import Finding

    report = Report(tuple(Finding("a.b", s, "x") for s in statuses), make_facts())
    assert (report.exit_code(), report.exit_code(strict=True)) == (normal, strict)


# ----------------------------------------------------------------- selection


CHECKS = {
    c.id: c
    for c in (
        ok_check("nvidia.driver"),
        ok_check("torch.install"),
        ok_check("torch.arch"),
        ok_check("dataloader.shm"),
        ok_check("dataloader.cpu"),
    )
}


@pytest.mark.parametrize(
    "ids, skip, chosen",
    [
        ((), (), ["nvidia.driver", "torch.install", "torch.arch", "dataloader.shm", "dataloader.cpu"]),
        (("torch",), (), ["torch.install", "torch.arch"]),
        (("torch.",), (), ["torch.install", "torch.arch"]),
        (("dataloader.shm", "nvidia"), (), ["nvidia.driver", "dataloader.shm"]),
        ((), ("dataloader",), ["nvidia.driver", "torch.install", "torch.arch"]),
        (("torch",), ("torch.arch",), ["torch.install"]),
    ],
)
def test_select_by_id_prefix_and_skip_keeps_registry_order(ids, skip, chosen):
    assert [c.id for c in select_checks(CHECKS, ids, skip)] == chosen


@pytest.mark.parametrize("ids, skip", [(("cuda",), ()), (("torch.inst",), ()), ((), ("nope",))])
def test_unknown_id_is_a_selection_error_naming_known_checks(ids, skip):
    with pytest.raises(SelectionError, match="no check matches") as exc:
        select_checks(CHECKS, ids, skip)
    assert "torch.install" in str(exc.value)


def test_builtin_order_is_stable_and_causal():
    ids = list(load_registry().checks)
    assert ids == list(load_registry().checks)
    # the causal chain: hardware/driver, then the torch build, then the data pipeline, then package sources
    assert (
        ids.index("nvidia.driver")
        < ids.index("cuda.toolkit")
        < ids.index("torch.install")
        < ids.index("dataloader.cpu")
        < ids.index("pip.config")
    )


# ----------------------------------------------------------------- the doctor never imports torch


def test_doctor_process_never_imports_torch():
    code = (
        "import sys\n"
        "from gpudoctor import engine\n"
        "from gpudoctor.collect import CollectOptions\n"
        "from gpudoctor.registry import load_registry\n"
        "from gpudoctor.system import System\n"
        "from gpudoctor.render import render\n"
        "reg = load_registry()\n"
        "report = engine.run(list(reg.checks.values()), System.live('/'), CollectOptions())\n"
        "render(report, 'json'); render(report, 'markdown')\n"
        "assert any(f.check == 'torch.install' for f in report.findings)\n"
        "print('torch' in sys.modules, 'torch.cuda' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False False"


def test_collector_budgets_scale_with_the_environment(monkeypatch):
    """GPUDOCTOR_COLLECT_TIMEOUT_SCALE multiplies every collector's timeout (a loaded machine);
    unset, the budget is the collector's own."""
    from gpudoctor.engine import collector_budget_s

    coll = Collector(domain="slowish", collect=lambda ctx: {}, timeout_s=10.0)
    assert collector_budget_s(coll, CollectOptions()) == 10.0
    monkeypatch.setenv("GPUDOCTOR_COLLECT_TIMEOUT_SCALE", "3")
    assert collector_budget_s(coll, CollectOptions()) == 30.0


# --------------------------------------------------------------------------- (hardening) plug-ins


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
    assert bad.evidence["provider"].startswith(__name__ + ".")  # this module (was test_hardening.)
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
