"""locust scenario: a burst after a broker failure (run with ``sftraffic load burst``)."""

from load.locustfiles.common import DashboardUser, KafkaConsumerUser, KafkaProducerUser, MqttDeviceUser
from load.locustfiles.shapes import BurstAfterFailure

__all__ = ["BurstAfterFailure", "DashboardUser", "KafkaConsumerUser", "KafkaProducerUser", "MqttDeviceUser"]
