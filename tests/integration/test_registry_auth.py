"""sftraffic registry with ``--auth-file`` over HTTPS: confluent-kafka's SchemaRegistryClient and
serdes with Basic credentials, Karapace's permission semantics (its own test users and auth
file), writes forwarded with the client's credentials, the file reloaded while running, and the
application's registry client with credentials in the URL.

Two instances share a ``_schemas`` topic: ``leader`` (started first and the only one eligible)
and ``follower`` (``--no-leader-eligibility``: it forwards every write). The follower's auth
file has one user more, ``follower-only``, whom the leader does not know.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from deploy.local.registry import RegistryProcess
from registry.auth import user_entry
from sensors import avro as app_avro
from testing import sftraffic, wait_for
from tests.support.registry_auth import KARAPACE

pytestmark = pytest.mark.integration

PASSWORDS = {"admin": "admin", "aladdin": "opensesame", "reader": "secret", "follower-only": "pw-f"}
CAVE = {"type": "record", "name": "Cave", "fields": [{"name": "gold", "type": "int"}]}
CARPET = {"type": "record", "name": "Carpet", "fields": [{"name": "colour", "type": "string"}]}


@dataclass
class Secured:
    leader: RegistryProcess
    follower: RegistryProcess
    ca: Path
    auth_file: Path

    def call(self, r: RegistryProcess, method: str, path: str, user: str | None, body: object = None) -> Any:
        auth = (user, PASSWORDS[user]) if user else None
        data = json.dumps(body) if body is not None else None
        return requests.request(method, r.url + path, data=data, auth=auth, verify=str(self.ca), timeout=30)

    def client(self, r: RegistryProcess, user: str) -> SchemaRegistryClient:
        return SchemaRegistryClient(
            {
                "url": r.url,
                "basic.auth.user.info": f"{user}:{PASSWORDS[user]}",
                "ssl.ca.location": str(self.ca),
            }
        )


@pytest.fixture(scope="module")
def secured(broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    import trustme

    d = tmp_path_factory.mktemp("registry-auth")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    cert.cert_chain_pems[0].write_to_path(str(d / "server.crt"))
    cert.private_key_pem.write_to_path(str(d / "server.key"))
    (d / "leader.json").write_text(json.dumps(KARAPACE))
    follower = {
        "users": [*KARAPACE["users"], user_entry("follower-only", PASSWORDS["follower-only"])],
        "permissions": [
            *KARAPACE["permissions"],
            {"username": "follower-only", "operation": "Write", "resource": ".*"},
        ],
    }
    (d / "follower.json").write_text(json.dumps(follower))
    topic, group = f"_schemas-{uuid.uuid4().hex[:8]}", f"schema-registry-{uuid.uuid4().hex[:8]}"
    tls = [
        "--tls-cert",
        str(d / "server.crt"),
        "--tls-key",
        str(d / "server.key"),
        "--tls-ca",
        str(d / "ca.pem"),
    ]
    started: list[RegistryProcess] = []
    try:
        for name, extra in (("leader", []), ("follower", ["--no-leader-eligibility"])):
            r = RegistryProcess(
                broker.bootstrap,
                topic=topic,
                group=group,
                name=f"registry-{name}",
                extra_args=["--auth-file", str(d / f"{name}.json"), *tls, *extra],
            )
            started.append(r)
            r.start(timeout=60)
        yield Secured(started[0], started[1], d / "ca.pem", d / "leader.json")
    finally:
        for r in started:
            r.stop()


def test_confluents_client_and_serdes_log_in_over_https(secured: Secured) -> None:
    r = secured.follower  # its write is forwarded to the leader, with the credentials
    assert r.url.startswith("https://")
    c = secured.client(r, "aladdin")
    sid = c.register_schema("cave-serdes-value", Schema(json.dumps(CAVE), "AVRO"))
    ctx = SerializationContext("cave-serdes", MessageField.VALUE)
    data = AvroSerializer(c, json.dumps(CAVE), conf={"auto.register.schemas": False})({"gold": 7}, ctx)
    assert data is not None and int.from_bytes(data[1:5], "big") == sid
    assert AvroDeserializer(secured.client(secured.leader, "aladdin"))(data, ctx) == {"gold": 7}
    # the wrong password, or none, and nothing but 401 (with the Basic challenge)
    with pytest.raises(SchemaRegistryError) as e:
        SchemaRegistryClient(
            {"url": r.url, "basic.auth.user.info": "aladdin:sesame", "ssl.ca.location": str(secured.ca)}
        ).get_subjects()
    assert e.value.http_status_code == 401 and e.value.error_code == 40101
    anonymous = secured.call(r, "GET", "/subjects", None)
    assert anonymous.status_code == 401 and anonymous.json()["error_code"] == 40101
    assert anonymous.headers["WWW-Authenticate"].startswith("Basic realm=")
    # what reveals nothing needs no credentials
    assert secured.call(r, "GET", "/schemas/types", None).json() == ["AVRO"]
    assert secured.call(r, "GET", "/", None).json() == {}


def test_each_user_sees_and_changes_only_what_it_may(secured: Secured) -> None:
    r, call = secured.leader, secured.call
    cave = call(r, "POST", "/subjects/cave-1/versions", "aladdin", {"schema": json.dumps(CAVE)}).json()["id"]
    carpet = call(r, "POST", "/subjects/carpet-1/versions", "admin", {"schema": json.dumps(CARPET)}).json()[
        "id"
    ]
    subjects = {u: call(r, "GET", "/subjects", u).json() for u in ("admin", "aladdin", "reader")}
    assert {"cave-1", "carpet-1"} <= set(subjects["admin"])
    assert "cave-1" in subjects["aladdin"] and "carpet-1" not in subjects["aladdin"]
    assert "carpet-1" in subjects["reader"] and "cave-1" not in subjects["reader"]
    # a subject the user may not read answers as one that does not exist (Karapace's way)
    for method, path, body in (
        ("GET", "/subjects/carpet-1/versions", None),
        ("GET", "/subjects/carpet-1/versions/latest", None),
        ("POST", "/subjects/carpet-1", {"schema": json.dumps(CARPET)}),
        ("POST", "/subjects/carpet-1/versions", {"schema": json.dumps(CARPET)}),
        ("DELETE", "/subjects/carpet-1", None),
        ("GET", "/config/carpet-1", None),
        ("PUT", "/mode/carpet-1", {"mode": "READONLY"}),
        ("POST", "/compatibility/subjects/carpet-1/versions/latest", {"schema": json.dumps(CARPET)}),
    ):
        got = call(r, method, path, "aladdin", body)
        assert (got.status_code, got.json()) == (
            404,
            {"error_code": 40401, "message": "Subject 'carpet-1' not found."},
        )
    # read-only: the reader may read its subject but not write it
    assert call(r, "GET", "/subjects/carpet-1/versions", "reader").json() == [1]
    got = call(r, "POST", "/subjects/carpet-1/versions", "reader", {"schema": json.dumps(CARPET)})
    assert got.json()["error_code"] == 40401
    # schemas by id: visible through a subject the user may read, else as unknown
    assert call(r, "GET", f"/schemas/ids/{cave}", "aladdin").status_code == 200
    assert (
        call(r, "GET", f"/schemas/ids/{carpet}", "aladdin").json()
        == {"error_code": 40403, "message": f"Schema {carpet} not found"}  # as an id nobody registered
        == {**call(r, "GET", "/schemas/ids/999", "admin").json(), "message": f"Schema {carpet} not found"}
    )
    assert call(r, "GET", f"/schemas/ids/{carpet}/versions", "reader").json() == [
        {"subject": "carpet-1", "version": 1}
    ]
    assert call(r, "GET", f"/schemas/ids/{cave}/subjects", "reader").json()["error_code"] == 40403
    # the global config and mode: 403 without a permission on Config:
    got = call(r, "PUT", "/config", "aladdin", {"compatibility": "NONE"})
    assert got.status_code == 403 and got.json()["error_code"] == 40301 and "aladdin" in got.json()["message"]
    assert call(r, "GET", "/mode", "reader").status_code == 403
    assert call(r, "GET", "/config", "admin").json() == {"compatibilityLevel": "BACKWARD"}


def test_the_leader_checks_forwarded_credentials_again(secured: Secured) -> None:
    """follower-only may write on the follower; the leader, which carries the write out, does
    not know that user: the write is refused, and nothing is written."""
    body = {"schema": json.dumps({**CAVE, "name": "Forwarded"})}
    got = secured.call(secured.follower, "POST", "/subjects/cave-forwarded/versions", "follower-only", body)
    assert got.status_code == 401, got.text
    assert "cave-forwarded" not in secured.call(secured.leader, "GET", "/subjects", "admin").json()
    assert secured.call(secured.follower, "GET", "/subjects", "follower-only").status_code == 200


def test_the_auth_file_is_read_again_when_it_changes(secured: Secured) -> None:
    data = json.loads(secured.auth_file.read_text())
    data["users"].append(user_entry("newcomer", "fresh"))
    data["permissions"].append({"username": "newcomer", "operation": "Read", "resource": "Subject:cave-"})
    secured.auth_file.write_text(json.dumps(data))
    url = secured.leader.url + "/subjects"

    def let_in() -> bool:
        return (
            requests.get(url, auth=("newcomer", "fresh"), verify=str(secured.ca), timeout=10).status_code
            == 200
        )

    wait_for(let_in, timeout=15, interval=0.2, what="the new user let in without a restart")
    seen = requests.get(url, auth=("newcomer", "fresh"), verify=str(secured.ca), timeout=10).json()
    assert seen and all(s.startswith("cave-") for s in seen)


def test_the_applications_client_takes_credentials_from_the_url(
    secured: Secured, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sensors.avro (fleet, gateway, dashboard, faust app): ``https://user:password@host``, the
    CA from $REQUESTS_CA_BUNDLE; an error names the registry without the password."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(secured.ca))
    host = secured.leader.url.removeprefix("https://")
    enc = app_avro.AvroEncoder(f"https://aladdin:{PASSWORDS['aladdin']}@{host}", schemas={"cave-app": CAVE})
    value = enc.encode("cave-app", {"gold": 3})
    assert app_avro.AvroDecoder(f"https://aladdin:{PASSWORDS['aladdin']}@{host}").decode(value) == {"gold": 3}
    with pytest.raises(app_avro.RegistryError) as e:
        app_avro.AvroEncoder(
            f"https://reader:{PASSWORDS['reader']}@{host}", schemas={"cave-app2": CAVE}
        ).encode("cave-app2", {"gold": 1})
    assert e.value.error_code == 40401
    assert app_avro.split_url(f"https://reader:p%40ss@{host}/x") == (f"https://{host}/x", ("reader", "p@ss"))


def test_a_bad_auth_file_is_one_line_at_start(tmp_path: Path, broker: Any) -> None:
    bad = tmp_path / "auth.json"
    bad.write_text('{"users": [{"username": "x", "algorithm": "md5", "salt": "s", "password_hash": "h"}]}')
    cmd = sftraffic("registry", "-b", broker.bootstrap, "--listen", "127.0.0.1:0", "--auth-file", str(bad))
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "unknown algorithm 'md5'" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
