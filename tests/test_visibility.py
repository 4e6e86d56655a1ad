"""One model of CUDA_VISIBLE_DEVICES (gpudoctor.visibility): indices, UUIDs, MIG UUIDs, empty, garbage."""

from __future__ import annotations

import pytest

from gpudoctor.visibility import Gpu, parse_visible

TWO = [Gpu(0, "GPU-8f3e1a2b-0000-1111-2222-333344445555"), Gpu(1, "GPU-aa11bb22-0000-1111-2222-333344445555")]
MIG = [Gpu(0, "GPU-8f3e1a2b-0000", mig=True, mig_uuids=("MIG-89c850dc-38e3-57df-85c7-690c186b68e9",))]


@pytest.mark.parametrize(
    ("value", "gpus", "names"),
    [
        ("0,1", TWO, True),
        ("1", TWO, True),
        ("2", TWO, False),  # an index this machine does not have: never "ok"
        ("GPU-8f3e", TWO, True),  # a UUID prefix
        ("GPU-deadbeef", TWO, False),
        ("MIG-89c850dc-38e3-57df-85c7-690c186b68e9", MIG, True),
        ("MIG-00000000-0000-0000-0000-000000000000", MIG, False),  # no such MIG device
        ("MIG-89c850dc-38e3-57df-85c7-690c186b68e9", TWO, True),  # MIG mode unknown: may exist
        ("MIG-89c850dc", [Gpu(0, "GPU-1", mig=False)], False),  # no GPU in MIG mode
        ("", TWO, False),
        ("-1", TWO, False),
        ("NoDevFiles", TWO, False),
        ("void", TWO, False),
        ("cuda:0", TWO, False),  # garbage: CUDA stops at it
        ("0", [], None),  # no GPUs known to judge by
        ("", [], False),  # hides every GPU whatever the machine has
    ],
)
def test_a_value_names_a_gpu_only_when_this_machine_has_it(value, gpus, names):
    assert parse_visible(value).names_gpus(gpus) is names


def test_cuda_stops_at_the_first_entry_it_cannot_use():
    v = parse_visible("1, 7, 0")
    assert [e.form for e in v.entries] == ["index", "index", "index"]
    assert v.first_invalid(TWO) == 1 and not v.hides_all
    assert parse_visible("none,0").hides_all and parse_visible("x,0").hides_all
    assert parse_visible("MIG-a,MIG-b").migs == ["MIG-a", "MIG-b"]
