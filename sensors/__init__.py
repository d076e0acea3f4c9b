"""Simulated San Francisco sensor fleets, MQTT devices and edge gateways."""
