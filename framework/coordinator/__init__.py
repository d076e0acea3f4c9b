"""Coordinators: consumer groups and their committed offsets, producer ids."""
