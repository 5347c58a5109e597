"""util/net: where the OS says a process listens (real sockets of this process), whether that
reaches other hosts, and the one exposure warning."""

from __future__ import annotations

import socket

from tfperf.util.net import exposed, exposure_warning, listening_addresses


def _listen(family: int, host: str) -> socket.socket:
    s = socket.socket(family)
    s.bind((host, 0))
    s.listen()
    return s


def test_loopback_and_wildcard_sockets_as_the_os_reports_them():
    with _listen(socket.AF_INET, "127.0.0.1") as lo, _listen(socket.AF_INET, "0.0.0.0") as anyv4:
        lo_port, any_port = lo.getsockname()[1], anyv4.getsockname()[1]
        assert listening_addresses(lo_port) == [f"127.0.0.1:{lo_port}"]
        assert listening_addresses(any_port) == [f"*:{any_port}"]
    assert listening_addresses(lo_port) == []  # closed: nothing listens


def test_an_ipv4_mapped_ipv6_socket_shows_its_ipv4_address():
    s = socket.socket(socket.AF_INET6)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    with s:
        s.bind(("::ffff:127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert listening_addresses(port) == [f"127.0.0.1:{port}"]


def test_exposed_is_anything_but_loopback():
    assert not exposed(["127.0.0.1:80", "::1:80", "localhost:80"])
    assert not exposed([])
    assert exposed(["127.0.0.1:80", "*:80"])
    assert exposed(["10.1.2.3:80"])


def test_the_warning_names_the_address_the_port_and_who_asked():
    text = exposure_warning("*:5050", 5050, "--host 0.0.0.0")
    assert text.startswith("warning: listening on *:5050 (--host 0.0.0.0)")
    assert "port 5050" in text and "127.0.0.1" in text
