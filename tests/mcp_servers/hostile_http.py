"""A raw streamable-HTTP MCP server (no SDK: it sends what the SDK would never send) for the tests of hostile
answers over HTTP (X3, F3). Its one tool ``echo`` answers per the mode, the first argument; a second is
a marker the tests find the process by; a third the port on 127.0.0.1; a fourth a number some modes read.

    python hostile_http.py endless MARK PORT       echo answers application/json with a body that never
                                                   ends (chunked, 256 KB every 10 ms)
    python hostile_http.py declared MARK PORT N    echo's answer says Content-Length N, sends a few bytes
    python hostile_http.py gzipbomb MARK PORT N    echo answers gzip-compressed JSON that decompresses to
                                                   N bytes (~1,000 times smaller on the wire)
    python hostile_http.py ssebomb MARK PORT N     echo answers an event stream, gzip-compressed, whose one
                                                   event decompresses to N bytes
    python hostile_http.py brotli MARK PORT        echo answers with Content-Encoding: br
    python hostile_http.py big MARK PORT N         echo answers a valid result of N bytes (plain JSON)

The ``plain`` argument to echo always answers plainly (so a test can see the server still works).
"""

import gzip
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE, PORT = sys.argv[1], int(sys.argv[3])
NUMBER = int(sys.argv[4]) if len(sys.argv) > 4 else 0


def result(rid: object, value: dict) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": value}).encode()


def text_result(rid: object, text: str) -> bytes:
    return result(rid, {"content": [{"type": "text", "text": text}], "isError": False})


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, body: bytes, headers: dict[str, str] | None = None, status: int = 200) -> None:
        self.send_response(status)
        if "Content-Type" not in (headers or {}):
            self.send_header("Content-Type", "application/json")
        self.send_header("Mcp-Session-Id", "hostile-session")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def do_GET(self) -> None:  # no server-to-client stream
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_DELETE(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        method, rid = message.get("method"), message.get("id")
        if rid is None:  # a notification
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if method == "initialize":
            self._send(result(rid, {"protocolVersion": message["params"]["protocolVersion"],
                                    "capabilities": {"tools": {}}, "serverInfo": {"name": "hostile-http", "version": "1"}}))
        elif method == "tools/list":
            schema = {"type": "object", "properties": {"text": {"type": "string"}}}
            self._send(result(rid, {"tools": [{"name": "echo", "description": "Echo.", "inputSchema": schema,
                                               "annotations": {"readOnlyHint": True}}]}))
        elif method == "tools/call":
            self._call(rid, message["params"].get("arguments", {}).get("text", ""))
        else:
            self._send(json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": method}}).encode())

    def _call(self, rid: object, text: str) -> None:
        if text == "plain" or MODE not in ("endless", "declared", "gzipbomb", "ssebomb", "brotli", "big"):
            self._send(text_result(rid, "plain answer"))
        elif MODE == "endless":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            head = b'{"jsonrpc": "2.0", "id": ' + json.dumps(rid).encode() + b', "result": {"content": [{"type": "text", "text": "'
            chunk = b"x" * (256 * 1024)
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(head), head))
                while True:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                    time.sleep(0.01)
            except OSError:
                return  # the client hung up: what the test wants
        elif MODE == "declared":
            self._send(b'{"jsonrpc": "2.0"', {"Content-Length": str(NUMBER)})
            self.close_connection = True
        elif MODE == "gzipbomb":
            body = text_result(rid, "x" * NUMBER)
            self._send(gzip.compress(body, 9), {"Content-Encoding": "gzip"})
        elif MODE == "ssebomb":
            event = b"event: message\ndata: " + text_result(rid, "x" * NUMBER) + b"\n\n"
            self._send(gzip.compress(event, 9), {"Content-Encoding": "gzip", "Content-Type": "text/event-stream"})
        elif MODE == "brotli":
            self._send(b"\x0b\x02\x80hello\x03", {"Content-Encoding": "br"})
        elif MODE == "big":
            self._send(text_result(rid, "y" * NUMBER))


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
