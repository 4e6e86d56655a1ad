"""The server's environment, not the terminal's (issue 13, item 7).

A real long-running process stands in for the Jupyter server (jupyter_server is
not a dependency): its /proc/<pid>/environ is read through Jupyter's runtime
directory file (jpserver-<pid>.json, what `jupyter server list --json` reads),
and each real kernelspec's environment is computed from it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpudoctor.checks import SkipCheck
from gpudoctor.checks.jupyter_server_env import CHECK
from gpudoctor.collect import CollectOptions
from gpudoctor.model import Status
from test_jupyter import collect_domains, ipk_argv, live_system, spec_json, write_spec

CUDA_LIB = "/usr/local/cuda-12.1/lib64"


@pytest.fixture
def server(tmp_path):
    """Start a stand-in server with a given environment; write its runtime file; kill it afterwards."""
    procs = []

    def start(env: dict, runtime: Path) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=env)
        procs.append(proc)
        runtime.mkdir(parents=True, exist_ok=True)
        (runtime / f"jpserver-{proc.pid}.json").write_text(
            json.dumps({"pid": proc.pid, "url": "http://127.0.0.1:8888/", "root_dir": str(tmp_path), "token": "secret"})
        )
        return proc

    yield start
    for p in procs:
        p.kill()
        p.wait()


def _facts(tmp_path, python, runtime, terminal_ld):
    jp = tmp_path / "jp" / "kernels"
    write_spec(jp, "train", spec_json(ipk_argv(python), "Train"))
    write_spec(
        jp, "pinned", spec_json(ipk_argv(python), "Pinned", env={"LD_LIBRARY_PATH": f"{CUDA_LIB}:${{LD_LIBRARY_PATH}}"})
    )
    system = live_system(
        tmp_path,
        JUPYTER_PATH=jp.parent,
        JUPYTER_RUNTIME_DIR=runtime,
        LD_LIBRARY_PATH=terminal_ld,
        CUDA_HOME="/usr/local/cuda-12.1",
    )
    return collect_domains(system, CollectOptions(extra={"jupyter_python": python}), CHECK)


@pytest.mark.slow
def test_kernel_losing_the_terminals_loader_path_fails_naming_variables_and_setting(tmp_path, python, server):
    runtime = tmp_path / "runtime"
    proc = server({"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, runtime)  # started without a login shell
    facts = _facts(tmp_path, python, runtime, f"{CUDA_LIB}:/opt/cudnn/lib")
    (server_facts,) = facts.get("jupyter_servers").servers
    assert server_facts.pid == proc.pid and server_facts.alive and "LD_LIBRARY_PATH" not in server_facts.env
    (f,) = CHECK.evaluate(facts)
    assert f.status is Status.FAIL
    assert f"pid {proc.pid}" in f.summary and "lose CUDA_HOME, LD_LIBRARY_PATH" in f.summary
    assert f.evidence["kernels"] == ["pinned", "python3", "train"]  # python3: ipykernel's built-in spec
    assert f.evidence["lost"]["LD_LIBRARY_PATH"] == f"{CUDA_LIB}:/opt/cudnn/lib"
    assert "export LD_LIBRARY_PATH=" in f.explanation
    # the pinned kernel's own env adds CUDA_LIB, but still lacks /opt/cudnn/lib and CUDA_HOME


@pytest.mark.slow
def test_jupyterhub_server_names_the_spawner_setting_and_a_complete_server_is_ok(tmp_path, python, server):
    runtime = tmp_path / "runtime"
    server(
        {
            "PATH": "/usr/bin:/bin",
            "JUPYTERHUB_API_URL": "http://127.0.0.1:8081/hub/api",
            "JUPYTERHUB_API_TOKEN": "t0ken",
        },
        runtime,
    )
    facts = _facts(tmp_path, python, runtime, CUDA_LIB)
    (f,) = CHECK.evaluate(facts)
    assert f.status is Status.FAIL and "started by JupyterHub" in f.summary
    assert "c.Spawner.environment = {" in f.explanation and "c.Spawner.env_keep.extend([" in f.explanation
    assert "t0ken" not in json.dumps(facts.get("jupyter_servers").servers[0].env)

    runtime2 = tmp_path / "runtime2"
    server({"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": CUDA_LIB, "CUDA_HOME": "/usr/local/cuda-12.1"}, runtime2)
    (f,) = CHECK.evaluate(_facts(tmp_path / "b", python, runtime2, CUDA_LIB))
    assert f.status is Status.OK


def test_no_server_is_skip_and_a_stale_runtime_file_is_not_a_server(tmp_path, python):
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (runtime / f"jpserver-{dead.pid}.json").write_text(json.dumps({"pid": dead.pid, "url": "http://x/"}))
    facts = _facts(tmp_path, python, runtime, CUDA_LIB)
    assert facts.get("jupyter_servers").servers[0].alive is False
    with pytest.raises(SkipCheck, match="no running Jupyter server"):
        CHECK.evaluate(facts)


# --------------------------------------------------------------------------- running kernels (--deep)


def _ask(km, expr: str) -> str:
    client = km.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=30)
        msg_id = client.execute("", silent=True, store_history=False, user_expressions={"x": expr})
        while True:
            reply = client.get_shell_msg(timeout=30)
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply["content"]["user_expressions"]["x"]["data"]["text/plain"]
    finally:
        client.stop_channels()


def _run(km, code: str) -> None:
    client = km.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=30)
        client.execute_interactive(code, timeout=30)
    finally:
        client.stop_channels()


@pytest.mark.slow
def test_deep_asks_running_kernels_and_warns_on_a_late_cuda_visible_devices(tmp_path, python, monkeypatch):
    from jupyter_client import KernelManager

    from gpudoctor.checks.jupyter_running_kernels import CHECK as RUNNING

    runtime = tmp_path / "runtime"
    runtime.mkdir()
    kms = []
    try:
        for name in ("late", "clean"):
            km = KernelManager(connection_file=str(runtime / f"kernel-{name}.json"))
            km.kernel_cmd = [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
            km.start_kernel(env={**os.environ, "CUDA_VISIBLE_DEVICES": "0"})
            kms.append(km)
        # in "late": CUDA is up (a stand-in torch module reports it), then a cell changes the variable
        _run(
            kms[0],
            "import os, sys, types\ntorch = types.ModuleType('torch')\n"
            "torch.cuda = types.SimpleNamespace(is_initialized=lambda: True)\nsys.modules['torch'] = torch\n"
            "os.environ['CUDA_VISIBLE_DEVICES'] = '1'",
        )
        history = _ask(kms[0], "len(In)")
        # the server's sessions API (a real HTTP server on 127.0.0.1) names the notebook of kernel "late"
        import threading
        from http.server import BaseHTTPRequestHandler, HTTPServer

        class Sessions(BaseHTTPRequestHandler):
            def do_GET(self):
                ok = self.path == "/api/sessions" and self.headers.get("Authorization") == "token s3cret"
                body = json.dumps([{"path": "work/train.ipynb", "kernel": {"id": "late"}}] if ok else []).encode()
                self.send_response(200 if ok else 403)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        httpd = HTTPServer(("127.0.0.1", 0), Sessions)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        (runtime / f"jpserver-{os.getpid()}.json").write_text(
            json.dumps({"pid": os.getpid(), "url": f"http://127.0.0.1:{httpd.server_address[1]}/", "token": "s3cret"})
        )
        system = live_system(tmp_path, JUPYTER_RUNTIME_DIR=runtime)
        facts = collect_domains(system, CollectOptions(deep=True), RUNNING)
        httpd.shutdown()
        findings = RUNNING.evaluate(facts)
        assert [f.status for f in findings] == [Status.WARN, Status.OK]
        assert "kernel late" in findings[0].summary and f"pid {kms[0].provisioner.pid}" in findings[0].summary
        assert "of work/train.ipynb" in findings[0].summary
        assert "CUDA_VISIBLE_DEVICES is '1' now, but CUDA was initialised with '0'" in findings[0].summary
        assert "kernel clean" in findings[1].summary and "no torch imported" in findings[1].summary
        assert _ask(kms[0], "len(In)") == history  # asking left no trace in the kernel's history
        # without --deep nothing is asked
        facts = collect_domains(system, CollectOptions(), RUNNING)
        with pytest.raises(SkipCheck, match="--deep"):
            RUNNING.evaluate(facts)
    finally:
        for km in kms:
            km.shutdown_kernel(now=True)
