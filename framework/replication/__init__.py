"""Partition replication: partition state, the replica manager, replica fetchers."""
