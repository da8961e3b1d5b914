"""Whether this machine lets a program open a TCP socket: the processes of a JAX job meet
over TCP (its coordinator), loopback included. Some sandboxed machines refuse every one
(`OSError: [Errno 97] Address family not supported by protocol`, seen on this workplace's
TPU machine); a lesson skips what needs one there, saying so."""

import socket


def sockets_refused() -> str | None:
    """Why a TCP socket cannot be opened here (the OSError's words), or None."""
    try:
        socket.socket().close()
    except OSError as error:
        return error.strerror or str(error)
    return None
