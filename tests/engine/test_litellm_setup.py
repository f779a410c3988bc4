"""litellm set-up (DESIGN §2): forced env, no .env keys, no import at module load, no banners."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_python(code: str, cwd: Path, **env_changes: str | None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    for key, value in env_changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out


def test_workspace_dotenv_never_supplies_a_key(tmp_path):
    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-from-dotenv\n")
    code = """
import json, os
from workbench.engine.llm_setup import import_litellm
litellm = import_litellm()
print(json.dumps({"key": os.environ.get("OPENAI_API_KEY"), "mode": os.environ.get("LITELLM_MODE"),
                  "local": os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"),
                  "quiet": litellm.suppress_debug_info, "drop": litellm.drop_params}))
"""
    # Even an inherited LITELLM_MODE=DEV must not turn .env loading back on.
    out = run_python(code, tmp_path, OPENAI_API_KEY=None, LITELLM_MODE="DEV", LITELLM_LOCAL_MODEL_COST_MAP="False")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"key": None, "mode": "PRODUCTION", "local": "True", "quiet": True, "drop": True}


def test_importing_model_modules_does_not_import_litellm(tmp_path):
    code = """
import sys
import workbench.engine.models.litellm_model, workbench.engine.models.threaded
import workbench.engine.models.scripted, workbench.engine.llm_setup, workbench.engine.tokens
m = workbench.engine.models.litellm_model.LiteLLMModel("openai/gpt-4o-mini")
print("litellm" in sys.modules, any(k.startswith("litellm") for k in sys.modules))
"""
    out = run_python(code, tmp_path)
    assert out.stdout.strip() == "False False"


def test_no_provider_list_banner(tmp_path, stub_server):
    stub_server.script({"text": "hi from the stub", "usage": [3, 4]})
    code = f"""
import asyncio
from workbench.engine.messages import Message, ModelRequest
from workbench.engine.models.base import complete
from workbench.engine.models.litellm_model import LiteLLMModel
from workbench.errors import ModelError
req = ModelRequest(system="s", messages=(Message.user("hi"),))
async def main():
    ok = await complete(LiteLLMModel("openai/test-model", {stub_server.url!r}, "sk-test"), req)
    print("ANSWER", ok.message.content)
    try:
        await complete(LiteLLMModel("nosuchprovider-model", api_key="sk-test"), req)
    except ModelError as e:
        print("ERROR", e)
asyncio.run(main())
"""
    out = run_python(code, tmp_path)
    assert "ANSWER hi from the stub" in out.stdout
    assert "ERROR unknown model 'nosuchprovider-model'" in out.stdout
    combined = out.stdout + out.stderr
    assert "Provider List" not in combined and "Give Feedback" not in combined
    assert len(stub_server.requests) == 1


def test_warm_up_loads_the_streaming_path_without_touching_the_network(tmp_path, stub_server):
    # How fast the first call is after warm-up is measured in benchmarks/startup.py, not asserted here.
    stub_server.script({"text": "after warm-up", "usage": [1, 1]})
    code = f"""
import asyncio, sys
from workbench.engine import llm_setup
from workbench.engine.messages import Message, ModelRequest
from workbench.engine.models.base import complete
from workbench.engine.models.litellm_model import LiteLLMModel
llm_setup.warm_up()
print("streaming", any("streaming_handler" in m for m in sys.modules))
r = asyncio.run(complete(LiteLLMModel("openai/test-model", {stub_server.url!r}, "sk-test"),
                         ModelRequest(system="s", messages=(Message.user("hi"),))))
print("answer", r.message.content.replace(" ", "_"))
"""
    out = run_python(code, tmp_path)
    values = dict(line.split() for line in out.stdout.strip().splitlines())
    assert values["streaming"] == "True", out.stdout
    assert values["answer"] == "after_warm-up"
    assert len(stub_server.requests) == 1  # warm-up itself sent nothing


def test_the_warm_up_and_a_call_whose_provider_reports_usage_load_no_tokenizer(tmp_path, stub_server):
    # Issue 9: the warm-up's mock answer once had no usage, so litellm counted its tokens and loaded two
    # tokenizers (0.43 s) that the shared host's first request then waited for; a provider that reports
    # usage never needs them. Counting still works when asked (litellm loads one then).
    stub_server.script({"text": "counted by the provider", "usage": [5, 3]})
    code = f"""
import asyncio, sys
from workbench.engine import llm_setup
from workbench.engine.messages import Message, ModelRequest
from workbench.engine.models.base import complete
from workbench.engine.models.litellm_model import LiteLLMModel
litellm = llm_setup.import_litellm()
llm_setup.warm_up()
import tiktoken.registry
print("after-warm-up", sorted(tiktoken.registry.ENCODINGS) or "none")
r = asyncio.run(complete(LiteLLMModel("openai/test-model", {stub_server.url!r}, "sk-test"),
                         ModelRequest(system="s", messages=(Message.user("hi"),))))
print("usage", r.usage.input_tokens, r.usage.output_tokens)
print("after-call", sorted(tiktoken.registry.ENCODINGS) or "none")
print("counted", litellm.token_counter(model="gpt-4o-mini", text="hello world") > 0)
"""
    out = run_python(code, tmp_path)
    values = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())
    assert values["after-warm-up"] == "none", out.stdout
    assert values["usage"] == "5 3"
    assert values["after-call"] == "none"
    assert values["counted"] == "True"


def test_a_warm_up_whose_mock_chunk_cannot_be_made_falls_back_and_still_ends(tmp_path):
    # Another litellm may shape its chunk types otherwise: building the chunk or streaming it may fail.
    # The warm-up then streams a text answer, never raises, and counts as done.
    code = """
from workbench.engine import llm_setup
def broken():
    raise TypeError("another litellm's chunk")
llm_setup._mock_answer = broken
print("seconds", llm_setup.warm_up() >= 0)
print("warmed", llm_setup._warmed)
"""
    out = run_python(code, tmp_path)
    assert "seconds True" in out.stdout and "warmed True" in out.stdout, out.stdout + out.stderr


def test_litellm_is_imported_with_the_collector_paused_and_its_heap_frozen(tmp_path):
    # Issue 9: collections during the import walked its ever-growing heap for nothing (2.5 -> 2.0 s).
    # The collector must be back as it was afterwards, and the import's objects frozen.
    code = """
import gc, importlib.abc, sys
seen = []
class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.startswith("litellm."):
            seen.append(gc.isenabled())
        return None
sys.meta_path.insert(0, Watch())
from workbench.engine.llm_setup import import_litellm
import_litellm()
print("during", len(seen) > 100, any(seen))
print("after", gc.isenabled(), gc.get_freeze_count() > 100_000)
"""
    out = run_python(code, tmp_path)
    assert "during True False" in out.stdout, out.stdout  # every submodule imported with the collector off
    assert "after True True" in out.stdout, out.stdout
    # A caller that keeps the collector off keeps it off.
    out = run_python("import gc; gc.disable()\n" + code, tmp_path)
    assert "after False True" in out.stdout, out.stdout
    # litellm imported before by a caller of its own: collected and frozen as before, the collector on.
    out = run_python("import litellm\n" + code, tmp_path)
    assert "during False False" in out.stdout and "after True True" in out.stdout, out.stdout


def test_success_logging_is_skipped_only_while_no_callback_listens(tmp_path):
    # litellm's end-of-stream dispatch recounts the whole history on the engine's loop (~3 ms a call);
    # with no callback it is skipped, with one it runs as litellm intends.
    code = """
import asyncio
from workbench.engine.llm_setup import import_litellm
litellm = import_litellm()
from litellm.litellm_core_utils.litellm_logging import Logging
calls = []
class Fake:
    pass
orig = Logging.dispatch_success_handlers
print("idle", asyncio.run(orig(Fake())) is None)
litellm.success_callback.append(lambda *a, **k: None)
try:
    asyncio.run(orig(Fake()))
    print("listening skipped")
except AttributeError:
    print("listening ran")  # litellm's own handler touched the (fake) logging object
"""
    out = run_python(code, tmp_path)
    assert "idle True" in out.stdout
    assert "listening ran" in out.stdout, out.stdout + out.stderr
