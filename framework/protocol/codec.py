"""Compile message declarations into fast encoders and decoders (sans-io).

For every (message class, version) pair the first call generates the Python source of one
decoder and one encoder function, straight-line code with adjacent fixed-width fields read or
written by a single ``struct`` call, and caches them. Decoders read from any bytes-like object;
``records`` fields are returned as slices of the input (zero-copy on a memoryview). Encoders
append to a ``bytearray`` and hand large ``records`` buffers through untouched, so a Fetch
response is a list of buffers for ``transport.writelines``: stored bytes are never copied into
a response buffer.

Wire rules (Kafka protocol guide): big-endian integers; non-flexible versions use int16-length
strings and int32-length bytes/arrays (-1 = null); flexible versions use unsigned-varint
length+1 (0 = null) and end every struct with a tagged-field section. Unknown tags are skipped.
"""

from __future__ import annotations

import dataclasses
import struct
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from framework.protocol.fields import FieldSpec

T = TypeVar("T")

Decoder = Callable[[Any, int], tuple[Any, int]]
Encoder = Callable[[Any, bytearray, list[Any]], None]


class DecodeError(ValueError):
    """The bytes do not hold a valid message of the expected version."""


class EncodeError(ValueError):
    """A value cannot be encoded in the requested version."""


_FIXED = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "float64": "d",
    "bool": "?",
    "uuid": "16s",
}
_SIZES = {"b": 1, "h": 2, "i": 4, "q": 8, "H": 2, "I": 4, "Q": 8, "d": 8, "?": 1, "16s": 16}

#: records fields at least this large are passed through as their own buffer
PASS_THROUGH = 2048


def read_uvarint(buf: Any, pos: int) -> tuple[int, int]:
    """Read an unsigned varint; return (value, new position)."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise DecodeError("varint too long")


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0:
        raise EncodeError("negative unsigned varint")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _struct_map(top: type) -> dict[str, type]:
    """Struct name → class, found in the module that declares ``top``."""
    mod = sys.modules[top.__module__]
    return {
        name: obj
        for name, obj in vars(mod).items()
        if isinstance(obj, type) and dataclasses.is_dataclass(obj) and hasattr(obj, "SPECS")
    }


class _Compiler:
    def __init__(self) -> None:
        self.ns: dict[str, Any] = {
            "_ruv": read_uvarint,
            "_wuv": write_uvarint,
            "DecodeError": DecodeError,
            "EncodeError": EncodeError,
            "_struct": struct,
        }
        self._struct_names: dict[str, str] = {}
        self.decoders: dict[tuple[type, int, bool], Decoder] = {}
        self.encoders: dict[tuple[type, int, bool], Encoder] = {}
        self.lock = threading.RLock()

    # -- helpers ---------------------------------------------------------------------------
    def _st(self, fmt: str) -> tuple[str, str]:
        name = self._struct_names.get(fmt)
        if name is None:
            name = f"_S{len(self._struct_names)}"
            self._struct_names[fmt] = name
            s = struct.Struct(">" + fmt)
            self.ns[name + "u"] = s.unpack_from
            self.ns[name + "p"] = s.pack
        return name + "u", name + "p"

    def _const(self, value: Any) -> str:
        name = f"_C{len(self.ns)}"
        self.ns[name] = value
        return name

    @staticmethod
    def _present(spec: FieldSpec, version: int) -> bool:
        return version in spec.versions

    @staticmethod
    def _is_tagged(spec: FieldSpec, version: int, flexible: bool) -> bool:
        return flexible and spec.tag is not None and version in spec.tagged

    # -- decoding --------------------------------------------------------------------------
    def decoder(self, cls: type, version: int, flexible: bool) -> Decoder:
        key = (cls, version, flexible)
        fn = self.decoders.get(key)
        if fn is not None:
            return fn
        with self.lock:
            fn = self.decoders.get(key)
            if fn is None:
                fn = self._compile_decoder(cls, version, flexible)
                self.decoders[key] = fn
        return fn

    def _decode_value(
        self,
        lines: list[str],
        ind: str,
        var: str,
        spec: FieldSpec,
        version: int,
        flexible: bool,
        structs: dict[str, type],
    ) -> None:
        """Emit code reading one (non-fixed-width or array) value into ``var``."""
        nullable = version in spec.nullable
        if spec.array:
            self._decode_array(lines, ind, var, spec, version, flexible, structs)
            return
        t = spec.type
        if t in _FIXED:
            fmt = _FIXED[t]
            u, _ = self._st(fmt)
            lines.append(f"{ind}{var} = {u}(buf, pos)[0]; pos += {_SIZES[fmt]}")
            return
        if t in ("string", "bytes", "records"):
            self._decode_sized(lines, ind, var, t, nullable, flexible)
            return
        if t == "struct":
            assert spec.struct is not None
            scls = structs[spec.struct]
            sub = self._const(self.decoder(scls, version, flexible))
            if nullable:
                u, _ = self._st("b")
                lines.append(f"{ind}_m = {u}(buf, pos)[0]; pos += 1")
                lines.append(f"{ind}if _m < 0: {var} = None")
                lines.append(f"{ind}else: {var}, pos = {sub}(buf, pos)")
            else:
                lines.append(f"{ind}{var}, pos = {sub}(buf, pos)")
            return
        raise AssertionError(t)

    def _decode_array(
        self,
        lines: list[str],
        ind: str,
        var: str,
        spec: FieldSpec,
        version: int,
        flexible: bool,
        structs: dict[str, type],
    ) -> None:
        """Emit code reading an array (nullable where the spec says) into ``var``."""
        nullable = version in spec.nullable
        if flexible:
            lines.append(f"{ind}_n, pos = _ruv(buf, pos)")
            lines.append(f"{ind}_n -= 1")
        else:
            u, _ = self._st("i")
            lines.append(f"{ind}_n = {u}(buf, pos)[0]; pos += 4")
        lines.append(f"{ind}if _n < 0:")
        if nullable:
            lines.append(f"{ind}    {var} = None")
        else:
            lines.append(f"{ind}    raise DecodeError('null array in non-nullable field')")
        lines.append(f"{ind}else:")
        lines.append(f"{ind}    if _n > _len - pos: raise DecodeError('array length past end of frame')")
        item = dataclasses.replace(spec, array=False, nullable=dataclasses.replace(spec.nullable, lo=1, hi=0))
        if spec.type in _FIXED and spec.type != "uuid":
            fmt = _FIXED[spec.type]
            size = _SIZES[fmt]
            lines.append(
                f"{ind}    {var} = list(_struct.unpack_from('>%d{fmt}' % _n, buf, pos)); pos += {size} * _n"
            )
        else:
            lines.append(f"{ind}    {var} = []")
            lines.append(f"{ind}    for _i in range(_n):")
            self._decode_value(lines, ind + "        ", "_x", item, version, flexible, structs)
            lines.append(f"{ind}        {var}.append(_x)")

    def _decode_sized(
        self, lines: list[str], ind: str, var: str, t: str, nullable: bool, flexible: bool
    ) -> None:
        """Emit code reading a length-prefixed string, bytes or records value into ``var``."""
        if flexible:
            lines.append(f"{ind}_n = buf[pos]")
            lines.append(f"{ind}if _n < 128: pos += 1")
            lines.append(f"{ind}else: _n, pos = _ruv(buf, pos)")
            lines.append(f"{ind}_n -= 1")
        elif t == "string":
            u, _ = self._st("h")
            lines.append(f"{ind}_n = {u}(buf, pos)[0]; pos += 2")
        else:
            u, _ = self._st("i")
            lines.append(f"{ind}_n = {u}(buf, pos)[0]; pos += 4")
        lines.append(f"{ind}if _n < 0:")
        if nullable:
            lines.append(f"{ind}    {var} = None")
        else:
            lines.append(f"{ind}    raise DecodeError('null in non-nullable field {var[2:]}')")
        lines.append(f"{ind}else:")
        lines.append(f"{ind}    _e = pos + _n")
        lines.append(f"{ind}    if _e > _len: raise DecodeError('field past end of frame')")
        if t == "string":
            lines.append(f"{ind}    {var} = str(buf[pos:_e], 'utf-8'); pos = _e")
        elif t == "bytes":
            lines.append(f"{ind}    {var} = bytes(buf[pos:_e]); pos = _e")
        else:
            lines.append(f"{ind}    {var} = buf[pos:_e]; pos = _e")

    def _decode_tagged(
        self, lines: list[str], tagged: list[tuple[str, FieldSpec]], version: int, structs: dict[str, type]
    ) -> None:
        """Emit code reading the tagged-field section (unknown tags are skipped)."""
        lines.append("    _nt = buf[pos]")
        lines.append("    if _nt < 128: pos += 1")
        lines.append("    else: _nt, pos = _ruv(buf, pos)")
        lines.append("    for _k in range(_nt):")
        lines.append("        _tag, pos = _ruv(buf, pos)")
        lines.append("        _sz, pos = _ruv(buf, pos)")
        lines.append("        _end = pos + _sz")
        lines.append("        if _end > _len: raise DecodeError('tagged field past end of frame')")
        for i, (name, s) in enumerate(tagged):
            lines.append(f"        {'if' if i == 0 else 'elif'} _tag == {s.tag}:")
            self._decode_value(lines, "            ", f"v_{name}", s, version, True, structs)
        lines.append("        pos = _end")

    def _compile_decoder(self, cls: type, version: int, flexible: bool) -> Decoder:
        specs: dict[str, FieldSpec] = cls.SPECS  # type: ignore[attr-defined]
        structs = _struct_map(cls)
        lines = ["def decode(buf, pos):", "    _len = len(buf)"]
        regular = [
            (n, s)
            for n, s in specs.items()
            if self._present(s, version) and not self._is_tagged(s, version, flexible)
        ]
        tagged = [
            (n, s)
            for n, s in specs.items()
            if self._present(s, version) and self._is_tagged(s, version, flexible)
        ]
        # group runs of fixed-width scalars into one unpack
        run: list[tuple[str, str]] = []

        def flush_run() -> None:
            if not run:
                return
            fmt = "".join(f for _, f in run)
            u, _ = self._st(fmt)
            size = sum(_SIZES[f] for _, f in run)
            names = ", ".join(f"v_{n}" for n, _ in run)
            lines.append(f"    {names}, = {u}(buf, pos); pos += {size}")
            run.clear()

        for name, s in regular:
            if not s.array and s.type in _FIXED:
                run.append((name, _FIXED[s.type]))
                continue
            flush_run()
            self._decode_value(lines, "    ", f"v_{name}", s, version, flexible, structs)
        flush_run()
        for name, _ in tagged:
            lines.append(f"    v_{name} = _D_{name}")
        if flexible:
            self._decode_tagged(lines, tagged, version, structs)
        lines.append("    if pos > _len: raise DecodeError('message past end of frame')")
        args = []
        for f in dataclasses.fields(cls):
            s = specs[f.name]
            if self._present(s, version):
                args.append(f"v_{f.name}")
            if f.name in dict(tagged) or not self._present(s, version):
                if f.default is not dataclasses.MISSING:
                    dflt = self._const(f.default)
                    expr = dflt
                else:
                    fac = self._const(f.default_factory)
                    expr = f"{fac}()"
                if not self._present(s, version):
                    args.append(expr)
                else:
                    # tagged: default unless the tag was present
                    lines.insert(2, f"    _D_{f.name} = {expr}")
        cname = self._const(cls)
        lines.append(f"    return {cname}({', '.join(args)}), pos")
        src = "\n".join(lines)
        ns = dict(self.ns)
        exec(compile(src, f"<decode {cls.__name__} v{version}>", "exec"), ns)  # noqa: S102
        self.ns.update({k: v for k, v in ns.items() if k.startswith("_C")})
        fn: Decoder = ns["decode"]
        fn.__doc__ = src
        return fn

    # -- encoding --------------------------------------------------------------------------
    def encoder(self, cls: type, version: int, flexible: bool) -> Encoder:
        key = (cls, version, flexible)
        fn = self.encoders.get(key)
        if fn is not None:
            return fn
        with self.lock:
            fn = self.encoders.get(key)
            if fn is None:
                fn = self._compile_encoder(cls, version, flexible)
                self.encoders[key] = fn
        return fn

    def _encode_value(
        self,
        lines: list[str],
        ind: str,
        var: str,
        spec: FieldSpec,
        version: int,
        flexible: bool,
        structs: dict[str, type],
        out: str = "out",
    ) -> None:
        """Emit code writing one value from ``var`` to the bytearray ``out``."""
        nullable = version in spec.nullable
        t = spec.type
        if spec.array:
            self._encode_array(lines, ind, var, spec, version, flexible, structs, out)
            return
        if t in _FIXED:
            _, p = self._st(_FIXED[t])
            lines.append(f"{ind}{out} += {p}({var})")
            return
        if t in ("string", "bytes", "records"):
            self._encode_sized(lines, ind, var, t, nullable, flexible, out)
            return
        if t == "struct":
            assert spec.struct is not None
            sub = self._const(self.encoder(structs[spec.struct], version, flexible))
            if nullable:
                lines.append(f"{ind}if {var} is None: {out}.append(255)")
                lines.append(f"{ind}else:")
                lines.append(f"{ind}    {out}.append(1); {sub}({var}, {out}, parts)")
            else:
                lines.append(f"{ind}{sub}({var}, {out}, parts)")
            return
        raise AssertionError(t)

    def _encode_array(
        self,
        lines: list[str],
        ind: str,
        var: str,
        spec: FieldSpec,
        version: int,
        flexible: bool,
        structs: dict[str, type],
        out: str,
    ) -> None:
        """Emit code writing an array (nullable where the spec says) from ``var``."""
        nullable = version in spec.nullable
        t = spec.type
        lines.append(f"{ind}if {var} is None:")
        if nullable:
            if flexible:
                lines.append(f"{ind}    {out}.append(0)")
            else:
                lines.append(f"{ind}    {out} += b'\\xff\\xff\\xff\\xff'")
        else:
            lines.append(f"{ind}    raise EncodeError('null array in non-nullable field')")
        lines.append(f"{ind}else:")
        if flexible:
            lines.append(f"{ind}    _wuv({out}, len({var}) + 1)")
        else:
            _, p = self._st("i")
            lines.append(f"{ind}    {out} += {p}(len({var}))")
        item = dataclasses.replace(spec, array=False, nullable=dataclasses.replace(spec.nullable, lo=1, hi=0))
        if t in _FIXED and t != "uuid":
            fmt = _FIXED[t]
            lines.append(f"{ind}    {out} += _struct.pack('>%d{fmt}' % len({var}), *{var})")
        else:
            lines.append(f"{ind}    for _x in {var}:")
            self._encode_value(lines, ind + "        ", "_x", item, version, flexible, structs, out)

    def _encode_sized(
        self, lines: list[str], ind: str, var: str, t: str, nullable: bool, flexible: bool, out: str
    ) -> None:
        """Emit code writing a length-prefixed string, bytes or records value (big records pass through)."""
        lines.append(f"{ind}if {var} is None:")
        if nullable:
            if flexible:
                lines.append(f"{ind}    {out}.append(0)")
            elif t == "string":
                lines.append(f"{ind}    {out} += b'\\xff\\xff'")
            else:
                lines.append(f"{ind}    {out} += b'\\xff\\xff\\xff\\xff'")
        else:
            lines.append(f"{ind}    raise EncodeError('null in non-nullable field')")
        lines.append(f"{ind}else:")
        if t == "string":
            lines.append(f"{ind}    _b = {var}.encode('utf-8')")
        else:
            lines.append(f"{ind}    _b = {var}")
        if flexible:
            lines.append(f"{ind}    _wuv({out}, len(_b) + 1)")
        elif t == "string":
            _, p = self._st("h")
            lines.append(f"{ind}    {out} += {p}(len(_b))")
        else:
            _, p = self._st("i")
            lines.append(f"{ind}    {out} += {p}(len(_b))")
        if t == "records" and out == "out":
            lines.append(f"{ind}    if len(_b) >= {PASS_THROUGH}:")
            lines.append(f"{ind}        parts.append(bytes(out)); out.clear(); parts.append(_b)")
            lines.append(f"{ind}    else:")
            lines.append(f"{ind}        out += _b")
        else:
            lines.append(f"{ind}    {out} += _b")

    def _compile_encoder(self, cls: type, version: int, flexible: bool) -> Encoder:
        specs: dict[str, FieldSpec] = cls.SPECS  # type: ignore[attr-defined]
        structs = _struct_map(cls)
        lines = ["def encode(o, out, parts):"]
        regular = [
            (n, s)
            for n, s in specs.items()
            if self._present(s, version) and not self._is_tagged(s, version, flexible)
        ]
        tagged = sorted(
            (
                (n, s)
                for n, s in specs.items()
                if self._present(s, version) and self._is_tagged(s, version, flexible)
            ),
            key=lambda ns: ns[1].tag or 0,
        )
        run: list[tuple[str, str]] = []

        def flush_run() -> None:
            if not run:
                return
            fmt = "".join(f for _, f in run)
            _, p = self._st(fmt)
            vals = ", ".join(f"o.{n}" for n, _ in run)
            lines.append(f"    out += {p}({vals})")
            run.clear()

        for name, s in regular:
            if not s.array and s.type in _FIXED:
                run.append((name, _FIXED[s.type]))
                continue
            flush_run()
            lines.append(f"    _v = o.{name}")
            self._encode_value(lines, "    ", "_v", s, version, flexible, structs)
        flush_run()
        if flexible:
            if not tagged:
                lines.append("    out.append(0)")
            else:
                lines.append("    _nt = 0; _tb = bytearray()")
                fields_by_name = {f.name: f for f in dataclasses.fields(cls)}
                for name, s in tagged:
                    f = fields_by_name[name]
                    if f.default is not dataclasses.MISSING:
                        dflt = self._const(f.default)
                    else:
                        assert f.default_factory is not dataclasses.MISSING
                        dflt = self._const(f.default_factory())
                    lines.append(f"    _v = o.{name}")
                    lines.append(f"    if _v != {dflt}:")
                    lines.append("        _nt += 1; _t = bytearray()")
                    self._encode_value(lines, "        ", "_v", s, version, flexible, structs, "_t")
                    lines.append(f"        _wuv(_tb, {s.tag}); _wuv(_tb, len(_t)); _tb += _t")
                lines.append("    _wuv(out, _nt); out += _tb")
        if len(lines) == 1:
            lines.append("    pass")
        src = "\n".join(lines)
        ns = dict(self.ns)
        exec(compile(src, f"<encode {cls.__name__} v{version}>", "exec"), ns)  # noqa: S102
        self.ns.update({k: v for k, v in ns.items() if k.startswith("_C")})
        fn: Encoder = ns["encode"]
        fn.__doc__ = src
        return fn


_compiler = _Compiler()


def is_flexible(cls: type, version: int) -> bool:
    return version >= cls.FLEXIBLE  # type: ignore[attr-defined,no-any-return]


def decode(cls: type[T], version: int, buf: Any, pos: int = 0) -> tuple[T, int]:
    """Decode a message of class ``cls`` at ``version`` from ``buf[pos:]``."""
    fn = _compiler.decoder(cls, version, is_flexible(cls, version))
    try:
        return fn(buf, pos)
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise DecodeError(f"malformed {cls.__name__} v{version}: {exc}") from exc


def encode_into(obj: Any, version: int, out: bytearray, parts: list[Any]) -> None:
    """Append ``obj`` encoded at ``version``; large records go to ``parts`` as-is."""
    cls = type(obj)
    fn = _compiler.encoder(cls, version, is_flexible(cls, version))
    try:
        fn(obj, out, parts)
    except (struct.error, AttributeError, TypeError) as exc:
        raise EncodeError(f"cannot encode {cls.__name__} v{version}: {exc}") from exc


def encode(obj: Any, version: int) -> bytes:
    """Encode ``obj`` at ``version`` into one bytes object (cold paths, tests)."""
    out = bytearray()
    parts: list[Any] = []
    encode_into(obj, version, out, parts)
    if not parts:
        return bytes(out)
    parts.append(out)
    return b"".join(parts)


def decode_data(cls: type[T], buf: Any) -> T:
    """Decode a versioned data schema (int16 version prefix, e.g. consumer protocol)."""
    if len(buf) < 2:
        raise DecodeError(f"{cls.__name__}: too short")
    version = struct.unpack_from(">h", buf, 0)[0]
    lo, hi = cls.VERSIONS  # type: ignore[attr-defined]
    if version < lo:
        # like Kafka's ConsumerProtocol: a newer version is read as our newest, an older
        # (negative) one is an error
        raise DecodeError(f"{cls.__name__}: unsupported version {version}")
    obj, _ = decode(cls, min(version, hi), buf, 2)
    return obj


def encode_data(obj: Any, version: int) -> bytes:
    return struct.pack(">h", version) + encode(obj, version)
