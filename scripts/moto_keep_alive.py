"""moto's server keeps a client's connection open between requests (patch 14; issue 47
items 13 and 15).

Loaded by scripts/moto_server.py; refuses to start if werkzeug's request handler no longer
has the shape this patch wraps.

Why: werkzeug's development server (which `moto_server` runs, threaded) answers every
request with `Connection: close`, because Python's http.server cannot drain a request body
the application left unread before it parses the next request line. So every request of
every client (the SDK's pooled connections, the CLI's, the pilot's) opened a new TCP
connection, and the server accepted it and started a new thread for it: in a py-spy
profile of `sortie dev` under load, accepting and starting threads took about a fifth of
moto's busy time, beside the answers themselves.

What: HTTP/1.1 keep-alive, done the way http.server needs it.
- Each request's body is read through a stream limited to its Content-Length (or
  werkzeug's own de-chunking stream for a chunked body), and whatever the application left
  unread is read to the end after the answer is written, before the next request line.
- werkzeug's own drain after each answer (it reads whatever the socket holds for 10 ms,
  which on a kept connection would swallow the client's next request) is skipped for a
  kept connection: its selector finds nothing to read there.
- The answer leaves out werkzeug's `Connection: close` only while that is safe: a request
  of HTTP/1.1 that did not ask to close, whose body has a length or is chunked. Anything
  else (an HTTP/1.0 request, a body of unknown length, a drain that failed) closes the
  connection after the answer, as before.
- Each connection is TCP_NODELAY: without the close after each answer, Nagle's algorithm
  held an answer's body back until the client's delayed ACK (about 40 ms a request).
- Nothing in an answer's status, headers (but that one) or body changes, and every
  request still gets a thread of its own connection's: requests on different connections
  run side by side as before, and patch 1 still serialises DynamoDB.
"""

import functools
import threading

_DRAIN_CHUNK = 64 * 1024

# Set while this thread answers a request on a connection it keeps.
_keeping = threading.local()


class _Selectors:
    """Stands in for the `selectors` module inside werkzeug.serving: on a kept connection
    its selector finds nothing to read (werkzeug's drain after an answer then reads
    nothing); everywhere else it is the real one."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def DefaultSelector(self):  # noqa: N802 (the name werkzeug calls)
        if getattr(_keeping, "on", False):
            return _NothingToRead()
        return self._real.DefaultSelector()


class _NothingToRead:
    def register(self, *args, **kwargs):
        return None

    def select(self, timeout=None):
        return []

    def close(self):
        return None


def install():
    """Patch 14; raises SystemExit if werkzeug's request handler changed shape."""
    import inspect

    from werkzeug import serving
    from werkzeug.wsgi import LimitedStream

    handler = serving.WSGIRequestHandler
    if getattr(handler.run_wsgi, "__sortie__", False):
        return
    run_source = inspect.getsource(handler.run_wsgi)
    environ_source = inspect.getsource(handler.make_environ)
    if (
        'self.send_header("Connection", "close")' not in run_source
        or "selector = selectors.DefaultSelector()" not in run_source
        or not hasattr(serving, "selectors")
        or '"wsgi.input": self.rfile' not in environ_source
        or "DechunkedInput" not in environ_source
    ):
        raise SystemExit(
            "moto_keep_alive.py: werkzeug's WSGIRequestHandler changed shape; revisit patch 14"
        )

    make_environ = handler.make_environ
    run_wsgi = handler.run_wsgi
    send_header = handler.send_header

    @functools.wraps(make_environ)
    def limited_environ(self):
        environ = make_environ(self)
        keep = (
            self.request_version == "HTTP/1.1"
            and "close" not in self.headers.get("Connection", "").lower()
        )
        stream = environ["wsgi.input"]
        if environ.get("wsgi.input_terminated"):
            body = stream  # werkzeug's DechunkedInput: it knows where the body ends
        else:
            length = environ.get("CONTENT_LENGTH", "")
            try:
                length = int(length) if length else 0
            except ValueError:
                length, keep = 0, False
            if length < 0:
                length, keep = 0, False
            body = LimitedStream(stream, length)
            environ["wsgi.input"] = body
        self._sortie_keep = keep
        self._sortie_body = body
        _keeping.on = keep
        return environ

    @functools.wraps(send_header)
    def keeping_send_header(self, keyword, value):
        if (
            getattr(self, "_sortie_keep", False)
            and keyword.lower() == "connection"
            and value.lower() == "close"
        ):
            return
        send_header(self, keyword, value)

    @functools.wraps(run_wsgi)
    def run_and_drain(self):
        self._sortie_keep = False
        self._sortie_body = None
        try:
            run_wsgi(self)
        finally:
            _keeping.on = False
            body = self._sortie_body
            if self._sortie_keep and body is not None:
                try:
                    while body.read(_DRAIN_CHUNK):
                        pass
                except Exception:  # noqa: BLE001 a body that cannot be drained ends the connection
                    self.close_connection = True
            else:
                self.close_connection = True

    run_and_drain.__sortie__ = True
    serving.selectors = _Selectors(serving.selectors)
    # An answer goes out as headers and then body, two writes: on a kept connection Nagle's
    # algorithm held the second until the client's delayed ACK (40 ms on Linux) once the
    # close no longer flushed it. socketserver's own switch sets TCP_NODELAY per connection.
    handler.disable_nagle_algorithm = True
    handler.make_environ = limited_environ
    handler.send_header = keeping_send_header
    handler.run_wsgi = run_and_drain
