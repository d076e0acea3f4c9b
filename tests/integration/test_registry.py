"""sftraffic registry against confluent-kafka's own Schema Registry client and Avro serdes.

One broker for the module; each test has its own ``_schemas`` topic and election group, so
its registries start from nothing. Covers: SchemaRegistryClient, AvroSerializer and
AvroDeserializer unmodified (auto-register on and off, use.latest.version), Confluent's error
codes over HTTP, each mode's verdict through the API, a restart keeping every schema and id,
and two instances agreeing on ids (one leads, the other forwards writes).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator

import pytest
import requests
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from deploy.local.registry import RegistryProcess
from testing import wait_for

pytestmark = pytest.mark.integration

CT = "application/vnd.schemaregistry.v1+json"
V1 = {
    "type": "record",
    "name": "TrafficEvent",
    "namespace": "sf.traffic",
    "fields": [{"name": "sensor_id", "type": "string"}, {"name": "speed", "type": "int"}],
}
V2 = {**V1, "fields": [*V1["fields"], {"name": "lane", "type": "int", "default": 0}]}  # type: ignore[misc]
V3_BAD = {**V1, "fields": [*V1["fields"], {"name": "heading", "type": "string"}]}  # type: ignore[misc]

Factory = Callable[..., RegistryProcess]


@pytest.fixture
def registries(broker) -> Iterator[Factory]:  # type: ignore[no-untyped-def]
    topic = f"_schemas-{uuid.uuid4().hex[:8]}"
    group = f"schema-registry-{uuid.uuid4().hex[:8]}"
    started: list[RegistryProcess] = []

    def start(port: int | None = None) -> RegistryProcess:
        r = RegistryProcess(
            broker.bootstrap, port=port, topic=topic, group=group, name=f"registry-{len(started)}"
        )
        started.append(r)
        return r.start(timeout=60)  # type: ignore[return-value]

    yield start
    for r in started:
        r.stop()


def call(r: RegistryProcess, method: str, path: str, body: object = None) -> tuple[int, object]:
    data = json.dumps(body) if body is not None else None
    resp = requests.request(method, r.url + path, data=data, headers={"Content-Type": CT}, timeout=30)
    assert resp.headers["Content-Type"].startswith(CT)
    return resp.status_code, resp.json()


def avro(schema: dict[str, object]) -> Schema:
    return Schema(json.dumps(schema), "AVRO")


def test_confluent_serdes(registries: Factory) -> None:
    reg = registries()
    client = SchemaRegistryClient({"url": reg.url})
    ctx = SerializationContext("traffic", MessageField.VALUE)
    event = {"sensor_id": "s-1", "speed": 42}

    # auto-register on: the serializer registers v1 and writes magic byte + id
    ser = AvroSerializer(client, json.dumps(V1))
    data = ser(event, ctx)
    assert data[0] == 0 and int.from_bytes(data[1:5], "big") == 1
    assert client.get_subjects() == ["traffic-value"]
    reader = AvroDeserializer(SchemaRegistryClient({"url": reg.url}))
    assert reader(data, ctx) == event

    # v2 (a field with a default) is compatible; auto-register off needs it registered
    with pytest.raises(SchemaRegistryError) as exc:
        AvroSerializer(client, json.dumps(V2), conf={"auto.register.schemas": False})(event, ctx)
    assert exc.value.error_code == 40403
    v2_id = client.register_schema("traffic-value", avro(V2))
    assert v2_id == 2
    ser2 = AvroSerializer(client, json.dumps(V2), conf={"auto.register.schemas": False})
    data2 = ser2({**event, "lane": 3}, ctx)
    assert int.from_bytes(data2[1:5], "big") == 2
    # an old reader (v1 as reader schema) reads v2 data; a new one reads v1 data with the default
    old = AvroDeserializer(SchemaRegistryClient({"url": reg.url}), json.dumps(V1))
    assert old(data2, ctx) == event
    new = AvroDeserializer(SchemaRegistryClient({"url": reg.url}), json.dumps(V2))
    assert new(data, ctx) == {**event, "lane": 0}

    # use.latest.version: the serializer writes with the subject's latest schema (v2)
    latest = AvroSerializer(
        SchemaRegistryClient({"url": reg.url}),
        None,
        conf={"auto.register.schemas": False, "use.latest.version": True},
    )
    assert int.from_bytes(latest({**event, "lane": 1}, ctx)[1:5], "big") == 2

    # an incompatible v3 is refused with 409 and the field's name
    with pytest.raises(SchemaRegistryError) as exc:
        client.register_schema("traffic-value", avro(V3_BAD))
    assert exc.value.http_status_code == 409 and "heading" in exc.value.error_message
    assert not client.test_compatibility("traffic-value", avro(V3_BAD))
    assert client.test_compatibility("traffic-value", avro(V2))

    lookup = client.lookup_schema("traffic-value", avro(V1))
    assert (lookup.schema_id, lookup.version) == (1, 1)
    assert client.get_latest_version("traffic-value").version == 2
    assert client.get_versions("traffic-value") == [1, 2]
    assert client.get_compatibility() == "BACKWARD"
    client.set_compatibility("traffic-value", "NONE")
    assert client.get_compatibility("traffic-value") == "NONE"
    assert client.register_schema("traffic-value", avro(V3_BAD)) == 3
    assert client.delete_version("traffic-value", 3) == 3
    assert client.delete_subject("traffic-value") == [1, 2]
    assert client.delete_subject("traffic-value", permanent=True) == [1, 2, 3]
    assert client.get_subjects() == []


def test_errors_and_modes_over_http(registries: Factory) -> None:
    reg = registries()
    s1 = json.dumps(V1)
    assert call(reg, "POST", "/subjects/e/versions", {"schema": s1}) == (200, {"id": 1})
    cases = [
        ("GET", "/subjects/nope/versions", None, 404, 40401),
        ("GET", "/subjects/e/versions/9", None, 404, 40402),
        ("GET", "/subjects/e/versions/0", None, 422, 42202),
        ("GET", "/subjects/e/versions/abc", None, 422, 42202),
        ("GET", "/schemas/ids/99", None, 404, 40403),
        ("POST", "/subjects/e", {"schema": json.dumps(V2)}, 404, 40403),
        ("POST", "/subjects/e/versions", {"schema": "{not json"}, 422, 42201),
        ("POST", "/subjects/e/versions", {"schema": '{"type": "nope"}'}, 422, 42201),
        ("POST", "/subjects/e/versions", {"schema": s1, "schemaType": "XML"}, 422, 42201),
        ("POST", "/subjects/e/versions", {"schema": json.dumps(V3_BAD)}, 409, 409),
        ("PUT", "/config", {"compatibility": "SIDEWAYS"}, 422, 42203),
        ("PUT", "/mode", {"mode": "SIDEWAYS"}, 422, 42204),
        ("GET", "/config/e", None, 404, 40408),
        ("DELETE", "/subjects/e?permanent=true", None, 404, 40405),
        ("DELETE", "/subjects/e/versions/1?permanent=true", None, 404, 40407),
        ("GET", "/no/such/path", None, 404, 404),
    ]
    for method, path, body, status, error_code in cases:
        got_status, got = call(reg, method, path, body)
        assert (got_status, got["error_code"]) == (status, error_code), (method, path, got)  # type: ignore[index]
    # a body that is not JSON is a 400, not a traceback
    resp = requests.post(
        reg.url + "/subjects/e/versions", data=b"\xff{", headers={"Content-Type": CT}, timeout=10
    )
    assert resp.status_code == 400 and resp.json()["error_code"] == 400
    assert call(reg, "GET", "/schemas/types") == (200, ["AVRO"])
    assert call(reg, "GET", "/subjects?subjectPrefix=x") == (200, [])
    assert [(x["subject"], x["id"]) for x in call(reg, "GET", "/schemas")[1]] == [("e", 1)]  # type: ignore[index]
    assert call(reg, "GET", "/schemas/ids/1/versions") == (200, [{"subject": "e", "version": 1}])
    assert call(reg, "GET", "/subjects/e/versions/latest/schema")[1] == json.loads(json.dumps(V1))
    # normalize: the same schema written differently is found
    reordered = json.dumps({"name": "sf.traffic.TrafficEvent", "type": "record", "fields": V1["fields"]})
    assert call(reg, "POST", "/subjects/e?normalize=true", {"schema": reordered})[0] == 404
    assert call(reg, "POST", "/subjects/n/versions?normalize=true", {"schema": s1}) == (200, {"id": 2})
    assert call(reg, "POST", "/subjects/n/versions?normalize=true", {"schema": reordered}) == (200, {"id": 2})
    # read-only mode refuses registrations
    assert call(reg, "PUT", "/mode", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    assert call(reg, "POST", "/subjects/e/versions", {"schema": json.dumps(V2)})[1]["error_code"] == 42205  # type: ignore[index]
    assert call(reg, "PUT", "/mode", {"mode": "READWRITE"}) == (200, {"mode": "READWRITE"})


@pytest.mark.parametrize(
    ("level", "v2_ok", "bad_ok"),
    [
        ("BACKWARD", True, False),
        ("FORWARD", True, True),  # a field without default added: old readers ignore it
        ("FULL", True, False),
        ("NONE", True, True),
    ],
)
def test_modes_through_the_api(registries: Factory, level: str, v2_ok: bool, bad_ok: bool) -> None:
    reg = registries()
    call(reg, "PUT", "/config", {"compatibility": level})
    call(reg, "POST", "/subjects/m/versions", {"schema": json.dumps(V1)})
    for schema, ok in ((V2, v2_ok), (V3_BAD, bad_ok)):
        status, got = call(
            reg, "POST", "/compatibility/subjects/m/versions/latest", {"schema": json.dumps(schema)}
        )
        assert status == 200 and got == {"is_compatible": ok}


def test_restart_keeps_every_schema_and_id(registries: Factory) -> None:
    reg = registries()
    ids = {}
    for i in range(5):
        schema = {**V1, "name": f"E{i}"}
        ids[f"s{i}"] = call(reg, "POST", f"/subjects/s{i}/versions", {"schema": json.dumps(schema)})[1]
    call(reg, "POST", "/subjects/s0/versions", {"schema": json.dumps({**V2, "name": "E0"})})
    call(reg, "DELETE", "/subjects/s1")
    call(reg, "PUT", "/config/s2", {"compatibility": "FULL"})
    port = reg.port
    reg.stop()
    again = registries(port)
    for i in range(5):
        sid = ids[f"s{i}"]["id"]  # type: ignore[index]
        assert call(again, "GET", f"/schemas/ids/{sid}")[0] == 200
    assert call(again, "GET", "/subjects")[1] == ["s0", "s2", "s3", "s4"]
    assert call(again, "GET", "/subjects?deleted=true")[1] == ["s0", "s1", "s2", "s3", "s4"]
    assert call(again, "GET", "/subjects/s0/versions/2")[1]["id"] == 6  # type: ignore[index]
    assert call(again, "GET", "/config/s2")[1] == {"compatibilityLevel": "FULL"}
    # a new schema after the restart gets the next id
    assert call(again, "POST", "/subjects/new/versions", {"schema": json.dumps({**V1, "name": "N"})})[1] == {
        "id": 7
    }


def test_two_instances_agree_on_ids(registries: Factory) -> None:
    a, b = registries(), registries()
    ids: dict[str, int] = {}
    for i in range(6):
        reg = (a, b)[i % 2]
        schema = json.dumps({**V1, "name": f"Two{i}"})
        status, got = call(reg, "POST", f"/subjects/two{i}/versions", {"schema": schema})
        assert status == 200, got
        ids[schema] = got["id"]  # type: ignore[index]
    assert sorted(ids.values()) == list(range(1, 7))
    for schema, sid in ids.items():
        for reg in (a, b):
            got = call(reg, "GET", f"/schemas/ids/{sid}")[1]
            assert json.loads(got["schema"]) == json.loads(schema)  # type: ignore[index]
    # the same schema through either instance keeps its id
    first = next(iter(ids))
    assert call(b, "POST", "/subjects/two0/versions", {"schema": first})[1] == {"id": ids[first]}

    # every kind of write through either instance: each reads its own write at once, and the
    # other's once it has read _schemas that far (instances serve reads from what they have
    # read, as Confluent's followers do: eventually, within a moment)
    def sees(reg: RegistryProcess, path: str, expected: object) -> None:
        wait_for(lambda: call(reg, "GET", path) == expected, 10, 0.05, f"{path} on the other instance")

    assert call(b, "PUT", "/config/two1", {"compatibility": "NONE"}) == (200, {"compatibility": "NONE"})
    assert call(b, "GET", "/config/two1") == (200, {"compatibilityLevel": "NONE"})
    sees(a, "/config/two1", (200, {"compatibilityLevel": "NONE"}))
    assert call(a, "DELETE", "/subjects/two2") == (200, [1])
    assert call(a, "GET", "/subjects/two2/versions")[1]["error_code"] == 40401  # type: ignore[index]
    gone = call(a, "GET", "/subjects/two2/versions")
    sees(b, "/subjects/two2/versions", gone)
    assert call(b, "PUT", "/mode/two3", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    sees(a, "/mode/two3", (200, {"mode": "READONLY"}))
    # the leader stops: the other takes over and writes go on with the next id
    leader_first = call(a, "POST", "/subjects/x/versions", {"schema": json.dumps({**V1, "name": "X"})})
    assert leader_first == (200, {"id": 7})
    a.stop()
    assert call(b, "POST", "/subjects/y/versions", {"schema": json.dumps({**V1, "name": "Y"})}) == (
        200,
        {"id": 8},
    )
