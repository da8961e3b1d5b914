"""What the lessons of a multi-process job ask of the network (sections/parts/network.py),
in this process: the fast tier."""

import errno
import socket

from sections.parts import network


def test_where_sockets_are_refused_the_lessons_are_told_why(monkeypatch):
    """Sections 11 and 18 ask before what needs a TCP socket: 18 is then skipped, and 11
    skips its three initialize() checks and runs the rest (as on the TPU machine; the
    slow tier runs 18 so: tests/test_multihost.py)."""
    assert network.sockets_refused() is None

    def refuse(*args, **kwargs):
        raise OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")

    monkeypatch.setattr(socket, "socket", refuse)
    assert network.sockets_refused() == "Address family not supported by protocol"


def test_an_ipv6_socket_bound_to_an_ipv4_address_is_read_as_that_address():
    assert network.ipv4_if_mapped("::ffff:127.0.0.1") == "127.0.0.1"
    assert network.is_loopback("::ffff:127.0.0.1") and network.is_loopback("::1")
    assert not network.is_loopback("10.0.0.1")
