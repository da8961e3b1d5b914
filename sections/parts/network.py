"""The network as the lessons of a multi-process job see it: whether this machine lets a
program open a TCP socket (the processes of a JAX job meet over TCP, loopback included;
some sandboxed machines refuse every one, `OSError: [Errno 97] Address family not
supported by protocol`, seen on this workplace's TPU machine, and a lesson skips what
needs one there, saying so), and what a job's processes listen on."""

import contextlib
import ipaddress
import socket


def sockets_refused() -> str | None:
    """Why a TCP socket cannot be opened here (the OSError's words), or None."""
    try:
        socket.socket().close()
    except OSError as error:
        return error.strerror or str(error)
    return None


def listening(pids: list[int]) -> set[tuple[str, int]]:
    """The (address, port) pairs the processes `pids` listen on now (TCP, IPv4 and IPv6)."""
    import psutil

    found = set()
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            found.update((ipv4_if_mapped(c.laddr.ip), c.laddr.port)
                         for c in psutil.Process(pid).net_connections(kind="inet") if c.status == psutil.CONN_LISTEN)
    return found


def ipv4_if_mapped(address: str) -> str:
    """`::ffff:127.0.0.1` (an IPv6 socket bound to an IPv4 address) as `127.0.0.1`."""
    mapped = getattr(ipaddress.ip_address(address), "ipv4_mapped", None)
    return str(mapped) if mapped else address


def is_loopback(address: str) -> bool:
    return ipaddress.ip_address(ipv4_if_mapped(address)).is_loopback
