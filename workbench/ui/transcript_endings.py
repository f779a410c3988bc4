"""How each run of a thread ended (G10), gathered from its durable events for the transcript.

When a thread is (re)opened the bridge replays its durable events; ``RunEndings`` keeps each run's
last ``run_finished`` (a resumed or retried run ends again under the same id: the last word counts).
``place`` then says after which of the committed messages each ending goes: a run's messages carry
its id (``meta["run"]``), so an ending is shown before the first message of a later run, or at the end.
The transcript renders each ending exactly as it did live (``TranscriptView.show_ending``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workbench.session import Event
    from workbench.session import Message


class RunEndings:
    """Each run's ending (the ``run_finished`` data), in the order the runs started."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.endings: dict[str, dict[str, Any]] = {}

    def reset(self) -> None:
        self.order.clear()
        self.endings.clear()

    def add(self, event: Event) -> None:
        """Take a durable event (replayed or live); only run starts and ends matter here."""
        if event.type not in ("run_started", "run_finished") or not event.run_id:
            return
        if event.run_id not in self.endings and event.run_id not in self.order:
            self.order.append(event.run_id)
        if event.type == "run_finished":
            self.endings[event.run_id] = dict(event.data)
        else:
            self.endings.pop(event.run_id, None)  # started again (a retry): its old ending is over

    @property
    def last_run(self) -> str | None:
        return self.order[-1] if self.order else None

    def place(self, messages: Sequence[Message], *, at_start: bool = True, tail: bool = True,
              next_run: str | None = None) -> dict[int, list[tuple[str, dict[str, Any]]]]:
        """``{i: [(run_id, ending), …]}``: the endings to show before message ``i`` (``len(messages)``:
        after the last one). A run whose messages are gone (compressed away) still shows, in run order.

        G13: ``messages`` may be one page of a long thread. Not ``at_start``: the runs before the page's
        first run are an earlier page's to show. Not ``tail``: only the runs before ``next_run`` (the run
        of the message after the page) end within it."""
        index = {run: n for n, run in enumerate(self.order)}
        placed: dict[int, list[tuple[str, dict[str, Any]]]] = {}
        shown = 0  # runs (in order) whose endings are placed
        if not at_start:
            first = next((index[r] for m in messages if (r := str(m.meta.get("run") or "")) in index), None)
            if first is None:  # no run known here (an old thread): at most the newest ending, at the end
                return {len(messages): self._ended(self.order[-1:])} if tail and self._ended(self.order[-1:]) else {}
            shown = first
        for i, m in enumerate(messages):
            n = index.get(str(m.meta.get("run") or ""))
            if n is None or n <= shown:
                continue
            # message i belongs to run n: every earlier run has ended before it
            placed.setdefault(i, []).extend(self._ended(self.order[shown:n]))
            shown = n
        if tail:
            placed.setdefault(len(messages), []).extend(self._ended(self.order[shown:]))
        elif next_run is not None and index.get(next_run, -1) > shown:
            placed.setdefault(len(messages), []).extend(self._ended(self.order[shown:index[next_run]]))
        return {i: e for i, e in placed.items() if e}

    def _ended(self, runs: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
        return [(r, self.endings[r]) for r in runs if r in self.endings]


__all__ = ["RunEndings"]
