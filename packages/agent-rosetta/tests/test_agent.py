"""End to end through a fake OpenAI-compatible server on loopback, and the MCP server."""

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from icml26_agent_rosetta import HPBackend, RosettaEnv, hp_task, run_episode

CHOOSE = '<action tag="choose"><name>backbone_change</name></action>'
RUN = (
    "Let me fold it.\n```json\n"
    '{"action": "backbone_change", "arguments": {"mover": "backrub", '
    '"selector": {"type": "index", "resnums": "1-6"}, "nmoves": 50,},}\n```'
)


class FakeServer:
    """POST /v1/chat/completions -> the next scripted reply (content or a tool call)."""

    def __init__(self, replies):
        self.replies, self.requests = list(replies), []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, body))
                reply = outer.replies.pop(0)
                msg = {"role": "assistant", "content": reply}
                if isinstance(reply, dict):  # one tool call
                    reply = [reply]
                if isinstance(reply, list):  # tool calls (several: parallel calls)
                    msg = {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"call_{len(outer.requests)}_{j}",
                                "type": "function",
                                "function": {
                                    "name": r["name"],
                                    "arguments": json.dumps(r["arguments"]),
                                },
                            }
                            for j, r in enumerate(reply)
                        ],
                    }
                out = json.dumps(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.timeout(60)
def test_episode_through_an_openai_compatible_server():
    pytest.importorskip("openai")
    from icml26_agent_rosetta.openai_policy import OpenAIChatPolicy

    server = FakeServer([CHOOSE, "I am not sure what to do.", RUN, CHOOSE, RUN])
    try:
        env = RosettaEnv(hp_task(6, 3, nstruct=4, max_steps=2), HPBackend())
        res = run_episode(
            env, OpenAIChatPolicy("local-model", base_url=server.url, max_retries=0, timeout=10)
        )
    finally:
        server.close()
    assert res["steps"] == 2 and res["valid_steps"] == 2 and res["turns"] == 5
    paths = {p for p, _ in server.requests}
    assert paths == {"/v1/chat/completions"}
    # each request carries the whole history; the third one carries the parse error fed back
    third = server.requests[2][1]["messages"]
    assert third[0]["role"] == "system" and third[-1]["role"] == "user"
    assert third[-1]["content"].startswith("Error: no action found")
    assert server.requests[1][1]["messages"][-1]["content"].startswith("# backbone_change")


@pytest.mark.timeout(60)
def test_tool_calls_through_an_openai_compatible_server():
    pytest.importorskip("openai")
    from icml26_agent_rosetta.openai_policy import OpenAIChatPolicy

    args = {"mover": "small", "selector": {"type": "layer", "surface": True}, "nmoves": 20}
    server = FakeServer(
        [
            {"name": "choose_action", "arguments": {"name": "backbone_change"}},
            {"name": "backbone_change", "arguments": args},
        ]
    )
    try:
        env = RosettaEnv(hp_task(6, 3, nstruct=2, max_steps=1), HPBackend())
        res = run_episode(
            env,
            OpenAIChatPolicy("m", base_url=server.url, use_tools=True, max_retries=0, timeout=10),
        )
    finally:
        server.close()
    assert res["valid_steps"] == 1
    # the assistant turn goes back as tool_calls with its id, the observation as role "tool"
    second = server.requests[1][1]
    assistant, tool = second["messages"][-2:]
    assert assistant["role"] == "assistant" and assistant["tool_calls"][0]["id"] == "call_1_0"
    assert assistant["tool_calls"][0]["function"]["name"] == "choose_action"
    assert tool == {
        "role": "tool",
        "tool_call_id": "call_1_0",
        "content": res["messages"][3]["content"],
    }
    assert tool["content"].startswith("# backbone_change")
    assert not any(m["role"] == "user" for m in second["messages"][2:])
    assert second["parallel_tool_calls"] is False
    sent = server.requests[0][1]["tools"]
    assert [t["function"]["name"] for t in sent] == [
        "choose_action",
        "rotamer_change",
        "backbone_change",
        "go_back_to_step",
    ]


@pytest.mark.timeout(60)
def test_parallel_tool_calls_are_refused_and_every_call_answered():
    pytest.importorskip("openai")
    from icml26_agent_rosetta.openai_policy import OpenAIChatPolicy

    both = [
        {"name": "choose_action", "arguments": {"name": "backbone_change"}},
        {"name": "choose_action", "arguments": {"name": "rotamer_change"}},
    ]
    server = FakeServer([both, both])
    try:
        env = RosettaEnv(hp_task(6, 3, nstruct=2, max_steps=1), HPBackend(), max_retries=1)
        res = run_episode(
            env,
            OpenAIChatPolicy("m", base_url=server.url, use_tools=True, max_retries=0, timeout=10),
        )
    finally:
        server.close()
    # neither call ran; each got its own tool answer; two refusals spent the step
    assert res["turns"] == 2 and res["steps"] == 1 and res["valid_steps"] == 0
    assert env.phase == "choose" and env.pending is None
    tools = [m for m in res["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools[:2]] == ["call_1_0", "call_1_1"]
    assert all("2 parallel tool calls" in m["content"] for m in tools)


def test_mcp_server_drives_the_environment():
    pytest.importorskip("mcp")
    from icml26_agent_rosetta.mcp_server import build_server

    env = RosettaEnv(hp_task(6, 3, nstruct=2, max_steps=3), HPBackend())
    server = build_server(env)

    async def go():
        tools = {t.name for t in await server.list_tools()}
        await server.call_tool("choose_action", {"name": "rotamer_change"})
        await server.call_tool(
            "run_action",
            {
                "name": "rotamer_change",
                "arguments": {
                    "design_selector": {"type": "index", "resnums": "1-6"},
                    "restrict": ["L", "S"],
                },
            },
        )
        status = await server.call_tool("status", {})
        return tools, status

    tools, status = asyncio.run(go())
    assert tools == {"reset", "choose_action", "run_action", "status"}
    assert env.n_valid == 1 and env.steps == 1
    assert json.loads(status.content[0].text) == {
        "step": 1,
        "valid": 1,
        "phase": "choose",
        "best": None,
    }
