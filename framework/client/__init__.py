"""Client-side helpers: a tiny wire client for admin extensions, producer/consumer helpers."""
