"""Checks of the local API over real HTTP, run by LocalAPICLITests against a running agent.

    python3 api_checks.py DATA_DIR     prints one JSON object: check name -> {"ok", "detail"}

The agent's data directory must have an app table `notes (id TEXT PRIMARY KEY, body TEXT)`.
Standard library only, with the example client (Examples/python/lansync_api.py).
"""

import http.client
import json
import os
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "Examples", "python"))
from lansync_api import LANSync, LANSyncAPIError  # noqa: E402

data_dir = sys.argv[1]
address = open(os.path.join(data_dir, "api-address")).read().strip()
token = open(os.path.join(data_dir, "api-token")).read().strip()
host, _, port = address.rpartition(":")
results = {}


def check(name, ok, detail=""):
    results[name] = {"ok": bool(ok), "detail": str(detail)[:500]}


def raw(method, path, headers=None, body=None):
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request(method, path, body=body, headers=headers or {})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    try:
        answer = json.loads(data)
    except ValueError:
        answer = None
    return response.status, dict(response.getheaders()), answer


def error_code(answer):
    return (answer or {}).get("error", {}).get("code")


auth = {"Authorization": "Bearer " + token}

status, headers, answer = raw("GET", "/v1/status")
check("no_token", status == 401 and error_code(answer) == "token_required" and "WWW-Authenticate" in headers, (status, answer))
status, _, answer = raw("GET", "/v1/status", {"X-API-Key": "0" * 64})
check("wrong_token", status == 401 and error_code(answer) == "token_wrong", (status, answer))
status, _, answer = raw("GET", "/v1/status", {"X-API-Key": token})
check("x_api_key", status == 200 and answer["entries"] >= 0, (status, answer))
status, _, answer = raw("GET", "/v1/status", {**auth, "Host": "evil.example"})
check("rebinding_host", status == 421 and error_code(answer) == "host_not_allowed", (status, answer))
status, _, answer = raw("GET", "/v1/status", {**auth, "Origin": "http://evil.example"})
check("foreign_origin", status == 403 and error_code(answer) == "origin_not_allowed", (status, answer))
status, headers, _ = raw("OPTIONS", "/v1/streams/taps/entries", {"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
check("no_cors", status >= 400 and not any(k.lower().startswith("access-control-") for k in headers), (status, headers))
status, _, answer = raw("GET", "/v1/nothing-here", auth)
check("unknown_route", status == 404, (status, answer))

node = LANSync(data_dir)
before = node.status()["entries"]
entry = node.append("taps", {"b": 1, "a": [2, {"z": None}]})
check("append_keeps_payload", list(entry["payload"].keys()) == ["b", "a"] and entry["stream"] == "taps", entry)
first = node.append("taps", {"tap": "once"}, entry_id="retry-1")
second = node.append("taps", {"tap": "once"}, entry_id="retry-1")
check("append_retry_is_idempotent", first["id"] == second["id"] == "retry-1" and node.status()["entries"] == before + 2,
      (first, second, node.status()["entries"]))
try:
    node.request("POST", "/v1/streams/taps/entries", "{not json")
    check("bad_json_refused", False, "accepted")
except LANSyncAPIError as error:
    check("bad_json_refused", error.status == 400 and error.code == "invalid_input" and "JSON" in error.message
          and node.status()["entries"] == before + 2, error)
try:
    node.request("POST", "/v1/streams/taps/entries/batch", '{"ok":1}\n{broken\n', "application/x-ndjson")
    check("bad_batch_writes_nothing", False, "accepted")
except LANSyncAPIError as error:
    check("bad_batch_writes_nothing", error.status == 400 and node.status()["entries"] == before + 2, error)
batch = node.append_batch("taps", [{"n": i} for i in range(10)])
check("batch", [e["payload"]["n"] for e in batch] == list(range(10)) and node.status()["entries"] == before + 12, batch[:2])
listed = node.entries("taps", limit=3)
check("entries_limit", len(listed) == 3, listed)
try:
    node.entries("taps", limit=0)
    check("entries_bad_limit", False, "accepted")
except LANSyncAPIError as error:
    check("entries_bad_limit", error.status == 400 and "limit" in error.message, error)
try:
    node.request("POST", "/v1/streams/taps/entries", "x" * (9 << 20))
    check("too_large", False, "accepted")
except LANSyncAPIError as error:
    check("too_large", error.status == 413 and error.code == "too_large", error)

node.set("ui.theme", {"contrast": "high"})
check("preference_roundtrip", node.preference("ui.theme") == {"contrast": "high"}, node.preference("ui.theme"))
node.unset("ui.theme")
check("preference_unset", node.preference("ui.theme") is None)

changed = node.execute("INSERT INTO notes (id, body) VALUES (?, ?), (?, ?)", "n1", "first", "n2", "second")
rows = node.query("SELECT id, body FROM notes ORDER BY id")
check("exec_and_query", changed == 2 and rows == [{"id": "n1", "body": "first"}, {"id": "n2", "body": "second"}], (changed, rows))
try:
    node.query("DELETE FROM notes")
    check("query_is_read_only", False, "accepted")
except LANSyncAPIError as error:
    check("query_is_read_only", error.status == 400 and len(node.query("SELECT id FROM notes")) == 2, error)
try:
    node.execute("DROP TABLE notes")
    check("exec_refuses_schema", False, "accepted")
except LANSyncAPIError as error:
    check("exec_refuses_schema", error.status == 400 and "schema apply" in error.message, error)
try:
    node.execute("INSERT INTO notes (id, body) VALUES ('n3', 'x'); INSERT INTO missing VALUES (1)")
    check("exec_is_all_or_nothing", False, "accepted")
except LANSyncAPIError as error:
    check("exec_is_all_or_nothing", error.status == 422 and len(node.query("SELECT id FROM notes")) == 2, error)

seeded = node.execute("INSERT OR IGNORE INTO notes (id, body) VALUES (?, ?)", "seed-1", "default", seed=True)
node.execute("UPDATE notes SET body = ? WHERE id = ?", "edited", "seed-1")
check("exec_seed", seeded == 1 and node.query("SELECT body FROM notes WHERE id = 'seed-1'") == [{"body": "edited"}], seeded)
node.execute("DELETE FROM notes WHERE id = 'seed-1'")

orphans = node.request("GET", "/v1/orphans")
check("orphans_listed", orphans == {"orphans": []}, orphans)

node.append_batch("reports", [{"symbol_id": i % 3, "session_id": "s1" if i < 4 else "s2"} for i in range(6)])
usage = node.request("GET", "/v1/streams/reports/reports/usage?by=symbol_id&days=2")
check("report_usage", usage["by"] == "symbol_id" and sorted((c["group"], c["count"]) for c in usage["counts"]) == [("0", 2), ("1", 2), ("2", 2)], usage)
sessions = node.request("GET", "/v1/streams/reports/reports/sessions?session_field=session_id")["sessions"]
check("report_sessions", [(x["session"], x["entries"], x["distinct_symbols"]) for x in sessions] == [("s1", 4, 3), ("s2", 2, 2)], sessions)
flags = node.request("GET", "/v1/streams/reports/reports/regression?key=symbol_id&min_uses=1")["flags"]
check("report_regression_none_recent", flags == [], flags)
try:
    node.request("GET", "/v1/streams/reports/reports/regression")
    check("report_regression_needs_key", False, "accepted")
except LANSyncAPIError as error:
    check("report_regression_needs_key", error.status == 400 and "key" in error.message, error)


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=10)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


connection = UnixConnection(os.path.join(data_dir, "api.sock"))
connection.request("GET", "/v1/status", headers=auth)
response = connection.getresponse()
answer = json.loads(response.read())
check("unix_socket", response.status == 200 and answer["entries"] == before + 18, answer)
mode = os.stat(os.path.join(data_dir, "api.sock")).st_mode & 0o777
check("unix_socket_owner_only", mode == 0o600, oct(mode))

# Keys with "/" are the documented form: every preference route takes them as is and percent-encoded.
status, _, answer = raw("PUT", "/v1/preferences/caregiver/active", {**auth, "Content-Type": "application/json"}, b'"mum"')
check("slash_key_put", status == 200 and answer["key"] == "caregiver/active", (status, answer))
status, _, answer = raw("GET", "/v1/preferences/caregiver/active", auth)
check("slash_key_get", status == 200 and answer["value"] == "mum", (status, answer))
status, _, answer = raw("GET", "/v1/preferences/caregiver%2Factive", auth)
check("slash_key_get_encoded", status == 200 and answer["value"] == "mum", (status, answer))
status, _, answer = raw("DELETE", "/v1/preferences/caregiver/active", auth)
check("slash_key_delete", status == 200 and node.preference("caregiver/active") is None, (status, answer))
# Keys are case-insensitive: the learning game's `game.<id>.level.L20` is stored and read in lowercase.
status, _, answer = raw("PUT", "/v1/preferences/game.6F96/level.L20", {**auth, "Content-Type": "application/json"}, b'{"stars":3}')
check("capital_key_put", status == 200 and answer["key"] == "game.6f96/level.l20", (status, answer))
status, _, answer = raw("GET", "/v1/preferences/game.6F96/level.L20", auth)
check("capital_key_get", status == 200 and answer["value"] == {"stars": 3}, (status, answer))
check("capital_key_lowercase", node.preference("game.6f96/level.l20") == {"stars": 3}, node.preference("game.6f96/level.l20"))
# An unknown route answers the API's JSON error, never an empty body.
status, _, answer = raw("GET", "/v1/no-such-route", auth)
check("unknown_route_json", status == 404 and error_code(answer) == "no_route", (status, answer))
# A body that is not UTF-8 is refused whole, not rewritten with U+FFFD.
before = node.status()["entries"]
status, _, answer = raw("POST", "/v1/streams/taps/entries", {**auth, "Content-Type": "application/json"}, b'{"a":"\xff\xfe\xc0"}')
check("invalid_utf8_refused", status == 400 and "UTF-8" in (answer or {}).get("error", {}).get("message", "")
      and node.status()["entries"] == before, (status, answer))

print(json.dumps(results))
