"""How the system runs: locally (``deploy.local``: ``sftraffic up`` and process supervision)."""
