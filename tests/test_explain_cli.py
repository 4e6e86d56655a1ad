"""``gpudoctor explain`` end to end: the field cases, files, stdin, running a command, formats."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

from _foundation import GPUDOCTOR, env_with, run_gpudoctor
from conftest import CASES, FIXTURES
from gpudoctor.explain import explain_text, load_signatures, match_finding
from gpudoctor.explain_run import explain_file, target_python
from gpudoctor.model import Status

PY = sys.executable


# ----------------------------------------------------------------- the field cases

#: case file -> (top signature, values it must extract, words the summary must name,
#: words the remedy must contain, status)
CASE_EXPECTATIONS = {
    "01-driver-470-vs-torch-cu121/traceback.txt": (
        "cuda.driver-too-old",
        {"driver_api": "11040", "driver_cuda": "11.4"},
        ["driver too old", "11.4"],
        ["nvidia-driver-", "--index-url https://download.pytorch.org/whl/cu118"],
        Status.FAIL,
    ),
    "05-cudnn-ld-library-path-shadow/traceback.txt": (
        "cudnn.version-incompatible",
        {"compiled_version": "8.3.2", "runtime_version": "8.0.3"},
        ["cuDNN 8.0.3", "8.3.2"],
        ["module unload cudnn", "LD_LIBRARY_PATH"],
        Status.FAIL,
    ),
    "07-wsl-libcuda-unresolvable/traceback.txt": (
        "lib.libcuda-missing",
        {"library": "libcuda.so"},
        ["driver library libcuda.so"],
        ["/usr/lib/wsl/lib", "sudo ldconfig", "Do not install a Linux driver inside WSL"],
        Status.FAIL,
    ),
    "09-device-order-fastest-first/user-report.txt": (
        "cuda.device-order-mismatch",
        {"smi_index": "1"},
        ["number the GPUs differently"],
        ["export CUDA_DEVICE_ORDER=PCI_BUS_ID", "UUID"],
        Status.WARN,
    ),
    "17-debian12-sources-list-absent/build-output.txt": (
        "apt.sources-list-absent",
        {"path": "/etc/apt/sources.list"},
        ["deb822"],
        ["/etc/apt/sources.list.d/debian.sources"],
        Status.FAIL,
    ),
    "18-ubuntu2404-sed-noop/build-output.txt": (
        "apt.mirror-sync",
        {"host": "archive.ubuntu.com", "got": "2401883", "expected": "2401874"},
        ["archive.ubuntu.com", "mid-sync"],
        ["/etc/apt/sources.list.d/*.sources", "gpudoctor fix apt.mirror"],
        Status.WARN,
    ),
    "20-pip-conf-no-section-header/pip-output.txt": (
        "pip.conf-no-section-header",
        {"path": "/home/user/.config/pip/pip.conf", "lineno": "1"},
        ["/home/user/.config/pip/pip.conf", "line 1"],
        ["[global]", "pip config list"],
        Status.FAIL,
    ),
    "23-docker-shm-64m-bus-error/traceback.txt": (
        "dataloader.bus-error",
        {"pid": "572"},
        ["/dev/shm is too small"],
        ["--shm-size=16g", "--ipc=host", "medium: Memory"],
        Status.FAIL,
    ),
    "26-torch-compile-missing-python-h/traceback.txt": (
        "compile.python-h-missing",
        {"python_version": "3.10", "include_dir": "/usr/include/python3.10"},
        ["Python.h (Python 3.10 headers) is missing"],
        ["sudo apt-get install python3.10-dev"],
        Status.FAIL,
    ),
    "26-torch-compile-missing-python-h/probe-output.txt": (
        "python.headers-absent",
        {"python_version": "3.10"},
        ["Python 3.10"],
        ["python3.10-dev"],
        Status.FAIL,
    ),
    "28-nccl-shm-docker-64m/nccl-output.txt": (
        "nccl.shm-no-space",
        {"size": "9637888"},
        ["/dev/shm is too small"],
        ["--ipc=host", "--shm-size=1g", "NCCL_SHM_DISABLE=1"],
        Status.FAIL,
    ),
    "30-uv-ignores-pip-conf/install-output.txt": (
        "uv.default-index",
        {"package": "ruff"},
        ["public default index"],
        ["UV_DEFAULT_INDEX=", "[[index]]", "default = true"],
        Status.WARN,
    ),
    "33-nvjitlink-ld-library-path-shadow/traceback.txt": (
        "lib.nvjitlink-too-old",
        {"library": "libcusparse.so.12", "needed_version": "12.4", "symbol": "__nvJitLinkComplete_12_4"},
        ["libcusparse.so.12", "nvJitLink 12.4"],
        ["LD_LIBRARY_PATH", "nvidia.nvjitlink"],
        Status.FAIL,
    ),
    "35-torch-compile-no-unversioned-libcuda/compile-output.txt": (
        "compile.lcuda-only-32bit",
        {"path": "/usr/lib/i386-linux-gnu/libcuda.so"},
        ["32-bit", "-lcuda"],
        ["sudo ln -s libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so", "LIBRARY_PATH"],
        Status.FAIL,
    ),
    "39-k8s-pod-no-nvidia-runtimeclass/pod-events.txt": (
        "k8s.pod-without-nvidia-runtime",
        {},
        ["without the NVIDIA runtime"],
        ["runtimeClassName: nvidia", "--set-as-default", "does not apply to Kubernetes"],
        Status.FAIL,
    ),
    "39-k8s-pod-no-nvidia-runtimeclass/in-pod.txt": (
        "container.no-device-nodes",
        {"path": "/dev/nvidia*"},
        ["/dev/nvidia*"],
        ["runtimeClassName: nvidia"],
        Status.FAIL,
    ),
}


def test_every_case_output_file_is_covered():
    wanted = {
        str(p.relative_to(CASES))
        for p in CASES.glob("*/*.txt")
        if p.name in ("traceback.txt", "user-report.txt", "build-output.txt") or p.name.endswith("-output.txt")
    }
    assert wanted <= set(CASE_EXPECTATIONS), wanted - set(CASE_EXPECTATIONS)


@pytest.mark.parametrize("case", sorted(CASE_EXPECTATIONS))
def test_field_case_is_explained(case):
    sig_id, values, summary_words, remedy_words, status = CASE_EXPECTATIONS[case]
    result = explain_file(str(CASES / case))
    top = result.matches[0]
    assert top.signature.id == sig_id, [m.signature.id for m in result.matches]
    assert {k: top.values.get(k) for k in values} == values
    finding = match_finding(top)
    assert finding.status is status
    for word in summary_words:
        assert word in finding.summary, (word, finding.summary)
    for word in remedy_words:
        assert word in finding.explanation, word


def test_nccl_case_also_names_the_top_level_error_below_the_cause():
    ids = [m.signature.id for m in explain_file(str(CASES / "28-nccl-shm-docker-64m/nccl-output.txt")).matches]
    assert ids == ["nccl.shm-no-space", "nccl.unhandled-system-error"]


def test_compile_cases_name_the_cause_not_the_wrapper():
    # BackendCompilerFailed and the plain "cannot find -lcuda" yield to the specific cause
    for case, cause in (
        ("35-torch-compile-no-unversioned-libcuda/compile-output.txt", "compile.lcuda-only-32bit"),
        ("26-torch-compile-missing-python-h/traceback.txt", "compile.python-h-missing"),
    ):
        assert [m.signature.id for m in explain_file(str(CASES / case)).matches] == [cause]
    alone = explain_text("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\nKeyError: 'x'")
    assert [m.signature.id for m in alone.matches] == ["compile.backend-failed"]


# ----------------------------------------------------------------- files, stdin, formats


def test_explain_file_console_lists_cause_remedy_and_the_confirm_command():
    proc = run_gpudoctor("explain", "--no-check", str(CASES / "01-driver-470-vs-torch-cu121/traceback.txt"))
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout
    assert "[FAIL] cuda.driver-too-old" in out and "seen 2 times" in out
    assert "What to do" in out and "To confirm on this machine: gpudoctor check nvidia.driver cuda.driver" in out
    assert proc.stderr == ""


def test_explain_stdin_dash_and_plain_pipe():
    text = (CASES / "23-docker-shm-64m-bus-error/traceback.txt").read_text()
    for args in (("explain", "--no-check", "-"), ("explain", "--no-check")):
        proc = run_gpudoctor(*args, input=text)
        assert proc.returncode == 1, proc.stderr
        assert "dataloader.bus-error" in proc.stdout and "stdin" in proc.stdout


def test_json_format_parses_and_carries_values_and_confirming_ids():
    proc = run_gpudoctor(
        "explain", "--no-check", "--format", "json", str(CASES / "33-nvjitlink-ld-library-path-shadow/traceback.txt")
    )
    doc = json.loads(proc.stdout)
    assert doc["kind"] == "explain" and doc["matched"] is True and doc["checks"] is None
    (d,) = doc["diagnosis"]
    assert d["signature"] == "lib.nvjitlink-too-old" and d["status"] == "fail"
    assert d["values"]["needed_version"] == "12.4" and d["line"] == 7
    assert "cuda.toolkit" in doc["confirm_with"] and doc["checks_run"] == [] and doc["confirmed_here"] is None
    assert proc.returncode == 1


def test_markdown_format():
    proc = run_gpudoctor(
        "explain", "--no-check", "--format", "markdown", str(CASES / "20-pip-conf-no-section-header/pip-output.txt")
    )
    assert proc.stdout.startswith("## gpudoctor explain")
    assert "### ✗ fail: `pip.conf-no-section-header`" in proc.stdout and "```text" in proc.stdout


def test_nothing_recognised_says_so_and_suggests_check():
    proc = run_gpudoctor("explain", str(FIXTURES / "explain/training-ok.log"))
    assert proc.returncode == 0, proc.stderr
    assert "no known error found" in proc.stdout and "gpudoctor check" in proc.stdout
    doc = json.loads(run_gpudoctor("explain", "--format", "json", str(FIXTURES / "explain/pip-install-ok.log")).stdout)
    assert doc["matched"] is False and doc["diagnosis"] == [] and doc["suggestion"] == "gpudoctor check"


def test_list_has_one_line_per_signature():
    proc = run_gpudoctor("explain", "--list")
    lines = proc.stdout.splitlines()
    sigs = load_signatures()
    assert proc.returncode == 0 and len(lines) == len(sigs)
    assert [ln.split()[0] for ln in lines] == [s.id for s in sigs]
    assert any("<driver_cuda>" in ln for ln in lines)
    doc = json.loads(run_gpudoctor("explain", "--list", "--format", "json").stdout)
    assert {d["id"] for d in doc} == {s.id for s in sigs} and all(d["regex"] for d in doc)


def test_list_honours_output_and_markdown(tmp_path):
    """--list -o FILE once printed to stdout and left no file; markdown printed the text table."""
    sigs = load_signatures()
    out = tmp_path / "sigs.json"
    proc = run_gpudoctor("explain", "--list", "--format", "json", "-o", str(out))
    assert proc.returncode == 0 and proc.stdout == ""
    assert [d["id"] for d in json.loads(out.read_text())] == [s.id for s in sigs]
    md = run_gpudoctor("explain", "--list", "--format", "markdown").stdout.splitlines()
    assert md[:2] == ["| signature | matches |", "|---|---|"] and len(md) == 2 + len(sigs)
    assert md[2].startswith(f"| `{sigs[0].id}` | ") and all(ln.count(" | ") >= 1 for ln in md[2:])
    assert not any("<driver_cuda>" in ln for ln in md) and any("&lt;driver_cuda>" in ln for ln in md)
    bad = run_gpudoctor("explain", "--list", "-o", str(tmp_path / "missing" / "x"))
    assert bad.returncode == 2 and "does not exist" in bad.stderr


def test_gzip_log_and_crlf_lines(tmp_path):
    log = tmp_path / "job.log.gz"
    body = (
        "step 1\r\nConfiguration file could not be loaded.\r\nFile contains no section headers.\r\n"
        "file: '/etc/pip.conf', line: 1\r\n"
    )
    log.write_bytes(gzip.compress(body.encode()))
    (m,) = explain_file(str(log)).matches
    assert m.signature.id == "pip.conf-no-section-header" and m.values["path"] == "/etc/pip.conf"


@pytest.mark.parametrize("compress", [False, True])
def test_a_pipe_given_as_file_is_read(tmp_path, compress):
    """`gpudoctor explain <(cmd)` and `explain /dev/stdin`: a FIFO cannot seek back after
    the gzip check ("File or stream is not seekable", exit 2)."""
    body = (CASES / "17-debian12-sources-list-absent/build-output.txt").read_bytes()
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(
        [PY, "-c", "import sys; open(sys.argv[1], 'wb').write(sys.stdin.buffer.read())", str(fifo)],
        stdin=subprocess.PIPE,
    )
    try:
        proc = subprocess.Popen(
            [*GPUDOCTOR, "explain", "--no-check", str(fifo)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        writer.communicate(gzip.compress(body) if compress else body, timeout=60)
        out, err = proc.communicate(timeout=120)
    finally:
        writer.kill()
    assert proc.returncode == 1, err
    assert "apt.sources-list-absent" in out and "seekable" not in err
    piped = run_gpudoctor("explain", "--no-check", "/dev/stdin", input=body.decode())
    assert piped.returncode == 1 and "apt.sources-list-absent" in piped.stdout, piped.stderr


def test_a_long_log_shows_progress_on_a_terminal_and_nothing_when_piped(tmp_path):
    import pty
    import threading

    log = tmp_path / "big.log"
    line = b"step 1234 loss 0.12345 lr 0.0001 throughput 1234.5 samples/s " * 2 + b"\n"
    with open(log, "wb") as fh:
        fh.write(line * 300_000)  # ~37 MiB: seconds to match, long enough for the status line
        fh.write((CASES / "17-debian12-sources-list-absent/build-output.txt").read_bytes())
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*GPUDOCTOR, "explain", "--no-check", str(log)],
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env_with(COLUMNS="200"),
    )
    os.close(slave)
    seen = bytearray()

    def drain():
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    out, _ = proc.communicate(timeout=300)
    reader.join(timeout=10)
    os.close(master)
    assert proc.returncode == 1 and b"apt.sources-list-absent" in out
    assert b"reading " + str(log).encode() + b": " in seen and b" MiB" in seen
    piped = run_gpudoctor("explain", "--no-check", str(log), timeout=300)
    assert "apt.sources-list-absent" in piped.stdout and "reading" not in piped.stderr


def test_secrets_never_reach_any_format(tmp_path):
    log = tmp_path / "pip.log"
    log.write_text(
        "export HF_TOKEN=hf_abcdefSECRET123\n"
        "Could not fetch URL https://bob:Hunter2Secret@pypi.corp.example.org/simple/pip/: There was a problem "
        "confirming the ssl certificate: HTTPSConnectionPool(host='pypi.corp.example.org', port=443)\n"
    )
    for fmt in ("console", "json", "markdown"):
        proc = run_gpudoctor("explain", "--no-check", "-v", "--format", fmt, str(log))
        assert "pip.ssl-certificate" in proc.stdout
        assert "Hunter2Secret" not in proc.stdout and "****" in proc.stdout, fmt


def test_output_file(tmp_path):
    out = tmp_path / "x.json"
    proc = run_gpudoctor(
        "explain",
        "--no-check",
        "--format",
        "json",
        "-o",
        str(out),
        str(CASES / "17-debian12-sources-list-absent/build-output.txt"),
    )
    assert proc.stdout == "" and json.loads(out.read_text())["diagnosis"][0]["signature"] == "apt.sources-list-absent"


def test_output_over_the_log_it_reads_is_refused_and_the_log_kept(tmp_path):
    log = tmp_path / "build.log"
    original = (CASES / "17-debian12-sources-list-absent/build-output.txt").read_bytes()
    log.write_bytes(original)
    proc = run_gpudoctor("explain", "--no-check", "-o", str(log), str(log))
    assert proc.returncode == 2 and f"-o {log}: is the input file {log}" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert log.read_bytes() == original


@pytest.mark.parametrize(
    "args, words",
    [
        (("explain", "/nonexistent/file.log"), "No such file"),
        (("explain", "/"), "is a directory"),
        (("explain", "x.log", "--", "true"), "not both"),
        (("explain", "--"), "nothing to run"),
        (("explain", "--list", "x.log"), "--list takes no"),
        (("explain", "--no-check", "/dev/zero"), "a device, not a log file"),  # was read forever
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, words):
    proc = run_gpudoctor(*args, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and words in proc.stderr and "Traceback" not in proc.stderr


# ----------------------------------------------------------------- running a command


def _run_bytes(*args, timeout=180):
    return subprocess.run(
        [*GPUDOCTOR, *args], capture_output=True, env=env_with(), timeout=timeout, stdin=subprocess.DEVNULL
    )


def test_command_output_diagnosis_confirming_checks_and_its_exit_code():
    code = (
        "import sys\n"
        "print('loading model', flush=True)\n"
        "sys.stderr.write('RuntimeError: The NVIDIA driver on your system is too old (found version 11040).\\n')\n"
        "sys.exit(7)\n"
    )
    proc = _run_bytes("explain", "--offline", "--", PY, "-c", code)
    assert proc.returncode == 7
    assert proc.stdout == b"loading model\n"  # the command's stdout, untouched and alone
    err = proc.stderr.decode()
    assert err.startswith("RuntimeError: The NVIDIA driver on your system is too old (found version 11040).\n")
    assert "[FAIL] cuda.driver-too-old" in err and "supports CUDA 11.4" in err
    assert "line 1 of stderr" in err
    # the confirming checks ran here, on the interpreter the command used
    assert "Confirming on this machine: gpudoctor check nvidia.driver cuda.driver torch.install" in err
    after = err.split("Confirming on this machine")[1]
    # the checks' own report follows: every confirming check is accounted for, with its verdict
    for check in ("nvidia.driver", "cuda.driver", "torch.install", "platform.driver-branch"):
        assert check in after, check
    assert "4 findings" in after
    assert f"[{PY}]" in err or PY in err
    # no GPU here, so nothing confirms the driver fault on this machine: it says so
    assert "The confirming checks find nothing wrong on this machine" in err


def test_command_raising_a_known_python_error_keeps_its_exit_code():
    code = "raise RuntimeError('Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!')"
    proc = _run_bytes("explain", "--", PY, "-c", code)
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert "Traceback (most recent call last)" in err
    assert "torch.tensors-on-different-devices" in err and "cuda:0 and cpu" in err
    assert "No installed check can confirm this on this machine." in err


def test_command_output_passes_through_byte_for_byte():
    code = (
        "import sys\n"
        "sys.stdout.buffer.write(b'\\xff\\xfe raw \\r progress 50%\\r progress 100%')\n"
        "sys.stdout.flush()\n"
        "sys.stderr.buffer.write(b'no newline at end')\n"
    )
    proc = _run_bytes("explain", "--", PY, "-c", code)
    assert proc.returncode == 0
    assert proc.stdout == b"\xff\xfe raw \r progress 50%\r progress 100%"
    assert proc.stderr == b"no newline at end"  # success: nothing added


def test_command_failing_with_nothing_known_says_so():
    proc = _run_bytes("explain", "--", PY, "-c", "import sys; print('plain failure'); sys.exit(4)")
    assert proc.returncode == 4
    assert proc.stdout == b"plain failure\n"
    assert b"no known error found" in proc.stderr and b"gpudoctor check" in proc.stderr


def test_command_killed_by_a_signal_reports_128_plus_n():
    code = "import os, signal; print('x', flush=True); os.kill(os.getpid(), signal.SIGKILL)"
    proc = _run_bytes("explain", "--no-check", "--", PY, "-c", code)
    assert proc.returncode == 137


def test_command_not_found_is_127():
    proc = _run_bytes("explain", "--", "/nonexistent/bin/train")
    assert proc.returncode == 127
    assert b"cannot start /nonexistent/bin/train" in proc.stderr


def test_command_json_to_a_file(tmp_path):
    out = tmp_path / "e.json"
    code = "import sys; sys.stderr.write('E: Unable to locate package nvidia-container-toolkit\\n'); sys.exit(100)"
    proc = _run_bytes("explain", "--no-check", "--format", "json", "-o", str(out), "--", PY, "-c", code)
    assert proc.returncode == 100
    doc = json.loads(out.read_text())
    assert doc["command_exit_code"] == 100 and doc["command"][0] == PY
    assert doc["diagnosis"][0]["values"] == {"package": "nvidia-container-toolkit"}
    assert doc["diagnosis"][0]["stream"] == "stderr"


def test_sigterm_is_forwarded_to_the_command(tmp_path):
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('got TERM', flush=True), sys.exit(42)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    proc = subprocess.Popen(
        [*GPUDOCTOR, "explain", "--no-check", "--", PY, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env_with(),
    )
    assert proc.stdout.readline() == b"ready\n"
    proc.terminate()
    out, _ = proc.communicate(timeout=30)
    assert b"got TERM" in out and proc.returncode == 42


# ----------------------------------------------------------------- which interpreter to confirm with


def test_target_python_from_argv_and_shebang(tmp_path):
    assert target_python([PY, "train.py"]) == os.path.abspath(PY)
    script = tmp_path / "torchrun"
    script.write_text(f"#!{PY}\nimport sys\n")
    script.chmod(0o755)
    assert target_python([str(script), "--nproc-per-node", "2"]) == PY
    env_script = tmp_path / "accelerate"
    env_script.write_text("#!/usr/bin/env python3\n")
    env_script.chmod(0o755)
    found = target_python([str(env_script)])
    assert found is None or os.path.basename(found).startswith("python3")
    assert target_python(["/bin/sh", "-c", "true"]) is None
    assert target_python(["definitely-not-a-command-xyz"]) is None
    assert target_python([]) is None


def test_long_log_streams(tmp_path):
    log = tmp_path / "big.log"
    healthy = (FIXTURES / "explain/training-ok.log").read_text()
    with log.open("w") as fh:
        for _ in range(400):
            fh.write(healthy)
        fh.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity\n")
    result = explain_file(str(log))
    assert [m.signature.id for m in result.matches] == ["cuda.out-of-memory"]
    assert result.matches[0].values == {"size": "2.00 GiB", "device": "3"}
    assert result.lines_read == 400 * len(healthy.splitlines()) + 1


def test_explain_text_is_reentrant_between_calls():
    a = explain_text("RuntimeError: No CUDA GPUs are available")
    b = explain_text("E: Unable to locate package foo")
    assert [m.signature.id for m in a.matches] == ["cuda.no-gpus-available"]
    assert [m.signature.id for m in b.matches] == ["apt.unable-to-locate"]


def test_json_with_confirming_checks_embeds_a_valid_report():
    from _foundation import validator

    proc = run_gpudoctor(
        "explain", "--offline", "--format", "json", str(CASES / "20-pip-conf-no-section-header/pip-output.txt")
    )
    doc = json.loads(proc.stdout)
    assert doc["checks_run"] == ["pip.config"] and doc["unresolved_checks"] == []
    validator("report.schema.json").validate(doc["checks"])
    assert [f["check"] for f in doc["checks"]["findings"]] == ["pip.config"]
    assert doc["confirmed_here"] is (doc["checks"]["findings"][0]["status"] in ("warn", "fail"))
    assert proc.returncode == 1  # the diagnosis itself is a failure


def test_every_json_document_validates_against_the_published_explain_schema(tmp_path):
    from _foundation import validator

    explain = validator("explain.schema.json")
    out = tmp_path / "cmd.json"
    code = "import sys; print('RuntimeError: No CUDA GPUs are available'); sys.exit(3)"
    docs = {
        "with checks": run_gpudoctor(
            "explain", "--offline", "--format", "json", str(CASES / "20-pip-conf-no-section-header/pip-output.txt")
        ).stdout,
        "no check": run_gpudoctor(
            "explain",
            "--no-check",
            "--format",
            "json",
            str(CASES / "33-nvjitlink-ld-library-path-shadow/traceback.txt"),
        ).stdout,
        "nothing found": run_gpudoctor(
            "explain", "--format", "json", str(FIXTURES / "explain/pip-install-ok.log")
        ).stdout,
    }
    proc = _run_bytes("explain", "--no-check", "--format", "json", "-o", str(out), "--", PY, "-c", code)
    assert proc.returncode == 3
    docs["command"] = out.read_text()
    for name, text in docs.items():
        doc = json.loads(text)
        explain.validate(doc)
        assert doc["schema_version"] == 2, name  # 2: diagnoses carry commands and caused_by
    assert json.loads(docs["command"])["diagnosis"][0]["stream"] == "stdout"
    assert json.loads(docs["with checks"])["checks"]["findings"]


def test_explain_schema_refuses_documents_that_break_its_contract():
    from _foundation import validator

    explain = validator("explain.schema.json")
    doc = json.loads(
        run_gpudoctor(
            "explain", "--no-check", "--format", "json", str(CASES / "23-docker-shm-64m-bus-error/traceback.txt")
        ).stdout
    )
    explain.validate(doc)
    broken = [
        {**doc, "schema_version": 1},
        {**doc, "kind": "report"},
        {**doc, "diagnosis": [{**doc["diagnosis"][0], "line": 0}]},
        {**doc, "diagnosis": [{**doc["diagnosis"][0], "values": {"size": 64}}]},
        {**doc, "diagnosis": [{k: v for k, v in doc["diagnosis"][0].items() if k != "signature"}]},
        {**doc, "checks": {"findings": []}},  # not a report
        {k: v for k, v in doc.items() if k != "matched"},
        {**doc, "extra": 1},
    ]
    for bad in broken:
        assert not explain.is_valid(bad), bad


def test_no_input_on_a_terminal_is_a_usage_error():
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([*GPUDOCTOR, "explain"], stdout=slave, stderr=slave, stdin=slave, env=env_with())
    os.close(slave)
    out = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        out += data
    assert proc.wait(timeout=60) == 2
    assert b"give a FILE to explain" in out and b"Traceback" not in out


_HEALTHY_INPUT_PATTERNS = (
    "ls-*.txt",
    "ldconfig-p.txt",
    "nvidia-smi*.txt",
    "nvidia-smi-q.xml",
    "pip-list.txt",
    "env.txt",
    "*.json",
    "*.sources",
    "pip.conf",
    "os-release.txt",
    "ldd-*.txt",
    "pip-config-debug.txt",
    "df-dev-shm.txt",
    "proc-driver-nvidia-version.txt",
)


def test_machine_state_files_of_the_cases_are_not_mistaken_for_errors():
    # listings, tables and configuration files show a machine's state; none is an error message
    files = sorted({p for pattern in _HEALTHY_INPUT_PATTERNS for p in CASES.glob(f"*/{pattern}")})
    assert len(files) > 20
    for path in files:
        assert explain_file(str(path)).matches == (), path


def test_stream_reader_handles_chunk_boundaries_progress_bars_and_bad_bytes():
    import io

    from gpudoctor.explain_run import CHUNK, explain_stream

    pad = b"x" * (CHUNK - 1)
    data = (
        pad
        + "é\n".encode()  # a two-byte character split across the chunk boundary
        + b"\xff\xfe garbage\n"
        + b"epoch 1  10%\repoch 1  50%\rRuntimeError: No CUDA GPUs are available\n"
        + b"step " * 5000
        + b"\n"  # a long line without the error
        + b"E: Unable to locate package cuda-toolkit-12-4"
    )  # no final newline
    result = explain_stream(io.BytesIO(data))
    assert [(m.signature.id, m.line) for m in result.matches] == [
        ("cuda.no-gpus-available", 3),
        ("apt.unable-to-locate", 5),
    ]
    assert result.lines_read == 5
