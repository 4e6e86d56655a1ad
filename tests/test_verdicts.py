"""Verdicts that never claim more than was judged (issue 32, item 4).

A run that judged nothing is "unknown" with exit code 4, never OK; a setting that hides GPUs on a
machine without a GPU is not a failure; a remedy another finding of the run rules out is not offered.
(The gate's "no GPU visible" line is tested with the real gate in test_gate.py.)
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

from gpudoctor.engine import EXIT_UNKNOWN, Report
from gpudoctor.facts import Facts
from gpudoctor.model import Finding, Status

FIXTURES = Path(__file__).parent / "fixtures" / "facts"


def _check(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "gpudoctor", "check", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), "GPUDOCTOR_CONFIG": "", "NO_COLOR": "1"},
    )


def test_a_run_that_judged_nothing_is_unknown_with_its_own_exit_code(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text('{"schema_version": 2, "domains": {}}')
    console = _check("--facts", str(empty), cwd=tmp_path)
    assert console.returncode == EXIT_UNKNOWN == 4, console.stderr
    assert console.stdout.startswith("[n/a] gpudoctor: UNKNOWN — the snapshot holds no facts: nothing was judged")
    doc = json.loads(_check("--facts", str(empty), "--format", "json", cwd=tmp_path).stdout)
    assert doc["status"] == "unknown" and doc["counts"]["skip"] == len(doc["findings"]) > 0
    md = _check("--facts", str(empty), "--format", "markdown", cwd=tmp_path)
    assert md.returncode == 4 and "**unknown**" in md.stdout
    # a snapshot that holds only domains this gpudoctor does not know: as empty
    foreign = tmp_path / "foreign.json"
    foreign.write_text('{"schema_version": 2, "domains": {"martian": {"x": 1}}}')
    proc = _check("--facts", str(foreign), cwd=tmp_path)
    assert proc.returncode in (2, 4) and "Traceback" not in proc.stderr
    assert "OK" not in proc.stdout.split("\n", 1)[0]


def test_a_selection_that_applies_nowhere_here_is_unknown_but_a_judged_one_is_not(tmp_path):
    snap = str(FIXTURES / "no-gpu-cpu-torch.json")
    nothing = _check("--facts", snap, "cuda.context", "cuda.arch", cwd=tmp_path)  # no GPU: neither applies
    assert nothing.returncode == 4 and "UNKNOWN" in nothing.stdout.split("\n", 1)[0], nothing.stdout
    judged = _check("--facts", snap, "torch.install", cwd=tmp_path)  # the healthy twin: judged, exit 0
    assert judged.returncode == 0 and "UNKNOWN" not in judged.stdout, judged.stdout


def test_report_exit_codes_order_fail_error_unknown_ok():
    facts = Facts.from_json({"schema_version": 2, "domains": {}})

    def report(*statuses):
        return Report(tuple(Finding(f"x.{i}", s, "s") for i, s in enumerate(statuses)), facts)

    assert report().exit_code() == 4 and report(Status.SKIP).verdict_word == "unknown"
    assert report(Status.SKIP, Status.INFO).exit_code() == 0 and report(Status.SKIP, Status.OK).verdict_word == "ok"
    assert report(Status.SKIP, Status.WARN).exit_code() == 0 and report(Status.SKIP, Status.WARN).verdict_word == "warn"
    assert report(Status.SKIP, Status.WARN).exit_code(strict=True) == 1
    assert report(Status.SKIP, Status.ERROR).exit_code() == 3
    assert report(Status.SKIP, Status.FAIL, Status.ERROR).exit_code() == 1


def _visibility(doc):
    from gpudoctor.checks import platform_visibility

    return platform_visibility.evaluate(Facts.from_json(doc))


def _with_env(doc, **env):
    doc = copy.deepcopy(doc)
    doc["domains"]["targets"]["targets"][0]["probe"]["env"] = env
    return doc


def test_hiding_gpus_on_a_machine_without_a_gpu_is_not_a_failure():
    base = json.loads((FIXTURES / "no-gpu-cpu-torch.json").read_text())
    for value in ("", "-1", "NoDevFiles"):
        [f] = _visibility(_with_env(base, CUDA_VISIBLE_DEVICES=value))
        assert f.status is Status.OK and "has none to hide" in f.summary, f.summary
    # the neighbour: NVIDIA_VISIBLE_DEVICES=void in a pod on a CPU node
    [pod] = _visibility(_with_env(base, NVIDIA_VISIBLE_DEVICES="void", KUBERNETES_SERVICE_HOST="10.0.0.1"))
    assert pod.status is Status.OK
    # the twin: a GPU on the PCI bus, so the same setting does hide it
    gpu = copy.deepcopy(base)
    gpu["domains"]["gpu"]["devices"] = [
        {"bus_id": "0000:01:00.0", "vendor_id": "0x10de", "device_id": "0x2330", "class_code": "0x030200"}
    ]
    [hidden] = _visibility(_with_env(gpu, CUDA_VISIBLE_DEVICES=""))
    assert hidden.status is Status.FAIL and "hides every GPU" in hidden.summary
    # unknown PCI bus (sysfs unreadable): no claim either way, the old verdict stands
    blind = copy.deepcopy(base)
    blind["domains"]["gpu"]["sysfs_readable"] = False
    [unsure] = _visibility(_with_env(blind, CUDA_VISIBLE_DEVICES=""))
    assert unsure.status is Status.FAIL


def _nvidia_driver(doc):
    from gpudoctor.checks import nvidia_driver

    [f] = nvidia_driver.evaluate(Facts.from_json(doc))
    return f


def test_a_container_is_not_told_to_install_the_driver_package_it_is_told_not_to_install():
    host = json.loads((FIXTURES / "proc-driver-nvml-broken.json").read_text())
    on_host = _nvidia_driver(host)
    assert on_host.status is Status.FAIL and "libnvidia-compute" in on_host.explanation
    container = copy.deepcopy(host)
    os_doc = json.loads((FIXTURES / "container-no-runtime-cudnn-missing.json").read_text())["domains"]["os"]
    container["domains"]["os"] = os_doc
    inside = _nvidia_driver(container)
    assert inside.status is Status.FAIL
    assert "libnvidia-compute" not in inside.explanation and "apt install" not in inside.explanation
    assert "Do not install a driver inside the image" in inside.explanation
    assert "without the NVIDIA runtime" in inside.explanation
