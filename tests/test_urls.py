"""gpudoctor.urls: the one reading of a mirror / index / archive URL that the apt source parser,
the prober, its connection policy and the mirror checks share."""

from __future__ import annotations

import pytest

from gpudoctor import urls
from gpudoctor.checks._mirrors import _host
from gpudoctor.mirrors.probe import is_local
from gpudoctor.sources.aptsources import classify_uri, replace_base


@pytest.mark.parametrize(
    "url, scheme, host, port, path, creds",
    [
        ("https://mirror.example.org/debian/", "https", "mirror.example.org", None, "/debian", False),
        ("HTTP://Mirror.Example.ORG:8080/pypi/simple", "http", "mirror.example.org", 8080, "/pypi/simple", False),
        ("http://[2001:db8::1]:3142/ubuntu", "http", "2001:db8::1", 3142, "/ubuntu", False),
        ("https://alice:s3cret@mirror.example.org/simple", "https", "mirror.example.org", None, "/simple", True),
        ("http://mirror.example.org:99999/x", "http", "mirror.example.org", None, "/x", False),  # bad port
        ("http://[::1/x", "http", "", None, "", False),  # unbalanced bracket: no host, never a traceback
        ("file:///srv/channel", "file", "", None, "/srv/channel", False),
        ("/srv/wheelhouse/", "", "", None, "/srv/wheelhouse", False),
    ],
)
def test_parse(url, scheme, host, port, path, creds):
    u = urls.parse(url)
    assert (u.scheme, u.host, u.port, u.path, u.credentials) == (scheme, host, port, path, creds)
    assert u.base == url.rstrip("/")


def test_ports_and_host_display():
    assert urls.parse("https://mirror.example.org/simple").effective_port == 443
    assert urls.parse("http://mirror.example.org/simple").effective_port == 80
    assert urls.parse("http://mirror.example.org:3142/debian").effective_port == 3142
    assert urls.parse("s3://bucket/channel").effective_port is None
    assert urls.parse("https://bob:pw@mirror.example.org:8443/simple").hostport == "mirror.example.org:8443"
    assert _host("https://bob:pw@mirror.example.org/simple") == "mirror.example.org"
    assert _host("not a url") == "not a url"


def test_display_redacts_credentials_and_secret_query_values():
    assert urls.display("https://bob:pw@mirror.example.org/simple") == "https://****@mirror.example.org/simple"
    assert urls.display("https://mirror.example.org/simple?token=abc&page=2") == (
        "https://mirror.example.org/simple?token=****&page=2"
    )
    assert urls.display("https://mirror.example.org/simple/") == "https://mirror.example.org/simple/"


@pytest.mark.parametrize(
    "url, local",
    [("file:///srv/ch", True), ("/srv/ch", True), ("relative/dir", True), ("https://m.example.org/", False)],
)
def test_local_indexes(url, local):
    assert urls.is_local(url) is local and is_local(url) is local


def test_apt_archives_and_bases_read_through_the_helper():
    assert classify_uri("http://MIRROR.example.org/debian-security/") == "debian_security"
    assert classify_uri("http://security.debian.org/") == "debian_security"
    assert classify_uri("https://mirror.example.org/ubuntu-ports") == "ubuntu_ports"
    assert classify_uri("https://download.example.org/linux/debian/stable") is None
    assert classify_uri("http://[::1/debian") is None  # unreadable: no archive, no traceback
    assert replace_base("http://deb.example.org/debian/", "https://mirror.example.org/debian//") == (
        "https://mirror.example.org/debian/"
    )
    assert replace_base("http://deb.example.org/debian", "https://mirror.example.org/debian/") == (
        "https://mirror.example.org/debian"
    )
    assert urls.same_base("https://m.example.org/simple/", "https://m.example.org/simple")
    assert not urls.same_base("https://m.example.org/simple", "https://m.example.org/simple2")
