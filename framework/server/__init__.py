"""The Kafka listener, request routing, handlers (one per API) and the broker that wires the parts."""
