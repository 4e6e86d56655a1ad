"""The entrypoint gate: blocks on failures and unmet requirements, execs the job when healthy.

The CLI tests run the real `gpudoctor gate` in a child process. The unhealthy and
healthy fixtures are a fake CUDA stack (gcc-built libcuda.so.1 on LD_LIBRARY_PATH,
a fake CUDA torch on PYTHONPATH) that the light probe in the job's interpreter sees.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _fakecuda import GccMissing, build_fake_cuda
from gpudoctor.gate import (
    GateOptions,
    gate_checks,
    gate_until_healthy,
    run_gate,
    write_atomic,
)
from gpudoctor.model import Check, Status

FIXTURES = Path(__file__).parent / "fixtures" / "facts"
from gpudoctor.registry import load_registry
from gpudoctor.testing import fake_system


def _check(cid, status, tags=("gate",)):
    return Check(
        id=cid,
        title=cid,
        needs=(),
        tags=tags,
        evaluate=lambda facts: [Check(cid, cid, (), lambda f: []).finding(status, f"{cid} says {status.value}")],
    )


def test_gate_selects_only_tagged_checks():
    checks = {c.id: c for c in (_check("a.one", Status.OK), _check("b.two", Status.OK, tags=()))}
    assert [c.id for c in gate_checks(checks)[0]] == ["a.one"]
    assert gate_checks(checks, skip=["a"])[0] == []
    assert [c.id for c in gate_checks(checks, ids=["b"])[0]] == ["b.two"]


def test_builtin_gate_runs_light_checks_and_leaves_full_ones_to_deep():
    registry = load_registry().checks
    chosen, left_out = gate_checks(registry)
    ids = {c.id for c in chosen}
    assert set(left_out) == {"cuda.libraries", "cuda.wsl", "platform.driver-branch", "platform.visibility"}
    assert {"nvidia.driver", "torch.install", "dataloader.shm", "cuda.context", "cudnn.load"} <= ids
    assert all("targets" not in c.needs or c.probe_level == "light" for c in chosen)
    deep, none_left = gate_checks(registry, deep=True)
    assert none_left == [] and {c.id for c in deep} == ids | set(left_out)


def test_builtin_gate_ids_are_exactly_the_gate_tagged_builtins():
    from gpudoctor.gate import BUILTIN_GATE_IDS, load_gate_registry

    reg = load_registry()
    own = {cid for cid in reg.checks if reg.provider(cid).split(" ")[0] == "gpudoctor"}
    assert BUILTIN_GATE_IDS == {cid for cid in own if "gate" in reg.checks[cid].tags}
    from gpudoctor.gate import BUILTIN_DEEP_ONLY

    light = load_gate_registry()
    assert set(light.checks) == (BUILTIN_GATE_IDS - BUILTIN_DEEP_ONLY) | (set(reg.checks) - own) and not light.fixes
    assert set(light.check_ids) == set(reg.checks)  # unknown --skip ids are still recognised
    assert set(load_gate_registry(deep=True).checks) >= BUILTIN_GATE_IDS
    # deep-only: the gate-tagged built-ins the light probe does not serve (or whose collector is costly)
    assert BUILTIN_DEEP_ONLY == {
        cid for cid in BUILTIN_GATE_IDS if "targets" in reg.checks[cid].needs and reg.checks[cid].probe_level != "light"
    }


def test_fail_blocks_and_warn_blocks_only_when_strict(tmp_path):
    system = fake_system(tmp_path)
    warn = [_check("x.warn", Status.WARN)]
    cpu = GateOptions(require_gpus=0)  # a CPU node, declared: no GPU is healthy
    assert run_gate(warn, system, cpu).healthy
    strict = run_gate(warn, system, GateOptions(require_gpus=0, strict=True))
    assert not strict.healthy and [(r, f.check) for r, f in strict.blocking] == [("warning", "x.warn")]
    failed = run_gate([_check("x.ok", Status.OK), _check("x.fail", Status.FAIL)], system, cpu)
    assert not failed.healthy and [(r, f.check) for r, f in failed.blocking] == [("failed", "x.fail")]


def test_wait_loop_retries_until_healthy_and_gives_up_on_time():
    now = [0.0]
    sleeps = []

    def sleep(s):
        sleeps.append(s)
        now[0] += s

    results = iter([False, False, True])

    class R:
        def __init__(self, healthy):
            self.healthy = healthy

    result, tries = gate_until_healthy(lambda: R(next(results)), 60, 5, clock=lambda: now[0], sleep=sleep)
    assert result.healthy and tries == 3 and sleeps == [5, 5]
    now[0] = 0.0
    sleeps.clear()
    result, tries = gate_until_healthy(lambda: R(False), 12, 5, clock=lambda: now[0], sleep=sleep)
    assert not result.healthy and tries == 4 and sleeps == [5, 5, 2]  # never sleeps past the deadline
    result, tries = gate_until_healthy(lambda: R(False), 0, 5, clock=lambda: now[0], sleep=sleep)
    assert tries == 1


def test_write_atomic_replaces_whole_file_or_leaves_the_old_one(tmp_path, monkeypatch):
    target = tmp_path / "status.json"
    target.write_text("old\n")
    inode = target.stat().st_ino
    write_atomic(str(target), "new\n")
    assert target.read_text() == "new\n" and target.stat().st_ino != inode  # renamed over, not rewritten
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with pytest.raises(OSError):
        write_atomic(str(target), "partial")
    assert target.read_text() == "new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["status.json"]  # no temporary file left behind


# --------------------------------------------------------------------------- the real CLI


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    try:
        return build_fake_cuda(tmp_path_factory.mktemp("fakecuda"))
    except GccMissing:
        pytest.skip("gcc is not installed: cannot build the fake libcuda.so.1")


def _env(fake=None, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_CUDA", "GPUDOCTOR_"))}
    env["GPUDOCTOR_CONFIG"] = ""  # no config file unless a test asks for one
    if fake:
        site, libdir = fake
        env.update(PYTHONPATH=str(site), LD_LIBRARY_PATH=str(libdir))
    env.update(extra)
    return env


def _gate(*args, env=None, cwd=None, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "gpudoctor", "gate", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or _env(),
        cwd=cwd,
    )


def test_healthy_gate_execs_the_job_in_the_same_process(fake, tmp_path):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpudoctor",
            "gate",
            "--require-gpus",
            "2",
            "--",
            sys.executable,
            "-c",
            "import os, sys; print(os.getpid()); sys.exit(7)",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(fake, FAKE_CUDA_COUNT="2"),
    )
    out, err = proc.communicate(timeout=120)
    # same PID (exec, not a child) and the job's own exit status
    assert proc.returncode == 7, err
    assert int(out.strip()) == proc.pid
    assert "healthy" in err


def test_unhealthy_node_exits_1_and_never_runs_the_job(fake, tmp_path):
    marker = tmp_path / "ran"
    job = ["--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    proc = _gate(*job, env=_env(fake, FAKE_CUDA_COUNT="2", FAKE_CUDA_CTX_FAIL="1"))
    assert proc.returncode == 1, proc.stderr
    assert not marker.exists()
    lines = [l for l in proc.stderr.splitlines() if l.startswith("gpudoctor gate: failed:")]
    assert len(lines) == 1 and "cuda.context" in lines[0] and "CUDA_ERROR_UNKNOWN" in lines[0]
    assert "-> nvidia-smi" in lines[0]  # the remedy's command on the same line
    assert "job not started" in proc.stderr


def test_missing_required_gpus_are_labelled_required_not_skip(fake, tmp_path):
    marker = tmp_path / "ran"
    proc = _gate(
        "--require-gpus",
        "4",
        "--min-gpu-memory-gib",
        "80",
        "--",
        sys.executable,
        "-c",
        f"open({str(marker)!r}, 'w')",
        env=_env(fake, FAKE_CUDA_COUNT="2", FAKE_CUDA_MEM_MIB="40960"),
    )
    assert proc.returncode == 1 and not marker.exists()
    assert (
        "gpudoctor gate: required: gate.gpus: 2 of the 4 required GPUs are visible "
        "(counted by the CUDA driver API in the job's interpreter)"
    ) in proc.stderr
    assert "gpudoctor gate: required: gate.gpu-memory: GPU memory below the required 80 GiB" in proc.stderr
    assert "skip" not in "\n".join(l for l in proc.stderr.splitlines() if "gate.gpus" in l)


def test_no_gpu_at_all_with_a_requirement_blocks(tmp_path):
    empty = tmp_path / "nolib"
    empty.mkdir()
    proc = _gate("--require-gpus", "1", "--format", "json", env=_env(LD_LIBRARY_PATH=str(empty)))
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["healthy"] is False and doc["checks"]["gate.gpus"] == "fail"
    assert doc["failures"][0]["reason"] == "required"
    # the reason no GPU is counted follows a colon (it read "(from libcuda.so.1 cannot be loaded (...))")
    assert doc["failures"][0]["summary"].startswith(
        "0 of the 1 required GPUs are visible: libcuda.so.1 cannot be loaded in the job's interpreter ("
    )


def test_unknown_ids_are_usage_errors():
    for args in (["--skip", "no.such"], ["--checks", "cuda.driver,no.such"]):
        proc = _gate(*args)
        assert proc.returncode == 2, proc.stderr
        assert "no check matches 'no.such'" in proc.stderr


def test_wait_retries_until_the_gpus_come_up(fake, tmp_path):
    count = tmp_path / "count"
    count.write_text("0")
    status = tmp_path / "status.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpudoctor",
            "gate",
            "--require-gpus",
            "1",
            "--wait",
            "120",
            "--interval",
            "0.5",
            "--status-file",
            str(status),
            "--",
            sys.executable,
            "-c",
            "print('job ran')",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(fake, FAKE_CUDA_COUNT_FILE=str(count)),
    )
    first = proc.stderr.readline()  # the first attempt found no GPU ...
    assert "not healthy yet" in first and "gate.gpus" in first and "retrying" in first
    count.write_text("1")  # ... then the node's GPU comes up
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "job ran" in out
    doc = json.loads(status.read_text())
    assert doc["healthy"] is True and doc["attempts"] >= 2 and doc["checks"]["gate.gpus"] == "ok"


def test_wait_gives_up_when_the_time_is_up(fake, tmp_path):
    status = tmp_path / "status.json"
    marker = tmp_path / "ran"
    start = time.monotonic()
    proc = _gate(
        "--require-gpus",
        "1",
        "--wait",
        "3",
        "--interval",
        "1",
        "--status-file",
        str(status),
        "--",
        sys.executable,
        "-c",
        f"open({str(marker)!r}, 'w')",
        env=_env(fake, FAKE_CUDA_COUNT="0"),
    )
    elapsed = time.monotonic() - start
    assert proc.returncode == 1 and not marker.exists()
    assert elapsed >= 3
    doc = json.loads(status.read_text())
    assert doc["healthy"] is False and doc["attempts"] >= 2
    assert {"healthy", "time", "hostname", "checks", "failures"} <= set(doc)
    assert f"after {doc['attempts']} attempts over 3 s" in proc.stderr


def test_status_file_unwritable_is_a_usage_error(tmp_path):
    proc = _gate("--status-file", str(tmp_path / "missing-dir" / "s.json"))
    assert proc.returncode == 2 and "--status-file" in proc.stderr and "Traceback" not in proc.stderr


def test_gate_reports_a_missing_command_with_127():
    proc = _gate("-q", "--require-gpus", "0", "--", "/nonexistent/job")
    assert proc.returncode == 127
    assert "cannot start /nonexistent/job" in proc.stderr


def test_the_gate_does_not_look_for_jupyter_kernels():
    from gpudoctor.system import System

    checks = [c for c in gate_checks(load_registry().checks)[0] if c.id == "torch.install"]
    result = run_gate(checks, System.live())
    jupyter = result.report.facts.get("jupyter")
    assert "gate leaves them out" in jupyter.reason
    targets = result.report.facts.get("targets").targets
    assert "kernel" not in [t.kind for t in targets]
    assert targets[0].probe.level == "light"


def test_collectors_for_imports_only_what_the_selection_needs():
    from gpudoctor.collect import all_collectors, collectors_for

    every = all_collectors()
    some = collectors_for(["targets", "shm"])
    assert set(some) == {"targets", "jupyter", "shm", "os", "cpu"}  # targets requires jupyter; host.py holds 3
    assert all(some[d] is every[d] for d in some)
    assert set(collectors_for(["no-such-domain"])) == set(every)  # unknown: everything, as before


def test_the_light_gate_does_not_import_the_modules_of_the_domains_it_leaves_out():
    """Stand-ins replace the Jupyter and CUDA-library collectors before their modules are imported
    (each costs the gate imports on every container start); with --deep the real ones run."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from gpudoctor.gate import GateOptions, _gate_collectors, gate_checks, load_gate_registry\n"
        "deep = sys.argv[1] == 'deep'\n"
        "checks, _ = gate_checks(load_gate_registry(deep=deep).checks, deep=deep)\n"
        "found = _gate_collectors(checks, GateOptions(deep=deep))\n"
        "print(sorted(m for m in sys.modules if m in ('gpudoctor.collect.jupyter', 'gpudoctor.collect.libraries')))\n"
        "print(found['jupyter'].collect.__module__, found['cuda_libraries'].collect.__module__)\n"
    )
    light = subprocess.run([sys.executable, "-c", code, "light"], capture_output=True, text=True, timeout=120)
    assert light.returncode == 0 and light.stdout.splitlines() == ["[]", "gpudoctor.gate gpudoctor.gate"], (
        light.returncode,
        light.stdout,
        light.stderr[-3000:],
    )
    deep = subprocess.run([sys.executable, "-c", code, "deep"], capture_output=True, text=True, timeout=120)
    assert deep.returncode == 0, deep.stderr[-3000:]
    assert deep.stdout.splitlines() == [
        "['gpudoctor.collect.jupyter', 'gpudoctor.collect.libraries']",
        "gpudoctor.collect.jupyter gpudoctor.collect.libraries",
    ]


def test_deep_uses_the_full_probe_and_light_says_the_import_was_not_tried(fake):
    import dataclasses

    from gpudoctor.system import System

    system = dataclasses.replace(System.live(), env=_env(fake, FAKE_CUDA_COUNT="1"))
    checks = [load_registry().checks["torch.install"]]
    light = run_gate(checks, system, GateOptions())
    deep = run_gate(checks, system, GateOptions(deep=True))
    probe = lambda r: r.report.facts.get("targets").targets[0].probe
    assert probe(light).level == "light" and probe(deep).level == "full"
    [lf] = [f for f in light.report.findings if f.check == "torch.install"]
    [df] = [f for f in deep.report.findings if f.check == "torch.install"]
    assert "is installed (import not tried: light probe)" in lf.summary
    assert "(CUDA 12.4 build) imports in" in df.summary
    assert light.healthy and deep.healthy


def test_a_torch_that_cannot_import_blocks_only_the_deep_gate(fake, tmp_path):
    import dataclasses
    import shutil

    from gpudoctor.system import System

    site, libdir = fake
    broken = tmp_path / "site"
    shutil.copytree(site, broken, symlinks=True)
    (broken / "torch" / "__init__.py").write_text("raise OSError('libtorch_cuda.so: cannot open shared object file')\n")
    system = dataclasses.replace(System.live(), env=_env((broken, libdir), FAKE_CUDA_COUNT="1"))
    checks = [load_registry().checks["torch.install"]]
    assert run_gate(checks, system, GateOptions()).healthy  # the light gate reads files only
    deep = run_gate(checks, system, GateOptions(deep=True))
    assert not deep.healthy and "libtorch_cuda.so" in deep.blocking[0][1].summary


def test_output_file_with_the_text_format_is_refused_not_ignored(tmp_path):
    """`gate -o FILE` without --format json/prometheus once exited 0 and wrote nothing."""
    out = tmp_path / "gate.txt"
    proc = _gate("-o", str(out))
    assert proc.returncode == 2 and "only --format json or prometheus" in proc.stderr and not out.exists()
    # the hint is the command to run instead, the job included
    job = _gate("-o", str(out), "--", "python", "train.py", "--lr", "1e-3")
    assert job.returncode == 2 and not out.exists()
    assert f"gpudoctor gate --format json -o {out} -- python train.py --lr 1e-3" in job.stderr.replace("\n", " ")
    ok = _gate("-o", str(out), "--format", "json")
    assert ok.returncode in (0, 1) and "healthy" in json.loads(out.read_text())


def test_the_gate_prints_one_line_per_root_cause_with_its_first_command():
    from gpudoctor.gate import blocking_line, root_blocking
    from gpudoctor.model import Command, Finding, Status

    driver = Finding(
        "nvidia.driver", Status.FAIL, "no driver", commands=(Command("sudo ubuntu-drivers install", "", "root"),)
    )
    head = Finding(
        "cuda.available",
        Status.FAIL,
        "CUDA is unavailable: no driver",
        target="current",
        evidence={"root_cause_check": "nvidia.driver"},
    )
    libcuda = Finding("cuda.libcuda", Status.FAIL, "no libcuda", target="current", caused_by=("nvidia.driver",))
    shm = Finding("dataloader.shm", Status.FAIL, "/dev/shm is 64 MiB")
    blocking = [("failed", head), ("failed", driver), ("failed", libcuda), ("failed", shm)]
    assert root_blocking(blocking) == (("failed", driver), ("failed", shm))
    assert root_blocking([("failed", head)]) == (("failed", head),)  # its cause is not blocking: it stays
    assert blocking_line("failed", driver) == (
        "gpudoctor gate: failed: nvidia.driver: no driver -> sudo ubuntu-drivers install"
    )
    assert blocking_line("failed", shm) == "gpudoctor gate: failed: dataloader.shm: /dev/shm is 64 MiB"


# --------------------------------------------------------------------------- no GPU visible (issue 32, item 4)


def test_a_node_without_a_gpu_is_not_healthy_unless_declared_a_cpu_node(tmp_path):
    """This machine has no GPU: the gate said "healthy" here by default, as if it had vouched for GPUs."""
    undeclared = _gate()
    assert undeclared.returncode == 1, undeclared.stderr
    assert "gpudoctor gate: required: gate.gpus: no GPU is visible" in undeclared.stderr
    assert "--require-gpus 0" in undeclared.stderr and "Traceback" not in undeclared.stderr
    for declared in (
        _gate("--require-gpus", "0"),
        _gate(env=_env(GPUDOCTOR_REQUIRE_GPUS="0")),
    ):
        assert declared.returncode == 0, declared.stderr
        assert declared.stderr.startswith("gpudoctor gate: healthy: no GPU visible: a CPU node, as --require-gpus 0")
    conf = tmp_path / "gpudoctor.toml"
    conf.write_text("[gate]\nrequire-gpus = 0\n")
    from_file = _gate("--format", "json", env=_env(GPUDOCTOR_CONFIG=str(conf)))
    doc = json.loads(from_file.stdout)
    assert from_file.returncode == 0 and doc["healthy"] is True and doc["checks"]["gate.gpus"] == "info"


def test_a_gpu_node_is_healthy_without_declaring_anything_and_says_how_many(fake):
    proc = _gate(env=_env(fake, FAKE_CUDA_COUNT="2"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("gpudoctor gate: healthy: 2 GPUs visible (counted by the CUDA driver API")
    lost = _gate("--format", "json", env=_env(fake, FAKE_CUDA_COUNT="0"))  # the GPUs went away
    assert lost.returncode == 1 and json.loads(lost.stdout)["checks"]["gate.gpus"] == "fail"


def test_requirement_findings_without_a_declaration(tmp_path):
    from gpudoctor.facts import Facts
    from gpudoctor.gate import requirement_findings

    facts = Facts.from_json(json.loads((FIXTURES / "no-gpu-cpu-torch.json").read_text()))
    [undeclared] = requirement_findings(facts, GateOptions())
    assert undeclared.status is Status.FAIL and "--require-gpus 0" in undeclared.summary
    [cpu] = requirement_findings(facts, GateOptions(require_gpus=0))
    assert cpu.status is Status.INFO and cpu.summary.startswith("no GPU visible: a CPU node")
    assert [f.status for f in requirement_findings(facts, GateOptions(require_gpus=2))] == [Status.FAIL]
