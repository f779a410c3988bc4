"""The shell tool (E1–E6): ``execute{command, cwd?, timeout_seconds?}`` — its limits, its environment,
its judging and its events, in one middleware; each command's process (its group, the pump of its output,
the kills) in ``command_process.py``.

- E1 The command runs under bash (``bash -c``; ``sh`` where there is no bash) in a folder of a host
  mount (default: the workspace's). stdout and stderr come interleaved through one pipe; the result
  keeps at most ``execute.max_output_chars`` of it — the head and the tail with a note of what was cut
  between them, read through a bounded buffer so 10 MB of output never sits in memory — and ends with
  the exit code and the duration. Timeout: 120 s by default, at most ``execute.max_timeout_seconds``.
- E2 Permissions judge the command part by part (``command_rules``): the tool's resources are its
  parts, so ``permissions.py`` judges them like paths; the approval question carries the command, the
  folder, whether a sandbox is on and rule proposals at prefix level (``approval_details``).
- E3 The command gets a minimal environment (PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_*, TZ, TMPDIR,
  TERM=dumb) plus the variables ``execute.env_allow`` names; whatever the patterns admit, a variable
  whose name holds KEY, TOKEN, SECRET, PASSWORD, PASSWD or CREDENTIAL, a provider key variable, or a
  value holding a key the workbench knows is dropped unless ``env_allow`` names it exactly.
- E4 The command starts its own session (a process group led by the shell). Stop (the call is
  cancelled), a timeout, the shell's own exit (what it left running in the background) and the end of
  the run (``on_run_end``, and at exit) end the whole group: SIGTERM, then SIGKILL after half a second.
  A process that left the group (``setsid``) but kept the environment is found by the marker variable
  ``WORKBENCH_COMMAND`` in ``/proc`` and killed too; in the sandbox the PID namespace ends everything
  (and the marker catches bubblewrap's inner half when it is killed while it still sets up). The
  command ends when its shell exits, not when its output closes (a program closes stdout just before it
  exits; ``exec >log`` goes on without it). When the workbench itself dies (``kill -9``), the shell dies
  with it (Linux: a parent-death signal); what it started carries the call's marker — derived from the
  thread, run and call — and is ended when the engine settles the cut-off call (``on_calls_cut_off``:
  ``workbench resume``, or the thread's next turn), before the model is told.
- E5 ``sandbox.py``: bubblewrap when it is installed and allowed; else a note says why not.
- E6 Output streams live as ``command_output`` events (``{call_id, text, skipped}``), batched every
  ~30 ms like streamed text: at most 8 KB a batch, the newest kept — ``skipped`` counts the
  characters left out before ``text`` when a command prints faster than that. The durable
  ``tool_call_finished`` carries ``exit_code``, ``duration_seconds``, ``timed_out``, ``output_chars``
  and ``sandboxed`` (counts, never the output: M8).

A message's ``execute`` calls share the ``files`` lock with the file tools (R4): "edit the file, then
run the tests" in one message runs in that order. While another call of the same step waits for an
approval, a command already running goes on until it ends or its own timeout stops it; the run
suspends after that.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import os
import shutil
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.backends.base import BackendRefusal, normalize
from workbench.backends.realpath import TooManySteps
from workbench.backends.realpath import realpath as bounded_realpath
from workbench.engine.middleware import AgentMiddleware, HookContext, ToolContext
from workbench.engine.tools import Resource, Tool, ToolOutcome, schema
from workbench.errors import ToolError
from workbench.redact import scrub_known
from workbench.harness.command_process import (
    _RUNNING,
    _RUNNING_LOCK,
    DRAIN_SECONDS,
    KILL_GRACE,
    MARKER_ENV,
    _Command,
    call_marker,
    kill_marked,
)
from workbench.harness.command_rules import MAX_COMMAND_CHARS, UnjudgedPart, parse, prefix_patterns
from workbench.harness.sandbox import Sandbox, detect

__all__ = [
    "BATCH_SECONDS",
    "DEFAULT_TIMEOUT",
    "ExecuteMiddleware",
    "ExecuteTool",
    "HostMount",
    "MARKER_ENV",
    "command_env",
]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 120.0
#: Live output is handed on this often (DESIGN §2: streamed text every ~30 ms).
BATCH_SECONDS = 0.03
#: Path components a redirection's target may lead through (links included) before it is unjudged.
LINK_STEPS = 2048
#: Names every command gets (E3), besides ``LC_*``.
BASE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM")
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")


# ---------------------------------------------------------------------------------------- environment


def _secret_name(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def command_env(environ: Mapping[str, str], allow: Sequence[str] = (), *, sandboxed: bool = False,
                marker: str | None = None) -> dict[str, str]:
    """The environment a command gets (E3): the minimal names plus those ``allow`` admits (names or
    globs), without secrets unless ``allow`` names them exactly."""
    from workbench.redact import known_secrets
    from workbench.secrets import ENV_VARS

    known = [s for s in known_secrets() if s]
    providers = set(ENV_VARS.values())
    exact = {a for a in allow if not any(c in a for c in "*?[")}
    out: dict[str, str] = {}
    for name, value in environ.items():
        listed = any(fnmatch.fnmatchcase(name, pattern) for pattern in allow)
        if not (listed or name in BASE_ENV or name.startswith("LC_")):
            continue
        if name not in exact:
            if _secret_name(name) or name in providers or any(s in value for s in known):
                continue
            if name == "TERM" or (sandboxed and name == "TMPDIR"):
                continue  # a pipe is no terminal; the sandbox's /tmp is the one to use
        out[name] = value
    out.setdefault("PATH", os.defpath)
    out.setdefault("TERM", "dumb")
    if marker:
        out[MARKER_ENV] = marker
    return out




# --------------------------------------------------------------------------------------------- the tool


@dataclass(frozen=True)
class HostMount:
    """A mount with a folder on disk, where commands may run."""

    point: str
    root: Path
    readonly: bool = False


@dataclass(frozen=True)
class ExecuteTool(Tool):
    """The ``execute`` tool: its resources are the command's parts (E2), judged by the permissions."""

    parts_of: Callable[[dict[str, Any]], list[Resource]] | None = field(default=None, compare=False)
    details_of: Callable[[dict[str, Any]], dict[str, Any]] | None = field(default=None, compare=False)

    def resources(self, arguments: dict[str, Any]) -> list[Resource]:
        out: list[Resource] = [("invoke", self.name)]
        if self.parts_of is not None:
            out += self.parts_of(arguments)
        return out

    def approval_details(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """What the approval question shows besides the arguments (E2, E5)."""
        return self.details_of(arguments) if self.details_of is not None else {}


class ExecuteMiddleware(AgentMiddleware):
    """Contributes ``execute`` (see the module docstring). ``mounts``: the host mounts by point;
    ``workspace``: the folder commands may write in the sandbox; ``hidden``: folders and files the
    sandbox empties (F4); ``sandbox``: a ``Sandbox`` (None: detect bubblewrap)."""

    def __init__(self, mounts: Sequence[HostMount], workspace: Path | str, *, max_output_chars: int = 30000,
                 max_timeout_seconds: float = 600.0, network: bool = False, env_allow: Sequence[str] = (),
                 hidden: Sequence[Path | str] = (), sandbox: Sandbox | None = None) -> None:
        self.workspace = Path(os.path.realpath(os.fspath(workspace)))
        self.mounts = sorted(mounts, key=lambda m: len(m.point), reverse=True)
        self.max_output_chars = int(max_output_chars)
        self.max_timeout = float(max_timeout_seconds)
        self.default_timeout = min(DEFAULT_TIMEOUT, self.max_timeout)
        self.env_allow = tuple(env_allow)
        self.hidden = [Path(os.path.realpath(os.fspath(p))) for p in hidden]
        self.sandbox = sandbox or Sandbox(detect(), self.workspace, hidden=self.hidden, network=network)
        self.shell = shutil.which("bash") or shutil.which("sh") or "/bin/sh"
        home = next((m for m in mounts if m.root == self.workspace), None)
        self.default_cwd = home.point if home else (self.mounts[-1].point if self.mounts else "/project")

    @classmethod
    def from_config(cls, config: Any, workspace: Path, *, hidden: Sequence[Path | str] = (),
                    sandbox: Sandbox | None = None) -> ExecuteMiddleware:
        """From a ``WorkbenchConfig``: its host mounts and its ``execute`` section."""
        mounts = [HostMount(point, mount.resolve_host(workspace), mount.readonly)
                  for point, mount in config.mounts.items() if mount.kind == "host"]
        ex = config.execute
        return cls(mounts, workspace, max_output_chars=ex.max_output_chars, max_timeout_seconds=ex.max_timeout_seconds,
                   network=ex.network, env_allow=ex.env_allow, hidden=hidden, sandbox=sandbox)

    # -- what the person and the model are told ---------------------------------------------------------
    def sandbox_line(self) -> str:
        """Whether commands run in a sandbox, in one line (``workbench run``, the status bar)."""
        return f"sandbox for commands (execute): {self.sandbox.describe()}"

    def tools(self) -> Sequence[Tool]:
        if os.name != "posix" or not self.mounts:
            return ()  # process groups and bash are what E4 relies on; no host folder, nowhere to run
        points = ", ".join(m.point for m in reversed(self.mounts))
        description = (
            f"Run a shell command with bash and get its output (stdout and stderr together) and exit code. "
            f"cwd is the folder to run in: a folder of a mount on disk ({points}; default {self.default_cwd}). "
            f"Output over {self.max_output_chars:,} characters keeps its beginning and end. The timeout is "
            f"{self.default_timeout:g} s unless timeout_seconds says otherwise (at most {self.max_timeout:g}). "
            f"The user's rules judge each command of a compound line separately. Sandbox: {self.sandbox.describe()}.")
        parameters = schema({
            "command": {"type": "string", "description": "The command line, e.g. python -m pytest -q tests/"},
            "cwd": {"type": "string", "description": f"A folder as a virtual path, default {self.default_cwd}"},
            "timeout_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": self.max_timeout,
                                "description": f"Seconds before the command is stopped (default {self.default_timeout:g})"},
        }, ["command"])
        return (ExecuteTool("execute", description, parameters, self._execute, lock="files",
                            parts_of=self._parts, details_of=self._details),)

    # -- folders ----------------------------------------------------------------------------------------
    def folder(self, cwd: Any) -> tuple[str, Path]:
        """``cwd`` (a virtual path; None: the default) as (virtual, host folder). ToolError names what is wrong."""
        vpath = cwd if isinstance(cwd, str) and cwd.strip() else self.default_cwd
        try:
            vpath = normalize(vpath)
        except BackendRefusal as e:
            raise ToolError(f"cwd {cwd!r}: {e.reason}") from None
        mount = next((m for m in self.mounts if vpath == m.point or vpath.startswith(m.point.rstrip("/") + "/")), None)
        if mount is None:
            points = ", ".join(m.point for m in reversed(self.mounts)) or "none"
            raise ToolError(f"cwd {vpath}: not in a mount with a folder on disk (those are: {points}); commands "
                            f"run in one of them")
        rel = vpath[len(mount.point):].lstrip("/")
        host = Path(os.path.realpath(os.path.join(mount.root, rel)))
        root = Path(os.path.realpath(mount.root))
        if host != root and root not in host.parents:
            raise ToolError(f"cwd {vpath}: leads outside the mount {mount.point} (a symlink)")
        if self._protected(host):
            raise ToolError(f"cwd {vpath}: the workbench keeps this folder out of every tool")
        if not host.is_dir():
            raise ToolError(f"cwd {vpath}: no such folder")
        return vpath, host

    def _protected(self, host: Path) -> bool:
        return any(host == p or p in host.parents for p in self.hidden)

    def _virtual(self, host: Path) -> tuple[str, HostMount] | None:
        """The virtual path of a host path inside a host mount (the deepest such mount), or None."""
        best: tuple[str, HostMount] | None = None
        best_len = -1
        for m in self.mounts:
            root = Path(os.path.realpath(m.root))
            if host == root or root in host.parents:
                if len(str(root)) > best_len:
                    rel = host.relative_to(root).as_posix()
                    best = (m.point if rel == "." else m.point.rstrip("/") + "/" + rel, m)
                    best_len = len(str(root))
        return best

    # -- permissions (E2) -------------------------------------------------------------------------------
    def _parts(self, arguments: dict[str, Any]) -> list[Resource]:
        command = arguments.get("command")
        if not isinstance(command, str):
            return []
        try:
            _vcwd, host_cwd = self.folder(arguments.get("cwd"))
        except ToolError:
            host_cwd = None
        out: list[Resource] = []
        for part in parse(command).parts:
            if part.kind == "command":
                out.append(("execute", part.text if part.judged else UnjudgedPart(part.text, part.why)))
                continue
            shown = f"> {part.text}"
            if not part.judged:
                out.append(("execute", UnjudgedPart(shown, part.why)))
                continue
            if host_cwd is None:
                out.append(("execute", UnjudgedPart(shown, "its folder (cwd) is not valid")))
                continue
            joined = os.path.join(host_cwd, os.path.expanduser(part.text))
            try:
                # resolved as the kernel opens it: `L/../x` through a link L is x beside L's target, not
                # beside L (normpath would drop `L/..` as text first); the lexical name is judged as well
                real = bounded_realpath(joined, LINK_STEPS)
            except TooManySteps:
                out.append(("execute", UnjudgedPart(shown, "it writes through more links than are followed")))
                continue
            for host in dict.fromkeys([Path(os.path.normpath(joined)), Path(real)]):
                found = self._virtual(host)
                if self._protected(host):
                    out.append(("execute", UnjudgedPart(shown, f"it writes {host}, which the workbench keeps "
                                                               "out of every tool")))
                elif found is None:
                    out.append(("execute", UnjudgedPart(shown, f"it writes {host}, outside every mount")))
                elif found[1].readonly:
                    out.append(("execute", UnjudgedPart(shown, f"it writes {found[0]} in the read-only mount "
                                                               f"{found[1].point}")))
                else:
                    out.append(("write", found[0]))
        return out

    def _details(self, arguments: dict[str, Any]) -> dict[str, Any]:
        command = arguments.get("command")
        out: dict[str, Any] = {"sandbox": self.sandbox.describe(), "sandboxed": self.sandbox.active}
        try:
            vcwd, host = self.folder(arguments.get("cwd"))
            out["folder"], out["host_folder"] = vcwd, str(host)
        except ToolError as e:
            out["folder"] = str(arguments.get("cwd") or self.default_cwd)
            out["folder_error"] = str(e)
        if isinstance(command, str):
            out["command"] = command
            proposals: list[str] = []
            for part in parse(command).commands:
                proposals += prefix_patterns(part)
            out["proposals"] = list(dict.fromkeys(proposals))
        return out

    # -- running ----------------------------------------------------------------------------------------
    async def _execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        command = args["command"]
        if not command.strip():
            raise ToolError("the command is empty")
        if len(command) > MAX_COMMAND_CHARS:
            raise ToolError(f"the command is {len(command):,} characters; at most {MAX_COMMAND_CHARS:,} — "
                            "write a script file and run that")
        if "\0" in command:
            raise ToolError("the command holds a NUL character")
        try:
            command.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolError("the command holds characters that are not valid text (lone surrogates)") from None
        _vcwd, host_cwd = self.folder(args.get("cwd"))
        timeout = float(args.get("timeout_seconds") or self.default_timeout)
        timeout = min(timeout, self.max_timeout)
        # the run id: a stand-in context without one (benchmarks/execute.py's) still runs commands
        marker = call_marker(ctx.thread_id, getattr(ctx, "run_id", ""), ctx.call.id)
        env = command_env(os.environ, self.env_allow, sandboxed=self.sandbox.active, marker=marker)
        argv = self.sandbox.argv([self.shell, "-c", command], host_cwd)
        loop = asyncio.get_running_loop()
        finished: asyncio.Future[None] = loop.create_future()

        def done() -> None:
            loop.call_soon_threadsafe(lambda: finished.done() or finished.set_result(None))

        try:
            cmd = _Command(argv, host_cwd, env, self.max_output_chars, marker=marker, sandboxed=self.sandbox.active,
                           thread_id=ctx.thread_id, on_done=done)
        except OSError as e:
            raise ToolError(f"could not start the command: {e.strerror or e}") from None
        call_id = ctx.call.id
        deadline = cmd.started + timeout
        timed_out = False
        try:
            while not finished.done():
                if not timed_out and time.monotonic() >= deadline:
                    timed_out = True
                    cmd.kill()
                await asyncio.wait([finished], timeout=BATCH_SECONDS)
                self._flush(cmd, ctx, call_id)
        except asyncio.CancelledError:  # Stop (E4): the group goes before the call ends
            cmd.kill()
            try:
                await asyncio.wait_for(asyncio.shield(finished), KILL_GRACE + DRAIN_SECONDS + 2.0)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                cmd.kill(hard=True)
            raise
        self._flush(cmd, ctx, call_id)
        return self._outcome(cmd, timeout, timed_out)

    @staticmethod
    def _flush(cmd: _Command, ctx: HookContext, call_id: str) -> None:
        text, skipped = cmd.take_live()
        if text or skipped:
            # F4: a key the process knows is not shown live either (the result is scrubbed by the
            # engine); a key cut across two batches can show in part, never whole.
            ctx.emit("command_output", call_id=call_id, text=scrub_known(text), skipped=skipped)

    def _outcome(self, cmd: _Command, timeout: float, timed_out: bool) -> ToolOutcome:
        seconds = (cmd.ended or time.monotonic()) - cmd.started
        code = cmd.returncode if cmd.returncode is not None else -signal.SIGKILL
        output = cmd.capture.text()
        body = output if output else "(no output)"
        if not body.endswith("\n"):
            body += "\n"
        if timed_out:
            line = (f"[timed out after {timeout:g} s: the command and every process it started were stopped · "
                    f"exit code {code}]")
        elif code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            line = f"[killed by {name} · {seconds:.2f} s]"
        else:
            line = f"[exit code {code} · {seconds:.2f} s]"
        details = {"exit_code": code, "duration_seconds": round(seconds, 3), "timed_out": timed_out,
                   "output_chars": cmd.capture.total, "sandboxed": self.sandbox.active}
        return ToolOutcome("error" if timed_out else "ok", body + line, details)

    # -- a call cut off by the workbench's end (E4, R9) -----------------------------------------------------
    def on_calls_cut_off(self, call_ids: Sequence[str], ctx: HookContext) -> None:
        """The process that ran these calls died mid-call (``kill -9``, a closed terminal): the engine settles
        them without running them again (R9) and calls this first, so nothing of them goes on changing the
        workspace after the model is told. The shell died with the workbench (its parent-death signal) or
        in its sandbox; what it started was re-parented and runs on — found here by the call's marker."""
        for call_id in call_ids:
            killed = kill_marked(call_marker(ctx.thread_id, ctx.run_id, call_id))
            if killed:
                log.info("ended %d process(es) left by cut-off call %s on thread %s", killed, call_id,
                         ctx.thread_id)

    # -- the run's end (E4) -----------------------------------------------------------------------------
    async def on_run_end(self, status: str, ctx: HookContext) -> None:
        with _RUNNING_LOCK:
            left = [c for c in _RUNNING.values() if c.thread_id == ctx.thread_id]
        for cmd in left:
            cmd.kill(hard=True)
