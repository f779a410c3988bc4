"""One side of ``benchmarks/peers.py`` and ``benchmarks/first_request.py``, run in its own process.

Run with the side's own interpreter (the project's venv, or a peer's throw-away venv): it imports only
the standard library at module level, so the same file serves every venv. Two modes:

- ``session`` (peers.py): imports everything, opens the side's agent on the stub (``--auto-ls``
  mode: the prompt names the count and the folder), runs an untimed 2-step warm-up session, then the
  timed ``--steps``-step session on a fresh thread/conversation — each step one ``ls`` tool call
  that lists the workspace folder, then the final answer, one history carried throughout. Prints one
  line ``RESULT {json}``: wall seconds, model calls, wall and process-CPU ms per model call, the
  package versions.
- ``first`` (first_request.py): the side's shortest script — build the agent, send "hi", stream the
  answer, exit. The caller times spawn → first request at the stub.

    python benchmarks/peer_sides.py session SIDE --url URL --ws DIR [--steps 100]
    python benchmarks/peer_sides.py first SIDE --url URL --ws DIR
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from importlib import metadata
from pathlib import Path
from typing import Any

# ``python benchmarks/peer_sides.py`` puts this folder first on sys.path, where benchmarks/mcp.py would
# stand in for the ``mcp`` package a peer imports (openai-agents: "'mcp' is not a package"). Nothing
# here imports a sibling script.
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if not p or str(Path(p).resolve()) != _HERE]

MODEL = "test-model"
KEY = "sk-bench"  # the stub ignores it; SDKs refuse to start without one
SYSTEM = "You are a benchmark agent. Use the ls tool when asked to list a folder."
LS_DOC = "List the entries of a folder of the workspace ('/' is its root)."

#: The distributions whose versions each side reports.
DISTS = {
    "workbench": ["workbench", "litellm", "openai", "httpx", "aiohttp"],
    "deepagents": ["deepagents", "langgraph", "langchain", "langchain-core", "langchain-openai", "openai"],
    "pydantic-ai": ["pydantic-ai", "pydantic-ai-slim", "pydantic", "openai"],
    "openai-agents": ["openai-agents", "openai"],
    "openai-sdk": ["openai", "httpx"],
    "http.client": [],
}


def versions(side: str) -> dict[str, str]:
    out = {}
    for dist in DISTS.get(side, []):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    out["python"] = sys.version.split()[0]
    return out


def prompt(steps: int, folder: str = "/") -> str:
    """The stub's ``--auto-ls`` mode reads the count and the folder from this."""
    return f"List {folder} {steps} times, one ls per step, then say done."


def list_folder(ws: Path, path: str) -> str:
    """The peers' ``ls``: the sorted entries of a workspace folder, folders marked with a slash."""
    target = (ws / path.lstrip("/")).resolve()
    if ws not in (target, *target.parents):
        return f"Error: {path} is outside the workspace"
    try:
        entries = sorted(os.scandir(target), key=lambda e: e.name)
    except OSError as exc:
        return f"Error: {exc}"
    return "\n".join(f"/{e.name}/" if e.is_dir() else f"/{e.name}" for e in entries)


# A side returns an async ``run(prompt) -> answer`` with its own, new thread/conversation per call.
Runner = Callable[[str], Awaitable[str]]


# --------------------------------------------------------------------------------------------------
# the sides


async def workbench_side(url: str, ws: Path) -> tuple[Runner, Callable[[], Awaitable[None]]]:
    """This project: ``Session`` on ``model: openai/<name>`` at the stub (LiteLLMModel, streamed)."""
    from workbench.engine.llm_setup import import_litellm
    from workbench.session import Session

    import_litellm()
    session = await Session.open(ws, model=f"openai/{MODEL}", api_base=url, api_key=KEY, trust=True)
    first = [True]

    async def run(text: str) -> str:
        if not first[0]:
            session.new_thread()
        first[0] = False
        result = await session.run(text.replace("List / ", "List /project "))
        if result.status != "done":
            raise RuntimeError(f"the run ended {result.status}: {result.error}")
        return result.answer or ""

    return run, session.close


async def deepagents_side(url: str, ws: Path) -> tuple[Runner, Callable[[], Awaitable[None]]]:
    """deepagents: ``create_deep_agent`` (LangGraph) on ``ChatOpenAI(streaming=True)``, its own ``ls``
    over a ``FilesystemBackend`` rooted at the workspace, an in-memory checkpointer per thread."""
    from deepagents import create_deep_agent
    from deepagents.backends import FilesystemBackend
    from langchain_openai import ChatOpenAI
    from langgraph.checkpoint.memory import InMemorySaver

    model = ChatOpenAI(model=MODEL, base_url=url, api_key=KEY, streaming=True, stream_usage=True)
    agent = create_deep_agent(model=model, system_prompt=SYSTEM, checkpointer=InMemorySaver(),
                              backend=FilesystemBackend(root_dir=str(ws), virtual_mode=True))
    threads = [0]

    async def run(text: str) -> str:
        threads[0] += 1
        config = {"configurable": {"thread_id": f"t{threads[0]}"}, "recursion_limit": 10_000}
        state = await agent.ainvoke({"messages": [{"role": "user", "content": text}]}, config)
        return str(state["messages"][-1].content)

    async def close() -> None:
        return None

    return run, close


async def pydantic_ai_side(url: str, ws: Path) -> tuple[Runner, Callable[[], Awaitable[None]]]:
    """pydantic-ai: ``Agent`` on ``OpenAIChatModel`` (openai provider); the run streams each request
    (``event_stream_handler``); no request limit."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.usage import UsageLimits

    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=url, api_key=KEY))
    agent = Agent(model, instructions=SYSTEM)

    @agent.tool_plain(docstring_format="auto")
    def ls(path: str) -> str:
        """List the entries of a folder of the workspace ('/' is its root)."""
        return list_folder(ws, path)

    async def drain(ctx: Any, events: Any) -> None:
        async for _ in events:
            pass

    async def run(text: str) -> str:
        result = await agent.run(text, event_stream_handler=drain, usage_limits=UsageLimits(request_limit=None))
        return str(result.output)

    async def close() -> None:
        return None

    return run, close


async def openai_agents_side(url: str, ws: Path) -> tuple[Runner, Callable[[], Awaitable[None]]]:
    """openai-agents: ``Agent`` on ``OpenAIChatCompletionsModel``, ``Runner.run_streamed``, tracing off."""
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=url, api_key=KEY)

    @function_tool
    def ls(path: str) -> str:
        """List the entries of a folder of the workspace ('/' is its root)."""
        return list_folder(ws, path)

    agent = Agent(name="bench", instructions=SYSTEM, tools=[ls],
                  model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client))

    async def run(text: str) -> str:
        result = Runner.run_streamed(agent, text, max_turns=10_000)
        async for _ in result.stream_events():
            pass
        return str(result.final_output)

    return run, client.close


LS_SCHEMA = {
    "type": "function",
    "function": {
        "name": "ls",
        "description": LS_DOC,
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}


def _step_messages(messages: list[dict[str, Any]], text: str, calls: dict[int, dict[str, Any]],
                   ws: Path) -> bool:
    """Append the assistant's turn (and the tools' results); True when the model answered."""
    if not calls:
        messages.append({"role": "assistant", "content": text})
        return True
    tool_calls = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["args"]}}
                  for _, c in sorted(calls.items())]
    messages.append({"role": "assistant", "content": text or None, "tool_calls": tool_calls})
    for c in tool_calls:
        args = json.loads(c["function"]["arguments"] or "{}")
        messages.append({"role": "tool", "tool_call_id": c["id"], "content": list_folder(ws, args.get("path", "/"))})
    return False


def _merge_call(calls: dict[int, dict[str, Any]], delta: dict[str, Any]) -> None:
    call = calls.setdefault(delta.get("index", 0), {"id": "", "name": "", "args": ""})
    call["id"] = delta.get("id") or call["id"]
    fn = delta.get("function") or {}
    call["name"] = fn.get("name") or call["name"]
    call["args"] += fn.get("arguments") or ""


async def openai_sdk_side(url: str, ws: Path) -> tuple[Runner, Callable[[], Awaitable[None]]]:
    """Reference: a bare loop over the openai SDK (``AsyncOpenAI``, streamed), no harness."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=url, api_key=KEY)

    async def run(text: str) -> str:
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]
        while True:
            stream = await client.chat.completions.create(
                model=MODEL, messages=messages, tools=[LS_SCHEMA], stream=True,
                stream_options={"include_usage": True})
            parts: list[str] = []
            calls: dict[int, dict[str, Any]] = {}
            async for chunk in stream:
                for choice in chunk.choices:
                    if choice.delta.content:
                        parts.append(choice.delta.content)
                    for tc in choice.delta.tool_calls or ():
                        _merge_call(calls, tc.model_dump())
            if _step_messages(messages, "".join(parts), calls, ws):
                return "".join(parts)

    return run, client.close


async def http_client_side(url: str, ws: Path) -> tuple[Runner, Callable[[], Awaitable[None]]]:
    """The floor: the standard library's ``http.client`` on one kept-alive connection, SSE parsed by hand."""
    import http.client
    from urllib.parse import urlsplit

    parts_url = urlsplit(url)
    conn = http.client.HTTPConnection(parts_url.hostname, parts_url.port)
    path = parts_url.path.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"}

    async def run(text: str) -> str:
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]
        while True:
            body = json.dumps({"model": MODEL, "messages": messages, "tools": [LS_SCHEMA], "stream": True,
                               "stream_options": {"include_usage": True}})
            conn.request("POST", path, body=body, headers=headers)
            resp = conn.getresponse()
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:300]!r}")
            parts: list[str] = []
            calls: dict[int, dict[str, Any]] = {}
            for raw in resp:
                line = raw.strip()
                if not line.startswith(b"data: "):
                    continue
                data = line[6:]
                if data == b"[DONE]":
                    break
                for choice in json.loads(data).get("choices", ()):
                    delta = choice.get("delta") or {}
                    if delta.get("content"):
                        parts.append(delta["content"])
                    for tc in delta.get("tool_calls") or ():
                        _merge_call(calls, tc)
            resp.read()  # the rest (nothing after [DONE]) so the connection is reused
            if _step_messages(messages, "".join(parts), calls, ws):
                return "".join(parts)

    async def close() -> None:
        conn.close()

    return run, close


SIDES = {
    "workbench": workbench_side,
    "deepagents": deepagents_side,
    "pydantic-ai": pydantic_ai_side,
    "openai-agents": openai_agents_side,
    "openai-sdk": openai_sdk_side,
    "http.client": http_client_side,
}


# --------------------------------------------------------------------------------------------------


async def session_mode(side: str, url: str, ws: Path, steps: int) -> dict[str, Any]:
    run, close = await SIDES[side](url, ws)  # every import is done here, before the clock
    try:
        warm = await run(prompt(2))
        if "Listed 2 times" not in warm:
            raise RuntimeError(f"warm-up answer {warm!r} (expected 'Listed 2 times. Done.')")
        t0, c0 = time.perf_counter(), time.process_time()
        answer = await run(prompt(steps))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        await close()
    if f"Listed {steps} times" not in answer:
        raise RuntimeError(f"the session answered {answer!r}: not every ls call reached the stub")
    calls = steps + 1
    return {"side": side, "wall_s": wall, "model_calls": calls, "ms_per_step": wall / calls * 1000,
            "cpu_ms_per_step": cpu / calls * 1000, "versions": versions(side)}


async def first_mode(side: str, url: str, ws: Path) -> dict[str, Any]:
    run, close = await SIDES[side](url, ws)
    try:
        answer = await run("hi")
    finally:
        await close()
    return {"side": side, "answer": answer}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["session", "first"])
    parser.add_argument("side", choices=sorted(SIDES))
    parser.add_argument("--url", required=True, help="the stub's base URL (…/v1)")
    parser.add_argument("--ws", required=True, help="the workspace folder the ls tool lists")
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args(argv)
    ws = Path(args.ws).resolve()
    if args.mode == "session":
        out = asyncio.run(session_mode(args.side, args.url, ws, args.steps))
    else:
        out = asyncio.run(first_mode(args.side, args.url, ws))
    print("RESULT " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
