"""pytest plugin: no network at test time, loopback allowed.

Loaded by the nox ``tests`` and ``install`` sessions (``-p icml26_no_network``, this folder on
``PYTHONPATH``). Any Python-level ``connect`` / ``connect_ex`` / ``sendto`` to an address that is
not loopback (127.0.0.0/8, ::1) or a Unix socket, and any name lookup of a host other than
``localhost``, raises :class:`NetworkBlocked` naming the address, before a packet is sent.
Loopback stays open for gloo process groups, fake servers and the like. (Same idea as
pytest-socket's ``--allow-hosts``, without adding a dependency to every member's environment.)

Opt out for one run with ``ICML26_ALLOW_NETWORK=1``.

It also makes the per-test timeout compulsory: a run whose configuration sets a ``timeout``
(every member's ``[tool.pytest.ini_options] timeout = 600``) without pytest-timeout installed
stops with a usage error, so a hang can never run to CI's limit unnoticed.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from typing import Any

LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", ""}


class NetworkBlocked(RuntimeError):
    """A test tried to reach a non-loopback address."""


def is_loopback(host: Any) -> bool:
    """True for a loopback IP literal or a local host name; False for anything else."""
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if not isinstance(host, str):
        return False
    host = host.strip().strip("[]").split("%", 1)[0]
    if host.lower() in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_address(family: int, address: Any) -> None:
    """Raise NetworkBlocked unless ``address`` (as given to connect) is loopback or a Unix path."""
    if family == getattr(socket, "AF_UNIX", object()) or isinstance(address, (str, bytes)):
        return  # a Unix socket path
    host = address[0] if isinstance(address, tuple) and address else address
    if not is_loopback(host):
        raise NetworkBlocked(
            f"network access to {address!r} blocked during tests (only loopback is allowed; "
            "tests must not need the network: ship or generate the data)"
        )


_originals: dict[str, Any] = {}  # the real socket functions while the guard is installed


def install() -> None:
    """Patch socket so that non-loopback connects and lookups raise."""
    if _originals:
        return
    sock = socket.socket
    _originals.update(
        connect=sock.connect,
        connect_ex=sock.connect_ex,
        sendto=sock.sendto,
        getaddrinfo=socket.getaddrinfo,
    )

    def connect(self, address):
        check_address(self.family, address)
        return _originals["connect"](self, address)

    def connect_ex(self, address):
        check_address(self.family, address)
        return _originals["connect_ex"](self, address)

    def sendto(self, data, *args):
        check_address(self.family, args[-1])
        return _originals["sendto"](self, data, *args)

    def getaddrinfo(host, *args, **kwargs):
        if host is not None and not is_loopback(host):
            raise NetworkBlocked(f"name lookup of {host!r} blocked during tests (loopback only)")
        return _originals["getaddrinfo"](host, *args, **kwargs)

    sock.connect = connect  # type: ignore[method-assign]
    sock.connect_ex = connect_ex  # type: ignore[method-assign]
    sock.sendto = sendto  # type: ignore[assignment]
    socket.getaddrinfo = getaddrinfo


def uninstall() -> None:
    if not _originals:
        return
    socket.socket.connect = _originals["connect"]  # type: ignore[method-assign]
    socket.socket.connect_ex = _originals["connect_ex"]  # type: ignore[method-assign]
    socket.socket.sendto = _originals["sendto"]  # type: ignore[method-assign]
    socket.getaddrinfo = _originals["getaddrinfo"]
    _originals.clear()


def check_timeout_plugin(config) -> None:
    """Usage error when ``timeout`` is configured but pytest-timeout is not installed."""
    try:
        configured = bool(config.getini("timeout"))
    except ValueError:  # the ini key is unknown: pytest-timeout did not register it
        configured = bool(config.inicfg.get("timeout")) if hasattr(config, "inicfg") else False
    if configured and not config.pluginmanager.hasplugin("timeout"):
        import pytest

        raise pytest.UsageError(
            "this project sets a per-test `timeout` but pytest-timeout is not installed: "
            "add pytest-timeout to the member's dev group (a hang must fail, not run to CI's limit)"
        )


def pytest_configure(config) -> None:
    check_timeout_plugin(config)
    if os.environ.get("ICML26_ALLOW_NETWORK") != "1":
        install()  # this process only: a subprocess a test starts is not patched


def pytest_unconfigure(config) -> None:
    uninstall()
