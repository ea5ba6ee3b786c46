"""moto_server.py's patch 7: SQS fair queues on a standard queue (issue 27).

Loaded by scripts/moto_server.py, whose other patches are described there.
"""

import collections
import functools
import itertools
import threading
import time

import moto

# Patch 7: SQS fair queues on a standard queue.
# https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-fair-queues-detailed.html
# A standard queue whose messages carry a MessageGroupId is a fair queue: the group is the
# tenant (a message without one is its own tenant). A tenant is noisy when it holds more
# than 10% of the queue's in-flight messages and at least 30 of its own, or more than 10%
# of the recent consumer processing time (receive -> delete; in-flight time so far counts).
# While any quiet tenant's message is visible, a receive returns quiet tenants' messages
# first (oldest first); among noisy tenants, the one with the fewest in flight first. A
# noisy tenant stays noisy until its backlog drains or it has sent nothing for 5 minutes.
# moto 5.2.5 accepts MessageGroupId on a standard queue (as AWS now does) and ignores it on
# receive; this patch only reorders the visible messages a receive walks, computed when
# the receive starts, and keeps moto's own receive (visibility, receive counts, delays,
# DLQ redrive) untouched. A queue without group ids is served exactly as stock moto does.

_FAIR_SHARE = 0.10  # more than this share of in-flight messages or processing time
_FAIR_MIN_IN_FLIGHT = 30  # and at least this many of its own in flight (concurrency rule)
_FAIR_QUIET_AFTER_S = 300  # a noisy tenant that sent nothing for this long is quiet again
_FAIR_WINDOW_S = 60.0  # "recent" processing time: deletes within this window
_FAIR_SEQ = itertools.count()
_FAIR_LOCK = threading.Lock()


def _fair_tenant(message):
    return message.group_id if message.group_id else f"message:{message.id}"


def _fair_order(queue, now):
    """The order a receive on `queue` walks its messages in, at `now` (seconds): quiet
    tenants' first, then noisy tenants' by fewest in flight; oldest first within each."""
    messages = list(queue._messages)
    state = queue.__dict__.setdefault("_sortie_fair", {"noisy": set(), "done": collections.deque()})
    done = state["done"]
    while done and done[0][0] < now - _FAIR_WINDOW_S:
        done.popleft()
    in_flight = collections.Counter()
    backlog = collections.Counter()
    last_sent = {}
    busy = collections.Counter()  # processing time, s: recent deletes + in-flight so far
    for _, tenant, seconds in done:
        busy[tenant] += seconds
    for m in messages:
        if not hasattr(m, "_sortie_seq"):
            m._sortie_seq = next(_FAIR_SEQ)  # arrival order: moto appends new messages
        tenant = _fair_tenant(m)
        last_sent[tenant] = max(last_sent.get(tenant, 0), (m.sent_timestamp or 0) / 1000)
        received = getattr(m, "_sortie_received_at", None)
        if received is not None and not m.visible:
            in_flight[tenant] += 1
            busy[tenant] += now - received
        else:
            backlog[tenant] += 1
    total_in_flight = sum(in_flight.values())
    total_busy = sum(busy.values())
    noisy = set()
    for tenant in set(in_flight) | set(backlog):
        by_concurrency = (in_flight[tenant] >= _FAIR_MIN_IN_FLIGHT
                          and in_flight[tenant] > _FAIR_SHARE * total_in_flight)
        by_time = total_busy > 0 and busy[tenant] > _FAIR_SHARE * total_busy
        still = (tenant in state["noisy"] and backlog[tenant] > 0
                 and now - last_sent.get(tenant, 0) < _FAIR_QUIET_AFTER_S)
        if by_concurrency or by_time or still:
            noisy.add(tenant)
    state["noisy"] = {t for t in noisy if backlog[t] > 0}

    def key(m):
        tenant = _fair_tenant(m)
        if tenant in noisy:
            return (1, in_flight[tenant], m._sortie_seq)
        return (0, 0, m._sortie_seq)

    return sorted(messages, key=key)


def _fair_receive(original):
    @functools.wraps(original)
    def receive_message(self, queue_name, *args, **kwargs):
        queue = self.get_queue(queue_name)
        fair = not queue.fifo_queue and any(m.group_id for m in list(queue._messages))
        if fair:
            # A send appends under `_messages_lock`; a delete runs under `_FAIR_LOCK`.
            with _FAIR_LOCK, queue._messages_lock:
                current = queue._messages
                ordered = _fair_order(queue, time.time())
                if len(ordered) == len(current):
                    current[:] = ordered  # same objects, same list, new order
        result = original(self, queue_name, *args, **kwargs)
        if fair:
            now = time.time()
            ids = {m.id for m in result}
            for m in list(queue._messages):
                if m.id in ids:
                    m._sortie_received_at = now
        return result

    receive_message.__sortie_fair__ = True
    return receive_message


def _fair_delete(original):
    @functools.wraps(original)
    def delete_message(self, receipt_handle):
        if self.fifo_queue:
            return original(self, receipt_handle)
        with _FAIR_LOCK:
            now = time.time()
            for m in list(self._messages):
                received = getattr(m, "_sortie_received_at", None)
                if received is not None and m.had_receipt_handle(receipt_handle):
                    state = self.__dict__.setdefault(
                        "_sortie_fair", {"noisy": set(), "done": collections.deque()})
                    state["done"].append((now, _fair_tenant(m), now - received))
                    break
            return original(self, receipt_handle)

    delete_message.__sortie_fair__ = True
    return delete_message


def install():
    """Patch moto's SQS receive and delete for fair queues; fails loudly if moto changed shape."""
    import inspect

    from moto.sqs.models import Message, Queue, SQSBackend

    if ("self.group_id" not in inspect.getsource(Message.__init__)
            or "_messages_lock" not in inspect.getsource(Queue.__init__)
            or "queue.messages" not in inspect.getsource(SQSBackend.receive_message)):
        raise SystemExit(f"moto_server.py: moto {moto.__version__}'s SQS changed shape; "
                         "revisit patch 7 (fair queues)")
    if not getattr(SQSBackend.receive_message, "__sortie_fair__", False):
        SQSBackend.receive_message = _fair_receive(SQSBackend.receive_message)
    if not getattr(Queue.delete_message, "__sortie_fair__", False):
        Queue.delete_message = _fair_delete(Queue.delete_message)
