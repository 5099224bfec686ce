"""hil room (see ../shared/DESIGN.md)."""
