"""Shell completion through click, as the README documents it: the console
script answers ``_GPUDOCTOR_COMPLETE=bash_source`` with a script and
``bash_complete`` with the candidates for the words typed so far."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

GPUDOCTOR = shutil.which("gpudoctor", path=str(Path(sys.executable).parent))


def _complete(tmp_path: Path, mode: str, words: str = "", cword: int = 0) -> subprocess.CompletedProcess[str]:
    assert GPUDOCTOR, "the gpudoctor console script is installed next to the test interpreter"
    env = dict(os.environ, HOME=str(tmp_path), _GPUDOCTOR_COMPLETE=mode, COMP_WORDS=words, COMP_CWORD=str(cword))
    return subprocess.run([GPUDOCTOR], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)


def test_bash_source_prints_the_completion_function(tmp_path: Path) -> None:
    proc = _complete(tmp_path, "bash_source")
    assert proc.returncode == 0, proc.stderr
    assert "_gpudoctor_completion()" in proc.stdout and "complete -o nosort -F _gpudoctor_completion" in proc.stdout


@pytest.mark.parametrize(
    ("words", "cword", "expected", "absent"),
    [
        ("gpudoctor ch", 1, {"check"}, {"fix", "list"}),
        ("gpudoctor check --for", 2, {"--format"}, {"--offline"}),
        ("gpudoctor check --format ", 3, {"console", "json", "markdown"}, {"check"}),
        # check and fix ids (and check families), which the commands take as arguments
        ("gpudoctor check cud", 2, {"cuda", "cudnn", "cuda.driver", "cudnn.load"}, {"torch.install"}),
        ("gpudoctor check --skip dev", 3, {"devices", "devices.ecc"}, {"dataloader.shm"}),
        ("gpudoctor gate --skip data", 3, {"dataloader.shm"}, {"devices.ecc"}),
        ("gpudoctor fix pi", 2, {"pip.index-url"}, {"pip.config", "uv.index-url"}),
    ],
)
def test_bash_complete_offers_commands_options_and_choices(
    tmp_path: Path, words: str, cword: int, expected: set[str], absent: set[str]
) -> None:
    proc = _complete(tmp_path, "bash_complete", words, cword)
    assert proc.returncode == 0, proc.stderr
    offered = {line.split(",", 1)[1] for line in proc.stdout.splitlines() if "," in line}
    assert expected <= offered and not absent & offered, offered
