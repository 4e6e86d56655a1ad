"""`--format prometheus` (parsed back with prometheus_client's parser) and `gpudoctor report merge`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from prometheus_client.parser import text_string_to_metric_families

from _fakecuda import GccMissing, build_fake_cuda
from gpudoctor.engine import Report
from gpudoctor.facts import Facts
from gpudoctor.fleet import load_reports, merge_summary, merge_table
from gpudoctor.model import Finding, Status
from gpudoctor.render.prometheus import render_prometheus


def _samples(text):
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def _run(*args, env=None, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "gpudoctor", *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd
    )


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUDOCTOR_", "FAKE_CUDA"))}
    env["GPUDOCTOR_CONFIG"] = ""
    env.update(extra)
    return env


def test_state_set_and_severity_per_check():
    facts = Facts(domains={})
    report = Report(
        (
            Finding("a.one", Status.OK, "fine"),
            Finding("b.two", Status.FAIL, "broken", target="current"),
            Finding("b.two", Status.WARN, "meh", target="current"),
            Finding("c.loader", Status.WARN, "slow", evidence={"data_stall_fraction": 0.35}),
        ),
        facts,
    )
    s = _samples(render_prometheus(report, gate={"healthy": False}))
    states = {(l["check"], l["status"]): v for l, v in s["gpudoctor_check_status"]}
    assert states[("b.two", "fail")] == 1 and states[("b.two", "warn")] == 0 and states[("a.one", "ok")] == 1
    assert sum(v for (c, _st), v in states.items() if c == "b.two") == 1  # exactly one state is set
    sev = {l["check"]: v for l, v in s["gpudoctor_check_severity"]}
    assert sev == {"a.one": 0, "b.two": 4, "c.loader": 3}
    assert s["gpudoctor_healthy"][0][1] == 0
    assert s["gpudoctor_data_stall_ratio"] == [({"check": "c.loader", "target": ""}, 0.35)]
    assert {l["status"]: v for l, v in s["gpudoctor_findings"]}["warn"] == 2


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    try:
        return build_fake_cuda(tmp_path_factory.mktemp("fakecuda"))
    except GccMissing:
        pytest.skip("gcc is not installed: cannot build the fake libcuda.so.1")


def test_gate_writes_the_textfile_atomically_and_it_parses(fake, tmp_path):
    site, libdir = fake
    out = tmp_path / "gpudoctor.prom"
    proc = _run(
        "gate",
        "--require-gpus",
        "2",
        "--format",
        "prometheus",
        "-o",
        str(out),
        env=_env(PYTHONPATH=str(site), LD_LIBRARY_PATH=str(libdir), FAKE_CUDA_COUNT="2", FAKE_CUDA_MEM_MIB="81920"),
    )
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["gpudoctor.prom"]  # no temporary file left
    s = _samples(out.read_text())
    assert s["gpudoctor_healthy"][0][1] == 1
    assert s["gpudoctor_gpu_count"][0][1] == 2
    assert {l["gpu"]: v for l, v in s["gpudoctor_gpu_memory_total_bytes"]} == {"0": 81920 * 2**20, "1": 81920 * 2**20}
    states = {(l["check"], l["status"]): v for l, v in s["gpudoctor_check_status"]}
    assert states[("cuda.context", "ok")] == 1 and states[("gate.gpus", "ok")] == 1
    assert s["gpudoctor_info"][0][0]["hostname"]


def test_check_prints_prometheus_to_stdout():
    proc = _run("check", "dataloader.shm", "--format", "prometheus", env=_env())
    s = _samples(proc.stdout)
    assert "dataloader.shm" in {l["check"] for l, _v in s["gpudoctor_check_severity"]}
    assert "gpudoctor_healthy" not in s  # only the gate gives a verdict


# --------------------------------------------------------------------------- report merge


def _report(path, host, statuses):
    findings = [
        {
            "check": c,
            "status": st,
            "summary": f"{c} is {st}",
            "explanation": "",
            "evidence": {},
            "fixes": [],
            "doc_url": None,
            "target": None,
            "duration_ms": 0,
        }
        for c, st in statuses.items()
    ]
    path.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "gpudoctor_version": "x",
                "hostname": host,
                "status": "ok",
                "counts": {},
                "duration_ms": 1,
                "findings": findings,
            }
        )
    )


def test_merge_three_reports_failing_nodes_first(tmp_path):
    _report(tmp_path / "a.json", "gpu-a", {"nvidia.driver": "ok", "cuda.context": "ok"})
    _report(tmp_path / "b.json", "gpu-b", {"nvidia.driver": "ok", "cuda.context": "fail"})
    _report(tmp_path / "c.json", "gpu-c", {"nvidia.driver": "warn", "dataloader.shm": "ok"})
    nodes = load_reports([str(tmp_path)])
    header, rows = merge_table(nodes)
    assert header == ["node", "verdict", "cuda.context", "dataloader.shm", "nvidia.driver"]
    assert rows == [
        ["gpu-b", "FAILING", "FAIL", "-", "ok"],
        ["gpu-c", "warn", "-", "ok", "WARN"],
        ["gpu-a", "healthy", "ok", "-", "ok"],
    ]
    summary = merge_summary(nodes)
    assert summary["nodes"] == 3 and summary["healthy"] == 2
    assert [f["node"] for f in summary["failing"]] == ["gpu-b"]
    assert summary["failing"][0]["failures"] == ["cuda.context: cuda.context is fail"]
    assert summary["by_check"]["nvidia.driver"]["ok"] == 2 and summary["by_check"]["nvidia.driver"]["warn"] == 1


def test_merge_cli_reads_check_reports_and_gate_status_files(tmp_path):
    check = _run("check", "dataloader.shm", "--format", "json", env=_env())
    (tmp_path / "node1.json").write_text(check.stdout)
    nolib = tmp_path / "nolib"
    nolib.mkdir()
    _run(
        "gate",
        "--require-gpus",
        "1",
        "--status-file",
        str(tmp_path / "node2.json"),
        env=_env(LD_LIBRARY_PATH=str(nolib)),
    )
    doc = json.loads((tmp_path / "node2.json").read_text())
    doc["hostname"] = "node2"
    (tmp_path / "node2.json").write_text(json.dumps(doc))
    proc = _run("report", "merge", str(tmp_path / "node1.json"), str(tmp_path / "node2.json"))
    assert proc.returncode == 1  # a node is failing
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:2] == ["node", "verdict"]
    assert lines[1].startswith("node2") and "FAILING" in lines[1]
    assert "node2: gate.gpus: 0 of the 1 required GPUs are visible" in proc.stdout
    js = json.loads(_run("report", "merge", str(tmp_path), "--format", "json").stdout)
    assert js["nodes"] == 2 and js["failing"][0]["node"] == "node2"


def test_merge_bad_input_is_a_usage_error(tmp_path):
    (tmp_path / "x.json").write_text("{not json")
    proc = _run("report", "merge", str(tmp_path / "x.json"))
    assert proc.returncode == 2 and "x.json: not JSON" in proc.stderr and "Traceback" not in proc.stderr
    proc = _run("report", "merge", str(tmp_path / "missing"))
    assert proc.returncode == 2 and "no such file" in proc.stderr


def test_merge_tells_reports_of_one_hostname_apart_by_file(tmp_path):
    _report(tmp_path / "check.json", "gpu-07", {"nvidia.driver": "ok"})
    _report(tmp_path / "gate.json", "gpu-07", {"nvidia.driver": "fail"})
    _report(tmp_path / "other.json", "gpu-08", {"nvidia.driver": "ok"})
    _, rows = merge_table(load_reports([str(tmp_path)]))
    assert [r[0] for r in rows] == ["gpu-07 (gate.json)", "gpu-07 (check.json)", "gpu-08"]


def test_merge_refuses_a_snapshot_a_device_and_binary_data_in_one_line(tmp_path):
    (tmp_path / "facts.json").write_text(json.dumps({"schema_version": 2, "domains": {}}))
    proc = _run("report", "merge", str(tmp_path / "facts.json"))
    assert proc.returncode == 2 and "a facts snapshot, not a report" in proc.stderr
    assert f"gpudoctor check --facts {tmp_path / 'facts.json'} --format json" in proc.stderr
    proc = _run("report", "merge", "/dev/zero")  # once read forever, growing without bound
    assert proc.returncode == 2 and "not a regular file" in proc.stderr
    (tmp_path / "b.json").write_bytes(b"\x00\x01garbage")
    proc = _run("report", "merge", str(tmp_path / "b.json"))
    assert proc.returncode == 2 and "binary" in proc.stderr and "Traceback" not in proc.stderr


def test_check_writes_the_textfile_with_output(tmp_path):
    out = tmp_path / "gpudoctor.prom"
    out.write_text("# stale\n")
    proc = _run("check", "dataloader.shm", "--format", "prometheus", "-o", str(out), env=_env())
    assert proc.returncode in (0, 1), proc.stderr
    assert proc.stdout == ""
    s = _samples(out.read_text())
    assert "dataloader.shm" in {l["check"] for l, _v in s["gpudoctor_check_severity"]}
    assert [p.name for p in tmp_path.iterdir()] == ["gpudoctor.prom"]
