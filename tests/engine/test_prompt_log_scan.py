"""Issue 9, V1: the prompt log looks for inserted task notices only when the request can hold one — more
messages than stored, or a compressed view — and never misses one that was inserted."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.engine.messages import Message, ModelRequest
from workbench.engine.prompt_log import PromptLog
from workbench.engine.store import Store


def _stored(n: int) -> list[Message]:
    return [Message.user(f"q{i}") if i % 2 == 0 else Message.assistant(f"a{i}") for i in range(n)]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 12), at=st.lists(st.integers(0, 12), max_size=3, unique=True),
       records=st.integers(0, 2), drop=st.integers(0, 4))
def test_v1_every_inserted_task_notice_is_recorded(tmp_path_factory, n: int, at: list[int], records: int,
                                                   drop: int) -> None:
    """A notice inserted anywhere (into the full history, or into a view a compression made shorter) is
    recorded with its position; a request that is exactly the stored history records none."""
    store = Store(Path(tmp_path_factory.mktemp("log")) / "s.sqlite3")
    try:
        log = PromptLog(store)
        view = _stored(n)
        if records:  # a compressed view: fewer messages than stored
            view = view[min(drop, len(view)):]
        notices = []
        for k, pos in enumerate(sorted(at)):
            pos = min(pos, len(view))
            view.insert(pos, Message.user(f"notice {k}", task_notice=f"t:{k}"))
            notices.append(pos)
        log.record("th", "run", 1, [], ModelRequest(system="s", messages=tuple(view)), n, records, "m", None, "ok")
        [call] = log.calls("th")
        assert [i["pos"] for i in call["injected"]] == notices
        assert [log.text(i["hash"]) for i in call["injected"]] == [f"notice {k}" for k in range(len(notices))]
    finally:
        store.close()
