"""locust scenario: the steady sensor fleet (run with ``sftraffic load steady``)."""

from load.locustfiles.common import DashboardUser, KafkaConsumerUser, KafkaProducerUser, MqttDeviceUser
from load.locustfiles.shapes import SteadyFleet

__all__ = ["DashboardUser", "KafkaConsumerUser", "KafkaProducerUser", "MqttDeviceUser", "SteadyFleet"]
