"""R1: when SQLite itself fails (a damaged page, a full disk) the message names the store and what to do,
never "internal error"; the failed transaction is rolled back and what was committed stays."""

from __future__ import annotations

import sqlite3

import pytest

from workbench.cli import _report
from workbench.engine.store import Store


def test_R1_a_failing_write_names_the_store_file_and_keeps_what_was_committed(tmp_path):
    store = Store.for_workspace(tmp_path)
    tid = store.create_thread("kept")
    with pytest.raises(sqlite3.DatabaseError) as caught:
        with store.transaction() as db:
            db.execute("INSERT INTO threads(id, title, created, updated, status) VALUES ('x', 'gone', 0, 0, 'idle')")
            db.execute("SELECT * FROM no_such_table")  # what a damaged page or a full disk raises: a DatabaseError
    assert caught.value.__notes__ == [f"the thread store {store.path}"]
    assert [t.id for t in store.threads()] == [tid]  # rolled back: 'x' is not there
    store.close()


def test_R1_the_cli_reports_a_store_failure_by_the_file_and_the_troubleshooting_section(capsys, tmp_path):
    error = sqlite3.OperationalError("database or disk is full")
    error.add_note(f"the thread store {tmp_path}/.workbench/threads.sqlite3")
    assert _report(error, verbose=False) == 1
    err = capsys.readouterr().err
    assert f"the thread store {tmp_path}/.workbench/threads.sqlite3: database or disk is full" in err
    assert "The thread store fails" in err and "internal error" not in err


def test_R1_a_store_failure_without_a_note_still_says_it_is_the_store(capsys):
    assert _report(sqlite3.DatabaseError("database disk image is malformed"), verbose=False) == 1
    err = capsys.readouterr().err
    assert "the thread store (.workbench/threads.sqlite3): database disk image is malformed" in err
