"""locust scenario: the rush-hour ramp (run with ``sftraffic load rush-hour``)."""

from load.locustfiles.common import DashboardUser, KafkaConsumerUser, KafkaProducerUser, MqttDeviceUser
from load.locustfiles.shapes import RushHour

__all__ = ["DashboardUser", "KafkaConsumerUser", "KafkaProducerUser", "MqttDeviceUser", "RushHour"]
