/// `lansync help TOPIC`: the concepts a newcomer needs, beside each command's own --help.
enum HelpTopic: String, CaseIterable {
    case groups, streams, preferences, tables, api, reinstall, discovery, config

    /// The topic asked for by `lansync help TOPIC` (singular forms too), or nil for anything else,
    /// which goes on to the command parser (`lansync help log` is the log command's help).
    static func requested(by arguments: [String]) -> HelpTopic? {
        guard arguments.count == 2, arguments[0] == "help" else { return nil }
        let word = arguments[1].lowercased()
        return HelpTopic(rawValue: word) ?? HelpTopic(rawValue: word + "s")
    }

    var text: String {
        switch self {
        case .groups:
            return """
                GROUPS

                A group is the set of devices that sync with each other: a family's machines and the therapy room's. One device creates it and prints a join code; each other device joins with that code:

                  lansync group create              (on the first device; prints the code)
                  lansync group join CODE           (on each other device)
                  lansync group show [--code]       (the group's public tag; --code prints the code again)

                On the same network, a short code is easier: on a member whose agent runs, `lansync group invite` prints an 8-digit code (e.g. 4821-3907) and keeps a pairing window open for a few minutes; on the new device, `lansync group join 4821-3907` finds it over mDNS and proves it knows the code with CPace, a password-authenticated key exchange: a wrong guess teaches nothing, each attempt is one guess, and the window closes after 3 attempts. Both devices show the other's name and device ID.

                The join code carries the group's 256-bit secret: whoever has it can read and write everything the group holds, so treat it like a house key. Codes are 8 blocks of 7 characters; typos are caught by a checksum, and O/I/L are read as 0/1/1.

                Devices prove membership in every connection's handshake (Noise, with the secret as a pre-shared key): a device without the secret is refused at the first message and learns nothing, and shows in `lansync peers` as refused. mDNS advertises only the group's tag of the day, from which the secret cannot be recovered and which changes at midnight UTC.

                `lansync group members` lists the member devices: name, device ID, the fingerprint of the key the group pinned for it, who added it and when, when this device last saw it. The group pins each device's key the first time a member sees it; a device that comes back with another key (reinstalled, or a cloned machine) is refused, with this advice, until a member vouches for it with `lansync group invite`.

                To remove a lost or given-away device, run `lansync group remove NAME` on any member. The group moves to a new epoch: a fresh secret, sealed to every other member's pinned key. Members online switch at once; one that was away is handed the new key by the first member it meets; the removed device is refused from then on, also after a reinstall, and gets nothing written after the removal (members that have not heard of the removal yet still sync with it until they do). The old join code is useless after a removal: `lansync group show --code` prints the new one.

                A node can be in several groups, kept strictly apart (a therapy room's machine serving several families): each has its own replica, secret, members and peers. Add one beside the first with `lansync group create --name family-b` or `lansync group join CODE --name family-b` (names are labels for this machine only); `lansync groups` lists them; every other command takes `--group NAME` (or the group's tag) and, with several groups, refuses until told which. `lansync run` serves them all from one process, on one port and one mDNS instance (`--group NAME` runs one alone); the local API serves each under /v1/groups/NAME/ with that group's own token. `lansync group leave family-b --erase` deletes the group's data from this machine and lists what it deleted.
                """
        case .streams:
            return """
                STREAMS

                A stream is a named, append-only log: symbol_taps, phrases, sessions. Each entry is immutable and carries an id (a UUIDv7 unless you give one with --id), the device and replica that wrote it, a hybrid-logical-clock reading, the wall-clock time, and a JSON payload.

                  lansync log append symbol_taps '{"symbol_id":12,"label":"more"}'
                  lansync log list symbol_taps --since 2026-11-21T00:00:00Z

                Streams are grow-only sets: entries from every device merge without conflicts, nothing is lost or duplicated, and appending an id that exists returns the entry already held (so retries are safe). An append is durable when the command returns, and never waits for the network.
                """
        case .preferences:
            return """
                PREFERENCES

                A preference is a key holding one JSON value: controls/slider/sensitivity = 0.7, caregiver/active = "mum". It is a last-writer-wins register: when two devices set it while apart, every device ends with the same winner, the write with the greatest hybrid-logical-clock reading (the replica ID breaks exact ties).

                  lansync pref set caregiver/active '"mum"'
                  lansync pref get caregiver/active
                  lansync pref unset caregiver/active      (a tombstone: the unset wins like a write)

                Keys are '/'-separated parts of letters, digits, '_', '-' and '.'. They are case-insensitive: game.6F96.level.L20 and game.6f96.level.l20 are one key, stored, synced and listed in lowercase, so an app finds its value under its own spelling.

                A device whose clock is far ahead cannot win forever: peers more than --max-clock-skew (120 s by default) off are refused.
                """
        case .api:
            return """
                API

                While `lansync run` runs, apps in any language use LANSync over HTTP on this machine: append taps, read them, set preferences, query and write app tables, status, peers, and a change feed. It listens on 127.0.0.1:7742 (choose with --api HOST:PORT, loopback only; --no-api turns it off) and on the Unix socket api.sock in the data directory. The address in use is in the data directory's api-address file.

                Every request carries the token from the data directory's api-token file (readable by its owner only), as `Authorization: Bearer TOKEN` or `X-API-Key: TOKEN`. Requests addressed to another host name (DNS rebinding) or sent by pages of other sites (an Origin header) are refused.

                  TOKEN=$(cat ~/.local/share/lansync/api-token)
                  curl -H "Authorization: Bearer $TOKEN" --data '{"symbol":"more"}' http://127.0.0.1:7742/v1/streams/symbol_taps/entries
                  curl -H "Authorization: Bearer $TOKEN" -N http://127.0.0.1:7742/v1/changes      (Server-Sent Events)

                An append is durable before the answer (about a millisecond on loopback); many at once go in one commit with POST /v1/streams/NAME/entries/batch (one JSON payload per line). The change feed sends every change after a cursor, then each new one as it commits, here or on a peer; reconnect with the last event's id (Last-Event-ID, as EventSource does) and nothing is missed or repeated, across agent restarts too. Errors are JSON, {"error": {"code", "message"}}, and the message says what to do.

                Every route, with its fields and errors: docs/openapi.json. A Python client in the standard library only: Examples/python/lansync_api.py (and taps.py, which logs and follows taps).
                """
        case .tables:
            return """
                TABLES

                An app declares SQL tables once and then uses plain SQL on them; LANSync syncs them. Declare with a schema file of CREATE TABLE and CREATE INDEX statements:

                  -- lansync: counter athletes.xp
                  CREATE TABLE athletes (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', weight_kg REAL, xp INTEGER NOT NULL DEFAULT 0);
                  -- lansync: append-only strokes
                  CREATE TABLE strokes (id TEXT PRIMARY KEY, athlete_id TEXT REFERENCES athletes(id), watts REAL);

                  lansync schema apply app.sql
                  lansync exec "INSERT INTO athletes (id, name) VALUES ('a1', 'Ana')"
                  lansync exec "UPDATE athletes SET weight_kg = 61.5 WHERE id = 'a1'"
                  lansync query "SELECT * FROM athletes"

                How rows merge: each column of a row is a last-writer-wins value, so two devices that edit different columns of one row while apart both keep their edit. A delete wins over edits made at the same time elsewhere; inserting the same key later brings the row back with the columns that insert wrote. An insert does not write a column left at its default (a literal DEFAULT, or NULL), so it never overrides what another device wrote there; INSERT OR REPLACE over a live row writes every column. A counter column adds up every device's increments (`SET xp = xp + 5` on three devices adds 15); a REAL counter counts in millionths, so every device shows the same sum to the bit. A `max` or `min` column only moves one way: it shows the greatest (smallest) value any device wrote, so a later, worse score does not replace the best (`-- lansync: max level_scores.high_score`, INTEGER columns). Append-only tables only grow: UPDATE and DELETE on them fail, except that a row declared REFERENCES parent ON DELETE CASCADE goes with its parent on every device (its key is never used again), and may be deleted once its parent is gone.

                Keys: rows are matched across devices by their primary key, so use keys the app makes up (a UUID in a TEXT column); INTEGER PRIMARY KEY and AUTOINCREMENT are refused, as are UNIQUE columns besides the key and CHECKs over several columns of a mutable table (an append-only table's rows never change, so there they are fine). A newer schema may add tables, columns (nullable or with a DEFAULT) and indexes; nothing may be dropped or renamed. REFERENCES are not enforced when rows arrive (a child may come before its parent); ON DELETE CASCADE and SET NULL apply to the rows this device holds when its app deletes the parent.

                Another program that writes the replica file directly fails (unknown function: lansync_guard()): every write goes through LANSync so that it syncs. Reading with sqlite3 works; check the file with `lansync doctor`, which runs SQLite's integrity check where that function exists.
                """
        case .reinstall:
            return """
                REINSTALL

                The device ID comes from /etc/machine-id through a keyed hash, so it survives a reinstall or a wiped data directory: run `lansync init` again and the same device ID returns, with a new key pair and a new replica ID. Its new writes use the new replica ID, so they never collide with the old install's.

                The group pinned the old key, so a member must vouch for the new one: on a member run `lansync group invite`, and on the reinstalled device `lansync group join CODE` with that short code; start the agent and the node refills from its peers, which show it as "re-keyed" in `lansync peers`. (The old join code alone gets it refused, with this advice: someone who copied the code cannot take over a member's device ID.)

                A device that was removed (`lansync group remove`) stays refused after a reinstall, until a member invites it again.

                Two machines cloned from one system image share a machine-id and so a device ID; LANSync reports it (`lansync status`, `lansync peers`) with the fix. The group lets one of them in and refuses the other until it is fixed and invited. Data stays correct either way.
                """
        case .discovery:
            return """
                DISCOVERY

                `lansync run` advertises the node over mDNS (through the system's avahi-daemon) as _lansync._tcp and dials every node of its group it finds; joining the group is the only setup. The advertisement holds a neutral name and two TXT keys: v (protocol version) and g (the group's tag of the day: it changes at midnight UTC, so the group cannot be followed from network to network) — no device ID, no names.

                  avahi-browse -rt _lansync._tcp     (every node on the LAN)
                  lansync status                     (the discovery line)
                  lansync run --no-mdns --peer 192.168.1.20:7741    (static peers only)

                Without avahi-daemon the agent warns once, syncs with static peers, and resumes discovery when the daemon starts (`sudo systemctl start avahi-daemon`). Where multicast does not reach (some guest Wi-Fi), give peers with --peer or `peer =` in the config file.
                """
        case .config:
            return """
                CONFIG

                A configuration file sets what `lansync run` would take as flags, and the data directory. It is read from --config FILE, else $LANSYNC_CONFIG, else ~/.config/lansync/lansync.conf, else /etc/lansync/lansync.conf (when present); LANSYNC_CONFIG=/dev/null reads none. Flags given on the command line override it.

                One `key = value` per line; # starts a comment; every key is optional; peer may repeat:

                  data-dir = /var/lib/lansync
                  listen = [::]:7741
                  peer = 192.168.1.20:7741
                  peer = laptop.local:7741
                  log-level = info                 (trace, debug, info, notice, warning, error, critical)
                  max-clock-skew = 120             (seconds, 1-86400)
                  max-connections = 64             (1-4096)
                  mdns = on                        (on or off)
                  mdns-name = LANSync therapy room
                  api = 127.0.0.1:7742             (the local HTTP API and dashboard, loopback only; or off)

                An unknown key or a bad value stops every command with the file, the line and the reason.
                """
        }
    }
}
