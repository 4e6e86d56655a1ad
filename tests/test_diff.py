"""gpudoctor diff: healthy vs broken twins from the fixtures and the field corpus; the difference
that explains the failing check comes first."""

from __future__ import annotations

import json
import os
from pathlib import Path

from _foundation import run_gpudoctor
from gpudoctor import diffing
from gpudoctor.model import Finding, Status

HERE = Path(__file__).resolve().parent
FIELD = HERE / "field" / "cases" / "gpu"
BROKEN = FIELD / "fooocus-1313-driver-470-torch-cu121" / "facts.json"
HEALTHY = FIELD / "fooocus-1313-twin-driver-535" / "facts.json"
FACTS = HERE / "fixtures" / "facts"


def test_driver_twins_name_the_driver_first_with_the_checks_it_explains():
    proc = run_gpudoctor("diff", str(HEALTHY), str(BROKEN), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert {(c["check"], c["a"], c["b"]) for c in doc["checks"]} >= {("cuda.driver", "ok", "fail")}
    first = doc["facts"][0]
    assert first["path"] in ("nvidia.driver_version", "nvidia.cuda_driver_version")
    assert "cuda.driver" in first["explains"]
    paths = [f["path"] for f in doc["facts"]]
    assert "nvidia.driver_version" in paths[:3]


def test_the_console_report_reads_a_to_b():
    proc = run_gpudoctor("diff", str(HEALTHY), str(BROKEN))
    assert proc.returncode == 1
    assert "cuda.driver     ok → fail" in proc.stdout
    assert "A: 535.183.01" in proc.stdout and "B: 470.86" in proc.stdout
    assert proc.stdout.index("checks whose verdict differs") < proc.stdout.index("facts that differ")


def test_a_snapshot_against_itself_does_not_differ():
    proc = run_gpudoctor("diff", str(BROKEN), str(BROKEN))
    assert proc.returncode == 0 and "do not differ" in proc.stdout


def test_two_reports_compare_verdicts_and_say_facts_are_needed(tmp_path):
    reports = []
    for name, src in (("a", HEALTHY), ("b", BROKEN)):
        out = tmp_path / f"{name}.json"
        run_gpudoctor("check", "--facts", str(src), "--format", "json", "-o", str(out))
        reports.append(str(out))
    proc = run_gpudoctor("diff", *reports, "--format", "markdown")
    assert proc.returncode == 1
    assert "| `cuda.driver` | ok | fail |" in proc.stdout and "reports carry no facts" in proc.stdout


def test_a_report_and_a_snapshot_are_a_usage_error(tmp_path):
    report = tmp_path / "r.json"
    run_gpudoctor("check", "--facts", str(BROKEN), "--format", "json", "-o", str(report))
    proc = run_gpudoctor("diff", str(report), str(BROKEN))
    assert proc.returncode == 2 and "compare two of the same kind" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    other = tmp_path / "x.json"
    other.write_text('{"hello": 1}')
    proc = run_gpudoctor("diff", str(other), str(BROKEN))
    assert proc.returncode == 2 and "neither a facts snapshot" in proc.stderr


def test_a_cpu_build_on_a_gpu_node_against_the_cuda_build():
    """Another pair of fixtures: the same kind of node, torch's build is what differs."""
    proc = run_gpudoctor(
        "diff",
        str(FACTS / "case01-driver-470-torch-cu121.json"),
        str(FACTS / "gpu-driver-550-cpu-torch.json"),
        "--format",
        "json",
    )
    doc = json.loads(proc.stdout)
    paths = [f["path"] for f in doc["facts"] if f["explains"]]
    assert any(p.endswith("probe.torch.cuda") or p.endswith("torch.version") for p in paths[:12]), paths[:12]


def test_flatten_keys_records_by_their_id_and_drops_timings():
    flat = dict(
        diffing.flatten(
            {
                "targets": [{"label": "current", "duration_ms": 5, "env": {"LD_LIBRARY_PATH": "/opt/a"}}],
                "arch": ["sm_80", "sm_90"],
            }
        )
    )
    assert flat == {
        "targets[label=current].label": "current",
        "targets[label=current].env.LD_LIBRARY_PATH": "/opt/a",
        "arch": ["sm_80", "sm_90"],
    }


def test_checks_that_got_worse_come_first():
    a = [Finding("x.one", Status.OK, "fine"), Finding("x.two", Status.OK, "fine")]
    b = [Finding("x.one", Status.WARN, "slow"), Finding("x.two", Status.FAIL, "broken")]
    assert [c.check for c in diffing.diff_findings(a, b)] == ["x.two", "x.one"]


def _report_with(tmp_path, name, findings):
    report = tmp_path / "good.json"
    if not report.exists():
        run_gpudoctor("check", "--facts", str(HEALTHY), "--format", "json", "-o", str(report))
    doc = json.loads(report.read_text())
    doc["findings"] = findings
    bad = tmp_path / name
    bad.write_text(json.dumps(doc))
    return str(report), str(bad)


def _one_line_2(proc, *texts):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    for text in texts:
        assert text in proc.stderr, proc.stderr


def test_a_malformed_finding_names_the_file_and_the_finding(tmp_path):
    good, bad = _report_with(tmp_path, "a.json", [{"check": "x", "status": "fail", "summary": "s"}, "str"])
    _one_line_2(run_gpudoctor("diff", good, bad), f"{bad}: not a gpudoctor report: findings[1] is not an object")
    good, bad = _report_with(tmp_path, "b.json", [{"check": "x"}])
    _one_line_2(run_gpudoctor("diff", bad, good), f"{bad}: not a gpudoctor report: findings[0] has no 'status' key")
    good, bad = _report_with(tmp_path, "c.json", [{"check": "x", "status": "weird", "summary": "s"}])
    _one_line_2(run_gpudoctor("diff", good, bad), f"{bad}: not a gpudoctor report: findings[0]:", "weird")


def test_a_snapshot_of_the_wrong_shape_names_its_file(tmp_path):
    doc = json.loads(BROKEN.read_text())
    doc["domains"] = dict.fromkeys(doc["domains"], "x")
    bad = tmp_path / "wrong-types.json"
    bad.write_text(json.dumps(doc))
    _one_line_2(run_gpudoctor("diff", str(HEALTHY), str(bad)), f"{bad}: not a gpudoctor facts snapshot: $.domains.")


def test_hostile_files_are_one_line_and_exit_2(tmp_path):
    cases = {
        "broken.json": (b'{"a":', "not JSON"),
        "binary.json": (b"\x00\x01", "a binary file"),
        "deep.json": (b"[" * 100000 + b"]" * 100000, "JSON nested deeper than 64"),
        "foreign.json": (b'{"foo": 1}', "neither a facts snapshot"),
        "huge.json": (b'{"x": "' + b"a" * (65 * 1024 * 1024) + b'"}', "too large"),
    }
    for name, (content, text) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        _one_line_2(
            run_gpudoctor("diff", str(HEALTHY), str(path)), f"{path}: {text}" if name != "foreign.json" else text
        )
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    _one_line_2(run_gpudoctor("diff", str(HEALTHY), str(fifo), timeout=60), "not a regular file")


def test_output_to_a_fifo_or_a_directory_is_refused_before_comparing(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for target, text in ((fifo, "is a FIFO (named pipe)"), (tmp_path, "is a directory")):
        proc = run_gpudoctor("diff", str(HEALTHY), str(BROKEN), "-o", str(target), timeout=60)
        _one_line_2(proc, f"-o {target}: {text}", "`-o -` writes to stdout")


def test_output_over_an_input_is_refused_and_the_input_kept(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_bytes(HEALTHY.read_bytes())
    b.write_bytes(BROKEN.read_bytes())
    link = tmp_path / "link.json"
    link.symlink_to(b)
    for out, named in ((a, a), (link, b)):
        proc = run_gpudoctor("diff", str(a), str(b), "-o", str(out))
        _one_line_2(proc, f"-o {out}: is the input file {named}")
    assert a.read_bytes() == HEALTHY.read_bytes() and b.read_bytes() == BROKEN.read_bytes()
    # the neighbour: check --facts FILE -o FILE; the healthy twin: a new output file is written
    proc = run_gpudoctor("check", "--facts", str(a), "--format", "json", "-o", str(a))
    _one_line_2(proc, f"-o {a}: is the input file {a}")
    assert a.read_bytes() == HEALTHY.read_bytes()
    proc = run_gpudoctor("diff", str(a), str(b), "-o", str(tmp_path / "d.txt"))
    assert proc.returncode == 1 and "cuda.driver" in (tmp_path / "d.txt").read_text()


def _many_packages(tmp_path, name, shift):
    doc = json.loads((FACTS / "gpu" / "driver-too-old-a100.json").read_text())
    dists = [{"name": f"pkg{i}", "version": f"1.{i + shift}"} for i in range(1000)]
    doc["domains"]["cuda_wheels"]["targets"][0]["dists"] = dists
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_thousands_of_differing_facts_are_capped_in_text_and_whole_in_json(tmp_path):
    a, b = _many_packages(tmp_path, "a.json", 0), _many_packages(tmp_path, "b.json", 1)
    text = run_gpudoctor("diff", a, b)
    assert text.returncode == 1
    assert "facts that differ (1000):" in text.stdout  # no check differs: no "checks above" to explain
    assert "checks whose verdict differs" not in text.stdout
    assert text.stdout.count("      A: ") == 200 and "... and 800 more (--format json lists them all)" in text.stdout
    md = run_gpudoctor("diff", a, b, "--format", "markdown")
    assert "... and 800 more facts" in md.stdout
    doc = json.loads(run_gpudoctor("diff", a, b, "--format", "json").stdout)
    assert len(doc["facts"]) == 1000


def test_the_twins_keep_the_explaining_order_heading():
    proc = run_gpudoctor("diff", str(HEALTHY), str(BROKEN))
    assert "facts that differ (" in proc.stdout and "those that can explain the checks above first" in proc.stdout


def test_stdin_serves_one_side_only(tmp_path):
    both = run_gpudoctor("diff", "-", "-", input=BROKEN.read_text())
    _one_line_2(both, "A and B are both stdin")
    one = run_gpudoctor("diff", str(HEALTHY), "-", input=BROKEN.read_text())
    assert one.returncode == 1 and "cuda.driver     ok → fail" in one.stdout


def test_a_domain_this_gpudoctor_does_not_know_still_differs(tmp_path):
    """A snapshot from a newer release carries a domain this one cannot decode: it is still compared."""
    doc = json.loads(BROKEN.read_text())
    doc["domains"]["from_the_future"] = {"x": 1}
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps(doc))
    proc = run_gpudoctor("diff", str(BROKEN), str(newer), "--format", "json")
    assert proc.returncode == 1
    assert [f["path"] for f in json.loads(proc.stdout)["facts"]] == ["from_the_future.x"]
