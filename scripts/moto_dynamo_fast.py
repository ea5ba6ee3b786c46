"""DynamoDB's attribute values written out directly (patch 12; issue 47 items 13 and 15).

Loaded by scripts/moto_server.py; refuses to start if moto's serializer no longer has the
shape this patch wraps, or if the direct form differs from moto's own for any sample.

Why: moto 5.2.5 serializes every DynamoDB answer (GetItem, Query, Scan, UpdateItem's
returned attributes, ...) through its generic, model-driven serializer
(moto/core/serialize.py), which visits each of an AttributeValue's ten members by name for
every value, nested maps and lists included: a GetItem of a 2.8 KB job item took 22.6 ms
against 7.2 ms for a small item, and an UpdateItem returning ALL_NEW 25.8 ms against 12.1
ms returning nothing (docs/TESTING.md, "moto's serializer"). Every job read, listing and
claim in the tests and in `sortie dev` paid it, and the serial lock (patch 1) made every
other DynamoDB request wait behind it.

What: for a value of the `AttributeValue` shape in a DynamoDB (or DynamoDB Streams) answer,
the wire form is written directly. An AttributeValue's wire form is its one member as it
is: `S` and `N` strings, `BOOL` and `NULL` booleans, `SS` and `NS` lists of strings, `M` a
map and `L` a list of AttributeValues, and `B` (raw bytes after moto's `dynamo_to_dict`)
and `BS` base64-encoded, exactly as moto's serializer does it
(https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_AttributeValue.html).
Anything else (not a dict of exactly one known member, or a member of another type) goes
to moto's own serializer unchanged, so the patch can only make an answer faster, never
different: at start it serializes a set of samples (every member, empty strings, lists
and maps, nesting, bytes) both ways and refuses to start if any differs.
"""

import base64
import functools

_STRINGS = ("S", "N")
_STRING_SETS = ("SS", "NS")
_BOOLS = ("BOOL", "NULL")


class _NotPlain(Exception):
    """A value the direct form does not cover: moto's own serializer writes it."""


def _b64(value):
    if isinstance(value, str):
        value = value.encode("utf-8")
    if not isinstance(value, (bytes, bytearray)):
        raise _NotPlain
    return base64.b64encode(value).strip().decode("utf-8")


def wire(value):
    """The wire form of one AttributeValue, or _NotPlain."""
    if type(value) is not dict or len(value) != 1:
        raise _NotPlain
    ((kind, inner),) = value.items()
    if kind in _STRINGS:
        if type(inner) is not str:
            raise _NotPlain
        return {kind: inner}
    if kind == "M":
        if type(inner) is not dict:
            raise _NotPlain
        return {"M": {k: wire(v) for k, v in inner.items()}}
    if kind == "L":
        if type(inner) is not list:
            raise _NotPlain
        return {"L": [wire(v) for v in inner]}
    if kind in _BOOLS:
        if type(inner) is not bool:
            raise _NotPlain
        return {kind: inner}
    if kind in _STRING_SETS:
        if type(inner) is not list or any(type(v) is not str for v in inner):
            raise _NotPlain
        return {kind: list(inner)}
    if kind == "B":
        return {"B": _b64(inner)}
    if kind == "BS":
        if type(inner) is not list:
            raise _NotPlain
        return {"BS": [_b64(v) for v in inner]}
    raise _NotPlain


def _direct(original):
    @functools.wraps(original)
    def serialize_structure(self, serialized, value, shape, key):
        if key and shape.name == "AttributeValue" and _is_dynamo(self):
            try:
                form = wire(value)
            except _NotPlain:
                pass
            else:
                self._default_serialize(serialized, form, shape, key)
                return
        original(self, serialized, value, shape, key)

    serialize_structure.__sortie__ = True
    return serialize_structure


def _is_dynamo(self):
    """Whether `self` serializes a DynamoDB answer (read once per serializer); the start-up
    check sets `_sortie_direct` to compare both forms."""
    direct = self.__dict__.get("_sortie_direct")
    if direct is None:
        name = getattr(getattr(self, "service_model", None), "service_name", None)
        direct = name in ("dynamodb", "dynamodbstreams")
        self._sortie_direct = direct
    return direct


# Every member, empty values, nesting and bytes: the start-up check serializes each both
# ways (an Item of a GetItem answer, the Attributes of an UpdateItem answer, Query's Items).
_SAMPLES = [
    {"s": {"S": "x"}, "e": {"S": ""}, "n": {"N": "-1.5e3"}, "t": {"BOOL": True},
     "f": {"BOOL": False}, "z": {"NULL": True}},
    {"ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2"]}, "b": {"B": b"\x00\xffab"},
     "bs": {"BS": [b"x", b"\x01"]}, "eb": {"B": b""}},
    {"m": {"M": {"a": {"S": "1"}, "b": {"L": [{"N": "1"}, {"M": {}}, {"L": []}]}}},
     "em": {"M": {}}, "el": {"L": []},
     "deep": {"L": [{"M": {"x": {"SS": ["q"]}, "y": {"B": b"z"}}}, {"NULL": True}]}},
    {"unicode": {"S": "\u00e9\u2028\"\\"}, "k" * 40: {"N": "0"}},
]


def _check():
    """Serializes the samples as moto does, with and without the direct form; raises
    SystemExit if any answer differs."""
    from moto.core.responses import XFormedAttributePicker, get_service_model
    from moto.core.serialize import get_serializer_class
    from moto.dynamodb.responses import DynamoHandler

    model = get_service_model("dynamodb")
    serializer_cls = get_serializer_class("dynamodb", model.protocol)
    picker = XFormedAttributePicker(
        response_transformers=getattr(DynamoHandler, "RESPONSE_KEY_PATH_TO_TRANSFORMER", None)
    )
    for op, field in (("GetItem", "Item"), ("UpdateItem", "Attributes"), ("Query", "Items")):
        operation = model.operation_model(op)
        for sample in _SAMPLES:
            result = {field: [sample, sample] if field == "Items" else sample}
            answers = []
            for direct in (False, True):
                serializer = serializer_cls(operation_model=operation, value_picker=picker)
                serializer._sortie_direct = direct
                answers.append(serializer.serialize(result)["body"])
            if answers[0] != answers[1]:
                raise SystemExit(
                    "moto_dynamo_fast.py: the direct form of an AttributeValue differs from "
                    f"moto's own for {op}: {answers[0]!r} != {answers[1]!r}; revisit patch 12"
                )


def install():
    """Patch 12; raises SystemExit if moto's serializer changed shape or the forms differ."""
    import inspect

    from moto.core import serialize

    cls = serialize.BaseJSONSerializer
    current = cls.__dict__.get("_serialize_type_structure")
    if current is None:
        raise SystemExit(
            "moto_dynamo_fast.py: moto's BaseJSONSerializer has no _serialize_type_structure; "
            "revisit patch 12"
        )
    if getattr(current, "__sortie__", False):
        return
    source = inspect.getsource(serialize.ResponseSerializer._default_serialize)
    if "serialized[serialization_key] = value" not in source:
        raise SystemExit(
            "moto_dynamo_fast.py: moto's serializer writes values another way; revisit patch 12"
        )
    cls._serialize_type_structure = _direct(current)
    _check()


# Patch 13: an update expression is parsed once.
#
# moto parses a request's UpdateExpression twice (the handler, to find its names and
# values, and the backend), and each validator then deep-copies the tree before resolving
# it (moto/dynamodb/parsing/validators.py): about 4 ms of a 20 ms UpdateItem with a
# ten-action expression, on every claim and transition. The tree depends on the expression
# text alone (names and values stay placeholders until the validator resolves its copy), so
# it is parsed once per text and kept pickled (at most _PARSED_MAX texts, least recently
# used dropped); every caller gets a tree of its own, unpickled, as a fresh parse would give
# it, and the validator's copy of a tree is a pickle round trip (an exact deep copy of these
# plain nodes, about a seventh of deepcopy's time). An expression that fails to parse is
# not kept: its error is raised again each time, as before.

_PARSED_MAX = 512


def _parse_once(make):
    import pickle
    from collections import OrderedDict

    kept = OrderedDict()
    lock = __import__("threading").Lock()

    @functools.wraps(make)
    def parse(expression_str):
        with lock:
            found = kept.get(expression_str)
            if found is not None:
                kept.move_to_end(expression_str)
        if found is None:
            tree = make(expression_str)
            try:
                found = pickle.dumps(tree, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # noqa: BLE001 a tree that does not pickle is not kept
                return tree
            with lock:
                kept[expression_str] = found
                while len(kept) > _PARSED_MAX:
                    kept.popitem(last=False)
        return pickle.loads(found)

    parse.__sortie__ = True
    parse.__func__ = make
    return parse


def _tree_copy(deepcopy, node_type):
    import pickle

    @functools.wraps(deepcopy)
    def copy(value, memo=None):
        if memo is None and isinstance(value, node_type):
            try:
                return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
            except Exception:  # noqa: BLE001 anything else is deep-copied as before
                pass
        return deepcopy(value, memo)

    copy.__sortie__ = True
    return copy


def install_parse_once():
    """Patch 13; raises SystemExit if moto's expression parsing changed shape, or if a kept
    tree does not validate and run exactly as a fresh parse does."""
    import inspect

    from moto.dynamodb.parsing import ast_nodes, expressions, validators

    parser = expressions.UpdateExpressionParser
    make = inspect.getattr_static(parser, "make")
    if getattr(getattr(make, "__func__", None), "__sortie__", False):
        return
    init = inspect.getsource(validators.Validator.__init__)
    if (
        not isinstance(make, classmethod)
        or "self.node_to_validate = deepcopy(expression)" not in init
        or validators.deepcopy.__module__ != "copy"
    ):
        raise SystemExit(
            "moto_dynamo_fast.py: moto's update expressions are parsed or copied another "
            "way; revisit patch 13"
        )
    fresh = make.__func__.__get__(parser)
    once = _parse_once(fresh)
    parser.make = staticmethod(once)
    validators.deepcopy = _tree_copy(validators.deepcopy, ast_nodes.Node)
    _check_parse_once(fresh, once)


def _check_parse_once(fresh, once):
    """The same expression, run three times through the kept tree and once freshly parsed,
    against the same item, must leave the same item: the kept tree is never changed by a
    run."""
    from moto.dynamodb.models.dynamo_type import DynamoType, Item
    from moto.dynamodb.parsing.executors import UpdateExpressionExecutor
    from moto.dynamodb.parsing.validators import UpdateExpressionValidator

    class _Table:
        table_key_attrs = ["pk"]
        attribute_keys = ["pk"]
        attr = []

    expression = (
        "SET a = :a, b = list_append(if_not_exists(b, :empty), :l), c = c + :one, "
        "d.e = :a REMOVE f ADD g :one"
    )
    names = {}
    values = {":a": {"S": "x"}, ":l": {"L": [{"N": "1"}]}, ":empty": {"L": []},
              ":one": {"N": "1"}}

    def run(make):
        item = Item(DynamoType({"S": "k"}), None, {
            "pk": {"S": "k"}, "c": {"N": "1"}, "d": {"M": {}}, "f": {"S": "gone"},
        })
        tree = UpdateExpressionValidator(
            make(expression), expression_attribute_names=names,
            expression_attribute_values=values, item=item, table=_Table(),
        ).validate()
        UpdateExpressionExecutor(tree, item, names).execute()
        return item.to_json()

    expected = run(fresh)
    for _ in range(3):
        got = run(once)
        if got != expected:
            raise SystemExit(
                "moto_dynamo_fast.py: an update through a kept expression tree differs from "
                f"a fresh parse: {got!r} != {expected!r}; revisit patch 13"
            )
