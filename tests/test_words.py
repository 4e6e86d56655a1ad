"""gpudoctor.words (counting nouns and verbs) and every report line that counts: kernels, CPU
limits, fix history, an empty snapshot."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from _foundation import run_gpudoctor
from gpudoctor.cli import cli
from gpudoctor.words import noun, plural, verb

# --------------------------------------------------------------------------- (issue 19) 7. counting words


def test_words():
    assert plural(1, "kernel") == "1 kernel" and plural(2, "kernel") == "2 kernels" and plural(0, "file") == "0 files"
    assert plural(2, "index", "indexes") == "2 indexes" and plural(1.0, "CPU") == "1 CPU"
    assert plural(1.5, "CPU") == "1.5 CPUs"
    assert noun(1, "file") == "file" and verb(1, "is", "are") == "is" and verb(2, "is", "are") == "are"


def _broken_kernels(home: Path, n: int) -> None:
    for i in range(n):
        d = home / ".local/share/jupyter/kernels" / f"gone{i}"
        d.mkdir(parents=True)
        (d / "kernel.json").write_text(
            json.dumps(
                {
                    "argv": [f"/nonexistent/env{i}/bin/python", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    "display_name": f"Gone {i}",
                    "language": "python",
                }
            )
        )


_KERNELS_RE = re.compile(r"(\d+) of (\d+) (Python kernels?) (is|are) broken or (does|do) not see")


@pytest.mark.parametrize("n", [1, 2])
def test_kernel_summary_agrees_with_its_counts(isolated_home, n):
    _broken_kernels(isolated_home, n)
    result = CliRunner().invoke(cli, ["check", "jupyter.kernels", "--offline"])
    m = _KERNELS_RE.search(" ".join(result.output.split()))
    assert m, result.output
    bad, total, noun_, is_are, do_does = m.groups()
    assert int(bad) == n
    assert noun_ == ("Python kernel" if total == "1" else "Python kernels")
    assert (is_are, do_does) == (("is", "does") if n == 1 else ("are", "do"))


def test_fix_history_and_undo_are_modes_of_their_own():
    """`fix --all --undo` used to undo silently, `--history --undo` to ignore --undo."""
    for args, named in (
        (["--all", "--undo"], "--undo and --all"),
        (["--history", "--undo"], "--history and --undo"),
        (["--history", "--all"], "--history and --all"),
    ):
        proc = run_gpudoctor("fix", *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert named in proc.stderr and "contradict" in proc.stderr


def test_an_empty_snapshot_is_said_to_be_empty():
    proc = run_gpudoctor("check", "--facts", "-", input='{"schema_version": 2, "domains": {}}')
    assert proc.returncode == 4  # unknown, never OK (issue 32)
    assert proc.stdout.splitlines()[0].startswith(
        "[n/a] gpudoctor: UNKNOWN — the snapshot holds no facts: nothing was judged"
    )
