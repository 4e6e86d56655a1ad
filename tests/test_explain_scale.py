"""explain at scale (issue 32, item 9): one error repeated with a new size on every line is one
diagnosis with a count, not 500 diagnoses (the cap) that hide every other error."""

from __future__ import annotations

import random

import pytest

from gpudoctor.explain import explain_text


def _oom(size: int, free: int, gpu: int = 0) -> str:
    return (
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {size}.00 MiB. GPU {gpu} has a total "
        f"capacity of 79.15 GiB of which {free}.00 MiB is free."
    )


def test_five_thousand_ooms_with_different_sizes_are_one_diagnosis_with_a_count():
    rng = random.Random(7)
    lines = [_oom(rng.randint(2, 900), rng.randint(1, 90)) for _ in range(5000)]
    lines.insert(
        2500, "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp, unhandled system error"
    )
    ex = explain_text("\n".join(lines))
    ooms = [m for m in ex.matches if m.signature.id == "cuda.out-of-memory"]
    assert len(ooms) == 1 and ooms[0].count == 5000 and ooms[0].line == 1
    [finding] = [f for f in ex.findings if f.check == "cuda.out-of-memory"]
    assert finding.evidence["occurrences"] == 5000
    # the other error in the flood is still found, not crowded out by the cap
    assert any("nccl" in m.signature.id for m in ex.matches), [m.signature.id for m in ex.matches]


def test_the_neighbour_other_gpus_stay_separate_diagnoses():
    ex = explain_text("\n".join([_oom(100, 5, gpu=0), _oom(200, 6, gpu=1), _oom(300, 7, gpu=0)]))
    ooms = sorted((m.values.get("gpu", ""), m.count) for m in ex.matches if m.signature.id == "cuda.out-of-memory")
    assert len(ooms) == 2 and sorted(c for _g, c in ooms) == [1, 2]


def test_the_healthy_twin_a_log_without_errors_has_no_diagnosis():
    assert explain_text("\n".join(f"step {i} loss 0.{i % 10}" for i in range(5000))).matches == ()


def _file_matches(path):
    from gpudoctor.explain_run import explain_file

    return [m.signature.id for m in explain_file(str(path)).matches]


OOM_LINE = "RuntimeError: CUDA error: out of memory"


@pytest.mark.parametrize(
    "encode",
    [
        lambda t: t.encode("utf-16"),  # with a BOM (PowerShell's Out-File)
        lambda t: t.encode("utf-16-le"),  # without one (PowerShell's `>`)
        lambda t: t.encode("utf-16-be"),
        lambda t: t.encode("utf-8-sig"),
        lambda t: t.encode("utf-8"),  # the twin: plain UTF-8 as before
    ],
)
def test_utf16_and_bom_logs_are_read(tmp_path, encode):
    log = tmp_path / "train.log"
    log.write_bytes(encode(f"step 1 loss 0.5\r\n{OOM_LINE}\r\n"))
    assert "cuda.error-out-of-memory" in _file_matches(log)


def test_binary_junk_with_nul_bytes_is_not_taken_for_utf16(tmp_path):
    """Every other byte NUL but the others not ASCII (b"\\x00\\xff"...): junk before a UTF-8 key line,
    read as UTF-8 (the break-it matrix's log on stdin)."""
    log = tmp_path / "train.log"
    log.write_bytes(b"\x00\xff" * 1000 + f"{OOM_LINE}\n".encode())
    assert "cuda.error-out-of-memory" in _file_matches(log)


def test_a_key_line_at_the_end_of_a_10_mb_line_is_read_and_line_numbers_stay_right(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("x" * 10_000_000 + " " + OOM_LINE + "\nok\n" + "Torch not compiled with CUDA enabled\n")
    from gpudoctor.explain_run import explain_file

    ex = explain_file(str(log))
    lines = {m.signature.id: m.line for m in ex.matches}
    assert lines["cuda.error-out-of-memory"] == 1 and lines["torch.not-compiled-with-cuda"] == 3
    assert max(len(m.text) for m in ex.matches) <= 4096
    # the neighbour: a huge line redrawn with carriage returns keeps its last state only
    bar = tmp_path / "bar.log"
    bar.write_text("".join(f"\r{i}%|####" for i in range(200_000)) + "\r" + OOM_LINE + "\n")
    assert _file_matches(bar) == ["cuda.error-out-of-memory"]


@pytest.mark.parametrize(
    ("text", "sig"),
    [
        ("RuntimeError: Distributed package doesn't have NCCL built in", "torch.cpu-build-nccl"),
        ("AssertionError: Torch not compiled with CUDA enabled", "torch.not-compiled-with-cuda"),
    ],
)
def test_cpu_build_errors_are_recognised(text, sig):
    assert [m.signature.id for m in explain_text(text).matches] == [sig]
