"""The run store: one SQLite database per run (or per workspace)."""
from .db import DB_NAME, SCHEMA_VERSION, JournalEntry, RunStore, StoreError, migrate

__all__ = ["DB_NAME", "SCHEMA_VERSION", "JournalEntry", "RunStore", "StoreError", "migrate"]
