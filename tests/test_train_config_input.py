"""``gpudoctor check --train-config FILE`` refuses a file the precision collector could not use
(missing, FIFO, directory, binary, too large, nested too deeply, not JSON/YAML, not a mapping)
with one line and exit 2, before anything is collected; before, such a file was only noted in
the facts and a machine without a GPU ended with exit 0 as if it had been judged."""

from __future__ import annotations

import os

import pytest

from _foundation import run_gpudoctor
from gpudoctor.cli.check import check_train_configs


def _bad(tmp_path):
    deep_yaml = "a:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 700))
    return {
        "missing.json": (None, "No such file or directory"),
        "binary.json": (b"{\x00\x01\x02", "binary file"),
        "huge.json": (b'{"bf16": true, "pad": "' + b"x" * (2 * 1024 * 1024) + b'"}', "too large"),
        "deep.json": (b"[" * 5000 + b"]" * 5000, "nested deeper than 64"),
        "deep.yaml": (deep_yaml.encode(), "not valid YAML"),
        "broken.yaml": (b"trainer: [unclosed\n", "not valid YAML"),
        "broken.json": (b'{"bf16": ', "not JSON"),
        "list.json": (b"[1, 2]", "but a list"),
        "empty.yaml": (b"", "an empty file"),
        "tagged.yaml": (b'!!python/object/apply:os.system ["true"]\n', "not valid YAML"),
    }


@pytest.mark.parametrize(
    "name",
    [
        "missing.json",
        "binary.json",
        "huge.json",
        "deep.json",
        "deep.yaml",
        "broken.yaml",
        "broken.json",
        "list.json",
        "empty.yaml",
        "tagged.yaml",
    ],
)
def test_a_bad_train_config_is_one_line_and_exit_2(tmp_path, name):
    content, text = _bad(tmp_path)[name]
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    before = sorted((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in tmp_path.iterdir())
    proc = run_gpudoctor("check", "amp", "--offline", "--train-config", str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert text in proc.stderr and f"--train-config {path}" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert proc.stdout == ""
    assert sorted((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in tmp_path.iterdir()) == before


def test_a_fifo_and_a_directory_are_refused_without_blocking(tmp_path):
    fifo = tmp_path / "cfg.yaml"
    os.mkfifo(fifo)
    for path, text in ((fifo, "not a regular file"), (tmp_path, "is a directory")):
        proc = run_gpudoctor("check", "amp", "--offline", "--train-config", str(path), timeout=60)
        assert proc.returncode == 2 and text in proc.stderr and "Traceback" not in proc.stderr


def test_the_neighbours_deepspeed_json_lightning_and_accelerate_yaml_pass(tmp_path):
    ds = tmp_path / "ds_config.json"
    ds.write_text('{"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true}}\n')
    lightning = tmp_path / "trainer.yaml"
    lightning.write_text("trainer:\n  precision: bf16-mixed\n")
    accelerate = tmp_path / "default_config.yaml"
    accelerate.write_text("compute_environment: LOCAL_MACHINE\nmixed_precision: fp16\n")
    assert check_train_configs((str(ds), str(lightning), str(accelerate))) is None


def test_only_the_bad_one_of_several_is_named(tmp_path):
    good = tmp_path / "good.json"
    good.write_text('{"fp16": {"enabled": true}}')
    proc = run_gpudoctor(
        "check", "amp", "--offline", "--train-config", str(good), "--train-config", str(tmp_path / "nope.yaml")
    )
    assert proc.returncode == 2 and "nope.yaml" in proc.stderr and "good.json" not in proc.stderr
