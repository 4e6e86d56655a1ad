"""The explain log corpus: every real log under tests/field/logs, explained and judged.

One parametrised test over the log files: adding a log is adding a ``.log`` and its ``.toml``.
A log marked ``xfail`` in its sidecar is a known gap; the mark is strict, so a log the tool gets
right must lose it.
"""

from __future__ import annotations

from collections import Counter

import pytest
from logs_replay import AREAS, LOGS, Log, judge, judge_path, load_log, log_paths

PATHS = log_paths()


def _param(path):
    try:
        xfail = load_log(path).spec.get("xfail")
    except ValueError:
        xfail = None  # malformed: the test reports why
    marks = [pytest.mark.xfail(reason=xfail, strict=True)] if xfail else []
    return pytest.param(path, id=f"{path.parent.name}/{path.stem}", marks=marks)


@pytest.mark.parametrize("path", [_param(p) for p in PATHS])
def test_field_log(path):
    result = judge_path(path)
    assert result.right, result.why


def test_every_log_has_a_sidecar_and_every_sidecar_a_log():
    logs = {p.with_suffix("") for p in LOGS.glob("*/*.log")}
    sidecars = {p.with_suffix("") for p in LOGS.glob("*/*.toml")}
    assert logs == sidecars
    assert {p.parent.name for p in PATHS} <= set(AREAS)


def test_the_corpus_is_spread():
    logs = [load_log(p) for p in PATHS]
    assert Counter(log.healthy for log in logs)[True] >= 30
    assert len({log.area for log in logs if not log.healthy}) == len(AREAS)
    frameworks = {log.spec.get("framework") for log in logs} - {None, "torch"}
    assert len(frameworks) >= 5, frameworks
    assert len({log.spec["source"] for log in logs}) >= 0.8 * len(logs)  # mostly distinct reports


def _log(text: str, **spec) -> Log:
    return Log("gpu", "made", text, {"source": "https://example.org/1", "kind": "k", **spec})


OOM = "\n".join(
    [
        "epoch 1: 100%|##########| 50/50 [00:10<00:00]",
        "Traceback (most recent call last):",
        '  File "train.py", line 3, in <module>',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity"
        " of 23.64 GiB of which 1.10 GiB is free. Including non-PyTorch memory, this process has 22.50 GiB"
        " memory in use. Of the allocated memory 21.00 GiB is allocated by PyTorch, and 1.10 GiB is reserved"
        " by PyTorch but unallocated.",
        "done",
    ]
)


def test_the_judge_holds_the_top_diagnosis_to_the_sidecar():
    right = judge(_log(OOM, expect="cuda.out-of-memory", keywords=["2.00 GiB", "batch"]))
    assert right.right, right.why
    wrong_id = judge(_log(OOM, expect="cuda.out-of-memory-other-process", keywords=["batch"]))
    assert not wrong_id.right and "expected cuda.out-of-memory-other-process" in wrong_id.why
    wrong_word = judge(_log(OOM, expect="cuda.out-of-memory", keywords=["no such word"]))
    assert not wrong_word.right and "does not say ['no such word']" in wrong_word.why
    # the quoted line is not the diagnosis: a word only the log holds does not count
    quoted = judge(_log(OOM, expect="cuda.out-of-memory", keywords=["23.64 GiB"]))
    assert not quoted.right
    assert not judge(_log(OOM, healthy=True)).right
    assert judge(_log("ok\n" * 5, healthy=True)).right


def test_the_judge_counts_a_repeated_error_once():
    """Three ranks timing out on one collective are one diagnosis, not three."""
    lines = [
        f"[rank{r}]:[E626 06:24:44.9 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation"
        f" timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000)"
        f" ran for 6000{r}0 milliseconds before timing out."
        for r in range(3)
    ]
    result = judge(
        _log("\n".join(["step 10", "step 11", *lines]), expect="nccl.collective-timeout", keywords=["timeout"])
    )
    assert result.right, result.why
    assert "collective-timeout (line 3)" in result.why and result.why.count("collective-timeout") == 1


def test_a_malformed_log_is_a_wrong_result_not_a_crash(tmp_path):
    d = tmp_path / "gpu"
    d.mkdir()
    (d / "short.log").write_text("one line\n")
    (d / "short.toml").write_text('kind = "k"\nexpect = "no.such-signature"\n')
    result = judge_path(d / "short.log")
    assert not result.right
    assert "source must be a public URL" in result.why
    assert "1 lines" in result.why and "expect names no signature" in result.why
