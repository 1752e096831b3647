#!/usr/bin/env python3
"""A fake model endpoint on 127.0.0.1 for the real clients' headless modes.

Speaks enough of the Anthropic messages API (POST /v1/messages, streamed or not) for
`claude -p`, of the OpenAI Responses API (POST .../responses, streamed as server-sent
events) for `codex exec`, and of the Gemini API (POST .../models/MODEL:generateContent and
:streamGenerateContent?alt=sse) for `gemini -p` with GOOGLE_GEMINI_BASE_URL: it asks for the tool named by MCPW_FAKE_TOOL (e.g. mcp__probe__probe) with
input MCPW_FAKE_INPUT (JSON) as soon as the client offers it, and once the conversation
holds that tool's result it answers with text quoting it. Claude Code connects MCP servers
in the background and may defer their tools: while the tool is not offered, the model
first asks for WaitForMcpServers, then for ToolSearch "select:TOOL". Every other request
gets a short text answer. Codex names an MCP tool SERVER__TOOL or mcp__SERVER__TOOL,
depending on its version: the first offered tool whose name ends with the part of
MCPW_FAKE_TOOL after "mcp__" counts as it. Prints its port on the first line of stdout; logs each
request to stderr.
usage: fake_model.py   (env: MCPW_FAKE_TOOL, MCPW_FAKE_INPUT or MCPW_FAKE_INPUT_KEY)
"""
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOOL = os.environ.get("MCPW_FAKE_TOOL", "mcp__probe__probe")
TOOL_INPUT = json.loads(os.environ.get("MCPW_FAKE_INPUT", '{"word": "hello"}'))


def blocks(messages, kind):
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == kind:
                    yield block


def result_of(messages, name):
    """The text of the result of the tool called `name`, or None."""
    ids = {b.get("id") for b in blocks(messages, "tool_use") if b.get("name") == name}
    for b in blocks(messages, "tool_result"):
        if b.get("tool_use_id") in ids:
            inner = b.get("content")
            if isinstance(inner, list):
                return " ".join(x.get("text", "") for x in inner if isinstance(x, dict))
            return str(inner)
    return None


def called(messages, name):
    return any(b.get("name") == name for b in blocks(messages, "tool_use"))


def first_prompt(messages):
    """The text of the conversation's first user message."""
    for m in messages:
        if m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return " ".join(b.get("text", "") for b in content
                            if isinstance(b, dict) and b.get("type") == "text")
    return ""


def tool_input(messages):
    """TOOL_INPUT; with MCPW_FAKE_INPUT_KEY=NAME, {NAME: the first prompt's last word}, so that
    several clients sharing one endpoint each get their own answer."""
    key = os.environ.get("MCPW_FAKE_INPUT_KEY")
    if not key:
        return TOOL_INPUT
    words = first_prompt(messages).split()
    return {key: words[-1] if words else ""}


def next_call(body):
    """(tool name, input) to ask for next, or None to answer with text."""
    messages = body.get("messages", [])
    offered = {t.get("name") for t in body.get("tools", []) or []}
    if called(messages, TOOL):
        return None
    if TOOL in offered:
        return TOOL, tool_input(messages)
    if "WaitForMcpServers" in offered and not called(messages, "WaitForMcpServers"):
        return "WaitForMcpServers", {}
    if "ToolSearch" in offered and not called(messages, "ToolSearch"):
        return "ToolSearch", {"query": "select:" + TOOL}
    return None


def openai_tools(tools, namespace=""):
    """(namespace, name) of each function offered; Codex offers an MCP server's tools as
    {"type": "namespace", "name": "mcp__SERVER", "tools": [...]}."""
    for t in tools:
        if t.get("type") == "namespace":
            yield from openai_tools(t.get("tools", []) or [], t.get("name", ""))
        elif t.get("name"):
            yield namespace, t["name"]


def openai_output_text(output):
    """The text of a function_call_output's `output`: a string (perhaps JSON holding
    `content`), or a list of content items."""
    if isinstance(output, str):
        try:
            output = json.loads(output)
        except ValueError:
            return output
    if isinstance(output, dict):
        output = output.get("content", output)
    if isinstance(output, list):
        return " ".join(x.get("text", "") for x in output if isinstance(x, dict))
    return str(output)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("fake_model: " + (fmt % args) + "\n")

    def do_GET(self):
        self.reply_json(200, {})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        path = self.path.split("?")[0]
        if path.endswith("/responses"):
            return self.openai_responses(body)
        if path.endswith(":generateContent") or path.endswith(":streamGenerateContent"):
            return self.gemini_generate(body, path.endswith(":streamGenerateContent"))
        if not path.endswith("/v1/messages"):
            if path.endswith("/count_tokens"):
                return self.reply_json(200, {"input_tokens": 10})
            return self.reply_json(200, {})
        names = [t.get("name") for t in body.get("tools", []) or []]
        sys.stderr.write("fake_model: tools offered: %s\n" % ",".join(map(str, names)))
        call = next_call(body)
        if call:
            name, args = call
            n = sum(1 for _ in blocks(body.get("messages", []), "tool_use")) + 1
            block = {"type": "tool_use", "id": "toolu_fake_%d" % n, "name": name, "input": args}
            stop = "tool_use"
            sys.stderr.write("fake_model: asking for %s %s\n" % (name, json.dumps(args)))
        else:
            result = result_of(body.get("messages", []), TOOL)
            text = "The tool said: " + result if result is not None else "ok"
            block = {"type": "text", "text": text}
            stop = "end_turn"
        message = {"id": "msg_fake", "type": "message", "role": "assistant",
                   "model": body.get("model", "fake"), "content": [block],
                   "stop_reason": stop, "stop_sequence": None,
                   "usage": {"input_tokens": 10, "output_tokens": 5}}
        if body.get("stream"):
            return self.reply_stream(message, block, stop)
        return self.reply_json(200, message)

    # The OpenAI Responses API, as `codex exec` uses it: `input` is a list of items (messages,
    # function_call, function_call_output), `tools` the functions offered; the answer is a
    # stream of events, each output item in a response.output_item.done, then
    # response.completed (Codex treats a stream that ends without it as an error).
    def openai_responses(self, body):
        items = body.get("input", []) or []
        offered = list(openai_tools(body.get("tools", []) or []))
        sys.stderr.write("fake_model: responses, tools offered: %s\n" %
                         ",".join(ns + "/" + n if ns else n for ns, n in offered))
        want = TOOL.split("__")[-1]
        tool = next(((ns, n) for ns, n in offered
                     if (ns + "__" + n if ns else n) == TOOL or n.endswith(want)), None)
        calls = {i.get("call_id") for i in items
                 if isinstance(i, dict) and i.get("type") == "function_call"}
        result = None
        for i in items:
            if isinstance(i, dict) and i.get("type") == "function_call_output" and \
                    i.get("call_id") in calls:
                # Codex prefixes the tool's text with "Wall time: …\nOutput: ": one line.
                result = openai_output_text(i.get("output")).replace("\n", " ")
        if tool and not calls:
            item = {"type": "function_call", "id": "fc_fake_1", "call_id": "call_fake_1",
                    "name": tool[1], "arguments": json.dumps(TOOL_INPUT)}
            if tool[0]:
                item["namespace"] = tool[0]
            sys.stderr.write("fake_model: asking for %s %s\n" % (tool, item["arguments"]))
        else:
            text = "The tool said: " + result if result is not None else "ok"
            item = {"type": "message", "id": "msg_fake", "role": "assistant", "status":
                    "completed", "content": [{"type": "output_text", "text": text,
                                              "annotations": []}]}
        response = {"id": "resp_fake", "object": "response", "status": "completed",
                    "model": body.get("model", "fake"), "output": [item],
                    "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                              "output_tokens": 5,
                              "output_tokens_details": {"reasoning_tokens": 0},
                              "total_tokens": 15}}
        events = [("response.created", {"type": "response.created",
                                        "response": dict(response, status="in_progress",
                                                         output=[])}),
                  ("response.output_item.added", {"type": "response.output_item.added",
                                                  "output_index": 0, "item": item}),
                  ("response.output_item.done", {"type": "response.output_item.done",
                                                 "output_index": 0, "item": item}),
                  ("response.completed", {"type": "response.completed",
                                          "response": response})]
        self.reply_events(events)

    # The Gemini API, as `gemini -p` uses it: `contents` is the conversation (parts of text,
    # functionCall and functionResponse), `tools` holds the functionDeclarations offered. Gemini
    # CLI also asks the model itself, unstreamed, with a JSON schema (which model to route a
    # turn to, who speaks next): those get a JSON text that ends the turn.
    def gemini_generate(self, body, stream):
        contents = body.get("contents", []) or []
        parts = [p for c in contents if isinstance(c, dict)
                 for p in c.get("parts", []) or [] if isinstance(p, dict)]
        offered = [f.get("name", "") for t in body.get("tools", []) or [] if isinstance(t, dict)
                   for f in t.get("functionDeclarations", []) or [] if isinstance(f, dict)]
        sys.stderr.write("fake_model: gemini, tools offered: %s\n" % ",".join(offered))
        want = TOOL.split("__")[-1]
        tool = next((n for n in offered if n == TOOL or n.endswith(want)), None)
        called = any("functionCall" in p for p in parts)
        results = [p["functionResponse"] for p in parts if "functionResponse" in p]
        config = body.get("generationConfig", {}) or {}
        if config.get("responseMimeType") == "application/json":
            part = {"text": json.dumps({"reasoning": "fake", "model_choice": "flash",
                                        "complexity_reasoning": "fake", "complexity_score": 1,
                                        "next_speaker": "user"})}
        elif tool and not called:
            part = {"functionCall": {"name": tool, "args": TOOL_INPUT}}
            sys.stderr.write("fake_model: asking for %s %s\n" % (tool, json.dumps(TOOL_INPUT)))
        else:
            text = "ok"
            if results:
                # The tool's answer, as Gemini CLI hands it back: {"output": TEXT} or the MCP
                # content itself; one line either way.
                text = "The tool said: " + json.dumps(results[-1].get("response")).replace(
                    "\\n", " ")
            part = {"text": text}
        answer = {"candidates": [{"content": {"role": "model", "parts": [part]},
                                  "finishReason": "STOP", "index": 0}],
                  "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                                    "totalTokenCount": 15},
                  "modelVersion": "fake"}
        if not stream:
            return self.reply_json(200, answer)
        data = ("data: %s\n\n" % json.dumps(answer)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def reply_json(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def reply_stream(self, message, block, stop):
        events = []
        start = dict(message, content=[], stop_reason=None)
        events.append(("message_start", {"type": "message_start", "message": start}))
        if block["type"] == "tool_use":
            events.append(("content_block_start", {"type": "content_block_start", "index": 0,
                           "content_block": dict(block, input={})}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                           "delta": {"type": "input_json_delta",
                                     "partial_json": json.dumps(block["input"])}}))
        else:
            events.append(("content_block_start", {"type": "content_block_start", "index": 0,
                           "content_block": {"type": "text", "text": ""}}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                           "delta": {"type": "text_delta", "text": block["text"]}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        events.append(("message_delta", {"type": "message_delta",
                       "delta": {"stop_reason": stop, "stop_sequence": None},
                       "usage": {"output_tokens": 5}}))
        events.append(("message_stop", {"type": "message_stop"}))
        self.reply_events(events)

    def reply_events(self, events):
        """Server-sent events, (name, object) each."""
        data = "".join("event: %s\ndata: %s\n\n" % (n, json.dumps(e)) for n, e in events).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
