"""The durability bookkeeping both LangGraph checkpointers of the store share (SQLite's and PostgreSQL's)."""

from __future__ import annotations

import threading


class DurableCommits:
    """What our LangGraph checkpointers (sqlite.StoreSaver, postgres.PgStoreSaver) add to the stock saver:
    `put` commits the run's deferred step rows with the checkpoint in one transaction (the backend's own
    `_transaction`), ordinary channel writes are not stored, and nodes can wait for the previous step's commit.
    Listed before the stock saver class, so its put/put_writes wrap the stock ones."""

    commits_store_steps = True

    def __init__(self, conn):
        super().__init__(conn)
        self.lock = threading.RLock()  # re-entered: put() holds it while the stock methods take it again
        self._batch = False
        self._durable = threading.Condition()
        self._durable_seq: dict[str, int] = {}
        self._failed: dict[str, BaseException] = {}

    def mark_durable(self, thread_id: str, seq: int) -> None:
        """Record that the run's state up to node `seq` is committed (a resumed run starts so)."""
        with self._durable:
            if seq > self._durable_seq.get(thread_id, -1):
                self._durable_seq[thread_id] = seq
            self._failed.pop(thread_id, None)  # a later commit (or a resume) supersedes an earlier failure
            self._durable.notify_all()

    def forget(self, thread_id: str) -> None:
        """Drop what is kept in memory for a finished run (an eval runs thousands in one process)."""
        with self._durable:
            self._durable_seq.pop(thread_id, None)
            self._failed.pop(thread_id, None)

    def wait_durable(self, thread_id: str, seq: int, timeout: float = 120.0) -> None:
        """Block until the checkpoint holding node `seq` is committed.

        Nodes call this before they do anything, so with LangGraph's durability="async" (the checkpoint is
        written on a background thread while the loop prepares the next step) no node acts on a step that
        is not yet on disk: a kill -9 loses exactly what it loses with durability="sync", at lower cost.
        """
        with self._durable:
            ok = self._durable.wait_for(
                lambda: self._durable_seq.get(thread_id, -1) >= seq or thread_id in self._failed, timeout)
            if thread_id in self._failed:
                raise RuntimeError(f"checkpoint write failed: {self._failed[thread_id]}")
            if not ok:
                raise TimeoutError(f"checkpoint of step {seq} was not written within {timeout:g} s")

    def put_writes(self, config, writes, task_id, task_path=""):
        thread_id = str(config["configurable"]["thread_id"])
        special = [(channel, value) for channel, value in writes if channel.startswith("__")]
        if special:
            with self._transaction(thread_id):
                super().put_writes(config, special, task_id, task_path)

    def put(self, config, checkpoint, metadata, new_versions):
        thread_id = str(config["configurable"]["thread_id"])
        try:
            with self._transaction(thread_id):
                out = super().put(config, checkpoint, metadata, new_versions)
        except BaseException as err:
            with self._durable:
                self._failed[thread_id] = err
                self._durable.notify_all()
            raise
        seq = (checkpoint.get("channel_values") or {}).get("seq")
        if isinstance(seq, int):
            self.mark_durable(thread_id, seq)
        return out

