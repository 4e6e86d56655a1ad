"""`gpudoctor fix` end to end with a small demo check and fix (registry injected), on a real temp root.

The demo check reads /etc/demo.conf under the root through a closure (test
scaffolding only; real checks read facts) and fails unless it says
``mode = fast``; the demo fix plans that edit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpudoctor import apply as ap
from gpudoctor.cli import fix as cli_fix
from gpudoctor.cli import main
from gpudoctor.model import Check, FileEdit, Fix, FixPlan, FixRefused, Status
from gpudoctor.registry import Registry

STATE: dict = {}


def _demo_text():
    p = Path(STATE["root"]) / "etc/demo.conf"
    return p.read_text() if p.exists() else None


def _evaluate(facts):
    text = _demo_text()
    if text is not None and "mode = fast" in text:
        return [CHECK.finding(Status.OK, "demo is fast")]
    return [CHECK.finding(Status.FAIL, "demo is slow", fixes=("demo.fast",))]


def _plan(facts, finding, options):
    if options.get("refuse"):
        raise FixRefused("edit /etc/demo.conf by hand: set mode = fast")
    old = _demo_text()
    if old is not None and "mode = fast" in old:
        return FixPlan("demo.fast", "set mode = fast", (FileEdit("/etc/demo.conf", old, old),), ("demo.check",))
    new = (
        (old or "").replace("mode = slow", "mode = fast")
        if old and "mode = slow" in old
        else (old or "") + "mode = fast\n"
    )
    return FixPlan(
        "demo.fast",
        "set mode = fast in /etc/demo.conf",
        (FileEdit("/etc/demo.conf", old, new),),
        ("demo.check",),
        notes=("systemctl restart demo",),
    )


CHECK = Check(id="demo.check", title="demo", needs=(), evaluate=_evaluate)
FIX = Fix(id="demo.fast", title="make demo fast", addresses=("demo.check",), plan=_plan)


@pytest.fixture
def root(tmp_path, monkeypatch):
    r = tmp_path / "root"
    (r / "etc").mkdir(parents=True)
    (r / "etc/demo.conf").write_text("# demo\nmode = slow\nother = 1\n")
    STATE["root"] = str(r)
    reg = Registry(
        checks={"demo.check": CHECK},
        fixes={"demo.fast": FIX},
        providers={"check:demo.check": "test", "fix:demo.fast": "test"},
    )
    monkeypatch.setattr(cli_fix, "load_registry", lambda: reg)
    return r


def run(capsys, *args):
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return info.value.code, out, err


def test_lists_offered_fixes_without_ids(root, capsys):
    code, out, _ = run(capsys, "fix", "--root", str(root))
    assert code == 0
    assert "demo.fast  (demo.check: fail: demo is slow)" in out
    assert "gpudoctor fix demo.fast" in out


def test_no_tty_without_yes_shows_diff_writes_nothing(root, capsys):
    code, out, err = run(capsys, "fix", "demo.fast", "--root", str(root))
    assert code == 2
    assert "-mode = slow\n+mode = fast\n" in out
    assert "rerun with --yes" in err and len(err.strip().splitlines()) == 1
    assert (root / "etc/demo.conf").read_text() == "# demo\nmode = slow\nother = 1\n"
    assert ap.Journal().transactions() == []


def test_dry_run_writes_nothing(root, capsys):
    code, out, _ = run(capsys, "fix", "--all", "--dry-run", "--root", str(root))
    assert code == 0 and "dry run: nothing was written" in out and "+mode = fast" in out
    assert "mode = slow" in (root / "etc/demo.conf").read_text()


def test_confirm_on_terminal(root, capsys, monkeypatch):
    monkeypatch.setattr(cli_fix, "stdin_is_tty", lambda: True)
    monkeypatch.setattr("click.confirm", lambda *a, **k: False)
    code, out, _ = run(capsys, "fix", "demo.fast", "--root", str(root))
    assert code == 1 and "nothing was written" in out
    monkeypatch.setattr("click.confirm", lambda *a, **k: True)
    code, out, _ = run(capsys, "fix", "demo.fast", "--root", str(root))
    assert code == 0 and "mode = fast" in (root / "etc/demo.conf").read_text()


def test_all_twice_then_undo_and_history(root, capsys):
    code, out, _ = run(capsys, "fix", "--all", "--yes", "--root", str(root))
    assert code == 0, out
    assert (root / "etc/demo.conf").read_text() == "# demo\nmode = fast\nother = 1\n"
    assert "demo.check: fail -> ok" in out
    assert "systemctl restart demo" in out
    [txn] = ap.Journal().transactions()
    assert f"gpudoctor fix --undo {txn.id}" in out

    code, out, _ = run(capsys, "fix", "--all", "--yes", "--root", str(root))
    assert code == 0 and "nothing to fix" in out
    code, out, _ = run(capsys, "fix", "demo.fast", "--yes", "--root", str(root))
    assert code == 0 and "already fixed" in out
    assert len(ap.Journal().transactions()) == 1

    code, out, _ = run(capsys, "fix", "--history")
    assert code == 0 and txn.id in out and "applied" in out and "demo.fast" in out
    code, out, _ = run(capsys, "fix", "--undo")
    assert code == 0 and "restored /etc/demo.conf" in out
    assert (root / "etc/demo.conf").read_text() == "# demo\nmode = slow\nother = 1\n"
    code, _, err = run(capsys, "fix", "--undo")
    assert code == 2 and "nothing to undo" in err


def test_undo_refuses_changed_file_unless_force(root, capsys):
    assert run(capsys, "fix", "demo.fast", "--yes", "--root", str(root))[0] == 0
    (root / "etc/demo.conf").write_text("hand edit\n")
    code, _, err = run(capsys, "fix", "--undo")
    assert code == 1 and "/etc/demo.conf changed since" in err and "--force" in err
    assert (root / "etc/demo.conf").read_text() == "hand edit\n"
    code, history, _ = run(capsys, "fix", "--history")
    assert "changed since: /etc/demo.conf" in history
    assert run(capsys, "fix", "--undo", "--force")[0] == 0
    assert (root / "etc/demo.conf").read_text() == "# demo\nmode = slow\nother = 1\n"


def test_permission_denied_names_file_and_sudo_command(root, capsys, monkeypatch):
    monkeypatch.setattr(ap.FileOps, "can_write", lambda self, path: False)
    monkeypatch.setattr(ap.FileOps, "is_root", lambda self: False)  # an ordinary user
    code, _, err = run(capsys, "fix", "demo.fast", "--yes", "--root", str(root))
    assert code == 1
    assert err.strip() == (
        f"gpudoctor: error: cannot write /etc/demo.conf: permission denied; rerun as root: "
        f"sudo gpudoctor fix demo.fast --root {root} --yes. Nothing was changed."
    )
    assert "mode = slow" in (root / "etc/demo.conf").read_text()


def test_refused_fix_exits_1_with_message(root, capsys):
    code, out, _ = run(capsys, "fix", "demo.fast", "--set", "refuse=1", "--yes", "--root", str(root))
    assert code == 1 and "refused: edit /etc/demo.conf by hand" in out


def test_json_outcome(root, capsys):
    code, out, err = run(capsys, "fix", "demo.fast", "--yes", "--format", "json", "--root", str(root))
    assert code == 0
    doc = json.loads(out)
    assert (
        doc["status"] == "applied" and doc["before"] == {"demo.check": "fail"} and doc["after"] == {"demo.check": "ok"}
    )
    assert doc["fixes"][0]["id"] == "demo.fast" and doc["fixes"][0]["status"] == "applied"
    assert doc["transaction"] and "+mode = fast" in doc["diffs"][0]["diff"]


def test_usage_errors(root, capsys):
    code, _, err = run(capsys, "fix", "nope.fix", "--root", str(root))
    assert code == 2 and "no fix matches 'nope.fix'; known fixes: demo.fast" in err
    code, _, err = run(capsys, "fix", "demo.fast", "--set", "novalue", "--root", str(root))
    assert code == 2 and "KEY=VALUE" in err
    code, _, err = run(capsys, "fix", "--force")
    assert code == 2


def test_undo_then_undo_of_the_undo_through_the_cli(root, capsys):
    conf = root / "etc/demo.conf"
    before = conf.read_bytes()
    assert run(capsys, "fix", "demo.fast", "--yes", "--root", str(root))[0] == 0
    after = conf.read_bytes()
    code, out, _ = run(capsys, "fix", "--undo")
    assert code == 0 and conf.read_bytes() == before
    record = out.split("to undo this undo: gpudoctor fix --undo ")[1].split()[0]
    code, out, _ = run(capsys, "fix", "--undo", record)
    assert code == 0 and conf.read_bytes() == after
    assert "is applied again" in out
    code, out, _ = run(capsys, "fix", "--undo")
    assert code == 0 and conf.read_bytes() == before
