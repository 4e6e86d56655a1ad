"""amp.readiness: the precision each GPU runs fast (data/precision.toml), settings that ask for one
it lacks (Accelerate, DeepSpeed, Lightning, Trainer keys, the environment) read by the real
collector from files, and the --deep matmul throughput against the datasheet."""

from __future__ import annotations

import pytest

from gpudoctor import engine
from gpudoctor.checks import SkipCheck, amp_readiness
from gpudoctor.collect import CollectOptions, all_collectors
from gpudoctor.data import load_table
from gpudoctor.facts.precision import PrecisionFacts
from gpudoctor.facts.targets import SmokeDevice, SmokeFacts
from gpudoctor.model import Status
from gpudoctor.precision import capabilities, recommend
from gpudoctor.testing import (
    fake_system,
    make_facts,
    no_nvidia,
    nvidia_facts,
    nvml_device,
    probe_facts,
    target,
    targets,
    torch_facts,
    write_tree,
)

HOME = "/home/user"
ACCEL = f"{HOME}/.cache/huggingface/accelerate/default_config.yaml"


def collect_precision(root, env=None, train_configs=()):
    system = fake_system(root, env={"HOME": HOME, **(env or {})}, home=HOME)
    options = CollectOptions(offline=True, extra={"train_configs": tuple(train_configs)})
    facts, errors = engine.collect_facts(["precision"], system, options, all_collectors())
    assert errors == []
    return facts.get("precision")


def judge(tmp_path, gpus, files=None, env=None, train_configs=(), torch_cuda="12.4", smoke=None):
    root = write_tree(tmp_path / "root", files or {})
    prec = collect_precision(root, env, train_configs)
    probe = probe_facts(torch=torch_facts("2.5.1+cu124", cuda=torch_cuda), smoke=smoke) if smoke else None
    facts = make_facts(
        nvidia=nvidia_facts(devices=[nvml_device(i, name, cc) for i, (name, cc) in enumerate(gpus)])
        if gpus
        else no_nvidia(),
        precision=prec,
        targets=targets(target(probe or probe_facts(torch=torch_facts("2.5.1+cu124", cuda=torch_cuda)))),
    )
    (finding,) = amp_readiness.evaluate(facts)
    return finding


DS_BF16 = '{\n  "train_micro_batch_size_per_gpu": 4,\n  "bf16": {\n    "enabled": true\n  },\n  "zero_optimization": {"stage": 2}\n}\n'
DS_FP16 = DS_BF16.replace('"bf16"', '"fp16"')


def test_deepspeed_bf16_on_a_v100_fails_naming_file_line_and_gpu(tmp_path):
    f = judge(
        tmp_path,
        [("Tesla V100-SXM2-32GB", "7.0")] * 8,
        {"/srv/train/ds.json": DS_BF16},
        train_configs=["/srv/train/ds.json"],
    )
    assert f.status is Status.FAIL
    text = f.summary + f.explanation
    assert "/srv/train/ds.json, line 3" in text and "8x Tesla V100-SXM2-32GB" in text and "Volta" in text
    assert "Ampere (compute capability 8.0)" in text
    assert '"fp16": {"enabled": true}' in text  # the DeepSpeed setting to use instead


def test_twin_deepspeed_fp16_on_a_v100_is_ok(tmp_path):
    f = judge(
        tmp_path,
        [("Tesla V100-SXM2-32GB", "7.0")],
        {"/srv/train/ds.json": DS_FP16},
        train_configs=["/srv/train/ds.json"],
    )
    assert f.status is Status.OK and "train in fp16" in f.summary and "avoid bf16, tf32" in f.summary


def test_lightning_bf16_mixed_on_a_t4_fails_with_lightnings_own_setting(tmp_path):
    cfg = "seed_everything: 1\ntrainer:\n  max_epochs: 3\n  precision: bf16-mixed\n"
    f = judge(
        tmp_path, [("Tesla T4", "7.5")], {"/srv/train/config.yaml": cfg}, train_configs=["/srv/train/config.yaml"]
    )
    assert f.status is Status.FAIL
    assert "line 4" in f.explanation and "precision: 16-mixed" in f.explanation


def test_trainer_tf32_on_a_t4_fails_and_on_an_a10_is_ok(tmp_path):
    cfg = "model_name_or_path: m\nbf16: false\ntf32: true\n"
    bad = judge(tmp_path / "a", [("Tesla T4", "7.5")], {"/w/args.yaml": cfg}, train_configs=["/w/args.yaml"])
    assert bad.status is Status.FAIL and "tf32" in bad.summary and "Tesla T4" in bad.summary
    good = judge(tmp_path / "b", [("NVIDIA A10", "8.6")], {"/w/args.yaml": cfg}, train_configs=["/w/args.yaml"])
    assert good.status is Status.OK and "train in bf16" in good.summary


def test_fp16_amp_on_a_gtx_1660_without_tensor_cores_warns_and_an_rtx_2080_is_ok(tmp_path):
    env = {"ACCELERATE_MIXED_PRECISION": "fp16"}
    gtx = judge(tmp_path / "a", [("NVIDIA GeForce GTX 1660 SUPER", "7.5")], env=env)
    assert gtx.status is Status.WARN
    assert "no fp16 Tensor Cores" in gtx.summary and "ACCELERATE_MIXED_PRECISION=no" in gtx.explanation
    assert "NaN" in gtx.explanation  # the known black-image symptom of fp16 on TU116
    rtx = judge(tmp_path / "b", [("NVIDIA GeForce RTX 2080 Ti", "7.5")], env=env)
    assert rtx.status is Status.OK and "train in fp16" in rtx.summary


def test_fp16_on_a_pascal_p40_warns(tmp_path):
    files = {ACCEL: "compute_environment: LOCAL_MACHINE\nmixed_precision: fp16\nnum_processes: 1\n"}
    f = judge(tmp_path, [("Tesla P40", "6.1")], files)
    assert f.status is Status.WARN and "line 2" in f.explanation and "1/64" in f.explanation


def test_rtx_4090_has_fp8_and_fp8_with_a_cu118_build_warns(tmp_path):
    files = {ACCEL: "mixed_precision: fp8\n"}
    ok = judge(tmp_path / "a", [("NVIDIA GeForce RTX 4090", "8.9")], files, torch_cuda="12.4")
    assert ok.status is Status.OK and "FP8 is available" in ok.explanation
    assert ok.evidence["gpus"]["NVIDIA GeForce RTX 4090"]["tensor_core_precisions"][:4] == [
        "fp16",
        "bf16",
        "tf32",
        "fp8",
    ]
    old = judge(tmp_path / "b", [("NVIDIA GeForce RTX 4090", "8.9")], files, torch_cuda="11.8")
    assert old.status is Status.WARN and "CUDA >= 12.1" in old.summary


def test_fp8_on_an_a100_fails(tmp_path):
    f = judge(tmp_path, [("NVIDIA A100-SXM4-80GB", "8.0")], {ACCEL: "mixed_precision: fp8\n"})
    assert f.status is Status.FAIL and "Ada Lovelace (8.9) or Hopper (9.0)" in f.explanation


@pytest.mark.parametrize(
    ("name", "cc", "best"), [("NVIDIA H100 80GB HBM3", "9.0", "bf16"), ("NVIDIA A100-SXM4-40GB", "8.0", "bf16")]
)
def test_h100_and_a100_with_bf16_working(tmp_path, name, cc, best):
    f = judge(tmp_path, [(name, cc)], {ACCEL: "mixed_precision: bf16\n"})
    assert f.status is Status.OK and f"train in {best}" in f.summary
    assert "torch.bfloat16" in f.explanation


def test_tf32_asked_while_the_override_turns_it_off_warns(tmp_path):
    f = judge(
        tmp_path,
        [("NVIDIA A100-SXM4-80GB", "8.0")],
        {"/w/a.json": '{"tf32": true}'},
        env={"NVIDIA_TF32_OVERRIDE": "0"},
        train_configs=["/w/a.json"],
    )
    assert f.status is Status.WARN and "NVIDIA_TF32_OVERRIDE=0" in f.summary


def test_cpu_only_machine_is_not_applicable_once(tmp_path):
    facts = make_facts(nvidia=no_nvidia(), precision=PrecisionFacts(), targets=targets())
    findings = engine.evaluate([amp_readiness.CHECK], facts)
    assert [(f.status, f.summary[:16]) for f in findings] == [(Status.SKIP, "no NVIDIA GPU: m")]


def test_an_unreadable_config_is_said(tmp_path):
    f = judge(
        tmp_path,
        [("NVIDIA L4", "8.9")],
        {"/w/c.yaml": "trainer: [unclosed\n"},
        train_configs=["/w/c.yaml", "/w/missing.json"],
    )
    assert f.status is Status.WARN
    assert "/w/c.yaml: not valid YAML" in f.explanation and "/w/missing.json: no such file" in f.explanation


def test_accelerate_config_follows_hf_home(tmp_path):
    root = write_tree(tmp_path, {"/data/hf/accelerate/default_config.yaml": "mixed_precision: bf16\n"})
    prec = collect_precision(root, {"HF_HOME": "/data/hf"})
    assert [(r.precision, r.tool, r.line) for r in prec.requests] == [("bf16", "accelerate", 1)]


def _smoke(tflops):
    return SmokeFacts(devices=(SmokeDevice(0, "cuda:0", matmul_ok=True, matmul_tflops=tflops),), budget_s=30.0)


def test_deep_measurement_is_reported_against_the_datasheet(tmp_path):
    f = judge(tmp_path, [("NVIDIA H100 80GB HBM3", "9.0")], smoke=_smoke({"fp32": 48.0, "tf32": 300.0, "bf16": 640.0}))
    assert f.status is Status.OK
    assert (
        "cuda:0 fp32 48.0, tf32 300.0, bf16 640.0 TFLOP/s (fastest: bf16), 65% of the datasheet's 989.4"
        in f.explanation
    )


def test_deep_measurement_far_below_the_datasheet_warns(tmp_path):
    f = judge(tmp_path, [("NVIDIA H100 80GB HBM3", "9.0")], smoke=_smoke({"fp32": 20.0, "bf16": 90.0}))
    assert f.status is Status.WARN and "9%" in f.summary and "throttled" in f.summary


def test_the_table_covers_maxwell_to_blackwell_with_a_source_per_row():
    table = load_table("precision")
    archs = {row["arch"].split(" ")[0] for row in table["arch"]}
    assert {"Maxwell", "Pascal", "Volta", "Turing", "Ampere", "Ada", "Hopper", "Blackwell"} <= archs
    for kind in ("arch", "model", "datasheet"):
        assert all(row.get("source") for row in table[kind]), kind
    known = {row["cc"] for row in load_table("gpu_arch")["arch"] if float(row["cc"]) >= 5.0}
    assert known <= {row["cc"] for row in table["arch"]}


@pytest.mark.parametrize(
    ("name", "cc", "best", "tc"),
    [
        ("NVIDIA GeForce GTX 1650", "7.5", "fp32", False),
        ("NVIDIA T1000 8GB", "7.5", "fp32", False),
        ("NVIDIA GeForce MX450", "7.5", "fp32", False),
        ("Tesla T4", "7.5", "fp16", True),
        ("NVIDIA GeForce GTX 1080 Ti", "6.1", "fp32", False),
        ("NVIDIA B200", "10.0", "bf16", True),
    ],
)
def test_capability_exceptions_by_board(name, cc, best, tc):
    caps = capabilities(name, cc)
    assert caps is not None and caps.fp16_tc is tc and recommend(caps)[0] == best


def test_an_oversized_config_in_an_image_is_refused_by_its_size_without_reading_it(tmp_path, monkeypatch):
    big = '{"bf16": true, "pad": "' + "x" * (2 * 1024 * 1024) + '"}'
    root = write_tree(tmp_path / "root", {"/w/big.json": big, "/w/small.json": '{"fp16": true}'})
    from gpudoctor import system as system_module

    read = []
    real = system_module.Files.read_bytes

    def spy(self, path, tail=None):
        read.append(path)
        return real(self, path, tail)

    monkeypatch.setattr(system_module.Files, "read_bytes", spy)
    prec = collect_precision(root, train_configs=["/w/big.json", "/w/small.json"])
    assert any("/w/big.json: larger than" in p for p in prec.problems)
    assert "/w/big.json" not in read and "/w/small.json" in read  # the neighbour is read and judged
    assert [r.precision for r in prec.requests] == ["fp16"]


def test_an_unreadable_config_is_said_on_a_machine_without_a_gpu(tmp_path):
    root = write_tree(tmp_path / "root", {})
    prec = collect_precision(root, train_configs=["/w/missing.json"])
    (f,) = amp_readiness.evaluate(make_facts(nvidia=no_nvidia(), precision=prec, targets=targets()))
    assert f.status is Status.WARN and "/w/missing.json" in f.summary


def test_gpus_not_collected_are_not_called_absent():
    facts = make_facts(precision=PrecisionFacts())
    with pytest.raises(SkipCheck, match="the GPUs are not known"):
        amp_readiness.evaluate(facts)
