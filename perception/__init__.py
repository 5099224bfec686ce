"""perception room (see ../shared/DESIGN.md)."""
