"""Real-world wordings (tests/fixtures/explain/field-instances.toml): each inside a healthy log is
recognised by the right signature with its values; each healthy or different twin is not."""

from __future__ import annotations

import sys

import pytest

from conftest import FIXTURES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the 3.10 branch
    import tomli as tomllib
from gpudoctor.explain import explain_text, load_signatures, match_finding

DATA = tomllib.loads((FIXTURES / "explain/field-instances.toml").read_text())
HEALTHY = (FIXTURES / "explain/training-ok.log").read_text().splitlines()
IDS = {s.id for s in load_signatures()}


def _in_noise(text: str) -> str:
    return "\n".join(HEALTHY[:12] + text.splitlines() + HEALTHY[12:])


def _label(row: dict) -> str:
    return row["signature"] + ":" + row["text"].splitlines()[0][:40]


@pytest.mark.parametrize("row", DATA["instance"], ids=_label)
def test_field_instance_is_recognised_with_its_values(row):
    assert row["signature"] in IDS and row["source"]
    result = explain_text(_in_noise(row["text"]))
    ids = [m.signature.id for m in result.matches]
    assert ids and ids[0] == row["signature"], ids
    top = result.matches[0]
    assert {k: top.values.get(k) for k in row.get("values", {})} == row.get("values", {})
    assert top.line > 12  # found where it is, not in the healthy lines around it
    finding = match_finding(top)
    assert "`" in finding.explanation  # the remedy names exact commands
    names = set(top.signature.groups) | set(top.signature.derive)
    unfilled = [n for n in names if f"<{n}>" in finding.summary + finding.explanation]
    assert not unfilled  # every value the text reads is filled in or has a default wording


@pytest.mark.parametrize("row", DATA["twin"], ids=_label)
def test_field_twin_is_not_claimed(row):
    assert row["signature"] in IDS and row["source"]
    ids = [m.signature.id for m in explain_text(_in_noise(row["text"])).matches]
    assert row["signature"] not in ids, ids


def test_the_field_set_covers_many_kinds():
    assert len(DATA["instance"]) >= 30
    assert len({r["signature"].split(".")[0] for r in DATA["instance"]}) >= 10


def test_a_wrapper_gives_way_to_the_cause_printed_above_it():
    """XLA's 'DNN library initialization failed. Look at the errors above' names no cause; when the
    cuDNN version line is above it (jax-ml/jax#16167, #15742), that line is the diagnosis, and the
    wrapper alone is still recognised as a wrapper."""
    cause = (
        "2023-05-29 05:39:19.492073: E external/xla/xla/stream_executor/cuda/cuda_dnn.cc:427] Loaded runtime"
        " CuDNN library: 8.5.0 but source was compiled with: 8.6.0.  CuDNN library needs to have matching major"
        " version and equal or higher minor version."
    )
    wrapper = (
        "jaxlib.xla_extension.XlaRuntimeError: FAILED_PRECONDITION: DNN library initialization failed."
        " Look at the errors above for more details."
    )
    ids = [
        m.signature.id
        for m in explain_text(_in_noise(cause + "\nTraceback (most recent call last):\n" + wrapper)).matches
    ]
    assert ids == ["cudnn.tf-runtime-older"]
    assert [m.signature.id for m in explain_text(_in_noise(wrapper)).matches] == ["cudnn.dnn-init-failed"]
