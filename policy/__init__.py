"""policy room (see ../shared/DESIGN.md)."""
