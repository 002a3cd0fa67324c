"""A client for LANSync's local HTTP API, in Python's standard library only.

    from lansync_api import LANSync
    node = LANSync()                      # finds the running agent through the data directory
    node.append("symbol_taps", {"symbol_id": 12, "label": "more"})
    for cursor, batch in node.changes():  # every change, then each new one; survives restarts
        ...

The agent (`lansync run`) writes its API address to `api-address` and its token to `api-token`
in the data directory ($LANSYNC_DATA_DIR, else $XDG_DATA_HOME/lansync, else
~/.local/share/lansync). The API is documented in docs/openapi.json.
"""

import http.client
import json
import os
import time
import urllib.parse


class LANSyncAPIError(Exception):
    """An error the API answered: `status` (HTTP), `code` and a `message` that says what to do."""

    def __init__(self, status, code, message):
        super().__init__(f"{code}: {message} (HTTP {status})")
        self.status, self.code, self.message = status, code, message


def default_data_dir():
    if os.environ.get("LANSYNC_DATA_DIR"):
        return os.environ["LANSYNC_DATA_DIR"]
    xdg = os.environ.get("XDG_DATA_HOME", "")
    if xdg.startswith("/"):
        return os.path.join(xdg, "lansync")
    return os.path.expanduser("~/.local/share/lansync")


class LANSync:
    """One keep-alive connection to the agent's API (not thread-safe: one per thread)."""

    def __init__(self, data_dir=None, timeout=10.0):
        self.data_dir = data_dir or default_data_dir()
        self.timeout = timeout
        self._connection = None

    # -- connection -----------------------------------------------------------------------

    def _read(self, name):
        with open(os.path.join(self.data_dir, name), encoding="utf-8") as file:
            return file.read().strip()

    def _connect(self):
        try:
            address, token = self._read("api-address"), self._read("api-token")
        except FileNotFoundError as error:
            raise LANSyncAPIError(0, "agent_not_running",
                                  f"{error.filename} is missing: start the agent with `lansync run`") from None
        host, _, port = address.rpartition(":")
        connection = http.client.HTTPConnection(host.strip("[]"), int(port), timeout=self.timeout)
        return connection, {"Authorization": "Bearer " + token, "Host": address}

    def request(self, method, path, body=None, content_type="application/json"):
        """Sends one request and returns the decoded JSON answer; raises LANSyncAPIError."""
        if isinstance(body, str):
            body = body.encode("utf-8")
        for attempt in (1, 2):
            if self._connection is None:
                self._connection = self._connect()
            connection, headers = self._connection
            headers = dict(headers)
            if body is not None:
                headers["Content-Type"] = content_type
            try:
                connection.request(method, path, body=body, headers=headers)
                response = connection.getresponse()
                data = response.read()
            except (ConnectionError, http.client.HTTPException, OSError):
                # A keep-alive connection the agent closed (restart, idle): one fresh try.
                connection.close()
                self._connection = None
                if attempt == 2:
                    raise
                continue
            answer = json.loads(data) if data else None
            if response.status >= 400:
                error = (answer or {}).get("error", {})
                raise LANSyncAPIError(response.status, error.get("code", "unknown"), error.get("message", data.decode()))
            return answer

    def close(self):
        if self._connection:
            self._connection[0].close()
            self._connection = None

    # -- the API --------------------------------------------------------------------------

    def status(self):
        return self.request("GET", "/v1/status")

    def peers(self):
        return self.request("GET", "/v1/peers")["peers"]

    def append(self, stream, payload, entry_id=None):
        """Appends one entry (durable when this returns) and returns it as stored."""
        path = f"/v1/streams/{urllib.parse.quote(stream, safe='')}/entries"
        if entry_id is not None:
            path += "?id=" + urllib.parse.quote(entry_id, safe="")
        return self.request("POST", path, json.dumps(payload, separators=(",", ":")))

    def append_batch(self, stream, payloads):
        """Appends several entries in one commit: all or none."""
        body = "\n".join(json.dumps(p, separators=(",", ":")) for p in payloads) + "\n"
        path = f"/v1/streams/{urllib.parse.quote(stream, safe='')}/entries/batch"
        return self.request("POST", path, body, "application/x-ndjson")["entries"]

    def entries(self, stream, since=None, until=None, limit=None):
        query = urllib.parse.urlencode({k: v for k, v in (("since", since), ("until", until), ("limit", limit)) if v is not None})
        return self.request("GET", f"/v1/streams/{urllib.parse.quote(stream, safe='')}/entries" + ("?" + query if query else ""))["entries"]

    def set(self, key, value):
        return self.request("PUT", "/v1/preferences/" + urllib.parse.quote(key, safe=""), json.dumps(value))

    def unset(self, key):
        return self.request("DELETE", "/v1/preferences/" + urllib.parse.quote(key, safe=""))

    def preference(self, key):
        try:
            return self.request("GET", "/v1/preferences/" + urllib.parse.quote(key, safe=""))["value"]
        except LANSyncAPIError as error:
            if error.code == "not_set":
                return None
            raise

    def query(self, sql, *arguments):
        answer = self.request("POST", "/v1/query", json.dumps({"sql": sql, "arguments": list(arguments)}))
        return [dict(zip(answer["columns"], row)) for row in answer["rows"]]

    def execute(self, sql, *arguments, seed=False):
        """Writes app tables; seed=True for seed data (first-launch defaults), which any real edit beats."""
        body = {"sql": sql, "arguments": list(arguments)}
        if seed:
            body["seed"] = True
        return self.request("POST", "/v1/exec", json.dumps(body))["changed"]

    # -- the change feed ------------------------------------------------------------------

    def changes(self, cursor=None, give_up_after=None):
        """Yields (cursor, batch) for every change after `cursor` (None: from the beginning,
        "now": only new ones), then for each new commit, forever. When the agent goes away
        (restart, crash) it reconnects with the last cursor, so no change is missed or repeated;
        it gives up after `give_up_after` seconds without an agent (None: never).
        Store the cursor with what you did with the batch to resume after your own restart."""
        down_since = None
        while True:
            try:
                connection, headers = self._connect()
                connection.timeout = None
                path = "/v1/changes"
                if cursor:
                    headers["Last-Event-ID"] = cursor
                connection.request("GET", path, headers=headers)
                response = connection.getresponse()
                if response.status != 200:
                    error = json.loads(response.read() or b"{}").get("error", {})
                    raise LANSyncAPIError(response.status, error.get("code", "unknown"), error.get("message", ""))
                down_since = None
                event, data = None, []
                while True:
                    line = response.fp.readline()
                    if not line:
                        break
                    line = line.decode("utf-8").rstrip("\r\n")
                    if line == "":
                        if event == "changes" and data:
                            batch = json.loads("\n".join(data))
                            cursor = batch["cursor"]
                            yield cursor, batch
                        event, data = None, []
                    elif line.startswith(":"):
                        continue
                    elif line.startswith("event:"):
                        event = line[6:].strip()
                    elif line.startswith("data:"):
                        data.append(line[5:].lstrip(" "))
                connection.close()
            except LANSyncAPIError as error:
                if error.code != "agent_not_running":
                    raise
            except (ConnectionError, http.client.HTTPException, OSError):
                pass
            now = time.monotonic()
            down_since = down_since or now
            if give_up_after is not None and now - down_since > give_up_after:
                raise LANSyncAPIError(0, "agent_gone", f"no agent answered for {give_up_after} s")
            time.sleep(0.2)
