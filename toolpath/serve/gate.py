"""Which part of a reply being written may already be sent to a streaming client.

Text leaves as soon as nothing after it can change it: a stop sequence is cut from the answer (so a piece
that may be its start waits), and when tools are offered a tool call is read from the whole reply at the end
(so everything from a possible call's first character on waits for the final parse). What was held back is
sent at the end as the part of the final content that follows what was already sent.
"""

from __future__ import annotations

CALL_STARTS = ("<tool_call>", "```", "{", "[{")  # where a call may start (JSON grammar; native: a list of calls)


class TextGate:
    def __init__(self, cut_at: tuple[str, ...] = (), calls: bool = False):
        self.markers = tuple(m for m in cut_at if m) + (CALL_STARTS if calls else ())
        self.strip = calls  # the tool grammar's parser strips the content it returns
        self.text = ""
        self.sent = ""
        self.closed = False

    def feed(self, piece: str) -> str:
        """The new text that may be sent now (maybe empty)."""
        self.text += piece
        if self.closed:
            return ""
        found = [i for i in (self.text.find(m) for m in self.markers) if i >= 0]
        if found:
            safe, self.closed = self.text[:min(found)], True
        else:
            safe = self.text[:len(self.text) - self._partial_marker()]
        if self.strip:
            safe = safe.lstrip().rstrip()
        if len(safe) <= len(self.sent) or not safe.startswith(self.sent):
            return ""
        new, self.sent = safe[len(self.sent):], safe
        return new

    def _partial_marker(self) -> int:
        """The length of the longest end of the text that is the start of a marker."""
        best = 0
        for m in self.markers:
            for n in range(min(len(m) - 1, len(self.text)), best, -1):
                if self.text.endswith(m[:n]):
                    best = n
                    break
        return best

    def rest(self, final: str) -> str:
        """What of the final content is still to send; nothing when it does not continue what was sent (the
        parser rewrote the text before a call)."""
        return final[len(self.sent):] if final.startswith(self.sent) else ""
