"""The ``sftraffic`` command line."""
