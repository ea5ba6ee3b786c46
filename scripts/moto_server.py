"""moto_server, with DynamoDB requests served one at a time.

    .tools/venv/bin/python scripts/moto_server.py -H 127.0.0.1 -p PORT

Takes the same flags as `.tools/venv/bin/moto_server` and runs the same
threaded server (moto.server.main), after one patch: every DynamoDB (and
DynamoDB Streams) request is handled under a single process-wide lock.

Why: moto 5.2.5's DynamoDBBackend.transact_write_items deep-copies every
table a transaction names before it starts, and when the transaction fails
(e.g. a ConditionCheck) it puts those copies back, undoing every other
client's write acknowledged in between. The deep copy also iterates tables
that other request threads are changing, so it can die with "dictionary
changed size during iteration" and answer 500. Real DynamoDB does neither.
With one request at a time the snapshot is exactly the state the failed
transaction found, so the rollback undoes only its own writes.

Serialising the whole handler (parse, backend call, serialisation of the
response) is deliberately coarse: the rollback is whole-table, so any
narrower lock would have to cover every write path anyway. Other services
(S3, SQS, ECS, ...) are untouched and still served concurrently.

tests/it/moto_writes.rs proves the patch; docs/ARCHITECTURE.md ("Test
doubles") says why it exists.
"""

import functools
import sys
import threading

import moto
from moto.dynamodb.responses import DynamoHandler
from moto.dynamodbstreams.responses import DynamoDBStreamsHandler
from moto.server import main

_DYNAMODB_LOCK = threading.RLock()


def _serialised(call_action):
    @functools.wraps(call_action)
    def locked(self, *args, **kwargs):
        with _DYNAMODB_LOCK:
            return call_action(self, *args, **kwargs)

    locked.__sortie_serialised__ = True
    return locked


def patch():
    """Serialise DynamoDB's request handlers; fails loudly if moto changed shape."""
    for handler in (DynamoHandler, DynamoDBStreamsHandler):
        # call_action is what BaseResponse._dispatch calls for every request;
        # it runs the backend method and serialises its result.
        original = getattr(handler, "call_action", None)
        if not callable(original):
            raise SystemExit(
                f"moto_server.py: moto {moto.__version__} has no "
                f"{handler.__name__}.call_action to serialise; revisit this patch"
            )
        if not getattr(original, "__sortie_serialised__", False):
            handler.call_action = _serialised(original)


if __name__ == "__main__":
    patch()
    print(
        f"moto_server.py: moto {moto.__version__}, DynamoDB requests serialised",
        file=sys.stderr,
        flush=True,
    )
    sys.exit(main(sys.argv[1:]))
