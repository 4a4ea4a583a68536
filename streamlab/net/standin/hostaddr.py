"""This machine's addresses that others in a room can reach (I/O layer: reads the interfaces, sends nothing).

A stand-in bound to 0.0.0.0 listens on every interface, but the URL it would print, 127.0.0.1, works only
on the instructor's own machine. `room_addresses()` lists the addresses to print instead: the IPv4
address of every interface that is up, except loopback and link-local ones. It reads them from the
operating system without sending a single packet:

1. On Linux, the address of each interface (`socket.if_nameindex()`) through the SIOCGIFADDR ioctl on a
   datagram socket that is never connected.
2. Elsewhere, or when that finds nothing, the address the operating system would send from towards a
   private network (`connect()` on a UDP socket only chooses a route and a source address; UDP has no
   handshake, so nothing leaves the machine).

No name lookup is made (resolving the host's own name could ask a DNS server).
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import sys

__all__ = ["room_addresses", "usable"]

_SIOCGIFADDR = 0x8915  # Linux: get an interface's IPv4 address


def usable(address: str) -> bool:
    """Whether others could reach this machine at `address`: IPv4, not loopback, link-local, unspecified
    or multicast."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return ip.version == 4 and not (ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast)


def _interface_addresses() -> list[str]:
    if not sys.platform.startswith("linux") or not hasattr(socket, "if_nameindex"):
        return []
    import fcntl  # Linux only (imported here so that importing this module works everywhere)

    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                reply = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, request)
            except OSError:  # down, or no IPv4 address
                continue
            found.append(socket.inet_ntoa(reply[20:24]))
    return found


def _routed_address() -> list[str]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("10.255.255.255", 9))  # chooses a route; a UDP connect sends nothing
            return [sock.getsockname()[0]]
        except OSError:
            return []


def room_addresses() -> list[str]:
    """This machine's IPv4 addresses that a room could reach, in interface order, without duplicates
    (empty when it has none: then only this machine can use the stand-in)."""
    found = [a for a in _interface_addresses() if usable(a)] or [a for a in _routed_address() if usable(a)]
    return list(dict.fromkeys(found))
