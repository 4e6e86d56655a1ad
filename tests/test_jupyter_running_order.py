"""A running kernel (a real ipykernel, CPU-only) that changed CUDA_VISIBLE_DEVICES or CUDA_DEVICE_ORDER
after CUDA started: the kernel's own answer (torch's ``cuda.is_initialized()`` and ``device_count()``,
stood in for by a module in the kernel since the CPU build cannot initialise CUDA) is what is judged."""

from __future__ import annotations

import os

import pytest

from gpudoctor.checks.jupyter_running_kernels import CHECK as RUNNING
from gpudoctor.collect import CollectOptions
from gpudoctor.model import Status
from test_jupyter import collect_domains, live_system
from test_jupyter_servers import _run

# two GPUs enumerated fastest first: the second one sits on the lower PCI bus
FAKE_TORCH = (
    "import os, sys, types\ntorch = types.ModuleType('torch')\n"
    "buses = ['0000:41:00.0', '0000:01:00.0']\n"
    "torch.cuda = types.SimpleNamespace(is_initialized=lambda: {init}, device_count=lambda: 2,\n"
    "    get_device_properties=lambda i: types.SimpleNamespace(pci_bus_id=buses[i]))\n"
    "sys.modules['torch'] = torch\n"
)


@pytest.mark.slow
def test_device_order_changed_after_cuda_started_and_its_twin(tmp_path, python):
    from jupyter_client import KernelManager

    runtime = tmp_path / "runtime"
    runtime.mkdir()
    kms = []
    try:
        for name in ("late-order", "before-init"):
            km = KernelManager(connection_file=str(runtime / f"kernel-{name}.json"))
            km.kernel_cmd = [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
            env = {k: v for k, v in os.environ.items() if k not in ("CUDA_DEVICE_ORDER", "CUDA_VISIBLE_DEVICES")}
            km.start_kernel(env=env)
            kms.append(km)
        # CUDA is up (torch enumerated 2 devices in FASTEST_FIRST order), then a cell asks for PCI order
        _run(kms[0], FAKE_TORCH.format(init=True) + "os.environ['CUDA_DEVICE_ORDER'] = 'PCI_BUS_ID'")
        # the twin: the order is set before CUDA starts, so it takes effect
        _run(kms[1], FAKE_TORCH.format(init=False) + "os.environ['CUDA_DEVICE_ORDER'] = 'PCI_BUS_ID'")
        system = live_system(tmp_path, JUPYTER_RUNTIME_DIR=runtime)
        findings = RUNNING.evaluate(collect_domains(system, CollectOptions(deep=True), RUNNING))
        assert [f.status for f in findings] == [Status.WARN, Status.OK]
        late = findings[0]
        assert "kernel late-order" in late.summary and f"pid {kms[0].provisioner.pid}" in late.summary
        assert "CUDA_DEVICE_ORDER is 'PCI_BUS_ID' now, but CUDA was initialised with unset" in late.summary
        assert "restart the kernel and set it first" in late.summary
        assert "torch enumerated 2 device(s)" in late.explanation and late.evidence["devices_enumerated"] == 2
        assert late.evidence["device_buses"] == ["0000:41:00.0", "0000:01:00.0"]
        assert "kernel before-init" in findings[1].summary and "CUDA not initialised" in findings[1].summary
    finally:
        for km in kms:
            km.shutdown_kernel(now=True)


# --------------------------------------------------------------------------- the judgement, from facts


def _judge(**kw):
    from gpudoctor.facts.jupyter import RunningKernel, RunningKernelsFacts
    from gpudoctor.testing import make_facts

    k = RunningKernel(
        "/run/jupyter/kernel-k1.json", "python3", pid=77, torch_imported=True, cuda_initialized=True, **kw
    )
    [f] = RUNNING.evaluate(make_facts(jupyter_running=RunningKernelsFacts("/run/jupyter", (k,))))
    return f


@pytest.mark.parametrize(
    ("kw", "status"),
    [
        # set in a cell after CUDA started: torch still enumerates both GPUs
        ({"cvd_now": "1", "device_count": 2}, Status.WARN),
        # the healthy twin: set in the first cell, before CUDA started: torch enumerates the one GPU named
        ({"cvd_now": "1", "device_count": 1}, Status.OK),
        # no evidence (an older answer): a change counts as late
        ({"cvd_now": "1"}, Status.WARN),
        ({"order_now": "PCI_BUS_ID", "device_buses": ("0000:41:00.0", "0000:01:00.0")}, Status.WARN),
        ({"order_now": "PCI_BUS_ID", "device_buses": ("0000:01:00.0", "0000:41:00.0")}, Status.OK),
    ],
)
def test_a_change_counts_only_when_the_enumerated_devices_do_not_show_it(kw, status):
    f = _judge(**kw)
    assert f.status is status, f.summary
    if status is Status.OK:
        assert "they are in effect" in f.summary
    else:
        assert "restart the kernel and set it first" in f.summary
