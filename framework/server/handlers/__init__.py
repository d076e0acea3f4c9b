"""One module per Kafka API (see framework/server/router.py for the contract)."""
