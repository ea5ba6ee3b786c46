"""What moto holds in memory, and moto letting go of what it no longer holds (issue 27).

Loaded by scripts/moto_server.py, whose other patches are described there.

moto_server.py's patch 6: moto's instance tracker holds its model objects weakly.
Stock moto's BaseModel.__new__ appends every model object it makes (every DynamoDB Item, each
deep copy of one, every SQS Message, S3 FakeKey, ...) to its class's
`instances_tracked` list, for its dashboard (/moto-api/data.json) and S3's reset,
and never lets go: every write stays in memory for good, 3.3 GB at 1,000 soak jobs.
The patch keeps the list's place and its creation order but holds each object
weakly, so an object nothing else holds (a replaced item, a deleted message) is
freed. Nothing moto answers to Sortie changes: only the dashboard and S3's reset
read the list, and they now see the objects still alive. Setting
SORTIE_MOTO_STRONG_INSTANCE_TRACKING=1 leaves stock moto's list in place (only to
measure the "before" figures). crates/testkit/it/moto_writes.rs
(overwritten_items_are_not_kept_in_moto_memory) proves it.
What moto holds is read from the server itself:
    GET  /_sortie/moto-memory[?objects=1]  RSS, peak RSS (kB), backends' sizes,
                                           instances tracked per model class
and SORTIE_MOTO_MEMORY_REPORT=path writes that (with live objects by type, and with
SORTIE_MOTO_TRACEMALLOC=1 tracemalloc's top allocations) to `path` every 20 s.
"""

import collections
import functools
import itertools
import json
import os
import sys
import threading
import time
import urllib.parse
import weakref

import moto

# Set by install(): the lock DynamoDB requests hold (moto_server.py patch 1) and a function
# giving moto_server.py's own sizes (patch 5's timing records).
_LOCK = [threading.RLock()]
_EXTRA_SIZES = [dict]


def install(lock, extra_sizes, weak_tracking=True):
    """Track moto's model objects weakly (unless `weak_tracking` is False, to measure stock
    moto) and answer `GET /_sortie/moto-memory`."""
    _LOCK[0], _EXTRA_SIZES[0] = lock, extra_sizes
    if weak_tracking:
        patch_instance_tracking()
    patch_memory_answer()


# Patch 6: moto's instance tracker holds its model objects weakly.


class _WeakInstances:
    """Stands in for a moto model class's `instances_tracked` list: remembers each
    instance weakly (strongly if it cannot be weakly referenced), in creation order, and
    forgets it when nothing else holds it. Iterating gives the instances still alive."""

    class _Ref(weakref.ref):
        __slots__ = ("key",)

    def __init__(self, existing=()):
        self._refs = {}
        self._strong = []
        self._keys = itertools.count()
        for instance in existing:
            self.append(instance)

    def _forget(self, ref):
        self._refs.pop(ref.key, None)

    def append(self, instance):
        try:
            ref = self._Ref(instance, self._forget)
        except TypeError:  # no __weakref__ slot: kept, as moto keeps it
            self._strong.append(instance)
            return
        ref.key = next(self._keys)
        self._refs[ref.key] = ref

    def __iter__(self):
        alive = [r() for r in list(self._refs.values())]
        return iter([i for i in alive if i is not None] + list(self._strong))

    def __len__(self):
        return len(self._refs) + len(self._strong)


def _weakly_tracked_new(cls, *args, **kwargs):
    from moto.core.common_models import BaseModel

    instance = super(BaseModel, cls).__new__(cls)
    tracked = cls.__dict__.get("instances_tracked")
    if not isinstance(tracked, _WeakInstances):
        # A class's own list (InstanceTrackerMeta gives each one; reset_model_data
        # gives a fresh one): from now on, weak.
        tracked = _WeakInstances(tracked or ())
        cls.instances_tracked = tracked
    tracked.append(instance)
    return instance


def patch_instance_tracking():
    import inspect

    from moto.core.common_models import BaseModel

    new = BaseModel.__dict__.get("__new__")
    if getattr(new, "__sortie__", False):
        return
    source = inspect.getsource(BaseModel.__new__)
    if "cls.instances_tracked.append(instance)" not in source:
        raise SystemExit(
            f"moto_server.py: moto {moto.__version__}'s BaseModel.__new__ no longer "
            "appends to instances_tracked; revisit patch 6"
        )
    _weakly_tracked_new.__sortie__ = True
    BaseModel.__new__ = staticmethod(_weakly_tracked_new)


# Memory report (issue 27, opt-in): what moto holds, by service, to find what grows.

_MEMORY_REPORT_EVERY_S = 20.0
_MEMORY_PATH = "/_sortie/moto-memory"


def _backend_sizes():
    """Counts and bytes of what moto's backends hold that grow with the jobs."""
    from moto.backends import get_backend

    sizes = {}

    def each(name):
        try:
            for account in get_backend(name).values():
                for region, backend in list(account.items()):
                    yield region, backend
        except Exception:  # noqa: BLE001 a report never breaks moto
            return

    for _, b in each("dynamodb"):
        for t in list(b.tables.values()):
            items = sum(len(v) if isinstance(v, dict) else 1 for v in list(t.items.values()))
            stream = len(t.stream_shard.items) if t.stream_shard is not None else 0
            sizes[f"dynamodb table {t.name}"] = {"items": items, "stream_records": stream}
    for _, b in each("s3"):
        for bucket in list(b.buckets.values()):
            keys = versions = size = 0
            for name, lst in list(bucket.keys.lists()):
                keys += 1
                versions += len(lst)
                size += sum(getattr(k, "size", 0) or 0 for k in lst)
            sizes[f"s3 bucket {bucket.name}"] = {
                "keys": keys, "versions": versions, "bytes": size,
                "multiparts": len(bucket.multiparts)}
    for region, b in each("sqs"):
        for q in list(b.queues.values()):
            sizes[f"sqs queue {q.name}"] = {
                "messages": len(q._messages),
                "deleted_ids": len(getattr(q, "deleted_messages", ()) or ())}
    for region, b in each("events"):
        for bus in list(b.event_buses.values()):
            sizes[f"events bus {bus.name}"] = {"rules": len(getattr(bus, "rules", {}))}
        sizes["events archives"] = {
            n: len(getattr(a, "events", []) or []) for n, a in b.archives.items()}
    for region, b in each("logs"):
        for g in list(b.groups.values()):
            sizes[f"logs group {g.name}"] = {
                "streams": len(g.streams),
                "events": sum(len(s.events) for s in list(g.streams.values()))}
    sizes.update(_EXTRA_SIZES[0]())
    from moto.core.model_instances import model_data

    tracked = {
        f"{service}.{name}": len(getattr(cls, "instances_tracked", ()))
        for service, models in list(model_data.items())
        for name, cls in list(models.items())
    }
    sizes["instances tracked (patch 6)"] = dict(
        sorted(((k, n) for k, n in tracked.items() if n), key=lambda kv: -kv[1]))
    return sizes


def _memory_report(path):
    import gc
    import tracemalloc

    report = {"at": time.time()}
    with open("/proc/self/status") as f:
        report["status"] = {
            line.split(":")[0]: line.split(":")[1].strip()
            for line in f if line.startswith(("VmRSS", "VmHWM"))}
    try:
        report["backends"] = _backend_sizes()
    except Exception as e:  # noqa: BLE001
        report["backends"] = {"error": repr(e)}
    counts = collections.Counter(type(o).__name__ for o in gc.get_objects())
    report["gc_objects"] = counts.most_common(25)
    if tracemalloc.is_tracing():
        snap = tracemalloc.take_snapshot()
        report["tracemalloc_mib"] = tracemalloc.get_traced_memory()[0] / 2**20
        report["top_lines"] = [
            (str(s.traceback), round(s.size / 2**20, 2), s.count)
            for s in snap.statistics("lineno")[:30]]
        report["top_files"] = [
            (str(s.traceback), round(s.size / 2**20, 2), s.count)
            for s in snap.statistics("filename")[:20]]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1, default=str)
    os.replace(tmp, path)


def _memory_answer(environ, start_response):
    """GET /_sortie/moto-memory: moto's RSS, its peak, what its backends hold, and how
    many instances each model class still tracks (patch 6); `?objects=1` adds the live
    objects by type."""
    query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
    answer = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS", "VmHWM")):
                answer[line.split(":")[0]] = int(line.split()[1])
    try:
        with _LOCK[0]:  # no DynamoDB table changes while it is counted
            answer["backends"] = _backend_sizes()
    except Exception as e:  # noqa: BLE001 a table of another service changed under it
        answer["backends"] = {"error": repr(e)}
    if (query.get("objects") or [""])[0] == "1":
        import gc

        counts = collections.Counter(type(o).__name__ for o in gc.get_objects())
        answer["objects"] = counts.most_common(25)
    body = json.dumps(answer).encode()
    start_response(
        "200 OK",
        [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
    )
    return [body]


def _with_memory_answer(call):
    @functools.wraps(call)
    def answering(self, environ, start_response):
        if environ.get("PATH_INFO", "") == _MEMORY_PATH:
            return _memory_answer(environ, start_response)
        return call(self, environ, start_response)

    answering.__sortie_memory__ = True
    return answering


def patch_memory_answer():
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    call = DomainDispatcherApplication.__call__
    if not getattr(call, "__sortie_memory__", False):
        DomainDispatcherApplication.__call__ = _with_memory_answer(call)


def start_memory_report():
    """SORTIE_MOTO_MEMORY_REPORT=path: every 20 s, write what moto holds to `path` (with
    SORTIE_MOTO_TRACEMALLOC=1, also tracemalloc's top allocations). Off by default."""
    path = os.environ.get("SORTIE_MOTO_MEMORY_REPORT")
    if not path:
        return
    if os.environ.get("SORTIE_MOTO_TRACEMALLOC"):
        import tracemalloc

        tracemalloc.start(1)

    def loop():
        while True:
            time.sleep(_MEMORY_REPORT_EVERY_S)
            try:
                _memory_report(path)
            except Exception as e:  # noqa: BLE001
                print(f"moto_memory.py: memory report failed: {e!r}", file=sys.stderr)

    threading.Thread(target=loop, daemon=True, name="sortie-memory-report").start()
