"""Generated message classes (see tools/gen_protocol.py)."""

