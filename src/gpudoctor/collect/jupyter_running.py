"""Collector for the ``jupyter_running`` domain (``--deep`` only): ask each running kernel about CUDA.

Each ``kernel-<id>.json`` connection file in Jupyter's runtime directory is
opened with jupyter_client's ``BlockingKernelClient``; the kernel is asked
one ``execute_request`` with empty code, ``silent=True``,
``store_history=False`` and a single ``user_expressions`` entry — so nothing
is added to its namespace, history or execution count — for its pid,
whether torch is imported and CUDA initialised (then also how many devices
torch enumerated), and ``CUDA_VISIBLE_DEVICES`` / ``CUDA_DEVICE_ORDER`` now and
in its start environment (``/proc/self/environ``). A kernel that does
not answer within the timeout is reported, never waited on longer. Kernels
are asked concurrently (one thread each). The notebook using each kernel is
named from the sessions API of the server(s) in the same runtime directory.
"""

from __future__ import annotations

import ast
import json
import re
import threading
from dataclasses import replace

from gpudoctor.collect import CollectContext, Collector
from gpudoctor.collect.jupyter_servers import runtime_dir
from gpudoctor.facts import Unavailable
from gpudoctor.facts.jupyter import RunningKernel, RunningKernelsFacts

#: One expression, evaluated in the kernel's namespace; comprehension names do not leak.
#: ``count`` and ``buses`` (each device's PCI bus id, in torch's order) are asked only once CUDA is up: they
#: then read the initialised runtime and never start it.
EXPRESSION = (
    "(lambda os, sys, start: __import__('json').dumps({'pid': os.getpid(), "
    "'cvd_now': os.environ.get('CUDA_VISIBLE_DEVICES'), 'cvd_start': start.get('CUDA_VISIBLE_DEVICES'), "
    "'order_now': os.environ.get('CUDA_DEVICE_ORDER'), 'order_start': start.get('CUDA_DEVICE_ORDER'), "
    "'torch': 'torch' in sys.modules, "
    "'cuda_init': bool(sys.modules['torch'].cuda.is_initialized()) if 'torch' in sys.modules else False, "
    "'count': (lambda f: f() if f else None)(getattr(sys.modules['torch'].cuda, 'device_count', None)) "
    "if 'torch' in sys.modules and sys.modules['torch'].cuda.is_initialized() else None, "
    "'buses': (lambda c: [getattr(c.get_device_properties(i), 'pci_bus_id', None) for i in range(c.device_count())] "
    "if hasattr(c, 'get_device_properties') and hasattr(c, 'device_count') else None)(sys.modules['torch'].cuda) "
    "if 'torch' in sys.modules and sys.modules['torch'].cuda.is_initialized() else None}))"
    "(__import__('os'), __import__('sys'), {k: v for k, _, v in (e.partition('=') for e in "
    "open('/proc/self/environ', 'rb').read().decode('utf-8', 'replace').split(chr(0)))})"
)
ASK_TIMEOUT_S = 5.0


def ask(path: str, timeout_s: float = ASK_TIMEOUT_S) -> RunningKernel:
    """Ask the kernel behind connection file ``path``; never raises."""
    name = ""
    try:
        with open(path, encoding="utf-8") as fh:
            name = str(json.load(fh).get("kernel_name") or "")
    except (OSError, ValueError) as exc:
        return RunningKernel(path, error=f"unreadable connection file: {exc}")
    from jupyter_client import BlockingKernelClient

    client = BlockingKernelClient(connection_file=path)
    try:
        client.load_connection_file()
        client.start_channels()
        msg_id = client.execute(
            "", silent=True, store_history=False, user_expressions={"gd": EXPRESSION}, allow_stdin=False
        )
        reply = client.get_shell_msg(timeout=timeout_s)
        while reply.get("parent_header", {}).get("msg_id") != msg_id:
            reply = client.get_shell_msg(timeout=timeout_s)
        expr = reply["content"].get("user_expressions", {}).get("gd", {})
        if expr.get("status") != "ok":
            return RunningKernel(
                path,
                name,
                error=f"the kernel could not evaluate the question: "
                f"{expr.get('ename', '')} {expr.get('evalue', '')}".strip(),
            )
        text = expr["data"]["text/plain"]
        data = json.loads(ast.literal_eval(text))  # the repr of the JSON string
        return RunningKernel(
            path,
            name,
            pid=int(data["pid"]),
            torch_imported=bool(data["torch"]),
            cuda_initialized=bool(data["cuda_init"]),
            cvd_now=data["cvd_now"],
            cvd_at_start=data["cvd_start"],
            order_now=data.get("order_now"),
            order_at_start=data.get("order_start"),
            device_count=data.get("count"),
            device_buses=tuple(str(b) for b in data.get("buses") or () if b is not None),
        )
    except Exception as exc:
        why = (
            f"no answer within {timeout_s:.0f} s (busy running a cell, or dead)"
            if type(exc).__name__ == "Empty"
            else f"{type(exc).__name__}: {exc}"
        )
        return RunningKernel(path, name, error=why)
    finally:
        try:
            client.stop_channels()
        except Exception:
            pass


def notebooks(files, rdir: str, names: list[str], timeout_s: float = 2.0) -> dict[str, str]:
    """kernel id -> notebook path, from each live server's sessions API (``GET <url>api/sessions``).

    Servers come from the ``jpserver-<pid>.json`` files (url and token);
    only loopback servers are asked (the server on this machine). Best effort:
    a server that does not answer in ``timeout_s`` names nothing.
    """
    from urllib.parse import urlsplit

    from gpudoctor.mirrors.netguard import is_loopback_host as _is_loopback

    out: dict[str, str] = {}
    for n in names:
        if not re.match(r"^(jpserver|nbserver)-\d+\.json$", n):
            continue
        try:
            info = json.loads(files.read_text(f"{rdir}/{n}"))
        except (OSError, ValueError):
            continue
        url = str(info.get("url") or "")
        if not url or not _is_loopback(urlsplit(url).hostname or ""):
            continue
        try:
            import httpx

            headers = {"Authorization": f"token {info['token']}"} if info.get("token") else {}
            resp = httpx.get(url.rstrip("/") + "/api/sessions", headers=headers, timeout=timeout_s, trust_env=False)
            for sess in resp.json() if resp.status_code == 200 else []:
                kid = (sess.get("kernel") or {}).get("id")
                if kid:
                    out[kid] = str(sess.get("path") or (sess.get("notebook") or {}).get("path") or "")
        except Exception:
            continue
    return out


def collect_running(ctx: CollectContext) -> RunningKernelsFacts | Unavailable:
    if not ctx.options.deep:
        return Unavailable("running kernels are asked only with --deep")
    files = ctx.system.files
    if not files.is_live:
        return Unavailable("an image root runs no kernels")
    rdir = runtime_dir(ctx.system.env, ctx.system.home)
    try:
        names = (
            sorted(n for n in files.listdir(rdir) if re.match(r"^kernel-[\w-]+\.json$", n))
            if files.is_dir(rdir)
            else []
        )
    except OSError:
        names = []
    results: dict[str, RunningKernel] = {}

    def work(path: str) -> None:
        results[path] = ask(path)

    threads: list[threading.Thread] = []
    for n in names:
        path = str(files.host_path(f"{rdir}/{n}"))
        th = threading.Thread(target=work, args=(path,), daemon=True)
        th.start()
        threads.append(th)
    for th in threads:
        th.join(ASK_TIMEOUT_S + 2.0)
    kernels = tuple(
        results.get(str(files.host_path(f"{rdir}/{n}")), RunningKernel(f"{rdir}/{n}", error="no answer in time"))
        for n in names
    )
    if kernels:
        try:
            every = files.listdir(rdir)
        except OSError:
            every = []
        paths = notebooks(files, rdir, every)
        kernels = tuple(
            replace(k, notebook=paths.get(k.connection_file.rsplit("/", 1)[-1][len("kernel-") : -5], ""))
            for k in kernels
        )
    return RunningKernelsFacts(runtime_dir=rdir, kernels=kernels)


COLLECTOR = Collector(domain="jupyter_running", collect=collect_running, timeout_s=20.0)
