"""The principal of a TLS client certificate: its subject, mapped by ``ssl.principal.mapping.rules``.

Kafka's ``SslPrincipalMapper``: the subject's distinguished name in RFC 2253 form (as Java's
``X500Principal.getName()`` writes it: the most specific RDN first, ``CN=alice,OU=eng,O=acme,C=US``)
is tried against each rule in order; the first that applies gives the user name:

* ``DEFAULT``: the whole distinguished name;
* ``RULE:pattern/replacement/`` with an optional ``L`` or ``U`` after the last slash (lower or
  upper case the result): applies when the pattern matches the whole name; the result is the
  name with every match replaced (``$1`` names a group, as in Java).

Rules are separated by commas (a comma inside a rule's pattern is part of it) or newlines. No
rule applying is an authentication failure. :func:`subject_dn` makes the name from the subject
Python's ``ssl`` reports (``SSLObject.getpeercert()["subject"]``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from framework.errors import ConfigError, SaslAuthenticationFailed

_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|\n\s*|$)")
_PARSER = re.compile(_RULE)

# attribute types Java's RFC 2253 output names by keyword; Python's ssl long names → keyword
_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
# others are written OID=#hex of their DER value; the one seen in practice:
_EMAIL_OID = "1.2.840.113549.1.9.1"


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        out = self.pattern.sub(self.replacement, dn)
        if self.case == "L":
            return out.lower()
        if self.case == "U":
            return out.upper()
        return out

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        return f"RULE:{self.pattern.pattern}/{self.replacement}/{self.case}"


def _java_replacement(text: str) -> str:
    """Java's replacement syntax (``$1``, ``\\$``) as Python's (``\\g<1>``)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append(text[i + 1].replace("\\", "\\\\"))
            i += 2
        elif c == "$" and i + 1 < len(text) and text[i + 1].isdigit():
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            out.append(f"\\g<{text[i + 1 : j]}>")
            i = j
        else:
            out.append("\\\\" if c == "\\" else c)
            i += 1
    return "".join(out)


def parse_rules(text: str) -> list[Rule]:
    """``ssl.principal.mapping.rules`` → rules; ConfigError naming the rule that is not one."""
    rules: list[Rule] = []
    for m in _SPLITTER.finditer(text.strip()):
        item = m.group(1)
        if not item:
            continue
        p = _PARSER.match(item)
        if p is None or p.end() != len(item) or p.group(7):
            raise ConfigError(
                f"ssl.principal.mapping.rules: invalid rule {item!r} "
                "(use DEFAULT or RULE:pattern/replacement/[LU])"
            )
        if p.group(1):
            rules.append(Rule(None))
            continue
        try:
            pattern = re.compile(p.group(2))
        except re.error as exc:
            raise ConfigError(f"ssl.principal.mapping.rules: bad pattern in {item!r}: {exc}") from None
        rules.append(Rule(pattern, _java_replacement(p.group(4)), p.group(6) or ""))
    return rules or [Rule(None)]


class PrincipalMapper:
    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules = parse_rules(rules)

    def name(self, dn: str) -> str:
        for r in self.rules:
            out = r.apply(dn)
            if out is not None:
                return out
        raise SaslAuthenticationFailed(f"no ssl.principal.mapping.rules rule applies to {dn!r}")


def _escape(value: str) -> str:
    out = []
    for i, c in enumerate(value):
        if c in ',+"\\<>;' or (i == 0 and c in "# ") or (i == len(value) - 1 and c == " "):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def _ava(attr: str, value: str) -> str:
    kw = _KEYWORDS.get(attr)
    if kw is not None:
        return f"{kw}={_escape(value)}"
    if attr == "emailAddress":  # IA5String, written as Java does: OID=#DER
        raw = value.encode("ascii", "replace")
        return f"{_EMAIL_OID}=#16{len(raw):02x}{raw.hex()}"
    return f"{attr}={_escape(value)}"


Subject = tuple[tuple[tuple[str, str], ...], ...]


def subject_dn(subject: Subject) -> str:
    """The RFC 2253 distinguished name of a subject as Python's ssl gives it (RDNs in
    certificate order, most general first): ``CN=alice,O=acme,C=US``."""
    return ",".join("+".join(_ava(a, v) for a, v in rdn) for rdn in reversed(subject))
