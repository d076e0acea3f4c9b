"""One event-store node: the composition root. It builds the parts (each module's docstring says
what it owns), gives each that reads time its one clock (framework.clock), wires them (who tells
whom of what), starts them in order, runs their periodic work on the event loop, and stops them
in reverse order. Its state, joining the cluster and the controlled shutdown belong to the
lifecycle (lifecycle.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from framework import __version__
from framework import config as cfg
from framework.clock import SYSTEM, Clock
from framework.coordinator.group_service import GroupService
from framework.coordinator.groups import LoopScheduler
from framework.coordinator.offsets_topic import TOPIC as OFFSETS_TOPIC
from framework.coordinator.producer_ids import ProducerIdManager
from framework.coordinator.schemas_topic import TOPIC as SCHEMAS_TOPIC
from framework.coordinator.schemas_topic import SchemasTopic
from framework.coordinator.transaction_log import TOPIC as TXN_TOPIC
from framework.coordinator.transaction_service import TransactionService
from framework.metadata.admin import MetadataAdmin
from framework.metadata.cache import MetadataCache
from framework.metadata.quorum import ClusterState, parse_voters
from framework.metadata.store import MetadataStore
from framework.replication.inter_broker_security import InterBrokerSecurity
from framework.replication.replica_manager import ReplicaManager
from framework.security.authorizer import StandardAuthorizer
from framework.security.listener_security import ListenerSecurity
from framework.security.listeners import ListenerConfig
from framework.security.quotas import ClientQuotas, QuotaWindow
from framework.server import metrics
from framework.server.authz import Authz
from framework.server.client_metrics import ClientMetrics, TelemetryCollector
from framework.server.context import BrokerServices
from framework.server.forward import BrokerChannel
from framework.server.lifecycle import BrokerLifecycle
from framework.server.listener import KafkaListener
from framework.server.shares import share_partitions
from framework.server.txn_markers import CacheLeaders, MarkerChannel
from framework.storage.log_manager import LogManager

log = logging.getLogger("sftraffic.broker")


class Broker:
    def __init__(self, config: cfg.BrokerConfig, clock: Clock = SYSTEM) -> None:
        self.config = config
        self.clock = clock
        self.node_id = config.node_id
        self.listeners = ListenerConfig.from_config(config)
        self.ports = {e.name: e.port for e in self.listeners.listeners}
        self.voters = parse_voters(config.list("controller.quorum.voters"))
        self.logs = LogManager(config.data_dir, clock)
        self.store = MetadataStore(config.data_dir, config, clock)
        advertised = {e.name: (e.host, e.port) for e in self.listeners.advertised}
        inter = self.listeners.inter_broker
        self.cache = MetadataCache(self.node_id, self.store, advertised[inter], advertised, inter)
        self.admin = MetadataAdmin(self.store, self.cache, config)
        authorizer = StandardAuthorizer.from_config(config)
        self.authz = Authz(authorizer) if authorizer is not None else None
        window = config.int("quota.window.num"), config.int("quota.window.size.seconds")
        self.quotas = ClientQuotas(QuotaWindow(*window))
        self.client_metrics = ClientMetrics(clock, config.int("telemetry.max.bytes"))  # KIP-714
        self.store.listeners.append(self._acls_or_quotas_changed)
        block, bits = config.int("producer.id.block.size"), 10 if self.voters else 0
        self.producer_ids = ProducerIdManager(config.data_dir / "__metadata", block, self.node_id, bits)
        peers = InterBrokerSecurity.from_config(config, self.listeners, clustered=bool(self.voters))
        tls, sasl = peers.tls, peers.sasl
        freed = metrics.RETENTION_BYTES.inc
        self.replicas = ReplicaManager(self.node_id, config, self.logs, self.cache, clock, freed, tls, sasl)
        self.groups = GroupService(config, self.cache, self.admin, self.replicas, LoopScheduler(), clock)
        self.replicas.on_leadership(OFFSETS_TOPIC, self.groups.on_offsets_leadership)
        self.shares = share_partitions(config, LoopScheduler())
        self.txn_channel = MarkerChannel(
            CacheLeaders(self.cache),
            self.replicas,
            lambda: self.groups.coordinator,
            lambda: self.groups.partition_count,
            clock,
            tls,
            sasl,
        )
        self.forwarder = BrokerChannel(self.cache, tls, sasl)  # DescribeQuorum
        ids, channel = self.producer_ids.next_id, self.txn_channel
        self.transactions = TransactionService(
            config, self.cache, self.admin, self.replicas, LoopScheduler(), channel, ids, clock
        )
        self.replicas.on_leadership(TXN_TOPIC, self.transactions.on_leadership)
        self.schemas = SchemasTopic(lambda: (self.replicas.topic_partitions(SCHEMAS_TOPIC) or [None])[0])
        self.lifecycle = BrokerLifecycle(self.node_id, self.replicas, self.store)
        self.listener = KafkaListener(
            BrokerServices(
                config,
                self.replicas,
                self.cache,
                self.admin,
                self.groups,
                self.producer_ids,
                self.lifecycle.stopping,
                self.authz,
                self.quotas,
                self.transactions,
                self.txn_channel,
                forwarder=self.forwarder,
                schemas=self.schemas,
                clock=clock,
                client_metrics=self.client_metrics,
                shares=self.shares,
            ),
            ListenerSecurity.from_config(config, self.listeners, self.store.credential, clock),
        )
        self._tasks: list[asyncio.Task[None]] = []
        self.quorum_watch = metrics.QuorumWatch(self.node_id)
        self.metrics_server: metrics.MetricsServer | None = None

    def _acls_or_quotas_changed(self, event: str, name: str) -> None:
        """The store applied CreateAcls/DeleteAcls, AlterClientQuotas or a client-metrics
        subscription (on every broker)."""
        if event in ("acls_changed", "restored", "loaded") and self.authz is not None:
            self.authz.load(list(self.store.acls))
        if event in ("quotas_changed", "restored", "loaded"):
            self.quotas.update(self.store.quotas)
        if event in ("client_metrics_changed", "restored", "loaded"):
            self.client_metrics.update_subscriptions(self.store.client_metrics)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.lifecycle.starting()
        self.logs.start()
        try:
            if self.voters:
                fenced = self.lifecycle.shutting_down
                quorum = ClusterState.for_broker(
                    self.config, self.store, self.cache, self._applied, fenced, self.clock
                )
                self.cache.quorum = quorum
                self.store.listeners.append(self.replicas.on_metadata)
                self._tasks.append(ticker := loop.create_task(quorum.run()))
                await self.lifecycle.join(quorum, ticker)
            else:
                self._load_single_node()
            self._acls_or_quotas_changed("loaded", "")
            self.ports = await self.listener.start(self.listeners.listeners)
        except BaseException:
            self.lifecycle.forced()
            await self._close_parts()
            raise
        eps = self.cache.endpoints  # listeners bound to a free port: advertise the one chosen
        eps.update({name: (host, self.ports[name]) for name, (host, port) in eps.items() if port == 0})
        self.cache.endpoint = eps[self.listeners.inter_broker]
        periodic = [*self.replicas.periodic(), *self.groups.periodic(), *self.transactions.periodic()]
        self._tasks += [loop.create_task(self._every(interval, fn)) for interval, fn in periodic]
        self.lifecycle.running()
        if listen := self.config.str("metrics.listen"):  # closed when the lifecycle starts stopping
            telemetry = [TelemetryCollector(self.client_metrics)]
            self.metrics_server = await metrics.serve(self, *metrics.host_port(listen), telemetry)
        log.info(
            "broker %d listening on %s (data dir %s, %d topics, sftraffic %s)",
            self.node_id,
            ", ".join(f"{e.name}://{e.host}:{self.ports[e.name]}" for e in self.listeners.listeners),
            self.config.data_dir,
            len(self.store.topics),
            __version__,
        )

    def _load_single_node(self) -> None:
        """Metadata from metadata.json; every partition local and led here."""
        self.store.load()
        self.replicas.open_all()
        self.store.listeners.append(self.replicas.on_metadata)
        self.groups.ensure_offsets_topic()
        self.groups.load_all()
        self.transactions.load_all()

    def _applied(self) -> None:
        """The quorum applied a change: count what it did (metrics), then reconcile."""
        self.quorum_watch.applied(self.cache.quorum)
        self.replicas.schedule_reconcile()

    async def _every(self, interval_ms: int, fn: Callable[[], None]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                fn()
            except Exception:
                log.exception("background task %s failed", getattr(fn, "__name__", fn))

    async def stop(self) -> None:
        """The controlled shutdown (cluster), listener, background work, quorum, logs; each step
        bounded, the whole by the caller (then :meth:`force_stop`)."""
        t0 = self.clock.monotonic()
        controlled = self.config.bool("controlled.shutdown.enable")
        await self.lifecycle.shut_down(controlled=controlled)
        self.listener.close()
        await self._close_parts()
        await self.listener.wait_closed(0.5)
        log.info("broker %d stopped cleanly in %.1f s", self.node_id, self.clock.monotonic() - t0)

    async def _close_parts(self) -> None:
        for t in self._tasks:
            t.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=1.0)
        self._tasks.clear()
        await self.transactions.coordinator.stop()
        self.txn_channel.close()
        self.forwarder.close()
        await self.replicas.stop(timeout=1.0)
        self._close_quorum_and_logs()

    def _close_quorum_and_logs(self) -> None:
        if self.cache.quorum is not None:
            with contextlib.suppress(Exception):
                self.cache.quorum.destroy()
        self.logs.shutdown()
        self.lifecycle.stopped()

    def force_stop(self, why: str) -> None:
        """Stop now, waiting for nothing (a second signal, or ``stop`` ran out of time): flush and
        checkpoint the logs (the clean-shutdown marker when every flush succeeded), and leave."""
        self.lifecycle.forced()
        self.listener.close()
        self.replicas.cleaner.stop()
        self._close_quorum_and_logs()
        log.warning("broker %d stopped: forced (%s)", self.node_id, why)
