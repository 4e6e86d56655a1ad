"""``--deep``: start a Jupyter kernel for real, run the probe inside it, shut it down.

Uses jupyter_client's ``KernelManager`` exactly as a Jupyter server would,
with two differences that keep it faithful to the *server* rather than to
gpudoctor: the kernelspec is copied to a private temporary directory with a
plain ``python`` in argv replaced by the server's interpreter (jupyter_client
would otherwise substitute gpudoctor's own ``sys.executable``) and
``{resource_dir}`` pointing at the real directory; and the launch
environment is the diagnosed one (``System.env``), to which jupyter_client
applies kernel.json ``env`` with ``${VAR}`` substitution itself.

Every step shares one deadline (``timeout_s``): a kernel that never answers
``kernel_info`` is killed and reported, one that dies is reported with its
exit status and the last lines of its stderr.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from typing import Any

from gpudoctor.facts import Unavailable
from gpudoctor.facts.jupyter import KernelLaunch, KernelSpecFacts
from gpudoctor.probe import PROBE_SCRIPT, ProbeError, parse_probe_output
from gpudoctor.system import track_process

__all__ = ["launch_and_probe", "probe_code"]

_SAFE_NAME = re.compile(r"[^a-z0-9._-]")


def probe_code() -> str:
    """Python source the kernel executes: the probe script's functions, then ``main()``."""
    source = PROBE_SCRIPT.read_text(encoding="utf-8")
    return (
        "def __gpudoctor_probe():\n"
        "    ns = {'__name__': 'gpudoctor_probe'}\n"
        f"    exec(compile({source!r}, '<gpudoctor-probe>', 'exec'), ns)\n"
        "    ns['main']()\n"
        "__gpudoctor_probe()\n"
        "del __gpudoctor_probe\n"
    )


#: stderr lines every ipykernel >= 7 prints on a TCP transport: noise, not a cause
_NOISE = ("Kernel is running over TCP without encryption",)


def _tail(path: str, lines: int = 5) -> str:
    try:
        with open(path, "rb") as fh:
            text = fh.read()[-8192:].decode("utf-8", errors="replace")
    except OSError:
        return ""
    kept = [ln for ln in text.strip().splitlines() if not any(n in ln for n in _NOISE)]
    return "\n".join(kept[-lines:])


def _ms(start: float) -> float:
    return (time.monotonic() - start) * 1000.0


def launch_and_probe(
    spec: KernelSpecFacts, server_python: str, server_env: Mapping[str, str], timeout_s: float = 60.0
) -> KernelLaunch:
    """Start ``spec``'s kernel, execute the probe in it, shut it down; all within ``timeout_s`` seconds.

    Returns a :class:`KernelLaunch`; never raises for a kernel's fault.
    """
    start = time.monotonic()
    deadline = start + timeout_s

    def left() -> float:
        return max(0.5, deadline - time.monotonic())

    try:
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import KernelManager
    except ImportError as exc:  # pragma: no cover - jupyter_client is a dependency
        return KernelLaunch(False, 0.0, f"jupyter_client is not importable: {exc}", Unavailable("kernel not launched"))
    tmp = tempfile.mkdtemp(prefix="gpudoctor-kernel-")
    name = _SAFE_NAME.sub("-", spec.name.lower()) or "kernel"
    stderr_path = os.path.join(tmp, "stderr.log")
    km = kc = None
    stderr_fh = None
    try:
        argv: list[str] = list(spec.argv)
        interp = spec.interpreter
        if interp is not None and interp.via == "server-python" and interp.argv_index is not None:
            argv[interp.argv_index] = server_python
        argv = [a.replace("{resource_dir}", spec.resource_dir) for a in argv]
        kdir = os.path.join(tmp, "kernels", name)
        os.makedirs(kdir)
        copy = {
            "argv": argv,
            "display_name": spec.display_name,
            "language": spec.language,
            "interrupt_mode": spec.interrupt_mode,
            "env": dict(spec.env),
            "metadata": json.loads(spec.metadata_json or "{}"),
        }
        with open(os.path.join(kdir, "kernel.json"), "w", encoding="utf-8") as fh:
            json.dump(copy, fh)
        ksm = KernelSpecManager(kernel_dirs=[os.path.join(tmp, "kernels")], ensure_native_kernel=False)
        km = KernelManager(kernel_name=name, kernel_spec_manager=ksm)
        stderr_fh = open(stderr_path, "wb")
        try:
            km.start_kernel(env=dict(server_env), stdout=stderr_fh, stderr=stderr_fh, cwd=tmp)
        except Exception as exc:  # missing executable, unavailable provisioner ...
            msg = f"the kernel could not be started: {type(exc).__name__}: {exc}"
            return KernelLaunch(False, _ms(start), msg, Unavailable(msg), _tail(stderr_path))
        kernel_proc = getattr(getattr(km, "provisioner", None), "process", None)
        if kernel_proc is not None:
            track_process(kernel_proc)  # Ctrl-C (kill_running_commands) kills it at once, not at its timeout
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=left())
        except RuntimeError:
            alive = km.is_alive()
            if alive:
                msg = (
                    f"the kernel did not answer within {timeout_s:g} s and was killed "
                    f"(hung at start: a startup file, an import, or a blocked network mount)"
                )
            else:
                code = _exit_code(km)
                msg = "the kernel died on start" + (f" (exit status {code})" if code is not None else "")
            return KernelLaunch(False, _ms(start), msg, Unavailable(msg), _tail(stderr_path))
        chunks: list[str] = []
        errors: list[str] = []

        def hook(msg: Any) -> None:
            kind = msg.get("msg_type") or msg.get("header", {}).get("msg_type")
            content = msg.get("content", {})
            if kind == "stream" and content.get("name") == "stdout":
                chunks.append(content.get("text", ""))
            elif kind == "error":
                errors.append(f"{content.get('ename', '?')}: {content.get('evalue', '')}")

        try:
            kc.execute_interactive(
                probe_code(), timeout=left(), output_hook=hook, store_history=False, allow_stdin=False, silent=False
            )
        except TimeoutError:
            msg = f"the kernel started, but the probe did not finish within {timeout_s:g} s; the kernel was killed"
            return KernelLaunch(False, _ms(start), msg, Unavailable(msg), _tail(stderr_path))
        if errors:
            msg = f"the probe raised inside the kernel: {errors[0]}"
            return KernelLaunch(False, _ms(start), msg, Unavailable(msg), _tail(stderr_path))
        try:
            probe = parse_probe_output("".join(chunks))
        except ProbeError as exc:
            msg = f"the probe printed nothing usable inside the kernel: {exc}"
            return KernelLaunch(False, _ms(start), msg, Unavailable(msg), _tail(stderr_path))
        return KernelLaunch(True, _ms(start), None, probe, "")
    finally:
        if kc is not None:
            try:
                kc.stop_channels()
            except Exception:  # pragma: no cover - best effort
                pass
        if km is not None:
            proc_ = getattr(getattr(km, "provisioner", None), "process", None)
            if proc_ is not None:
                track_process(proc_, running=False)
            try:
                if km.has_kernel:
                    km.shutdown_kernel(now=True)
            except Exception:  # pragma: no cover - best effort: make sure it is gone
                try:
                    km._kill_kernel()  # jupyter_client >= 7: the synchronous SIGKILL (no public name)
                except Exception:
                    pass
        if stderr_fh is not None:
            stderr_fh.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _exit_code(km: Any) -> Any:
    prov = getattr(km, "provisioner", None)
    proc = getattr(prov, "process", None)
    if proc is not None:
        try:
            return proc.poll()
        except Exception:  # pragma: no cover
            return None
    return None
