"""policy room (see docs/ARCHITECTURE.md)."""
