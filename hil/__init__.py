"""hil room (see docs/ARCHITECTURE.md)."""
