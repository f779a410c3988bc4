"""ProcessModel: the window's model calls in the model host process (issues 9 and 11: no per-chunk work on
the GUI's interpreter), through the real litellm path against the loopback stub.

What must hold: the same deltas, response, usage and errors as ``LiteLLMModel`` in-process; a consumer
that leaves cancels the host's call; a host that dies fails the open call (retryable) and the next call
starts a new one; the host dies with the app (``kill -9`` included); the API key never reaches the host's
command line or environment.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from typing import Any
import time
from pathlib import Path

import pytest

from tests.engine.test_models import collect
from tests.stub_server import StubReply
from workbench.engine import model_info
from workbench.engine.messages import Message, ModelDelta, ModelRequest, ModelResponse, ToolSpec
from workbench.engine.models.litellm_model import LiteLLMModel
from workbench.engine.models.process_model import ModelHost, ProcessModel
from workbench.engine.usage import Usage
from workbench.errors import ModelError

ROOT = Path(__file__).resolve().parents[2]
REQUEST = ModelRequest(
    system="You are a test.",
    messages=(Message.user("Say hello"),),
    tools=(ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}),),
    meta={"compression_records": 0, "unpicklable": lambda: None},  # bookkeeping never crosses
)


def inner(url: str, key: str = "sk-process-test", **kw: object) -> LiteLLMModel:
    kw.setdefault("backoff_base", 0.01)
    kw.setdefault("timeout", 10.0)
    return LiteLLMModel("openai/test-model", api_base=url, api_key=key, **kw)  # type: ignore[arg-type]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) is not running
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


async def test_the_host_streams_what_litellm_in_process_streams(stub_server) -> None:
    reply = StubReply(text="Hello there, general Kenobi", chunks=4, usage=(42, 7),
                      tool_calls=[("read_file", {"path": "a.txt"})])
    stub_server.script(reply, reply)
    here_deltas, here = await collect(inner(stub_server.url), REQUEST)
    deltas, there = await collect(ProcessModel(inner(stub_server.url)), REQUEST)
    assert "".join(d.text for d in deltas) == "".join(d.text for d in here_deltas) == "Hello there, general Kenobi"
    assert there.message.content == here.message.content
    assert [(c.name, c.arguments) for c in there.message.tool_calls] == [("read_file", {"path": "a.txt"})]
    assert there.usage == here.usage and there.usage.input_tokens == 42 and there.usage.calls == 1
    assert there.finish_reason == here.finish_reason
    assert stub_server.requests[1]["messages"] == stub_server.requests[0]["messages"]
    assert stub_server.requests[1]["tools"] == stub_server.requests[0]["tools"]


async def test_a_provider_error_keeps_its_message_status_and_retryable_flag(stub_server) -> None:
    stub_server.script(StubReply(status=401), StubReply(status=401))
    with pytest.raises(ModelError) as here:
        await collect(inner(stub_server.url, max_retries=0))
    with pytest.raises(ModelError) as there:
        await collect(ProcessModel(inner(stub_server.url, max_retries=0)))
    assert str(there.value) == str(here.value) and "openai/test-model" in str(there.value)
    assert (there.value.retryable, there.value.status) == (here.value.retryable, here.value.status) == (False, 401)


async def test_a_consumer_that_leaves_cancels_the_call_and_the_host_goes_on(stub_server) -> None:
    stub_server.script(StubReply(text="word " * 200, chunks=200, chunk_delay=0.02), StubReply(text="after"))
    model = ProcessModel(inner(stub_server.url))
    stream = model.stream(REQUEST)
    first = await stream.__anext__()
    assert isinstance(first, ModelDelta)
    await stream.aclose()  # the engine stops reading (Stop, a cancelled run)
    host = ModelHost.shared()
    assert not host._streams, "the call is forgotten here"  # noqa: SLF001
    _, final = await collect(model)
    assert final.message.content == "after" and ModelHost.shared() is host


async def test_a_host_that_dies_mid_call_fails_it_retryably_and_the_next_call_starts_another(stub_server) -> None:
    stub_server.script(StubReply(text="word " * 200, chunks=200, chunk_delay=0.02), StubReply(text="again"))
    model = ProcessModel(inner(stub_server.url))
    await asyncio.wrap_future(model.warm_up())
    host = ModelHost.shared()
    stream = model.stream(REQUEST)
    assert isinstance(await stream.__anext__(), ModelDelta)
    os.kill(host.pid, signal.SIGKILL)
    with pytest.raises(ModelError) as caught:
        async for _ in stream:
            pass
    assert caught.value.retryable and "model process ended" in str(caught.value)
    _, final = await collect(model)
    assert final.message.content == "again"
    assert ModelHost.shared() is not host and ModelHost.shared().pid != host.pid


async def test_a_host_that_dies_before_the_first_item_is_replaced_and_the_call_made_again(stub_server) -> None:
    stub_server.script(StubReply(text="never seen", delay=3.0), StubReply(text="second"))
    model = ProcessModel(inner(stub_server.url))
    await asyncio.wrap_future(model.warm_up())
    host = ModelHost.shared()
    call = asyncio.ensure_future(collect(model))
    deadline = time.monotonic() + 10
    while not stub_server.requests and time.monotonic() < deadline:  # the request is at the server
        await asyncio.sleep(0.02)
    os.kill(host.pid, signal.SIGKILL)
    deltas, final = await call
    assert final.message.content == "second" and "".join(d.text for d in deltas) == "second"
    assert len(stub_server.requests) == 2 and ModelHost.shared().pid != host.pid


async def test_the_key_never_reaches_the_hosts_command_line_or_environment(stub_server) -> None:
    key = "sk-only-on-the-pipe-7f3a9c"
    stub_server.script(StubReply(text="ok"))
    await collect(ProcessModel(inner(stub_server.url, key=key)))
    pid = ModelHost.shared().pid
    assert stub_server.auth[-1] == f"Bearer {key}"  # it was used...
    for name in ("cmdline", "environ"):
        assert key.encode() not in Path(f"/proc/{pid}/{name}").read_bytes()  # ...never shown


async def test_warm_up_remembers_the_models_window_and_price_for_this_process(stub_server) -> None:
    """C7's default trigger needs the input window, and a call cut mid-stream is priced (B2) — here, where
    litellm is not imported in the window's process, from what the host looked up."""
    model = ProcessModel(LiteLLMModel("openai/gpt-4o-mini", api_base=stub_server.url, api_key="sk-x"))
    seconds = await asyncio.wrap_future(model.warm_up())
    assert seconds >= 0 and model_info.known("openai/gpt-4o-mini")
    assert model_info.context_window("openai/gpt-4o-mini") == 128000
    per_in, per_out = model_info.prices("openai/gpt-4o-mini")
    assert 0 < per_in < per_out
    usage = model.estimate_usage(REQUEST, "word " * 100)
    assert usage.output_tokens > 50 and usage.unpriced_calls == 0
    assert usage.cost_usd == pytest.approx(usage.input_tokens * per_in + usage.output_tokens * per_out)
    unknown = ProcessModel(inner(stub_server.url))  # test-model: litellm has no price for it
    await asyncio.wrap_future(unknown.warm_up())
    assert model_info.prices("openai/test-model") is None
    assert unknown.estimate_usage(REQUEST, "x").unpriced_calls == 1


def test_the_host_ends_when_the_app_is_killed(tmp_path: Path, stub_server) -> None:
    """kill -9 of the window's process: the host sees its stdin close and exits — no call outlives the app."""
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(f"""
        import asyncio, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from workbench.engine.models.litellm_model import LiteLLMModel
        from workbench.engine.models.process_model import ModelHost, ProcessModel
        model = ProcessModel(LiteLLMModel("openai/test-model", api_base={stub_server.url!r}, api_key="k"))
        model.warm_up().result(120)
        print(ModelHost.shared().pid, flush=True)
        time.sleep(600)
    """))
    app = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert app.stdout is not None
        host_pid = int(app.stdout.readline())
        assert _alive(host_pid)
        app.send_signal(signal.SIGKILL)
        app.wait(10)
        deadline = time.monotonic() + 10
        while _alive(host_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(host_pid), "the model host outlived the app"
    finally:
        if app.poll() is None:
            app.kill()


def test_the_window_uses_the_host_unless_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.config import WorkbenchConfig
    from workbench.engine.models.threaded import ThreadedModel
    from workbench.session import make_model

    cfg = WorkbenchConfig(model="openai/test-model", api_base="http://127.0.0.1:9")
    assert isinstance(make_model(cfg, api_key="k", threaded=True), ProcessModel)
    assert isinstance(make_model(cfg, api_key="k", host=True), ProcessModel)
    assert isinstance(make_model(cfg, api_key="k"), LiteLLMModel)  # the CLI and scripts: in-process
    monkeypatch.setenv("WORKBENCH_MODEL_PROCESS", "0")
    assert isinstance(make_model(cfg, api_key="k", threaded=True), ThreadedModel)
    assert isinstance(make_model(cfg, api_key="k", host=True), LiteLLMModel)


@pytest.mark.timeout(60)  # the failure this guards against is a host that never answers
def test_a_host_whose_litellm_cannot_load_still_answers_and_reports_it(tmp_path: Path) -> None:
    """A broken install: the warm-up still answers (nobody waits for it in vain) and the call fails with
    a ModelError that says what is wrong, not a hang or a dead pipe."""
    from workbench.engine.models.model_host import read_frame, write_frame
    from workbench.engine.models.process_model import host_command, package_path

    fake = tmp_path / "fake" / "litellm"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('this litellm is broken on purpose')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake.parent), package_path()])}
    host = subprocess.Popen(host_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env)
    try:
        assert host.stdin is not None and host.stdout is not None
        write_frame(host.stdin, ("warm", 1, "openai/test-model"))
        assert read_frame(host.stdout)[:2] == ("warmed", 1)
        spec = {"model": "openai/test-model", "api_base": "http://127.0.0.1:9", "api_key": "k", "max_retries": 0}
        write_frame(host.stdin, ("stream", 2, spec, ModelRequest("", (Message.user("hi"),))))
        kind, call_id, (message, retryable, status) = read_frame(host.stdout)
        assert (kind, call_id) == ("error", 2) and "broken on purpose" in message, message
    finally:
        host.kill()
        host.wait(10)


async def test_a_host_that_cannot_be_started_is_a_model_error_naming_the_command(monkeypatch) -> None:
    from workbench.engine.models import process_model

    monkeypatch.setattr(process_model, "host_command", lambda: ["/nonexistent/python-for-the-host"])
    monkeypatch.setattr(ModelHost, "_shared", None)
    with pytest.raises(ModelError) as caught:
        await collect(ProcessModel(inner("http://127.0.0.1:9")), REQUEST)
    assert "could not be started" in str(caught.value) and "/nonexistent/python-for-the-host" in str(caught.value)


def test_stop_sends_what_is_queued_then_ends_the_host() -> None:
    """The writer thread sends queued frames in order; ``stop`` closes the pipe after them and the host
    exits (its stdin ended)."""
    host = ModelHost.spawn()
    try:
        host.send(("cancel", 999))  # a frame for a call that does not exist: harmless, and sent first
        host.stop(timeout=20)
        assert host.process is not None and host.process.returncode == 0
        deadline = time.monotonic() + 5
        while host.alive and time.monotonic() < deadline:  # the reader sees the end of the replies
            time.sleep(0.02)
        assert not host.alive
        with pytest.raises(OSError):
            host.send(("cancel", 1000))
    finally:
        if host.process is not None and host.process.poll() is None:
            host.process.kill()


async def test_a_warm_up_lost_with_its_host_is_asked_again_of_the_next_one(stub_server) -> None:
    """The host died before it answered the warm-up: the model's window and price were never learnt.
    The next call, in a new host, asks again, so C7's trigger and B2's price for a cut call are known."""
    model_info._windows.pop("openai/gpt-4o-mini", None)  # noqa: SLF001 - a process that never learnt them
    model_info._prices.pop("openai/gpt-4o-mini", None)  # noqa: SLF001
    stub_server.script(StubReply(text="ok"))
    model = ProcessModel(LiteLLMModel("openai/gpt-4o-mini", api_base=stub_server.url, api_key="sk-x"))
    host = ModelHost.shared()
    os.kill(host.pid, signal.SIGSTOP)  # it cannot answer the warm-up, then dies with it unanswered
    try:
        warm = model.warm_up()
        await asyncio.sleep(0.2)
        assert not warm.done()
    finally:
        os.kill(host.pid, signal.SIGKILL)
        os.kill(host.pid, signal.SIGCONT)
    with pytest.raises(ModelError):
        await asyncio.wait_for(asyncio.wrap_future(warm), 30)
    assert "openai/gpt-4o-mini" not in model_info._windows  # noqa: SLF001 - nothing learnt from a host
    assert model_info.prices("openai/gpt-4o-mini") is None
    _, final = await collect(model)
    assert final.message.content == "ok" and ModelHost.shared().pid != host.pid
    await model_info.settled("openai/gpt-4o-mini", 60)
    assert model_info._windows.get("openai/gpt-4o-mini") == 128000  # noqa: SLF001 - learnt from the new host
    assert model_info.prices("openai/gpt-4o-mini") is not None


async def test_giving_up_on_a_silent_warm_up_neither_cancels_it_nor_fails_the_call() -> None:
    """C7 waits a while for the host's look-up of the model's window (``model_info.settled``). Giving up
    cancelled the shared warm-up future, and the model's next call then raised
    concurrent.futures.CancelledError — an Exception, so the run failed after 120 s (a review found it)."""
    import concurrent.futures

    class SilentHost:  # accepted the warm-up, never answers it; the call itself is refused at once
        def warm(self, name: str) -> concurrent.futures.Future[float]:
            return concurrent.futures.Future()

        def open_stream(self, spec: object, request: object) -> None:
            raise ModelError("the host is gone", retryable=True)

    model = ProcessModel(inner("http://127.0.0.1:9"), host=SilentHost)  # type: ignore[arg-type]
    warm = model.warm_up()
    try:
        await model_info.settled(model.name, timeout=0.2)
        assert not warm.cancelled()
        with pytest.raises(ModelError, match="the host is gone"):
            async for _ in model.stream(REQUEST):
                pass
        started = asyncio.get_running_loop().time()
        await model_info.settled(model.name, timeout=30)  # waited for once in vain: not again
        assert asyncio.get_running_loop().time() - started < 1
    finally:
        warm.set_result(0.0)  # nothing of this test is left pending for the next


class _SilentHost:
    """A host that takes calls and never answers them (wedged, or stopped with SIGSTOP)."""

    def __init__(self) -> None:
        self.abandoned: list[str] = []

    def open_stream(self, spec: object, request: object) -> tuple[int, asyncio.Queue[Any]]:
        return 1, asyncio.Queue()

    def close_stream(self, call_id: int, *, cancel: bool = False) -> None:
        pass

    def abandon(self, why: str) -> None:
        self.abandoned.append(why)


async def test_a_host_that_never_answers_is_abandoned_and_the_call_made_in_this_process(stub_server, monkeypatch) -> None:
    """R6: a wedged shared host accepted the call and said nothing: `workbench run` waited for ever, and so
    did every later command (a review found it). Past the call's own time limit the host is abandoned
    and, for the shared host (which may fall back), this process makes the call itself, then and after."""

    from workbench.engine.models import process_model

    monkeypatch.setattr(process_model, "SILENCE_MARGIN", 0.2)
    stub_server.script(StubReply(text="from this process"), StubReply(text="again here"))
    silent = _SilentHost()
    model = ProcessModel(inner(stub_server.url, timeout=0.3, max_retries=0), host=lambda: silent, fallback=True)
    _, final = await collect(model)
    assert final.message.content == "from this process" and len(silent.abandoned) == 1
    assert "sent nothing for" in silent.abandoned[0]
    _, final = await collect(model)  # the silent host is not tried again
    assert final.message.content == "again here" and len(silent.abandoned) == 1


async def test_a_host_of_our_own_that_never_answers_fails_the_call_retryably(monkeypatch) -> None:
    from workbench.engine.models import process_model

    monkeypatch.setattr(process_model, "SILENCE_MARGIN", 0.2)
    hosts: list[_SilentHost] = []

    def spawn() -> _SilentHost:
        hosts.append(_SilentHost())
        return hosts[-1]

    model = ProcessModel(inner("http://127.0.0.1:9", timeout=0.3, max_retries=0), host=spawn)  # type: ignore[arg-type]
    with pytest.raises(ModelError, match="sent nothing for") as caught:
        async for _ in model.stream(REQUEST):
            pass
    assert caught.value.retryable and len(hosts) == 2 and all(h.abandoned for h in hosts)  # replaced once


async def test_a_stop_ends_the_wait_for_a_models_window_at_once(tmp_path) -> None:
    """R6: before its first model call a run waits (up to 120 s) for the model host's look-up of the
    window (C7); a host that never answers kept Ctrl-C waiting there (a review found it)."""
    import concurrent.futures
    import time

    from workbench.engine.models.scripted import ScriptedModel, reply
    from workbench.session import Session

    ws = tmp_path / "ws"
    ws.mkdir()
    model = ScriptedModel([reply("never")], name="openai/never-answers")
    never: concurrent.futures.Future[float] = concurrent.futures.Future()
    model_info.expect(model.name, never)
    session = await Session.open(ws, model=model)
    try:
        task = asyncio.ensure_future(session.run("hi"))
        await asyncio.sleep(0.5)
        assert not task.done()  # waiting for the window
        started = time.monotonic()
        await session.stop()
        result = await asyncio.wait_for(task, 10)
        assert result.status == "aborted" and time.monotonic() - started < 5
        assert not never.cancelled() and model.calls == 0
    finally:
        await session.close()
        never.set_result(0.0)


async def test_a_host_streaming_nothing_forwardable_says_it_is_alive(stub_server, monkeypatch) -> None:
    """A call may stream for minutes with nothing to forward (a long tool call's arguments arrive as
    fragments the host keeps until the call is whole); the client's silence limit took that for a wedged
    host and killed it (a review found it). The host sends ("alive", id) while a stream runs."""
    from workbench.engine.models import model_host

    monkeypatch.setattr(model_host, "ALIVE_EVERY", 0.05)
    stub_server.script(StubReply(tool_calls=[("write_file", {"path": "/project/a.md", "content": "x" * 400})],
                                 chunks=20, chunk_delay=0.03))
    sent: list[Any] = []
    connection = model_host.Connection(sent.append)
    connection.handle(("stream", 7, ProcessModel(inner(stub_server.url))._spec(), REQUEST))
    deadline = time.monotonic() + 20
    while not any(m[0] in ("done", "error") for m in sent) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    kinds = [m[0] for m in sent]
    assert kinds[-1] == "done" and kinds.count("alive") >= 3, kinds
    first_item = kinds.index("item")
    assert kinds[:first_item].count("alive") >= 3  # heard from while nothing could be forwarded yet


async def test_alive_frames_keep_a_silent_call_from_being_abandoned(stub_server, monkeypatch) -> None:
    from workbench.engine.models import process_model

    monkeypatch.setattr(process_model, "SILENCE_MARGIN", 0.2)

    class SlowHost(_SilentHost):  # says it is alive for longer than the silence limit, then answers
        def open_stream(self, spec: object, request: object) -> tuple[int, asyncio.Queue[Any]]:
            queue: asyncio.Queue[Any] = asyncio.Queue()

            async def feed() -> None:
                for _ in range(12):
                    await asyncio.sleep(0.1)
                    queue.put_nowait(("alive", None))
                final = ModelResponse(message=Message.assistant("late but whole"), usage=Usage(input_tokens=1))
                queue.put_nowait(("item", final))
                queue.put_nowait(("done", None))

            asyncio.get_running_loop().create_task(feed())
            return 1, queue

    slow = SlowHost()
    model = ProcessModel(inner(stub_server.url, timeout=0.3, max_retries=0), host=lambda: slow)  # type: ignore[arg-type]
    _, final = await collect(model)
    assert final.message.content == "late but whole" and slow.abandoned == []
