"""uvicorn's h11 connection with a deadline for the request headers.

uvicorn times out an idle keep-alive connection but not one that is sending its headers: a client that opens a
connection and writes a byte now and then (slowloris) holds a socket for as long as it likes. Here a connection
must finish a request's headers within `header_seconds` of connecting or of its last answer, or it is closed.
The body has its own deadline, kept by the app while it reads (body.read_body).
"""

from __future__ import annotations

from uvicorn.protocols.http.h11_impl import H11Protocol


def with_header_deadline(seconds: float) -> type:
    class HeaderDeadline(H11Protocol):
        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            # the request being waited for is the one after `self.cycle`: a new cycle means its headers came
            self._header_timer = self.loop.call_later(seconds, self._headers_late, self.cycle)

        def _disarm(self) -> None:
            timer = getattr(self, "_header_timer", None)
            if timer is not None:
                timer.cancel()
                self._header_timer = None

        def _headers_late(self, cycle) -> None:
            self._header_timer = None
            waiting = self.cycle is cycle and (cycle is None or cycle.response_complete)  # no request under way
            if waiting and not self.transport.is_closing():
                self.transport.close()

    return HeaderDeadline
