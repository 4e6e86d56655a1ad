"""A stale CUDA_HOME (a directory that does not exist) does not hide a toolkit found in the
standard place: both facts are reported."""

from __future__ import annotations

import json
import os

from gpudoctor.checks.cuda_toolkit import evaluate
from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.cuda_toolkit import collect
from gpudoctor.facts import Facts, Unavailable
from gpudoctor.model import Status
from gpudoctor.testing import fake_system, write_tree


def _root(tmp_path, toolkit=True):
    if toolkit:
        write_tree(
            tmp_path,
            {
                "/usr/local/cuda-12.4/version.json": json.dumps({"cuda": {"version": "12.4.1"}}),
                "/usr/local/cuda-12.4/bin/nvcc": "#!/bin/sh\n",
            },
        )
        os.symlink("/usr/local/cuda-12.4", tmp_path / "usr" / "local" / "cuda")
    else:
        (tmp_path / "usr").mkdir()
    return tmp_path


def _facts(root, env):
    tk = collect(CollectContext(fake_system(root, env=env), CollectOptions()))
    return tk, Facts(domains={"cuda_toolkit": tk, "nvidia": Unavailable("no driver")})


def test_stale_cuda_home_still_finds_the_standard_toolkit(tmp_path):
    tk, facts = _facts(_root(tmp_path), {"CUDA_HOME": "/opt/cuda-11.0-removed"})
    assert tk.cuda_home == "/opt/cuda-11.0-removed" and tk.cuda_home_missing
    assert tk.version == "12.4.1" and tk.default_path == "/usr/local/cuda-12.4"
    (f,) = evaluate(facts)
    assert f.status is Status.WARN
    assert "/opt/cuda-11.0-removed, which does not exist" in f.summary and "12.4.1" in f.summary
    assert "export CUDA_HOME=/usr/local/cuda-12.4" in f.explanation


def test_stale_cuda_home_and_no_toolkit(tmp_path):
    tk, facts = _facts(_root(tmp_path, toolkit=False), {"CUDA_PATH": "/nope"})
    assert tk.cuda_home_missing and isinstance(tk.version, Unavailable)
    (f,) = evaluate(facts)
    assert f.status is Status.WARN and "no other toolkit was found" in f.summary and "unset CUDA_HOME" in f.explanation


def test_valid_cuda_home_wins_and_is_not_stale(tmp_path):
    write_tree(tmp_path, {"/opt/cuda/version.json": json.dumps({"cuda": {"version": "12.1.0"}})})
    tk, facts = _facts(_root(tmp_path), {"CUDA_HOME": "/opt/cuda"})
    assert not tk.cuda_home_missing and tk.version == "12.1.0"
    assert evaluate(facts)[0].status is Status.INFO
