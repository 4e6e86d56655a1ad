"""``gpudoctor.entrypoints`` finds what ``importlib.metadata.entry_points`` finds: compared on real
distribution directories written to temp dirs, and on this interpreter's own ``sys.path``."""

from __future__ import annotations

import sys
import textwrap
from importlib import metadata

import pytest

from gpudoctor import entrypoints


def _dist(site, dirname, name, version, entry_points=None, meta="METADATA"):
    d = site / dirname
    d.mkdir(parents=True)
    (d / meta).write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: x\n\n"
        "Long description\nName: not-a-header\nVersion: 9.9\n",
        encoding="utf-8",
    )
    if entry_points is not None:
        (d / "entry_points.txt").write_text(textwrap.dedent(entry_points), encoding="utf-8")
    return d


def _as_tuples(eps):
    return sorted((e.name, e.value, e.group, e.dist.metadata["Name"], e.dist.version) for e in eps)


@pytest.fixture
def sites(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    _dist(
        first,
        "alpha_plug-1.0.dist-info",
        "alpha-plug",
        "1.0",
        """
        # a comment
        ; another comment
        [gpudoctor.checks]
        alpha.one = alpha_plug.checks:CHECK
        alpha.two=alpha_plug.more:THING.inner [extra]

        [console_scripts]
        alpha = alpha_plug.cli:main
        """,
    )
    _dist(first, "beta-2.0.dist-info", "Beta", "2.0", "[other.group]\nbeta = beta:x\n")
    _dist(first, "gamma.egg-info", "gamma", "0.5", "[gpudoctor.checks]\ngamma.c = gamma:C\n", meta="PKG-INFO")
    _dist(first, "nometa-1.0.dist-info", "nometa", "1.0")
    # the same distribution (normalised name) later on the path: shadowed, its entry points unseen
    _dist(second, "Alpha.Plug-0.1.dist-info", "Alpha.Plug", "0.1", "[gpudoctor.checks]\nold.one = old:X\n")
    _dist(second, "delta-3.dist-info", "delta", "3", "[gpudoctor.checks]\ndelta.d = delta:D\n")
    (second / "not-a-dir.txt").write_text("x")
    return [str(first), str(second), str(tmp_path / "missing")]


def _importlib_entry_points(path, group):
    """``importlib.metadata.entry_points(group=...)`` over ``path``: the first distribution of each
    normalised name (its ``_unique``), then the group's entry points."""
    seen, out = set(), []
    for dist in metadata.distributions(path=path):
        key = dist._normalized_name  # type: ignore[attr-defined]
        if key in seen:
            continue
        seen.add(key)
        out.extend(ep for ep in dist.entry_points if ep.group == group)
    return out


@pytest.mark.parametrize("group", ["gpudoctor.checks", "console_scripts", "other.group", "absent.group"])
def test_same_entry_points_as_importlib_metadata(sites, group):
    assert _as_tuples(entrypoints.entry_points(group, sites)) == _as_tuples(_importlib_entry_points(sites, group))


def test_shadowed_distribution_and_headers_only(sites):
    eps = entrypoints.entry_points("gpudoctor.checks", sites)
    assert sorted(e.name for e in eps) == ["alpha.one", "alpha.two", "delta.d", "gamma.c"]
    alpha = next(e for e in eps if e.name == "alpha.one")
    # the headers end at the first blank line: the description's "Name:" is not read
    assert alpha.dist.metadata == {"Name": "alpha-plug", "Version": "1.0"}
    assert alpha.dist.name == "alpha-plug"


def test_this_interpreter_agrees_with_importlib_metadata():
    for group in ("gpudoctor.checks", "gpudoctor.fixes", "console_scripts"):
        ours = entrypoints.entry_points(group)
        theirs = metadata.entry_points(group=group)
        assert _as_tuples(ours) == _as_tuples(theirs), group
    assert len(entrypoints.entry_points("gpudoctor.checks")) > 40


def test_load_follows_module_and_attributes(tmp_path, monkeypatch):
    pkg = tmp_path / "epdemo_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("class Outer:\n    inner = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "epdemo_pkg", raising=False)
    assert entrypoints.EntryPoint("x", "epdemo_pkg:Outer.inner [extra]", "g").load() == 42
    assert entrypoints.EntryPoint("x", "epdemo_pkg", "g").load().__name__ == "epdemo_pkg"
    with pytest.raises(AttributeError):
        entrypoints.EntryPoint("x", "epdemo_pkg:Nope", "g").load()
    with pytest.raises(ValueError, match="malformed value"):
        entrypoints.EntryPoint("x", "not a value!", "g").load()
    with pytest.raises(ModuleNotFoundError):
        entrypoints.EntryPoint("x", "epdemo_missing_module:X", "g").load()


def test_unreadable_or_odd_files_do_not_raise(tmp_path):
    site = tmp_path / "site"
    d = _dist(site, "odd-1.dist-info", "odd", "1")
    (d / "entry_points.txt").write_bytes(b"[gpudoctor.checks]\nodd.x = odd:\xff\xfe\n")
    _dist(site, "bare-1.dist-info", "bare", "1", "no section here = x\n[gpudoctor.checks]\nnot an entry\n")
    assert entrypoints.entry_points("gpudoctor.checks", [str(site)]) == []


def _raw_dist(site, dirname, meta, entry_points=None, metafile="METADATA"):
    d = site / dirname
    d.mkdir(parents=True)
    if meta is not None:
        (d / metafile).write_bytes(meta)
    if entry_points is not None:
        (d / "entry_points.txt").write_bytes(entry_points)
    return d


@pytest.fixture
def odd_sites(tmp_path):
    """Distributions as installers, editors and old tools leave them."""
    site, later = tmp_path / "site", tmp_path / "later"
    ep = b"[gpudoctor.checks]\n%s = %s:C\n"
    _raw_dist(
        site, "crlf-1.dist-info", b"Name: crlf\r\nVersion: 1\r\n\r\n", b"[gpudoctor.checks]\r\ncrlf.x = crlf:C\r\n"
    )
    _raw_dist(
        site, "bom-1.dist-info", b"\xef\xbb\xbfName: bom\nVersion: 1\n\n", b"\xef\xbb\xbf" + ep % (b"bom.x", b"bom")
    )
    _raw_dist(
        site, "spaced-1.dist-info", b"Name: spaced\nVersion: 1\n\n", b"[ gpudoctor.checks ]\nspaced.x = spaced:C\n"
    )
    _raw_dist(
        site,
        "Upper-1.dist-info",
        b"Name: Upper\nVersion: 1\n\n",
        b"[GPUDOCTOR.CHECKS]\nu.x = u:C\n[gpudoctor.checks]\nU.Y = U:D\n",
    )
    _raw_dist(
        site, "extras-1.dist-info", b"Name: extras\nVersion: 1\n\n", ep % (b"extras.x", b"extras.mod:C [gpu, cuda]")
    )
    # headers are case-insensitive; a missing Name header; a suffix in upper case
    _raw_dist(site, "lower-1.dist-info", b"name: lowerhdr\nVERSION: 3\n\n", ep % (b"lower.x", b"lower"))
    _raw_dist(site, "noname-1.dist-info", b"Metadata-Version: 2.1\nVersion: 1\n\n", ep % (b"noname.x", b"noname"))
    _raw_dist(site, "CASE-1.DIST-INFO", b"Name: CASE\nVersion: 1\n\n", ep % (b"case.x", b"case"))
    # unreadable files (a directory where the file should be; root can read any file)
    d = _raw_dist(site, "dirmeta-1.dist-info", None, ep % (b"dirmeta.x", b"dirmeta"))
    (d / "METADATA").mkdir()
    (d / "PKG-INFO").write_text("Name: dirmeta\nVersion: 2\n\n")
    (_raw_dist(site, "dirent-1.dist-info", b"Name: dirent\nVersion: 1\n\n") / "entry_points.txt").mkdir()
    # `setup.py develop` leaves name.egg-info with PKG-INFO; easy_install leaves name-ver.egg/EGG-INFO
    _raw_dist(site, "leg_plug.egg-info", b"Name: leg-plug\nVersion: 0.3\n\n", ep % (b"leg.x", b"legplug"), "PKG-INFO")
    egg = site / "eggy-1.0-py3.11.egg"
    _raw_dist(egg, "EGG-INFO", b"Name: eggy\nVersion: 1.0\n\n", ep % (b"eggy.x", b"eggy"), "PKG-INFO")
    # the same distribution later on the path, reached through a symlink: shadowed
    _raw_dist(site, "dup-1.dist-info", b"Name: dup\nVersion: 1\n\n", ep % (b"dup.first", b"dup1"))
    _raw_dist(later, "Dup-2.dist-info", b"Name: Dup\nVersion: 2\n\n", ep % (b"dup.second", b"dup2"))
    (tmp_path / "link").symlink_to(later, target_is_directory=True)
    return [str(site), str(egg), str(tmp_path / "link")]


def _tuples_by_name(eps):
    return sorted((e.name, e.value, e.group, e.dist.metadata.get("Name"), e.dist.version) for e in eps)


@pytest.mark.parametrize("group", ["gpudoctor.checks", "GPUDOCTOR.CHECKS", " gpudoctor.checks "])
def test_odd_distributions_same_as_importlib_metadata(odd_sites, group):
    ours = entrypoints.entry_points(group, odd_sites)
    assert _tuples_by_name(ours) == _tuples_by_name(_importlib_entry_points(odd_sites, group))
    if group == "gpudoctor.checks":
        names = {e.name for e in ours}
        assert {"crlf.x", "U.Y", "extras.x", "lower.x", "noname.x", "case.x", "dirmeta.x", "leg.x", "eggy.x"} <= names
        assert "spaced.x" not in names and "dup.second" not in names and "bom.x" not in names
        by_name = {e.name: e.dist for e in ours}
        assert (by_name["lower.x"].name, by_name["lower.x"].version) == ("lowerhdr", "3")
        assert by_name["noname.x"].name == "noname"  # importlib.metadata says None; the directory's name here


def test_latin1_metadata_is_read_where_importlib_metadata_raises(tmp_path):
    site = tmp_path / "site"
    _raw_dist(
        site, "lat-1.dist-info", b"Name: lat\nVersion: 1\nSummary: caf\xe9\n\n", b"[gpudoctor.checks]\nlat.x = lat:C\n"
    )
    (ep,) = entrypoints.entry_points("gpudoctor.checks", [str(site)])
    assert (ep.name, ep.dist.name, ep.dist.version) == ("lat.x", "lat", "1")
    with pytest.raises(UnicodeDecodeError):
        _ = next(iter(metadata.distributions(path=[str(site)]))).metadata


def test_a_fifo_for_a_metadata_file_is_skipped_not_waited_on(tmp_path):
    """A FIFO named ``entry_points.txt`` or ``METADATA`` (where importlib.metadata blocks forever): the
    distribution's entry points are unseen, or its name comes from the directory. Run in a child with
    a timeout, so that a regression fails instead of hanging. Twin: a regular file beside them."""
    import os
    import subprocess

    site = tmp_path / "site"
    os.mkfifo(_raw_dist(site, "fifoeps-1.dist-info", b"Name: fifoeps\nVersion: 1\n\n") / "entry_points.txt")
    meta = _raw_dist(site, "fifometa-2.dist-info", None, b"[gpudoctor.checks]\nfifometa.x = fm:C\n")
    os.mkfifo(meta / "METADATA")
    _raw_dist(site, "plain-3.dist-info", b"Name: plain\nVersion: 3\n\n", b"[gpudoctor.checks]\nplain.x = p:C\n")
    code = (
        "import sys; from gpudoctor import entrypoints\n"
        "for e in entrypoints.entry_points('gpudoctor.checks', [sys.argv[1]]):\n"
        "    print(e.name, e.dist.name, e.dist.version)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(site)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.splitlines()) == ["fifometa.x fifometa ", "plain.x plain 3"]
