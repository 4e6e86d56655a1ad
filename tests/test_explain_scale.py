"""explain at scale (issue 32, item 9): one error repeated with a new size on every line is one
diagnosis with a count, not 500 diagnoses (the cap) that hide every other error."""

from __future__ import annotations

import random

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
