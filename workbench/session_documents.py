"""The ``Session`` facade's calls on the person's own documents (I3, S-panel, G2): reading AGENTS.md or a
SKILL.md through the agent's backend, and saving the person's edits through the same backend and the
same permission rules as the agent — on the path as named and, through a symlink, on the file it leads
to (P5) — with the backend's guard judging again the path it really opens. A mixin of ``Session``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workbench.backends.composite import CompositeBackend


#: Path components the Save verdict follows on the GUI thread before it gives up (``_link_target``): a
#: real path has tens; each is a system call or two (~2 µs) and a copy of a path of at most 8,192
#: characters (``realpath.MAX_PATH_CHARS``), so the window waits a few ms at most.
LINK_STEPS = 2048


class DocumentCalls:
    """The window's reads and saves of the person's documents (see the module)."""

    if TYPE_CHECKING:
        backend: CompositeBackend

        def middleware(self, kind: type) -> Any: ...

        def _state(self, *, messages: bool = False) -> dict[str, Any]: ...

    async def read_document(self, path: str) -> str:
        """Read a virtual path through the agent's backend (FileNotFound, BackendRefusal propagate)."""
        return await self.backend.read(path)

    async def read_document_head(self, path: str, max_bytes: int) -> tuple[str, bool]:
        """At most ``max_bytes`` of a file and whether it is longer (F3): what the window reads of a
        file it does not control (AGENTS.md, SKILL.md), so a huge one never freezes it."""
        return await self.backend.read_head(path, max_bytes)

    def write_verdict(self, path: str) -> tuple[bool, str]:
        """Whether the user may save ``path``: the agent's deny rules and read-only mounts apply to them too,
        on the path as named and, through a symlink, on the file it leads to (P5), as for ``edit_file``.

        An ``ask`` rule does not stop the user: they are the one who would be asked.
        """
        allowed, why, _verdicts = self._save_judgement(path)
        return allowed, why

    def _save_judgement(self, path: str) -> tuple[bool, str, list[Any]]:
        """``write_verdict``'s answer and the permission verdicts it rests on (``write_document``'s guard)."""
        from workbench.backends.base import LinksTooDeep

        try:
            verdicts = self._write_verdicts(path)
        except LinksTooDeep as e:  # not judged where it leads, so not saved: never a stalled window
            return False, str(e), []
        except ValueError:  # a name that is not text (a lone surrogate: a file name's undecodable bytes)
            return False, f"Refused: {path}: its name is not valid text, so no rule can be checked on it", []
        denied = [v for v in verdicts if v.effect == "deny"]
        if denied:
            return False, "Denied: " + "; ".join(v.reason for v in denied), verdicts
        try:
            backend, _ = self.backend.backend_for(path)
        except Exception as e:  # no mount: a refusal naming the path
            return False, str(e), verdicts
        if getattr(backend, "readonly", False):
            return False, f"Refused: {path} is on a read-only mount", verdicts
        return True, "", verdicts

    def _write_verdicts(self, path: str) -> list[Any]:
        """The permissions' verdicts on writing ``path``: as named, and where a symlink leads (P5), judged
        as the permissions middleware judges a tool call's paths; [] without a permissions middleware."""
        from workbench.harness.permissions import PermissionsMiddleware

        perms = self.middleware(PermissionsMiddleware)
        if perms is None:
            return []
        session = perms.session_rules(self._state())
        named = perms.judge("write", path, has_paths=True, session=session)
        verdicts = [named]
        target = self._link_target(path)
        led = perms.judge_link_target("write", path, target, session=session) if target is not None else None
        return verdicts if led is None else [*verdicts, led]

    def _link_target(self, path: str) -> str | None:
        """The virtual path ``path`` leads to through symlinks, or None when its mount has none to follow
        (a state or store mount) or there is no mount (the save is refused for that). ``LinksTooDeep``
        when following it would take more than ``LINK_STEPS`` path components (this runs on the window's
        GUI thread, and a workspace can hold a chain of links that takes seconds to resolve), or failed."""
        from workbench.backends.base import LinksTooDeep, PathError, normalize

        try:
            v = normalize(path)
            backend, inner = self.backend.backend_for(v)
        except PathError:
            return None  # no mount: the save is refused for that
        link_target = getattr(backend, "link_target", None)
        if link_target is None:
            return None
        try:
            led = link_target(inner, LINK_STEPS)
        except LinksTooDeep as e:
            raise e.with_path(v) from None
        except PathError:
            return None
        except OSError as e:  # a link changed while it was followed: not judged, so not saved
            raise LinksTooDeep(v, f"its links could not be followed ({e.strerror or e})") from None
        point = v if inner == "/" else v[: len(v) - len(inner)]  # the mount point ("" for "/")
        return led if point in ("", "/") else (point if led == "/" else point + led)

    async def write_document(self, path: str, text: str) -> None:
        """Save a file the user edited, through the same backend and permission rules as the agent.

        The backend judges again the path it really opens while it writes (P5, as during a tool call):
        a link changed between the verdict and the write cannot carry the save past a rule. The paths
        judged here count as asked and approved, since the person saving is the one an ``ask`` would ask.
        """
        from workbench.backends.base import BackendRefusal
        from workbench.backends.guard import guarding
        from workbench.harness.permissions import PermissionsMiddleware

        allowed, why, verdicts = self._save_judgement(path)
        if not allowed:  # the verdict's words, without a second "<path>: " (BackendRefusal adds its own)
            raise BackendRefusal(path, why.removeprefix("Denied: ").removeprefix("Refused: ").removeprefix(f"{path}: "))
        perms = self.middleware(PermissionsMiddleware)
        guard = perms.guard(verdicts, self._state(), approved=True) if perms is not None else None
        with guarding(guard):
            await self.backend.write(path, text)
