"""The controller link: protocol (the wire format of firmware/PROTOCOL.md), link (the host side
over pyserial), vdevice (the firmware core behind a pseudo-terminal, and the firmware image in
rp2040js)."""

from hil.link.link import Anomaly, Link, LinkError, LinkRefused, LinkTimeout

__all__ = ["Anomaly", "Link", "LinkError", "LinkRefused", "LinkTimeout"]
