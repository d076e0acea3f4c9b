"""A schema registry's users and permissions file as Karapace writes them (:data:`KARAPACE`), for
the registry's authentication tests."""

from __future__ import annotations

# Karapace's own test file (tests/integration/config/karapace.auth.json) and its passwords:
# a file made for Karapace must work here unchanged
KARAPACE = {
    "users": [
        {
            "username": "admin",
            "algorithm": "scrypt",
            "salt": "adminsalt",
            "password_hash": "AG7+ttm/skHjqEZ90yzEkgjy75yaqoucNnQPIP2S++1rYOPXEtm4+AF7"
            "WdDGj+J0sIPFdYC9nXYsvkB1xYDYkw==",
        },
        {
            "username": "aladdin",
            "algorithm": "sha512",
            "salt": "salt",
            "password_hash": "uofa7Uw+IolY0GDeCQApTVAUPlBthFYPFQ+QN+kKtXBzSwddiyLrNnIC"
            "2UQcA5X+hCL/mHNNqEMA30oIM4oqxA==",
        },
        {
            "username": "reader",
            "algorithm": "sha1",
            "salt": "third-salt",
            "password_hash": "SeUTCvKCE8rj6lHFkyFkhopktuY=",
        },
    ],
    "permissions": [
        {"username": "admin", "operation": "Write", "resource": ".*"},
        {"username": "aladdin", "operation": "Write", "resource": "Subject:cave-.*"},
        {"username": "reader", "operation": "Read", "resource": "Subject:carpet-.*"},
    ],
}
