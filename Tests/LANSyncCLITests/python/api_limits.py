"""The local API's bounds, checked over real sockets against a running agent by LocalAPICLITests.

    python3 api_limits.py DATA_DIR LIMITS_JSON    prints one JSON object: check name -> {"ok", "detail"}

LIMITS_JSON: {"connections": N, "feeds": N, "idle_seconds": N}, as the agent enforces them.
"""

import json
import os
import socket
import sys
import time

data_dir = sys.argv[1]
limits = json.loads(sys.argv[2])
address = open(os.path.join(data_dir, "api-address")).read().strip()
token = open(os.path.join(data_dir, "api-token")).read().strip()
host, _, port = address.rpartition(":")
port = int(port)
results = {}


def check(name, ok, detail=""):
    results[name] = {"ok": bool(ok), "detail": str(detail)[:500]}


def connect():
    s = socket.create_connection((host, port), timeout=30)
    return s


def head_of(s):
    """Reads a response head; returns (status, headers) or (None, {}) when the server closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            return None, {}
        data += chunk
    lines = data.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)}
    return status, headers


def request(path, keep_alive=True):
    return (f"GET {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n"
            + ("" if keep_alive else "Connection: close\r\n") + "\r\n").encode()


# 1. Half-sent request heads are closed by the server, within a bound of its idle time.
half = [connect() for _ in range(20)]
start = time.monotonic()
for s in half:
    s.sendall(f"GET /v1/status HTTP/1.1\r\nHost: {address}\r\n".encode())
closed = 0
deadline = start + limits["idle_seconds"] * 6
for s in half:
    s.settimeout(max(0.1, deadline - time.monotonic()))
    try:
        if s.recv(4096) == b"":
            closed += 1
    except ConnectionResetError:
        closed += 1
    except socket.timeout:
        pass
    s.close()
check("half_requests_closed", closed == len(half), f"{closed} of {len(half)} closed after {time.monotonic() - start:.1f} s")

# 2. Change feeds past the bound: 503 with Retry-After; the first `feeds` are served.
feeds = []
answers = []
for _ in range(limits["feeds"] + 6):
    s = connect()
    s.sendall(request("/v1/changes"))
    status, headers = head_of(s)
    answers.append((status, headers.get("retry-after")))
    feeds.append(s)
served = sum(1 for status, _ in answers if status == 200)
refused = [answer for answer in answers if answer[0] == 503]
check("feeds_bounded", served == limits["feeds"] and len(refused) == 6 and all(r == "1" for _, r in refused),
      f"{served} served, refused: {refused[:3]}")
for s in feeds:
    s.close()
# Feeds that ended give their places back.
deadline = time.monotonic() + 60
reopened = None
while time.monotonic() < deadline:
    s = connect()
    s.sendall(request("/v1/changes"))
    reopened, _ = head_of(s)
    s.close()
    if reopened == 200:
        break
    time.sleep(0.5)
check("feeds_freed", reopened == 200, reopened)

# 3. Connections past the bound: each answered 503 with Retry-After, and closed. All are opened
# and sent their request before any answer is read: opened one by one with a round trip each,
# they took over the idle time on a busy machine, the first were closed as idle, and none was
# refused.
start = time.monotonic()
held = [connect() for _ in range(limits["connections"] + 20)]
for s in held:
    s.sendall(request("/v1/status"))
answers = [head_of(s) for s in held]
ok = sum(1 for status, _ in answers if status == 200)
refused = [headers for status, headers in answers if status == 503]
check("connections_bounded", ok <= limits["connections"] and len(refused) >= 20 and all(h.get("retry-after") == "1" for h in refused),
      f"{ok} served, {len(refused)} refused, in {time.monotonic() - start:.1f} s")
for s in held:
    s.close()

print(json.dumps(results))
