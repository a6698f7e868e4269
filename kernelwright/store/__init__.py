"""The run store: one SQLite database per run (or per workspace), and the lock of a live run."""
from .db import DB_NAME, SCHEMA_VERSION, JournalEntry, RunStore, StoreError, migrate
from .lock import RunBusy, RunLock, is_live, shown_status

__all__ = ["DB_NAME", "SCHEMA_VERSION", "JournalEntry", "RunStore", "StoreError", "migrate",
           "RunBusy", "RunLock", "is_live", "shown_status"]
