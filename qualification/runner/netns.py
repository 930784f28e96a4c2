"""Runs inside a fresh network namespace: bring ``lo`` up, then probe or exec the step.

A new namespace starts with ``lo`` down, and iproute2 is not on every host, so this sets
IFF_UP with one ioctl from the standard library. Run as a file
(``python3 -I -S netns.py probe`` or ``... exec -- ARGV...``), never imported by the runner.
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import sys

SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | IFF_UP))


def probe() -> str:
    """'ok' only when ``lo`` is the sole interface and a loopback round trip works."""
    names = sorted(name for _, name in socket.if_nameindex())
    if names != ["lo"]:
        return f"interfaces {names} (want only lo)"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), timeout=5) as client:
            peer, _ = server.accept()
            with peer:
                client.sendall(b"kiln")
                if peer.recv(4) != b"kiln":
                    return "loopback round trip lost bytes"
    return "ok"


def main(argv: list[str]) -> int:
    try:
        loopback_up()
    except OSError as error:
        print(f"cannot bring lo up: {error}", file=sys.stderr)
        return 125
    if argv[:1] == ["probe"]:
        try:
            verdict = probe()
        except OSError as error:
            verdict = f"probe failed: {error}"
        print(verdict)
        return 0 if verdict == "ok" else 1
    if argv[:2] == ["exec", "--"] and len(argv) > 2:
        try:
            os.execvp(argv[2], argv[2:])  # noqa: S606 - no shell, on purpose
        except OSError as error:
            print(f"cannot execute {argv[2]!r}: {error}", file=sys.stderr)
            return 127
    print("usage: netns.py probe | exec -- ARGV...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
