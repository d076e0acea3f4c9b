"""Who is asking and what they may do: principals, SASL/TLS authentication, the authorizer.

Pure logic with no sockets and no files: the listener hands it bytes and certificates, the
metadata store keeps its state (credentials, ACLs) and replicates it through the quorum.
It imports only :mod:`framework.protocol`, :mod:`framework.errors` and :mod:`framework.config`.
"""
