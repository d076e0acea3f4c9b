"""Running the system on this machine: managed child processes and ``sftraffic up``."""
