"""The language worker protocol's messages, built at run time from ``function_rpc_subset.proto``.

The worker library expects the proxy worker's ``protos`` module: generated message classes
for ``FunctionRpc.proto``. Neither protoc nor the generated module ships on PyPI, so this
module parses the subset of the protocol the driver and the library touch (one declaration
a line, proto3, with the official field names and numbers) into a ``FileDescriptorProto``
and asks protobuf for its message classes, which then serialize exactly as gRPC's would.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from google.protobuf import descriptor_pb2, descriptor_pool, duration_pb2, message_factory, timestamp_pb2

PACKAGE = "AzureFunctionsRpcMessages"
SCHEMA_PATH = Path(__file__).with_name("function_rpc_subset.proto")

_FDP = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "string": _FDP.TYPE_STRING,
    "bytes": _FDP.TYPE_BYTES,
    "bool": _FDP.TYPE_BOOL,
    "int32": _FDP.TYPE_INT32,
    "int64": _FDP.TYPE_INT64,
    "sint64": _FDP.TYPE_SINT64,
    "double": _FDP.TYPE_DOUBLE,
}
_FIELD = re.compile(r"(repeated )?(map<(\w+), ([\w.]+)>|[\w.]+) (\w+) = (\d+);")
_ENUM = re.compile(r"enum (\w+) \{(.*)\}")
_HEADER = re.compile(r'(syntax|package|import) (?:= )?"?([\w./]+)"?;')


def _build_file(schema: str) -> descriptor_pb2.FileDescriptorProto:
    """Parse the schema (proto3 syntax, one declaration a line) into a file descriptor."""
    file = descriptor_pb2.FileDescriptorProto(name="azure_functions_rpc_subset.proto")
    schema = re.sub(r"//[^\n]*", "", schema)
    enums = {m.group(1) for m in re.finditer(r"enum (\w+)", schema)}
    one_line_enums = re.sub(r"enum (\w+) \{([^}]*)\}", lambda m: f"enum {m[1]} {{{' '.join(m[2].split())}}}", schema)
    message: descriptor_pb2.DescriptorProto | None = None
    oneof: int | None = None
    for line in (raw.strip() for raw in one_line_enums.splitlines()):
        if enum_match := _ENUM.fullmatch(line):
            enum = (message.enum_type if message is not None else file.enum_type).add(name=enum_match.group(1))
            for pair in filter(None, (p.strip() for p in enum_match.group(2).split(";"))):
                value_name, number = (s.strip() for s in pair.split("="))
                enum.value.add(name=value_name, number=int(number))
        elif line.startswith("message "):
            message = file.message_type.add(name=line.split()[1])
        elif line.startswith("oneof ") and message is not None:
            oneof = len(message.oneof_decl)
            message.oneof_decl.add(name=line.split()[1])
        elif message is None and (header := _HEADER.fullmatch(line)):
            _apply_header(file, header.group(1), header.group(2))
        elif line == "}":
            message, oneof = (message, None) if oneof is not None else (None, None)
        elif line:
            if message is None:
                raise ValueError(f"field outside a message: {line!r}")
            _add_field(message, line, oneof, enums)
    if file.syntax != "proto3" or file.package != PACKAGE:
        raise ValueError(f"the schema must declare syntax proto3 and package {PACKAGE}")
    return file


def _apply_header(file: descriptor_pb2.FileDescriptorProto, keyword: str, value: str) -> None:
    if keyword == "import":
        file.dependency.append(value)
    elif keyword == "syntax":
        file.syntax = value
    else:
        file.package = value


def _add_field(message: descriptor_pb2.DescriptorProto, line: str, oneof: int | None, enums: set[str]) -> None:
    found = _FIELD.fullmatch(line)
    if found is None:
        raise ValueError(f"cannot parse schema line: {line!r}")
    repeated, type_name, key, value, name, number = found.groups()
    target = message.field.add(name=name, number=int(number), label=_FDP.LABEL_OPTIONAL)
    if oneof is not None:
        target.oneof_index = oneof
    if key is None:
        if repeated:
            target.label = _FDP.LABEL_REPEATED
        _set_type(target, type_name, message, enums)
        return
    # map<K, V> is a repeated nested XxxEntry message with map_entry set.
    entry = message.nested_type.add(name=name[0].upper() + _camel(name[1:]) + "Entry")
    entry.options.map_entry = True
    _set_type(entry.field.add(name="key", number=1, label=_FDP.LABEL_OPTIONAL), key, message, enums)
    _set_type(entry.field.add(name="value", number=2, label=_FDP.LABEL_OPTIONAL), value, message, enums)
    target.label = _FDP.LABEL_REPEATED
    target.type = _FDP.TYPE_MESSAGE
    target.type_name = f".{PACKAGE}.{message.name}.{entry.name}"


def _set_type(
    target: descriptor_pb2.FieldDescriptorProto, name: str, message: descriptor_pb2.DescriptorProto, enums: set[str]
) -> None:
    if name in _SCALARS:
        target.type = _SCALARS[name]
        return
    if name.startswith("google.protobuf."):
        target.type, target.type_name = _FDP.TYPE_MESSAGE, f".{name}"
        return
    target.type = _FDP.TYPE_ENUM if name.rsplit(".", 1)[-1] in enums else _FDP.TYPE_MESSAGE
    own = name in {e.name for e in message.enum_type}  # an enum declared in this message
    target.type_name = f".{PACKAGE}.{message.name}.{name}" if own else f".{PACKAGE}.{name}"


def _camel(snake: str) -> str:
    return re.sub(r"_(\w)", lambda m: m.group(1).upper(), snake)


def build_protos(schema_path: Path = SCHEMA_PATH) -> SimpleNamespace:
    """Message classes by name, like the proxy worker's ``protos`` module."""
    pool = descriptor_pool.DescriptorPool()
    for dependency in (duration_pb2, timestamp_pb2):
        proto = descriptor_pb2.FileDescriptorProto()
        dependency.DESCRIPTOR.CopyToProto(proto)
        pool.Add(proto)
    file = _build_file(schema_path.read_text(encoding="utf-8"))
    pool.Add(file)
    return SimpleNamespace(
        **{
            m.name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{m.name}"))
            for m in file.message_type
        }
    )


protos = build_protos()
