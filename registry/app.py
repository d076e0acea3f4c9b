"""The registry's REST API (Confluent Schema Registry's), served with aiohttp.

Reads are answered from the local state (:class:`~registry.store.KafkaStore`); a read
that finds nothing first catches up with the topic, so a schema just registered through another
instance is found. Writes (register, deletes, config and mode changes) are done by the elected
leader (:class:`~registry.election.Election`): on the leader they are planned against
the state (read up to the topic's end first) and produced to ``_schemas`` one at a time; a
follower forwards the request to the leader's URL and, once answered, catches up with the
topic before answering itself (read your writes). Every refusal is a
:class:`~registry.errors.RegistryError`, answered with Confluent's JSON error body;
an unexpected exception is logged and answered 500/50001, never with a traceback.

With an :class:`~registry.auth.AuthFile` every request but ``GET /`` and
``GET /schemas/types`` needs HTTP Basic credentials of one of its users (401/40101 otherwise),
and is allowed as Karapace allows it: ``Read``/``Write`` on ``Subject:<name>`` for a subject's
versions, lookups, compatibility checks, config and mode; on ``Config:`` for the global config
and mode (403/40301 when refused). A subject the user may not read is answered as one that does
not exist (40401), a schema id used by no subject the user may read as an unknown id (40403),
and lists leave out what the user may not read. A forwarded write carries the client's
credentials: the leader checks them again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import ClientError, ClientSession, ClientTimeout, TCPConnector, web

from registry.auth import AuthFile, Operation
from registry.compatibility import check
from registry.election import Election
from registry.errors import RegistryError
from registry.schemas import SCHEMA_TYPES
from registry.state import Record, RegistryState, SchemaEntry, parse_version
from registry.store import KafkaStore

__all__ = ["CONTENT_TYPE", "make_app"]

log = logging.getLogger("sftraffic.registry")
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
FORWARDED = "X-Sftraffic-Registry-Forwarded"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# answered without credentials (Confluent's root is {}, the types reveal nothing)
PUBLIC = frozenset({"/", "/schemas/types"})
REALM = 'Basic realm="sftraffic schema registry"'
RELOAD_EVERY_S = 1.0  # how often the auth file's modification time is looked at


def reply(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(), status=status, content_type=CONTENT_TYPE
    )


def _flag(request: web.Request, name: str, default: bool = False) -> bool:
    value = request.query.get(name)
    if value is None or value == "":
        return default
    return value.lower() == "true"


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        raw = await request.read()
        data = json.loads(raw) if raw else {}
    except (ValueError, UnicodeDecodeError) as exc:
        raise RegistryError(400, f"Unexpected character in the request body: {exc}") from exc
    if not isinstance(data, dict):
        raise RegistryError.unprocessable("Unrecognized request body: a JSON object is expected")
    return data


def _schema_fields(body: dict[str, Any]) -> tuple[str, str, Any]:
    text = body.get("schema")
    if not isinstance(text, str):
        raise RegistryError.invalid_schema("Empty schema" if text is None else "the schema must be a string")
    stype = body.get("schemaType") or "AVRO"
    if not isinstance(stype, str):
        raise RegistryError.unprocessable("schemaType must be a string")
    refs = body.get("references") or []
    if not isinstance(refs, list):
        raise RegistryError.unprocessable("references must be a list")
    if stype.upper() not in SCHEMA_TYPES:
        raise RegistryError.invalid_schema(
            f"Invalid schema type {stype}: this registry serves {SCHEMA_TYPES}"
        )
    return text, stype.upper(), refs


class LeaderGone(Exception):
    """The instance a write was forwarded to is gone or no longer leads."""


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except RegistryError as exc:
        return reply(exc.body(), exc.http_status)
    except web.HTTPException as exc:  # routing: unknown path or method
        return reply({"error_code": exc.status, "message": f"HTTP {exc.status} {exc.reason}"}, exc.status)
    except Exception:
        log.exception("%s %s failed", request.method, request.path)
        return reply(
            {"error_code": 50001, "message": "Error in the backend data store - internal error"}, 500
        )


def auth_middleware(auth: AuthFile) -> Any:
    """HTTP Basic authentication against ``auth``; the user is ``request["user"]``."""
    next_reload = 0.0

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        nonlocal next_reload
        if request.path in PUBLIC and request.method == "GET":
            return await handler(request)
        now = asyncio.get_running_loop().time()
        if now >= next_reload:
            next_reload = now + RELOAD_EVERY_S
            auth.maybe_reload()
        user = auth.authenticate(request.headers.get("Authorization"))
        if user is None:
            err = RegistryError.unauthorized()
            resp = reply(err.body(), err.http_status)
            resp.headers["WWW-Authenticate"] = REALM
            return resp
        request["user"] = user
        return await handler(request)

    return authenticate


class Registry:
    """The handlers, over a store and an election (and who may do what, when ``auth`` is set)."""

    def __init__(
        self,
        store: KafkaStore,
        election: Election,
        auth: AuthFile | None = None,
        forward_ssl: ssl.SSLContext | None = None,
    ) -> None:
        self.store = store
        self.election = election
        self.auth = auth
        self.forward_ssl = forward_ssl
        self._write_lock = asyncio.Lock()
        self._session: ClientSession | None = None

    # -- permissions ------------------------------------------------------------------------------
    def may(self, request: web.Request, operation: Operation, subject: str) -> bool:
        """May the request's user do ``operation`` on ``subject`` (always, without auth)?"""
        if self.auth is None:
            return True
        return self.auth.allowed(request["user"], operation, f"Subject:{subject}")

    def need(self, request: web.Request, operation: Operation, subject: str | None) -> None:
        """Refuse unless allowed: a subject as if it did not exist, the global config with 403."""
        if self.auth is None:
            return
        if subject is not None:
            if not self.may(request, operation, subject):
                raise RegistryError.subject_not_found(subject)
        elif not self.auth.allowed(request["user"], operation, "Config:"):
            who, what = request["user"].username, operation.value.lower()
            raise RegistryError.forbidden(f"{who} may not {what} the global config and mode")

    def _visible(self, request: web.Request, s: RegistryState, sid: int) -> SchemaEntry:
        """Schema ``sid``, if a subject using it is one the user may read; 40403 if not (the same
        answer as for an id nobody registered)."""
        entry = s.schema_by_id(sid)
        if self.auth is not None and not self.auth.allowed_any(
            request["user"], Operation.READ, [f"Subject:{subject}" for subject in s.subjects_using(sid)]
        ):
            raise RegistryError.schema_id_not_found(sid)  # as if it did not exist
        return entry

    def _readable_uses(self, request: web.Request, s: RegistryState, sid: int, deleted: bool) -> list[Any]:
        """The subject versions using schema ``sid`` that the user may read (40403 when none)."""
        self._visible(request, s, sid)
        return [u for u in s.uses_of(sid, deleted) if self.may(request, Operation.READ, u["subject"])]

    # -- helpers ----------------------------------------------------------------------------------
    async def read(self, fn: Callable[[RegistryState], Any]) -> Any:
        """``fn(state)``; when it finds nothing (a 404), catch up with the topic and ask again."""
        try:
            with self.store.lock:
                return fn(self.store.state)
        except RegistryError as exc:
            if exc.http_status != 404:
                raise
        await asyncio.to_thread(self.store.sync)
        with self.store.lock:
            return fn(self.store.state)

    async def write(
        self, request: web.Request, plan: Callable[[RegistryState], tuple[Any, list[Record]]]
    ) -> web.StreamResponse:
        """Carry out a write here when leading, else forward the request to the leader (again
        to the next one, for up to 30 s, when that one is gone or no longer leads)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while True:
            leader = await self._leader()
            if leader == self.election.url:
                break
            if request.headers.get(FORWARDED):
                raise RegistryError.forwarding_failed(f"{self.election.url} is not the leader either")
            try:
                return await self._forward(request, leader)
            except LeaderGone as exc:
                self.election.forget()
                if loop.time() > deadline:
                    raise RegistryError.forwarding_failed(str(exc)) from exc
                await asyncio.sleep(0.5)
        async with self._write_lock:
            for _ in range(3):  # another writer's record came first (a rebalance): plan again
                await asyncio.to_thread(self.store.sync)
                with self.store.lock:
                    answer, records = plan(self.store.state)
                if await asyncio.to_thread(self.store.write, records):
                    return reply(answer)
        raise RegistryError.store_error("another registry instance kept writing first; try again")

    async def _leader(self) -> str:
        for _ in range(100):
            if self.election.is_leader:
                return self.election.url
            url = await asyncio.to_thread(self.election.leader_url)
            if url is not None:
                return url
            await asyncio.sleep(0.2)
        raise RegistryError.forwarding_failed("no registry instance is the leader")

    async def _forward(self, request: web.Request, leader: str) -> web.StreamResponse:
        if self._session is None:
            connector = TCPConnector(ssl=self.forward_ssl) if self.forward_ssl is not None else None
            self._session = ClientSession(timeout=ClientTimeout(total=60), connector=connector)
        headers = {"Content-Type": CONTENT_TYPE, FORWARDED: "1", "Accept": CONTENT_TYPE}
        if "Authorization" in request.headers:  # the leader checks the client's credentials again
            headers["Authorization"] = request.headers["Authorization"]
        body = await request.read()
        try:
            async with self._session.request(
                request.method, leader.rstrip("/") + request.rel_url.path_qs, data=body, headers=headers
            ) as r:
                status, payload = r.status, await r.read()
        except (ClientError, TimeoutError) as exc:
            raise LeaderGone(f"{leader}: {exc}") from exc
        if status == 500 and b"50003" in payload:  # it no longer leads either
            raise LeaderGone(f"{leader}: {payload[:200]!r}")
        if status < 300:
            await asyncio.to_thread(self.store.sync)
        return web.Response(body=payload, status=status, content_type=CONTENT_TYPE)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    # -- subjects ---------------------------------------------------------------------------------
    async def root(self, request: web.Request) -> web.StreamResponse:
        return reply({})

    async def subjects(self, request: web.Request) -> web.StreamResponse:
        deleted, prefix = _flag(request, "deleted"), request.query.get("subjectPrefix", "")
        names = await self.read(lambda s: s.subject_names(deleted))
        return reply([n for n in names if n.startswith(prefix) and self.may(request, Operation.READ, n)])

    async def schemas(self, request: web.Request) -> web.StreamResponse:
        """GET /schemas: every subject version (``subjectPrefix``, ``deleted``, ``latestOnly``)."""
        deleted, prefix = _flag(request, "deleted"), request.query.get("subjectPrefix", "")
        latest_only = _flag(request, "latestOnly")

        def every(s: RegistryState) -> list[Any]:
            out = []
            for subject in s.subject_names(deleted):
                if not subject.startswith(prefix) or not self.may(request, Operation.READ, subject):
                    continue
                versions = sorted(s.versions(subject, deleted).items())
                for n, v in versions[-1:] if latest_only else versions:
                    out.append(s.version_answer(subject, n, v))
            return out

        return reply(await self.read(every))

    async def subject_versions(self, request: web.Request) -> web.StreamResponse:
        subject, deleted = request.match_info["subject"], _flag(request, "deleted")
        self.need(request, Operation.READ, subject)
        return reply(await self.read(lambda s: list(s.versions(subject, deleted))))

    async def subject_version(self, request: web.Request) -> web.StreamResponse:
        return reply(await self.read(self._version_answer(request)))

    async def subject_version_schema(self, request: web.Request) -> web.StreamResponse:
        answer = await self.read(self._version_answer(request))
        return web.Response(text=answer["schema"], content_type=CONTENT_TYPE)

    def _version_answer(self, request: web.Request) -> Callable[[RegistryState], Any]:
        subject, version = request.match_info["subject"], request.match_info["version"]
        self.need(request, Operation.READ, subject)
        parse_version(version)
        deleted = _flag(request, "deleted")

        def answer(s: RegistryState) -> Any:
            n, v = s.version(subject, version, deleted)
            return s.version_answer(subject, n, v)

        return answer

    async def referenced_by(self, request: web.Request) -> web.StreamResponse:
        subject, version = request.match_info["subject"], request.match_info["version"]
        self.need(request, Operation.READ, subject)

        def users(s: RegistryState) -> list[int]:
            n, _ = s.version(subject, version)
            return sorted(
                sid
                for sid, e in s.schemas.items()
                if any(r.get("subject") == subject and r.get("version") == n for r in e.references)
                and s.uses_of(sid)
            )

        return reply(await self.read(users))

    async def register(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info["subject"]
        self.need(request, Operation.WRITE, subject)
        body = await _body(request)
        text, stype, refs = _schema_fields(body)
        normalize_flag = request.query.get("normalize")

        def plan(s: RegistryState) -> tuple[Any, list[Record]]:
            normalize = _flag(request, "normalize") if normalize_flag else s.normalize_default(subject)
            parsed = s.parse(text, stype, refs, normalize)
            sid, records = s.plan_register(subject, parsed, refs)
            return {"id": sid}, records

        if not request.headers.get(FORWARDED):  # a schema already there needs no leader
            with self.store.lock:
                state = self.store.state
                normalize = (
                    _flag(request, "normalize") if normalize_flag else state.normalize_default(subject)
                )
                parsed = state.parse(text, stype, refs, normalize)
                try:
                    found = state.lookup(subject, parsed, refs)
                except RegistryError:
                    found = None
            if found is not None:
                return reply({"id": found["id"]})
        return await self.write(request, plan)

    async def lookup(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info["subject"]
        self.need(request, Operation.READ, subject)
        body = await _body(request)
        text, stype, refs = _schema_fields(body)
        deleted = _flag(request, "deleted")
        normalize_flag = request.query.get("normalize")

        def find(s: RegistryState) -> Any:
            normalize = _flag(request, "normalize") if normalize_flag else s.normalize_default(subject)
            parsed = s.parse(text, stype, refs, normalize)
            return s.lookup(subject, parsed, refs, deleted)

        return reply(await self.read(find))

    async def delete_version(self, request: web.Request) -> web.StreamResponse:
        subject, version = request.match_info["subject"], request.match_info["version"]
        self.need(request, Operation.WRITE, subject)
        parse_version(version)
        permanent = _flag(request, "permanent")
        return await self.write(request, lambda s: s.plan_delete_version(subject, version, permanent))

    async def delete_subject(self, request: web.Request) -> web.StreamResponse:
        subject, permanent = request.match_info["subject"], _flag(request, "permanent")
        self.need(request, Operation.WRITE, subject)
        return await self.write(request, lambda s: s.plan_delete_subject(subject, permanent))

    # -- schemas by id ----------------------------------------------------------------------------
    def _id(self, request: web.Request) -> int:
        raw = request.match_info["id"]
        try:
            return int(raw)
        except ValueError:
            raise RegistryError(404, "HTTP 404 Not Found") from None

    def _schema(self, request: web.Request, sid: int) -> Callable[[RegistryState], SchemaEntry]:
        """Schema ``sid``'s entry, if the user may read a subject using it."""
        return lambda s: self._visible(request, s, sid)

    async def schema_by_id(self, request: web.Request) -> web.StreamResponse:
        sid = self._id(request)
        entry = await self.read(self._schema(request, sid))
        if request.query:  # ?subject=..., ?format=...: answered alike
            return reply(entry.answer())
        return web.Response(body=entry.answer_bytes(), content_type=CONTENT_TYPE)

    async def schema_by_id_raw(self, request: web.Request) -> web.StreamResponse:
        answer = (await self.read(self._schema(request, self._id(request)))).answer()
        return web.Response(text=answer["schema"], content_type=CONTENT_TYPE)

    async def schema_versions(self, request: web.Request) -> web.StreamResponse:
        sid, deleted = self._id(request), _flag(request, "deleted")
        return reply(await self.read(lambda s: self._readable_uses(request, s, sid, deleted)))

    async def schema_subjects(self, request: web.Request) -> web.StreamResponse:
        sid, deleted = self._id(request), _flag(request, "deleted")
        uses = await self.read(lambda s: self._readable_uses(request, s, sid, deleted))
        return reply(sorted({u["subject"] for u in uses}))

    async def schema_types(self, request: web.Request) -> web.StreamResponse:
        return reply(SCHEMA_TYPES)

    # -- compatibility ----------------------------------------------------------------------------
    async def compatibility(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info["subject"]
        self.need(request, Operation.READ, subject)
        version = request.match_info.get("version")
        if version is not None:
            parse_version(version)
        body = await _body(request)
        text, stype, refs = _schema_fields(body)
        verbose = _flag(request, "verbose")

        def verdict(s: RegistryState) -> Any:
            parsed = s.parse(text, stype, refs, _flag(request, "normalize"))
            if version is not None:
                problems = s.incompatibilities(subject, parsed, version)
            else:
                live = s.subjects.get(subject, {})
                earlier = [(n, s.parsed(v.schema_id).avro) for n, v in sorted(live.items()) if not v.deleted]
                problems = check(parsed.avro, earlier, s.level(subject))
            answer: dict[str, Any] = {"is_compatible": not problems}
            if verbose:
                answer["messages"] = problems
            return answer

        return reply(await self.read(verdict))

    # -- config and mode --------------------------------------------------------------------------
    def _subject_or_none(self, request: web.Request) -> str | None:
        return request.match_info.get("subject")

    async def get_config(self, request: web.Request) -> web.StreamResponse:
        subject = self._subject_or_none(request)
        self.need(request, Operation.READ, subject)
        to_global = _flag(request, "defaultToGlobal")

        def config(s: RegistryState) -> Any:
            conf = s.configs.get(subject) or {}
            if subject is not None and "compatibilityLevel" not in conf and not to_global:
                raise RegistryError.subject_compatibility_not_configured(subject)
            answer: dict[str, Any] = {"compatibilityLevel": s.level(subject).value}
            if "normalize" in conf:
                answer["normalize"] = conf["normalize"]
            return answer

        return reply(await self.read(config))

    async def put_config(self, request: web.Request) -> web.StreamResponse:
        subject = self._subject_or_none(request)
        self.need(request, Operation.WRITE, subject)
        body = await _body(request)
        with self.store.lock:
            self.store.state.plan_config(subject, body)  # refuse bad input before forwarding
        return await self.write(request, lambda s: s.plan_config(subject, body))

    async def delete_config(self, request: web.Request) -> web.StreamResponse:
        subject = self._subject_or_none(request)
        self.need(request, Operation.WRITE, subject)
        return await self.write(request, lambda s: s.plan_delete_config(subject))

    async def get_mode(self, request: web.Request) -> web.StreamResponse:
        subject = self._subject_or_none(request)
        self.need(request, Operation.READ, subject)
        to_global = _flag(request, "defaultToGlobal")

        def mode(s: RegistryState) -> Any:
            if subject is not None and subject not in s.modes and not to_global:
                raise RegistryError.subject_mode_not_configured(subject)
            return {"mode": s.mode(subject)}

        return reply(await self.read(mode))

    async def put_mode(self, request: web.Request) -> web.StreamResponse:
        subject = self._subject_or_none(request)
        self.need(request, Operation.WRITE, subject)
        body = await _body(request)
        with self.store.lock:
            self.store.state.plan_mode(subject, body)
        return await self.write(request, lambda s: s.plan_mode(subject, body))

    async def delete_mode(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info["subject"]
        self.need(request, Operation.WRITE, subject)
        return await self.write(request, lambda s: s.plan_delete_mode(subject))


def make_app(
    store: KafkaStore,
    election: Election,
    auth: AuthFile | None = None,
    forward_ssl: ssl.SSLContext | None = None,
) -> web.Application:
    """The REST API; with ``auth`` only its users get in, each to what it may do; ``forward_ssl``
    is the TLS context for forwarding writes to an https leader (default: the system's CAs)."""
    r = Registry(store, election, auth, forward_ssl)
    middlewares: list[Any] = [errors_middleware]
    if auth is not None:
        middlewares.append(auth_middleware(auth))
    app = web.Application(middlewares=middlewares, client_max_size=16 * 1024 * 1024)
    app["registry"] = r
    s = "/subjects/{subject}"
    v = s + "/versions/{version}"
    app.add_routes(
        [
            web.get("/", r.root),
            web.get("/subjects", r.subjects),
            web.get(s + "/versions", r.subject_versions),
            web.post(s + "/versions", r.register),
            web.get(v, r.subject_version),
            web.get(v + "/schema", r.subject_version_schema),
            web.get(v + "/referencedby", r.referenced_by),
            web.delete(v, r.delete_version),
            web.post(s, r.lookup),
            web.delete(s, r.delete_subject),
            web.get("/schemas", r.schemas),
            web.get("/schemas/types", r.schema_types),
            web.get("/schemas/ids/{id}", r.schema_by_id),
            web.get("/schemas/ids/{id}/schema", r.schema_by_id_raw),
            web.get("/schemas/ids/{id}/versions", r.schema_versions),
            web.get("/schemas/ids/{id}/subjects", r.schema_subjects),
            web.post("/compatibility/subjects/{subject}/versions/{version}", r.compatibility),
            web.post("/compatibility/subjects/{subject}/versions", r.compatibility),
            web.get("/config", r.get_config),
            web.put("/config", r.put_config),
            web.delete("/config", r.delete_config),
            web.get("/config/{subject}", r.get_config),
            web.put("/config/{subject}", r.put_config),
            web.delete("/config/{subject}", r.delete_config),
            web.get("/mode", r.get_mode),
            web.put("/mode", r.put_mode),
            web.get("/mode/{subject}", r.get_mode),
            web.put("/mode/{subject}", r.put_mode),
            web.delete("/mode/{subject}", r.delete_mode),
        ]
    )

    async def close(app: web.Application) -> None:
        await r.close()

    app.on_cleanup.append(close)
    return app
