"""On PYTHONPATH, makes this Python refuse TCP and UDP sockets as some sandboxes do (a TPU
machine of this project's was seen doing it): tests/test_multihost.py."""

import errno
import socket

_socket = socket.socket


class _Refused(_socket):
    def __init__(self, family=socket.AF_INET, *args, **kwargs):
        if family in (socket.AF_INET, socket.AF_INET6):
            raise OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")
        super().__init__(family, *args, **kwargs)


socket.socket = _Refused
