"""One event-store node: the composition root that builds the broker's parts and runs them.

The parts, as Kafka keeps them apart::

    LogManager       storage: the data dir, partition logs, checkpoints, recovery
    MetadataStore    metadata: streams and topics, changed only by ``apply`` (metadata.json
                     on a single node; the Raft journal's state in a cluster)
    ClusterState     the metadata quorum (cluster only): brokers, leaders, ISRs, the controller
    MetadataCache    "who leads, who is there, which config applies", read by everyone
    MetadataAdmin    metadata changes asked for by clients: plan, then apply or propose
    ReplicaManager   the partitions this broker holds: roles, fetchers, ISR, housekeeping
    GroupService     the group coordinator and ``__consumer_offsets``
    SchemasTopic     the schema ids of the registry's ``_schemas`` topic (its local replica),
                     for topics with schema validation
    TransactionService  the transaction coordinator and ``__transaction_state``; its markers
                     go through a MarkerChannel (in process, or WriteTxnMarkers to other brokers)
    KafkaListener    the sockets (one per named listener, TLS and SASL as each needs);
                     handlers see the parts above through narrow interfaces

The broker wires them (who tells whom of what), starts them in order, runs their periodic
work on the event loop, and stops them in reverse order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
import time
from collections.abc import Callable

from framework import config as cfg
from framework.coordinator.group_service import GroupService
from framework.coordinator.groups import LoopScheduler
from framework.coordinator.offsets_topic import TOPIC as OFFSETS_TOPIC
from framework.coordinator.producer_ids import ProducerIdManager
from framework.coordinator.schemas_topic import TOPIC as SCHEMAS_TOPIC
from framework.coordinator.schemas_topic import SchemasPartition, SchemasTopic
from framework.coordinator.transaction_log import TOPIC as TXN_TOPIC
from framework.coordinator.transaction_service import TransactionService
from framework.errors import ConfigError, StoreError
from framework.metadata.admin import MetadataAdmin
from framework.metadata.cache import MetadataCache
from framework.metadata.quorum import ClusterState, parse_voters
from framework.metadata.store import MetadataStore
from framework.protocol import record_walk
from framework.replication.replica_manager import ReplicaManager
from framework.security.authorizer import StandardAuthorizer
from framework.security.listeners import ListenerConfig
from framework.security.quotas import ClientQuotas, QuotaWindow
from framework.security.sasl import SaslLogin
from framework.security.ssl_principal import PrincipalMapper
from framework.server import metrics, tls
from framework.server.authz import Authz
from framework.server.context import BrokerServices
from framework.server.forward import BrokerChannel
from framework.server.listener import KafkaListener, ListenerSecurity
from framework.server.txn_markers import CacheLeaders, MarkerChannel
from framework.storage.log_manager import LogManager

log = logging.getLogger("sftraffic.broker")

SHUTDOWN_S = 5.0  # SIGTERM to exit, at most (then force_stop)
CONTROLLED_SHUTDOWN_S = 3.0  # of which handing over leaderships, at most
HANDED_OVER_ACKS_S = 1.0  # controlled shutdown: answering the produce requests appended as leader
COMMIT_ANNOUNCE_S = 0.25  # a stopping controller's last AppendEntries rounds (every 0.1 s)


def split_host_port(text: str, what: str = "listener") -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise StoreError(f"{what} {text!r} must look like HOST:PORT, e.g. 127.0.0.1:9092")
    p = int(port)
    if not 0 <= p <= 65535:
        raise StoreError(f"{what} port {p} is out of range")
    return host.strip("[]"), p


def _now_ms() -> int:
    return int(time.time() * 1000)


class Broker:
    def __init__(self, config: cfg.BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.listeners = ListenerConfig.from_config(config)
        self.ports = {e.name: e.port for e in self.listeners.listeners}
        inter = self.listeners.advertised_for(self.listeners.inter_broker)
        self.voters = parse_voters(config["controller.quorum.voters"])
        self.logs = LogManager(config.data_dir)
        self.store = MetadataStore(config.data_dir, config)
        self.cache = MetadataCache(
            self.node_id,
            self.store,
            (inter.host, inter.port),
            {e.name: (e.host, e.port) for e in self.listeners.advertised},
            self.listeners.inter_broker,
        )
        self.admin = MetadataAdmin(self.store, self.cache, config)
        authorizer = StandardAuthorizer.from_config(config)
        self.authz = Authz(authorizer) if authorizer is not None else None
        if self.authz is not None:  # reloaded whenever the store applies CreateAcls/DeleteAcls
            self.store.listeners.append(self._acls_changed)
        window = QuotaWindow(config["quota.window.num"], config["quota.window.size.seconds"])
        self.quotas = ClientQuotas(window)
        self.store.listeners.append(self._quotas_changed)  # AlterClientQuotas, on every broker
        self.producer_ids = ProducerIdManager(
            config.data_dir / "__metadata",
            config["producer.id.block.size"],
            config.node_id,
            node_bits=10 if self.voters else 0,
        )
        fetch_tls, fetch_sasl = self._fetcher_security()
        self.replicas = ReplicaManager(
            self.node_id, config, self.logs, self.cache, metrics.RETENTION_BYTES.inc, fetch_tls, fetch_sasl
        )
        self.groups = GroupService(config, self.cache, self.admin, self.replicas, LoopScheduler(), _now_ms)
        self.replicas.on_leadership(OFFSETS_TOPIC, self.groups.on_offsets_leadership)
        self.txn_channel = MarkerChannel(
            CacheLeaders(self.cache),
            self.replicas,
            lambda: self.groups.coordinator,
            self.groups._partition_count,
            fetch_tls,
            fetch_sasl,
        )
        self.forwarder = BrokerChannel(self.cache, fetch_tls, fetch_sasl)  # DescribeQuorum
        self.transactions = TransactionService(
            config,
            self.cache,
            self.admin,
            self.replicas,
            LoopScheduler(),
            self.txn_channel,
            self.producer_ids.next_id,
            _now_ms,
        )
        self.replicas.on_leadership(TXN_TOPIC, self.transactions.on_leadership)
        self.schemas = SchemasTopic(self._schemas_partition)
        self.stopping = asyncio.Event()
        self.listener = KafkaListener(
            BrokerServices(
                config,
                self.replicas,
                self.cache,
                self.admin,
                self.groups,
                self.producer_ids,
                self.stopping,
                self.authz,
                self.quotas,
                self.transactions,
                self.txn_channel,
                forwarder=self.forwarder,
                schemas=self.schemas,
            ),
            self._listener_security(),
        )
        self._tasks: list[asyncio.Task[None]] = []
        self.quorum_watch = metrics.QuorumWatch(self.node_id)
        self.metrics_server: metrics.MetricsServer | None = None

    def _schemas_partition(self) -> SchemasPartition | None:
        parts = self.replicas.topic_partitions(SCHEMAS_TOPIC)
        return parts[0] if parts else None

    def _listener_security(self) -> ListenerSecurity:
        c = self.config
        eps = self.listeners.listeners
        return ListenerSecurity(
            ssl_context=tls.server_context(c) if any(e.protocol == "SSL" for e in eps) else None,
            sasl_ssl_context=(
                tls.server_context(c, False) if any(e.protocol == "SASL_SSL" for e in eps) else None
            ),
            mapper=PrincipalMapper(str(c["ssl.principal.mapping.rules"])),
            credentials=self.store.credential,
            mechanisms=tuple(c["sasl.enabled.mechanisms"]),
            # decoy credentials of unknown users are derived from it (never leaves the process)
            secret=os.urandom(32),
            reauth_ms=int(c["connections.max.reauth.ms"]),
            auth_timeout_s=int(c["connections.authentication.timeout.ms"]) / 1000,
            max_connections=int(c["max.connections"]),
            max_connections_per_ip=int(c["max.connections.per.ip"]),
            idle_s=int(c["connections.max.idle.ms"]) / 1000,
            inter_broker=self.listeners.inter_broker,
        )

    def _fetcher_security(self) -> tuple[ssl.SSLContext | None, SaslLogin | None]:
        """TLS and SASL of the replica fetchers, from the inter-broker listener's protocol."""
        ep = self.listeners.inter_broker_endpoint
        c = self.config
        context = tls.client_context(c) if ep.uses_ssl else None
        login = None
        if ep.uses_sasl:
            user = str(c["sasl.inter.broker.username"])
            if self.voters and not user:
                raise ConfigError(
                    f"inter.broker.listener.name {ep.name} is {ep.protocol}: set "
                    "sasl.inter.broker.username and sasl.inter.broker.password (a SCRAM user of the cluster)"
                )
            login = SaslLogin(
                str(c["sasl.mechanism.inter.broker.protocol"]), user, str(c["sasl.inter.broker.password"])
            )
        return context, login

    def _acls_changed(self, event: str, name: str) -> None:
        if event in ("acls_changed", "restored", "loaded") and self.authz is not None:
            self.authz.load(list(self.store.acls))

    def _quotas_changed(self, event: str, name: str) -> None:
        if event in ("quotas_changed", "restored", "loaded"):
            self.quotas.update(self.store.quotas)

    # -- starting ----------------------------------------------------------------------------
    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.logs.start()
        try:
            if self.voters:
                await self._join_cluster(loop)
            else:
                self._load_single_node()
            self._quotas_changed("loaded", "")
            self.ports = await self.listener.start(self.listeners.listeners)
        except BaseException:
            await self._close_parts()
            raise
        for name, (host, port) in list(self.cache.endpoints.items()):
            if port == 0:  # bound to a free port: advertise the one chosen
                self.cache.endpoints[name] = (host, self.ports[name])
        self.cache.endpoint = self.cache.endpoints[self.listeners.inter_broker]
        periodic = [*self.replicas.periodic(), *self.groups.periodic(), *self.transactions.periodic()]
        for interval, fn in periodic:
            self._tasks.append(loop.create_task(self._every(interval, fn)))
        listen = self.config["metrics.listen"]
        if listen:  # closed when ``stopping`` is set
            self.metrics_server = await metrics.serve(self, *split_host_port(listen, "metrics.listen"))
        if record_walk.COMPILED:
            log.info("produce validation: record walk compiled (mypyc)")
        else:
            log.warning(
                "produce validation: record walk in pure Python, ~25x the CPU per record (not built "
                "at install: no C compiler, or SFTRAFFIC_PURE_PYTHON=1)"
            )
        log.info(
            "broker %d listening on %s (data dir %s, %d topics)",
            self.node_id,
            ", ".join(f"{e.name}://{e.host}:{self.ports[e.name]}" for e in self.listeners.listeners),
            self.config.data_dir,
            len(self.store.topics),
        )

    def _load_single_node(self) -> None:
        """Metadata from metadata.json; every partition local and led here."""
        self.store.load()
        self._acls_changed("loaded", "")
        self.replicas.open_all()
        self.store.listeners.append(self.replicas.on_metadata)
        self.groups.ensure_offsets_topic()
        self.groups.load_all()
        self.transactions.load_all()

    async def _join_cluster(self, loop: asyncio.AbstractEventLoop) -> None:
        """Catch up with the metadata quorum and register before serving clients.

        Like a KRaft broker, this one accepts no Kafka connections until it has applied the
        quorum's log and registered: answering from a half-replayed journal would send clients
        to partitions it no longer leads. Needs a majority of the voters up.
        """
        if any(port == 0 for _, port in self.cache.endpoints.values()):
            raise StoreError("a cluster broker needs fixed ports: --listen HOST:PORT (not port 0)")
        self.store.persist = False
        self.store.dir.mkdir(parents=True, exist_ok=True)
        quorum = ClusterState(
            self.node_id,
            self.voters,
            self.config.data_dir / "__cluster",
            self.store,
            int(self.config["broker.session.timeout.ms"]),
            self._metadata_applied,
            (*self.cache.endpoint, None),
            dict(self.cache.endpoints),
            str(self.config["controller.quorum.password"]),
        )
        self.cache.quorum = quorum
        self.store.listeners.append(self.replicas.on_metadata)
        ticker = loop.create_task(quorum.run())
        self._tasks.append(ticker)
        t0 = loop.time()
        next_note = t0 + 5
        while not (quorum.replayed and quorum.registered):
            if ticker.done():
                ticker.result()  # raises what stopped it
            if loop.time() >= next_note:
                next_note += 10
                log.info(
                    "broker %d waiting for the metadata quorum (%d of %d voters must be up: %s)",
                    self.node_id,
                    len(self.voters) // 2 + 1,
                    len(self.voters),
                    ", ".join(f"{i}@{a}" for i, a in sorted(self.voters.items())),
                )
            await asyncio.sleep(0.02)
        self.replicas.quarantine_strays()
        self.replicas.reconcile()
        log.info("broker %d caught up with the metadata quorum in %.1f s", self.node_id, loop.time() - t0)
        await self._propose_bootstrap_credentials(quorum)

    async def _propose_bootstrap_credentials(self, quorum: ClusterState) -> None:
        """Credentials added with ``sftraffic users add --data-dir`` before this broker's first
        start go to the quorum (those it has not got already), then leave metadata.json."""
        pending = self.store.bootstrap_credentials()
        if not pending:
            return
        for user, mechs in sorted(pending.items()):
            missing = {m: c for m, c in mechs.items() if self.store.credential(user, m) is None}
            if missing:
                arg = {"name": user, "set": missing, "delete": []}
                await quorum.propose_retrying("change_metadata", "scram_credentials", arg)
        self.store.forget_bootstrap_credentials()
        log.info(
            "broker %d: SCRAM users of %s proposed to the quorum: %s",
            self.node_id,
            self.store.path,
            ", ".join(sorted(pending)),
        )

    def _metadata_applied(self) -> None:
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

    # -- stopping ----------------------------------------------------------------------------
    async def stop(self) -> None:
        """Stop in order: controlled shutdown (cluster), listener, background work, quorum, logs.

        Each step is bounded; the caller bounds the whole (``SHUTDOWN_S``) and calls
        :meth:`force_stop` when it runs out.
        """
        t0 = time.monotonic()
        self.stopping.set()  # long-polling fetches answer now
        if self.cache.quorum is not None and self.config["controlled.shutdown.enable"]:
            await self._controlled_shutdown(CONTROLLED_SHUTDOWN_S)
        self.listener.close()
        await self._close_parts()
        await self.listener.wait_closed(0.5)
        log.info("broker %d stopped cleanly in %.1f s", self.node_id, time.monotonic() - t0)

    async def _controlled_shutdown(self, timeout: float) -> None:
        """Hand every leadership to an in-sync follower and leave the ISRs before stopping.

        The broker proposes its own fencing (Kafka's controlled shutdown): once applied, its
        partitions have new leaders elected from their ISRs, so producers see retriable
        NOT_LEADER_OR_FOLLOWER answers and move on instead of waiting out a session timeout.
        """
        quorum = self.cache.quorum
        assert quorum is not None
        leading = sum(1 for p in self.replicas.all_partitions() if p.is_leader and p.replicated)
        log.info("broker %d: controlled shutdown, handing over %d leadership(s)", self.node_id, leading)
        quorum.shutting_down = True
        try:
            async with asyncio.timeout(timeout):
                await quorum.propose_retrying(
                    "fence_broker", self.node_id, quorum.broker_epoch, timeout=timeout
                )
        except (TimeoutError, StoreError) as exc:
            log.warning("broker %d: controlled shutdown incomplete (%s); stopping anyway", self.node_id, exc)
            return
        if quorum.is_controller:
            # the other brokers apply the change when the leader's next AppendEntries tells them
            # it is committed: let that go out (the ticker runs meanwhile) before the quorum
            # loses its leader, or they would wait for a new election (~2 s) to learn it
            await asyncio.sleep(COMMIT_ANNOUNCE_S)
        self.replicas.reconcile()  # the new leaders take over here too, before the listener closes
        left = [
            f"{p.topic}-{p.index}" for p in self.replicas.all_partitions() if p.is_leader and p.replicated
        ]
        if left:
            log.warning(
                "broker %d: no in-sync follower could take over %s", self.node_id, ", ".join(left[:10])
            )
        await self._answer_handed_over_acks(HANDED_OVER_ACKS_S)

    async def _answer_handed_over_acks(self, timeout: float) -> None:
        """Wait (bounded) until the acks=all produce requests appended here as leader are
        answered: as a follower this broker learns the new leader's high watermark and answers
        the batches it still holds with success (see ``Partition.apply_state``). Closing their
        connections instead leaves the producer unsure whether they were written."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pending = sum(p.pending_acks for p in self.replicas.all_partitions())
            if not pending:
                return
            await asyncio.sleep(0.02)
        log.info("broker %d: stopping with acks=all produce requests not yet answered", self.node_id)

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
        quorum = self.cache.quorum
        if quorum is not None:
            with contextlib.suppress(Exception):
                quorum.destroy()
        self.logs.shutdown()

    def force_stop(self, why: str) -> None:
        """Stop now, from the event loop's thread, without waiting for anything (a second
        signal, or ``stop`` ran out of time): flush and checkpoint the logs, write the
        clean-shutdown marker when every flush succeeded, and leave."""
        self.stopping.set()
        self.listener.close()
        self.replicas.cleaner.stop()
        quorum = self.cache.quorum
        if quorum is not None:
            with contextlib.suppress(Exception):
                quorum.destroy()
        self.logs.shutdown()
        log.warning("broker %d stopped: forced (%s)", self.node_id, why)
