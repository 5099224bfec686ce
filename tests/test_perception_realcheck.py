"""perception.realcheck's truth from the sprite buffer (the emulator run itself needs the
user's ROM and is a local check): the falling pill from the first two OAM entries, the next
pill at rest or in flight."""

from __future__ import annotations

import numpy as np

from perception.realcheck import falling_from_oam, next_from_oam


def oam(*sprites):
    buf = np.full(256, 0xF8, np.uint8)  # hidden
    for k, (y, tile, x) in enumerate(sprites):
        buf[4 * k : 4 * k + 4] = (y, tile, 0, x)
    return buf


HIDDEN = (0xF8, 0x00, 0x00)


def test_falling_pill_from_the_first_two_entries():
    # horizontal in field row 0 (OAM Y 80): left yellow at column 3, right blue at column 4
    assert falling_from_oam(oam((80, 0x60, 120), (80, 0x72, 128))) == (3, 15, 0, (0, 2))
    # vertical: top red in row 4, bottom yellow in row 5 at column 0 -> (bottom, top)
    assert falling_from_oam(oam((112, 0x41, 96), (120, 0x50, 96))) == (0, 10, 1, (0, 1))
    # none drawn, or pill sprites only later in OAM (the thrown next pill over the neck)
    assert falling_from_oam(oam(HIDDEN, HIDDEN)) is None
    assert falling_from_oam(oam(HIDDEN, HIDDEN, (72, 0x60, 120), (72, 0x71, 128))) is None


def test_next_pill_at_rest_or_in_flight():
    rest = oam(HIDDEN, HIDDEN, (69, 0x61, 190), (69, 0x72, 198))
    assert next_from_oam(rest) == (1, 2)
    flight = oam(HIDDEN, HIDDEN, (40, 0x61, 150), (40, 0x72, 158))
    assert next_from_oam(flight) == "flight"
    assert next_from_oam(oam(HIDDEN, HIDDEN)) is None
