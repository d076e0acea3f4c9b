"""locust scenario: a short check (<= 60 s) that every part takes load and nothing is lost.

Run with ``sftraffic load smoke``.
"""

from load.locustfiles.common import DashboardUser, KafkaConsumerUser, KafkaProducerUser, MqttDeviceUser
from load.locustfiles.shapes import SteadyFleet

__all__ = ["DashboardUser", "KafkaConsumerUser", "KafkaProducerUser", "MqttDeviceUser", "SteadyFleet"]
