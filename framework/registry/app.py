"""The registry's REST API (Confluent Schema Registry's), served with aiohttp.

Reads are answered from the local state (:class:`~framework.registry.store.KafkaStore`); a read
that finds nothing first catches up with the topic, so a schema just registered through another
instance is found. Writes (register, deletes, config and mode changes) are done by the elected
leader (:class:`~framework.registry.election.Election`): on the leader they are planned against
the state (read up to the topic's end first) and produced to ``_schemas`` one at a time; a
follower forwards the request to the leader's URL and, once answered, catches up with the
topic before answering itself (read your writes). Every refusal is a
:class:`~framework.registry.errors.RegistryError`, answered with Confluent's JSON error body;
an unexpected exception is logged and answered 500/50001, never with a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import ClientError, ClientSession, ClientTimeout, web

from framework.registry.compatibility import check
from framework.registry.election import Election
from framework.registry.errors import RegistryError
from framework.registry.schemas import SCHEMA_TYPES
from framework.registry.state import Record, RegistryState, parse_version
from framework.registry.store import KafkaStore

__all__ = ["CONTENT_TYPE", "make_app"]

log = logging.getLogger("sftraffic.registry")
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
FORWARDED = "X-Sftraffic-Registry-Forwarded"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


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


class Registry:
    """The handlers, over a store and an election."""

    def __init__(self, store: KafkaStore, election: Election) -> None:
        self.store = store
        self.election = election
        self._write_lock = asyncio.Lock()
        self._session: ClientSession | None = None

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
            self._session = ClientSession(timeout=ClientTimeout(total=60))
        headers = {"Content-Type": CONTENT_TYPE, FORWARDED: "1", "Accept": CONTENT_TYPE}
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
        return reply([n for n in names if n.startswith(prefix)])

    async def schemas(self, request: web.Request) -> web.StreamResponse:
        """GET /schemas: every subject version (``subjectPrefix``, ``deleted``, ``latestOnly``)."""
        deleted, prefix = _flag(request, "deleted"), request.query.get("subjectPrefix", "")
        latest_only = _flag(request, "latestOnly")

        def every(s: RegistryState) -> list[Any]:
            out = []
            for subject in s.subject_names(deleted):
                if not subject.startswith(prefix):
                    continue
                versions = sorted(s.versions(subject, deleted).items())
                for n, v in versions[-1:] if latest_only else versions:
                    out.append(s.version_answer(subject, n, v))
            return out

        return reply(await self.read(every))

    async def subject_versions(self, request: web.Request) -> web.StreamResponse:
        subject, deleted = request.match_info["subject"], _flag(request, "deleted")
        return reply(await self.read(lambda s: list(s.versions(subject, deleted))))

    async def subject_version(self, request: web.Request) -> web.StreamResponse:
        return reply(await self.read(self._version_answer(request)))

    async def subject_version_schema(self, request: web.Request) -> web.StreamResponse:
        answer = await self.read(self._version_answer(request))
        return web.Response(text=answer["schema"], content_type=CONTENT_TYPE)

    def _version_answer(self, request: web.Request) -> Callable[[RegistryState], Any]:
        subject, version = request.match_info["subject"], request.match_info["version"]
        parse_version(version)
        deleted = _flag(request, "deleted")

        def answer(s: RegistryState) -> Any:
            n, v = s.version(subject, version, deleted)
            return s.version_answer(subject, n, v)

        return answer

    async def referenced_by(self, request: web.Request) -> web.StreamResponse:
        subject, version = request.match_info["subject"], request.match_info["version"]

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
        parse_version(version)
        permanent = _flag(request, "permanent")
        return await self.write(request, lambda s: s.plan_delete_version(subject, version, permanent))

    async def delete_subject(self, request: web.Request) -> web.StreamResponse:
        subject, permanent = request.match_info["subject"], _flag(request, "permanent")
        return await self.write(request, lambda s: s.plan_delete_subject(subject, permanent))

    # -- schemas by id ----------------------------------------------------------------------------
    def _id(self, request: web.Request) -> int:
        raw = request.match_info["id"]
        try:
            return int(raw)
        except ValueError:
            raise RegistryError(404, "HTTP 404 Not Found") from None

    async def schema_by_id(self, request: web.Request) -> web.StreamResponse:
        sid = self._id(request)
        if request.query:  # ?subject=..., ?format=...: answered alike
            return reply(await self.read(lambda s: s.schema_by_id(sid).answer()))
        body = await self.read(lambda s: s.schema_by_id(sid).answer_bytes())
        return web.Response(body=body, content_type=CONTENT_TYPE)

    async def schema_by_id_raw(self, request: web.Request) -> web.StreamResponse:
        sid = self._id(request)
        answer = await self.read(lambda s: s.schema_by_id(sid).answer())
        return web.Response(text=answer["schema"], content_type=CONTENT_TYPE)

    async def schema_versions(self, request: web.Request) -> web.StreamResponse:
        sid, deleted = self._id(request), _flag(request, "deleted")

        def uses(s: RegistryState) -> Any:
            s.schema_by_id(sid)
            return s.uses_of(sid, deleted)

        return reply(await self.read(uses))

    async def schema_subjects(self, request: web.Request) -> web.StreamResponse:
        sid, deleted = self._id(request), _flag(request, "deleted")

        def subjects(s: RegistryState) -> Any:
            s.schema_by_id(sid)
            return sorted({u["subject"] for u in s.uses_of(sid, deleted)})

        return reply(await self.read(subjects))

    async def schema_types(self, request: web.Request) -> web.StreamResponse:
        return reply(SCHEMA_TYPES)

    # -- compatibility ----------------------------------------------------------------------------
    async def compatibility(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info["subject"]
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
        subject, body = self._subject_or_none(request), await _body(request)
        with self.store.lock:
            self.store.state.plan_config(subject, body)  # refuse bad input before forwarding
        return await self.write(request, lambda s: s.plan_config(subject, body))

    async def delete_config(self, request: web.Request) -> web.StreamResponse:
        subject = self._subject_or_none(request)
        return await self.write(request, lambda s: s.plan_delete_config(subject))

    async def get_mode(self, request: web.Request) -> web.StreamResponse:
        subject = self._subject_or_none(request)
        to_global = _flag(request, "defaultToGlobal")

        def mode(s: RegistryState) -> Any:
            if subject is not None and subject not in s.modes and not to_global:
                raise RegistryError.subject_mode_not_configured(subject)
            return {"mode": s.mode(subject)}

        return reply(await self.read(mode))

    async def put_mode(self, request: web.Request) -> web.StreamResponse:
        subject, body = self._subject_or_none(request), await _body(request)
        with self.store.lock:
            self.store.state.plan_mode(subject, body)
        return await self.write(request, lambda s: s.plan_mode(subject, body))

    async def delete_mode(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info["subject"]
        return await self.write(request, lambda s: s.plan_delete_mode(subject))


def make_app(store: KafkaStore, election: Election) -> web.Application:
    r = Registry(store, election)
    app = web.Application(middlewares=[errors_middleware], client_max_size=16 * 1024 * 1024)
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
