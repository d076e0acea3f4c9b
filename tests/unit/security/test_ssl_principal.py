"""ssl.principal.mapping.rules (framework/security/ssl_principal.py), Kafka's SslPrincipalMapper cases."""

from __future__ import annotations

import pytest

from framework.errors import ConfigError, SaslAuthenticationFailed
from framework.security.ssl_principal import PrincipalMapper, parse_rules, subject_dn


def test_default_keeps_the_whole_name() -> None:
    assert PrincipalMapper().name("CN=alice,OU=eng,O=acme,C=US") == "CN=alice,OU=eng,O=acme,C=US"
    assert PrincipalMapper("").name("CN=x") == "CN=x"


@pytest.mark.parametrize(
    ("rules", "dn", "name"),
    [
        # from Kafka's SslPrincipalMapperTest
        (
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT",
            "CN=kafka-server1,OU=ServiceUsers,O=Org,C=US",
            "kafka-server1",
        ),
        (
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT",
            "CN=Duke,OU=JavaSoft,O=Sun Microsystems",
            "CN=Duke,OU=JavaSoft,O=Sun Microsystems",
        ),
        (
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
            "CN=Kafka-Server1,OU=ServiceUsers,O=Org,L=X,ST=Y,C=US",
            "kafka-server1@serviceusers",
        ),
        (
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/U",
            "CN=kafka-server1,OU=ServiceUsers,O=Org,L=X,ST=Y,C=US",
            "KAFKA-SERVER1@SERVICEUSERS",
        ),
        (
            "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT",
            "OU=ServiceUsers,O=Org,CN=Kafka.Admin,C=US",
            "kafka.admin",
        ),
        ("RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U", "cn=a,ou=b,dc=c,dc=d", "A@B"),
        # a comma inside a pattern belongs to it; rules may be on separate lines
        ("RULE:^CN=([^,]*),O=acme$/$1/\nDEFAULT", "CN=bob,O=acme", "bob"),
        # an escaped slash in the replacement
        ("RULE:^CN=(.*?),O=(.*)$/$2\\/$1/", "CN=bob,O=acme", "acme/bob"),
    ],
)
def test_rules(rules: str, dn: str, name: str) -> None:
    assert PrincipalMapper(rules).name(dn) == name


def test_first_matching_rule_wins_and_no_match_fails() -> None:
    m = PrincipalMapper("RULE:^CN=(.*?),O=a$/$1-a/,RULE:^CN=(.*?),O=.*$/$1-any/")
    assert m.name("CN=x,O=a") == "x-a"
    assert m.name("CN=x,O=b") == "x-any"
    with pytest.raises(SaslAuthenticationFailed):
        m.name("OU=nothing")


@pytest.mark.parametrize("bad", ["DEFAULT,FOO", "RULE:abc", "RULE:^CN=(.*$/$1/", "RULE:x/y/Z"])
def test_invalid_rules_are_refused(bad: str) -> None:
    with pytest.raises(ConfigError):
        parse_rules(bad)


def test_subject_dn_is_rfc2253_most_specific_first() -> None:
    subject = (
        (("countryName", "US"),),
        (("organizationName", "Acme, Inc."),),
        (("organizationalUnitName", "eng"), ("userId", "7")),
        (("commonName", "alice"),),
    )
    assert subject_dn(subject) == "CN=alice,OU=eng+UID=7,O=Acme\\, Inc.,C=US"
    assert subject_dn(((("commonName", " lead"),),)) == "CN=\\ lead"
    email = subject_dn(((("emailAddress", "a@b.c"),),))
    assert email == "1.2.840.113549.1.9.1=#1605" + b"a@b.c".hex()
