"""calibration room (see ../shared/DESIGN.md)."""
