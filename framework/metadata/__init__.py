"""Cluster metadata: the store of streams and topics, the Raft quorum that replicates it, and
the cache the rest of the broker reads ("who leads, who coordinates, which config applies")."""
