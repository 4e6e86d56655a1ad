"""``gpudoctor.audit`` with the real torch (CPU build), mixing ``cpu`` and ``meta`` tensors."""

from __future__ import annotations

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import gpudoctor
from gpudoctor.device_audit import AuditReport


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(torch.relu(self.fc(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 8)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(8, 2)
        self.register_buffer("scale", torch.ones(8))

    def forward(self, x, mask=None):
        h = self.embed(x) * self.scale
        for b in self.blocks:
            h = b(h)
        if mask is not None:
            h = h * mask
        return self.head(h)


def test_clean_model_no_false_alarm():
    model = Net()
    report = gpudoctor.audit(model, torch.randn(3, 4), mask=torch.ones(3, 8))
    assert isinstance(report, AuditReport)
    assert report.first_mismatch is None and report.error is None and report.ok
    assert set(report.by_device()) == {"cpu"}
    names = {t.name: t.kind for t in report.placements}
    assert names["blocks.1.fc.weight"] == "parameter" and names["scale"] == "buffer"
    assert "no device mix" in report.summary()


def test_clean_model_on_meta_no_false_alarm():
    model = Net().to("meta")
    report = gpudoctor.audit(model, torch.empty(3, 4, device="meta"))
    assert report.first_mismatch is None
    assert set(report.by_device()) == {"meta"}


def test_cpu_scalar_tensors_are_allowed_with_any_device():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.register_buffer("temperature", torch.tensor(2.0))

        def forward(self, x):
            return self.fc(x) / self.temperature

    model = Scaled().to("meta")
    model.temperature = torch.tensor(2.0)  # a 0-dim CPU tensor, as PyTorch allows
    assert gpudoctor.audit(model, torch.empty(2, 4, device="meta")).first_mismatch is None


def test_plain_attribute_tensor_left_behind_by_to():
    class WithPlainAttr(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Sequential(nn.Linear(4, 4), Gate())

        def forward(self, x):
            return self.inner(x)

    class Gate(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)
            self.bias_table = torch.zeros(4, 4)  # not a registered buffer: .to() leaves it on cpu

        def forward(self, x):
            return self.proj(x) + self.bias_table

    model = WithPlainAttr().to("meta")
    report = gpudoctor.audit(model, torch.empty(2, 4, device="meta"))
    m = report.first_mismatch
    assert m is not None and m.module == "inner.1" and m.module_type == "Gate"
    assert [(t.name, t.kind, t.shape, t.device) for t in m.offending] == [
        ("inner.1.bias_table", "attribute", (4, 4), "cpu")
    ]
    assert m.devices == ("cpu", "meta")
    assert report.error is not None  # adding a cpu tensor to a meta one raised, and the report still came back
    assert any(t.name == "inner.1.bias_table" and t.kind == "attribute" for t in report.placements)
    assert "register_buffer" in str(report)


def test_input_on_the_wrong_device():
    model = Block()  # no tensor of its own at the top: the first user of the input is ``fc``
    report = gpudoctor.audit(model, torch.empty(3, 8, device="meta"))
    m = report.first_mismatch
    assert m is not None and m.module == "fc" and m.module_type == "Linear"
    assert [(t.name, t.kind, t.shape, t.device) for t in m.offending] == [("input[0]", "input", (3, 8), "meta")]
    assert {t.name for t in m.tensors} == {"input[0]", "fc.weight", "fc.bias"}
    assert "x.to('cpu')" in str(report)


def test_input_on_the_wrong_device_meets_a_buffer_of_the_model_itself():
    report = gpudoctor.audit(Net(), torch.empty(3, 4, device="meta"))
    m = report.first_mismatch
    assert (m.module, m.module_type) == ("", "Net")  # Net.forward multiplies by its own buffer ``scale``
    assert [(t.name, t.device) for t in m.offending] == [("input[0]", "meta")]
    assert "module <model> (Net) mixes devices cpu and meta: input[0] (meta)" == report.summary()


def test_keyword_input_on_the_wrong_device_is_named():
    model = Net()
    report = gpudoctor.audit(model, torch.randn(3, 4), mask=torch.ones(3, 8, device="meta"))
    m = report.first_mismatch
    assert m.module == "" and m.module_type == "Net"
    assert [(t.name, t.device) for t in m.offending] == [("input['mask']", "meta")]


def test_submodule_with_a_buffer_on_meta():
    model = Net()
    model.blocks[1].norm.register_buffer("running", torch.zeros(8, device="meta"))
    report = gpudoctor.audit(model, torch.randn(3, 4))
    m = report.first_mismatch
    assert m is not None and m.module == "blocks.1.norm" and m.module_type == "LayerNorm"
    assert [(t.name, t.kind, t.shape, t.device) for t in m.offending] == [
        ("blocks.1.norm.running", "buffer", (8,), "meta")
    ]
    # the mix did not raise here (the buffer is unused): found by the hooks, not by an exception
    assert report.error is None
    assert set(report.by_device()) == {"cpu", "meta"}


def test_first_in_execution_order():
    model = Net()
    model.head.to("meta")
    model.blocks[0].fc.to("meta")
    report = gpudoctor.audit(model, torch.randn(3, 4))
    assert report.first_mismatch.module == "blocks.0.fc"


def test_unreached_module_is_still_checked_after_an_exception():
    class Broken(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = nn.Linear(4, 4)

        def forward(self, x):
            raise ValueError("shape problem\nsecond line")

    model = Broken()
    model.b.register_buffer("stale", torch.zeros(1, device="meta"))
    report = gpudoctor.audit(model, torch.randn(1, 4))
    assert report.error == "ValueError: shape problem"
    assert report.first_mismatch.module == "b"


def test_training_mode_and_hooks_are_restored():
    model = Net()
    model.train()
    model.blocks[0].eval()
    gpudoctor.audit(model, torch.randn(3, 4))
    assert model.training and not model.blocks[0].training and model.blocks[1].training
    assert all(not m._forward_pre_hooks for m in model.modules())


def test_gradients_are_not_recorded():
    model = Net()
    gpudoctor.audit(model, torch.randn(3, 4))
    assert all(p.grad is None for p in model.parameters())


def test_rich_rendering_groups_by_device():
    from rich.console import Console

    model = Net()
    model.blocks[1].norm.register_buffer("running", torch.zeros(8, device="meta"))
    console = Console(record=True, width=160, color_system=None)
    console.print(gpudoctor.audit(model, torch.randn(3, 4)))
    text = console.export_text()
    assert "'blocks.1.norm' (LayerNorm) mixes devices cpu and meta" in text
    assert "where parameters and buffers live" in text
    assert "blocks.1.norm.running" in text and "← move" in text
    lines = [ln for ln in text.splitlines() if ln.strip().startswith(("│ cpu", "│ meta", "cpu", "meta"))]
    assert len(lines) >= 2


def test_not_a_module_is_a_type_error():
    with pytest.raises(TypeError, match="torch.nn.Module"):
        gpudoctor.audit(lambda x: x, torch.ones(1))


def test_importing_gpudoctor_does_not_import_torch():
    code = "import sys, gpudoctor, gpudoctor.device_audit; assert 'torch' not in sys.modules; print('ok')"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "ok", r.stderr
