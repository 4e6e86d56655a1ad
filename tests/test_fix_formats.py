"""Files a fix edits correctly or refuses with the reason, asserted on the bytes after the run.

``[tool.uv]`` in pyproject.toml (edited in place; an inline ``index = [...]``
array refused), a uv.toml holding the pyproject form (refused), files that
are not UTF-8 (refused, the byte named, never rewritten), deb822 ``.sources``
files with multi-line ``URIs:``/``Signed-By:`` fields and comments inside a
field (only the URIs change), and ``.condarc`` files with a key given twice
(refused with the line numbers). A refused file keeps its bytes and no
journal transaction is made; an edited one has its original in the journal.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.test_fix_verify import MIRROR, run_fix

from gpudoctor import apply as ap
from gpudoctor.testing import fake_system, write_tree

DEBIAN = 'ID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n'
TUNA = "https://mirrors.tuna.tsinghua.edu.cn/anaconda"


def journal_backups(root: Path) -> list[bytes]:
    """The original bytes saved by every transaction of the test's journal (see run_fix)."""
    txns = ap.Journal(root.parent / "journal").transactions()
    return [(t.directory / f.backup).read_bytes() for t in txns for f in t.files if f.backup]


def no_journal(root: Path) -> bool:
    return not ap.Journal(root.parent / "journal").transactions()


# --------------------------------------------------------------------------- [tool.uv] in pyproject.toml

PYPROJECT = (
    '[project]\nname = "demo"\nversion = "0.1"\n\n'
    '[tool.uv]\nindex-url = "https://old.example.org/simple"  # the team mirror\npython-preference = "managed"\n\n'
    "[tool.ruff]\nline-length = 100\n"
)


def _project(tmp_path, monkeypatch, text: str) -> tuple[Path, object]:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text(text)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.chdir(proj)
    env = {"XDG_CONFIG_HOME": str(home / ".config"), "XDG_CONFIG_DIRS": str(tmp_path / "xdg"), "PATH": "/nonexistent"}
    return proj, lambda: fake_system("/", env=env, home=str(home))


def test_tool_uv_index_url_in_pyproject_is_edited_in_place(tmp_path, monkeypatch):
    proj, live = _project(tmp_path, monkeypatch, PYPROJECT)
    out = run_fix(tmp_path / "r", "uv.index-url", ["uv.mirror"], {"mirror": MIRROR}, live=live)
    assert [(o.status, o.message) for o in out] == [("applied", "")]
    assert (proj / "pyproject.toml").read_bytes() == PYPROJECT.replace(
        "https://old.example.org/simple", MIRROR
    ).encode()
    assert journal_backups(tmp_path / "r") == [PYPROJECT.encode()]


def test_tool_uv_index_table_in_pyproject_gets_the_url(tmp_path, monkeypatch):
    text = '[project]\nname = "demo"\n\n[[tool.uv.index]]\nname = "team"\nurl = "https://old.example.org/simple"\ndefault = true\n'
    proj, live = _project(tmp_path, monkeypatch, text)
    out = run_fix(tmp_path / "r", "uv.index-url", ["uv.mirror"], {"mirror": MIRROR}, live=live)
    assert [o.status for o in out] == ["applied"]
    assert (proj / "pyproject.toml").read_text() == text.replace("https://old.example.org/simple", MIRROR)


def test_tool_uv_inline_index_array_in_pyproject_is_refused(tmp_path, monkeypatch):
    text = '[project]\nname = "demo"\n\n[tool.uv]\nindex = [{url = "https://old.example.org/simple", default = true}]\n'
    proj, live = _project(tmp_path, monkeypatch, text)
    out = run_fix(tmp_path / "r", "uv.index-url", ["uv.mirror"], {"mirror": MIRROR}, live=live)
    assert [o.status for o in out] == ["refused"]
    assert "inline array (`index = [{url" in out[0].message and "Edit it by hand" in out[0].message
    assert (proj / "pyproject.toml").read_text() == text
    assert no_journal(tmp_path / "r")


def test_uv_toml_with_the_pyproject_form_is_refused_with_uvs_reason(tmp_path):
    text = '[tool.uv]\nindex-url = "https://old.example.org/simple"\n'
    root = write_tree(tmp_path / "r", {"/home/user/.config/uv/uv.toml": text})
    out = run_fix(root, "uv.index-url", ["uv.mirror"], {"mirror": MIRROR})
    assert [o.status for o in out] == ["refused"]
    assert "unknown field `tool`" in out[0].message and "nothing was written" in out[0].message
    assert (root / "home/user/.config/uv/uv.toml").read_text() == text
    assert no_journal(root)


# --------------------------------------------------------------------------- not UTF-8

LATIN1 = [
    (
        "uv.index-url",
        ["uv.mirror"],
        "/home/user/.config/uv/uv.toml",
        '# caf\xe9\nindex-url = "https://old.example.org/simple"\n',
        {"mirror": MIRROR},
        {},
    ),
    (
        "conda.channels",
        ["conda.mirror"],
        "/home/user/.condarc",
        "# caf\xe9\nchannels:\n  - defaults\n",
        {"mirror": TUNA},
        {},
    ),
    (
        "apt.mirror",
        ["apt.sources"],
        "/etc/apt/sources.list",
        "# caf\xe9\ndeb http://ftp.debian.org/debian bookworm main\n",
        {"mirror": "https://mirror.example.org/debian"},
        {"/etc/os-release": DEBIAN, "/etc/ssl/certs/ca-certificates.crt": ""},
    ),
]


@pytest.mark.parametrize("fix_id, checks, path, text, options, extra", LATIN1, ids=[c[0] for c in LATIN1])
def test_latin1_file_is_refused_naming_the_byte_and_kept(tmp_path, fix_id, checks, path, text, options, extra):
    data = text.encode("latin-1")
    root = write_tree(tmp_path / "r", {path: data, **extra})
    out = run_fix(root, fix_id, checks, options)
    assert [o.status for o in out] == ["refused"], [(o.status, o.message) for o in out]
    assert "not valid UTF-8 text: a byte at line 1, column 6 is not UTF-8" in out[0].message
    assert (root / path.lstrip("/")).read_bytes() == data
    assert no_journal(root)


def test_pip_conf_in_latin1_is_refused_and_kept(tmp_path):
    data = "# caf\xe9\n[global]\nindex-url = https://old.example.org/simple\n".encode("latin-1")
    root = write_tree(tmp_path / "r", {"/home/user/.config/pip/pip.conf": data})
    out = run_fix(root, "pip.index-url", ["pip.config"], {"index-url": MIRROR})
    assert [o.status for o in out] == ["refused"]
    assert "not valid UTF-8" in out[0].message
    assert (root / "home/user/.config/pip/pip.conf").read_bytes() == data


def test_utf8_twin_with_the_same_accent_is_edited(tmp_path):
    text = '# caf\xe9\nindex-url = "https://old.example.org/simple"\n'
    root = write_tree(tmp_path / "r", {"/home/user/.config/uv/uv.toml": text.encode()})
    out = run_fix(root, "uv.index-url", ["uv.mirror"], {"mirror": MIRROR})
    assert [o.status for o in out] == ["applied"]
    assert (root / "home/user/.config/uv/uv.toml").read_bytes() == text.replace(
        "https://old.example.org/simple", MIRROR
    ).encode()
    assert journal_backups(root) == [text.encode()]


# --------------------------------------------------------------------------- deb822 continuation lines

KEY = (
    "Signed-By:\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n .\n"
    " mQINBGPL0BUBEADmW5NdOOHwPIJlgPu6JDcKw/NwQO+SYTXq3nfdqzJoBqfH0xeX\n -----END PGP PUBLIC KEY BLOCK-----\n"
)
DEB822 = (
    "# main archive\nTypes: deb deb-src\nURIs: http://ftp.debian.org/debian\n"
    "# kept for reference: http://ftp.debian.org/debian\n http://ftp.debian.org/debian\n"
    "Suites: bookworm\n bookworm-updates\nComponents: main\n" + KEY + "\n"
    "# third party\nTypes: deb\nURIs: https://repo.example.org/apt\nSuites: stable\nComponents: main\n\n"
    "Types: deb\nURIs: http://ftp.debian.org/debian\nSuites: trixie\nComponents: main\nEnabled: no\n"
)


def test_deb822_multiline_uris_and_signed_by_are_edited_keeping_the_rest(tmp_path):
    files = {
        "/etc/os-release": DEBIAN,
        "/etc/apt/sources.list.d/debian.sources": DEB822,
        "/etc/ssl/certs/ca-certificates.crt": "",
    }
    root = write_tree(tmp_path / "r", files)
    out = run_fix(root, "apt.mirror", ["apt.sources"], {"mirror": "https://mirror.example.org/debian"})
    assert [(o.status, o.message) for o in out] == [("applied", "")]
    # both URIs of the stanza move to the mirror, written once; the comment inside the field, the key
    # block, the third-party stanza and the disabled stanza keep their bytes
    want = DEB822.replace(
        "URIs: http://ftp.debian.org/debian\n# kept for reference: http://ftp.debian.org/debian\n http://ftp.debian.org/debian\n",
        "URIs: https://mirror.example.org/debian\n# kept for reference: http://ftp.debian.org/debian\n",
    )
    assert (root / "etc/apt/sources.list.d/debian.sources").read_text() == want
    assert journal_backups(root) == [DEB822.encode()]


def test_deb822_uris_value_on_its_own_continuation_line_is_edited(tmp_path):
    text = (
        "Types: deb\nURIs:\n http://ftp.debian.org/debian\nSuites: bookworm\n bookworm-updates\nComponents: main\n"
        + KEY
    )
    files = {"/etc/os-release": DEBIAN, "/etc/apt/sources.list.d/debian.sources": text}
    root = write_tree(tmp_path / "r", {**files, "/etc/ssl/certs/ca-certificates.crt": ""})
    out = run_fix(root, "apt.mirror", ["apt.sources"], {"mirror": "https://mirror.example.org/debian"})
    assert [o.status for o in out] == ["applied"]
    assert (root / "etc/apt/sources.list.d/debian.sources").read_text() == text.replace(
        " http://ftp.debian.org/debian\n", " https://mirror.example.org/debian\n"
    )


# --------------------------------------------------------------------------- duplicate YAML keys


def test_condarc_with_a_key_twice_is_refused_with_the_lines(tmp_path):
    data = b"channels:\n  - defaults\nshow_channel_urls: true\nchannels:\n  - conda-forge\n"
    root = write_tree(tmp_path / "r", {"/home/user/.condarc": data})
    out = run_fix(root, "conda.channels", ["conda.mirror"], {"mirror": TUNA})
    assert [o.status for o in out] == ["refused"]
    assert "the key `channels` appears 2 times (lines 1, 4)" in out[0].message
    assert (root / "home/user/.condarc").read_bytes() == data
    assert no_journal(root)


def test_condarc_with_a_nested_key_twice_is_refused_with_the_lines(tmp_path):
    data = b"channels:\n  - defaults\ncustom_channels:\n  pytorch: https://a.example.org\n  pytorch: https://b.example.org\n"
    root = write_tree(tmp_path / "r", {"/home/user/.condarc": data})
    out = run_fix(root, "conda.channels", ["conda.mirror"], {"mirror": TUNA})
    assert [o.status for o in out] == ["refused"]
    assert "the key `pytorch` appears 2 times (lines 4, 5)" in out[0].message
    assert (root / "home/user/.condarc").read_bytes() == data


def test_condarc_with_each_key_once_is_edited(tmp_path):
    data = b"channels:\n  - defaults\n  - conda-forge\nshow_channel_urls: true\n"
    root = write_tree(tmp_path / "r", {"/home/user/.condarc": data})
    out = run_fix(root, "conda.channels", ["conda.mirror"], {"mirror": TUNA})
    assert [o.status for o in out] == ["applied"]
    text = (root / "home/user/.condarc").read_text()
    assert text.startswith(data.decode()) and f"  - {TUNA}/pkgs/main\n" in text
    assert journal_backups(root) == [data]
