"""Files in a SQLite database, shared by every thread of a workspace (F1).

One table ``files(namespace, path, content, modified)``; a namespace isolates one set of files
from another in the same database. WAL mode lets several connections (other instances, other
processes) read while one writes. An instance may be used from event loops in different threads:
its one connection is guarded by a lock and all database work runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from workbench.backends.base import (
    BackendIOError,
    FileBackend,
    FileInfo,
    FileNotFound,
    GrepMatch,
    NotTextFile,
    ancestors,
    apply_edit,
    compile_grep,
    glob_regex,
    grep_filter,
    grep_text,
    head_of_text,
    looks_binary,
    normalize,
    relative,
    require_text,
    split_glob,
    tree_children,
)

__all__ = ["StoreBackend"]

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    namespace TEXT NOT NULL,
    path      TEXT NOT NULL,
    content   TEXT NOT NULL,
    modified  REAL NOT NULL,
    PRIMARY KEY (namespace, path)
)
"""


def _under(v: str) -> tuple[str, tuple[str, ...]]:
    """SQL condition and parameters for paths strictly under directory ``v``.

    ``'/'`` sorts just before ``'0'``, so the range ``[v + '/', v + '0')`` is exactly the subtree.
    """
    if v == "/":
        return "path > '/'", ()
    return "path >= ? AND path < ?", (v + "/", v + "0")


class StoreBackend(FileBackend):
    """Files in table ``files`` of the SQLite database at ``db_path``, in ``namespace``."""

    def __init__(self, db_path: Path | str, namespace: str = "default") -> None:
        self._db_path = Path(db_path)
        self._namespace = namespace
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"StoreBackend({str(self._db_path)!r}, namespace={self._namespace!r})"

    @property
    def namespace(self) -> str:
        return self._namespace

    def close(self) -> None:
        """Close the connection (a later call opens it again)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # ------------------------------------------------------------------------ the database

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self._db_path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self._db_path, timeout=10.0, isolation_level=None, check_same_thread=False)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(_SCHEMA)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _run(self, v: str, fn: Callable[[sqlite3.Connection], T], write: bool = False) -> T:
        """Run ``fn`` under the lock (in a transaction if ``write``); database errors → BackendIOError."""
        with self._lock:
            try:
                conn = self._connect()
                if not write:
                    return fn(conn)
                conn.execute("BEGIN IMMEDIATE")
                try:
                    result = fn(conn)
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
                return result
            except (sqlite3.Error, OSError) as exc:
                raise BackendIOError(v, f"database error: {exc}") from exc

    async def _call(self, v: str, fn: Callable[[sqlite3.Connection], T], write: bool = False) -> T:
        return await asyncio.to_thread(self._run, v, fn, write)

    def _content(self, conn: sqlite3.Connection, v: str) -> str | None:
        row = conn.execute("SELECT content FROM files WHERE namespace = ? AND path = ?", (self._namespace, v)).fetchone()
        return None if row is None else row[0]

    def _is_dir(self, conn: sqlite3.Connection, v: str) -> bool:
        if v == "/":
            return True
        cond, params = _under(v)
        sql = f"SELECT 1 FROM files WHERE namespace = ? AND {cond} LIMIT 1"
        return conn.execute(sql, (self._namespace, *params)).fetchone() is not None

    def _text(self, conn: sqlite3.Connection, v: str) -> str:
        content = self._content(conn, v)
        if content is not None:
            return content
        if self._is_dir(conn, v):
            raise NotTextFile(v, "is a directory")
        raise FileNotFound(v)

    def _store(self, conn: sqlite3.Connection, v: str, content: str, exists: bool) -> None:
        if not exists:
            if self._is_dir(conn, v):
                raise BackendIOError(v, "is a directory")
            for parent in ancestors(v):
                if self._content(conn, parent) is not None:
                    raise BackendIOError(v, f"cannot create the parent folder: {parent} is a file")
        try:
            conn.execute(
                "INSERT OR REPLACE INTO files (namespace, path, content, modified) VALUES (?, ?, ?, ?)",
                (self._namespace, v, content, time.time()),
            )
        except UnicodeEncodeError as exc:
            raise BackendIOError(v, f"content cannot be encoded as UTF-8: {exc.reason}") from exc

    def _paths_under(self, conn: sqlite3.Connection, v: str) -> list[str]:
        cond, params = _under(v)
        sql = f"SELECT path FROM files WHERE namespace = ? AND {cond} ORDER BY path"
        return [row[0] for row in conn.execute(sql, (self._namespace, *params))]

    # ----------------------------------------------------------------------------- the API

    async def read(self, path: str) -> str:
        v = normalize(path)
        return await self._call(v, lambda conn: self._text(conn, v))

    async def read_head(self, path: str, max_bytes: int) -> tuple[str, bool]:
        """Only the first ``max_bytes + 1`` characters leave the database (F3)."""
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be at least 0, got {max_bytes}")
        v = normalize(path)

        def op(conn: sqlite3.Connection) -> str:
            row = conn.execute("SELECT substr(content, 1, ?) FROM files WHERE namespace = ? AND path = ?",
                               (max_bytes + 1, self._namespace, v)).fetchone()
            return self._text(conn, v) if row is None or row[0] is None else row[0]

        return head_of_text(v, await self._call(v, op), max_bytes)

    async def write(self, path: str, content: str) -> None:
        require_text(content)
        v = normalize(path)

        def op(conn: sqlite3.Connection) -> None:
            self._store(conn, v, content, exists=self._content(conn, v) is not None)

        await self._call(v, op, write=True)

    async def edit(self, path: str, old: str, new: str, replace_all: bool = False) -> int:
        v = normalize(path)

        def op(conn: sqlite3.Connection) -> int:
            text = self._text(conn, v)
            updated, count = apply_edit(v, text, old, new, replace_all)
            if updated != text:
                self._store(conn, v, updated, exists=True)
            return count

        return await self._call(v, op, write=True)

    async def list(self, path: str) -> list[FileInfo]:
        v = normalize(path)

        def op(conn: sqlite3.Connection) -> list[FileInfo]:
            if self._content(conn, v) is not None:
                return [self._stat(conn, v)]
            cond, params = _under(v)
            sql = (
                "SELECT path, length(CAST(content AS BLOB)), modified FROM files "
                f"WHERE namespace = ? AND {cond}"
            )
            kids = tree_children(v, conn.execute(sql, (self._namespace, *params)))
            if kids is None:
                raise FileNotFound(v)
            return kids

        return await self._call(v, op)

    async def glob(self, pattern: str, path: str = "/") -> list[str]:
        base, rel = split_glob(pattern, path)

        def op(conn: sqlite3.Connection) -> list[str]:
            if not rel:
                return [base] if self._content(conn, base) is not None else []
            rx = glob_regex(rel)
            return [p for p in self._paths_under(conn, base) if rx.fullmatch(relative(p, base))]

        return await self._call(base, op)

    async def grep(self, pattern: str, path: str = "/", glob: str | None = None) -> list[GrepMatch]:
        rx = compile_grep(pattern)
        keep = grep_filter(glob)
        v = normalize(path)

        def op(conn: sqlite3.Connection) -> list[GrepMatch]:
            content = self._content(conn, v)
            if content is not None:
                return grep_text(v, content, rx)
            if not self._is_dir(conn, v):
                raise FileNotFound(v)
            cond, params = _under(v)
            sql = f"SELECT path, content FROM files WHERE namespace = ? AND {cond} ORDER BY path"
            out: list[GrepMatch] = []
            for p, text in conn.execute(sql, (self._namespace, *params)):
                if keep(relative(p, v)) and not looks_binary(text):
                    out.extend(grep_text(p, text, rx))
            return out

        return await self._call(v, op)

    def _stat(self, conn: sqlite3.Connection, v: str) -> FileInfo:
        row = conn.execute(
            "SELECT length(CAST(content AS BLOB)), modified FROM files WHERE namespace = ? AND path = ?",
            (self._namespace, v),
        ).fetchone()
        if row is not None:
            return FileInfo(v, False, row[0], row[1])
        if not self._is_dir(conn, v):
            raise FileNotFound(v)
        cond, params = _under(v)
        sql = f"SELECT MAX(modified) FROM files WHERE namespace = ? AND {cond}"
        latest = conn.execute(sql, (self._namespace, *params)).fetchone()[0]
        return FileInfo(v, True, 0, latest or 0.0)

    async def stat(self, path: str) -> FileInfo:
        v = normalize(path)
        return await self._call(v, lambda conn: self._stat(conn, v))
