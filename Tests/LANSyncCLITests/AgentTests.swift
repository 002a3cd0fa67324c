import Foundation
import LANSyncTestSupport
import Testing

/// Real agents as processes on loopback, driven through the CLI.
@Suite(.serialized) struct AgentTests {
    @Test func twoNodesConvergeAndPushLiveWrites() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.group(of: "a", "b")
        for index in 0..<20 { try await cli.ok(["log", "append", "taps", "{\"a\":\(index)}"], node: "a") }
        try await cli.ok(["pref", "set", "caregiver/active", "\"mum\""], node: "a")
        let a = try await AgentProcess(cli, node: "a", discovery: true)
        let b = try await AgentProcess(cli, node: "b", arguments: ["--peer", a.address])
        try await cli.ok(["sync", "--wait", "--peers", "1", "--timeout", "20"], node: "b")
        #expect(try await cli.digest("a") == cli.digest("b"))
        #expect(try await cli.entries("b") == 20)
        // Discovery: off when asked; otherwise on (running, or unavailable where no avahi-daemon is reachable).
        #expect(try await cli.status("b")["discovery"] as? [String: Any] != nil)
        #expect((try await cli.status("b")["discovery"] as? [String: Any])?["state"] as? String == "off")
        #expect(
            ["starting", "running", "unavailable"].contains(
                (try await cli.status("a")["discovery"] as? [String: Any])?["state"] as? String ?? ""
            )
        )
        // A write on one side reaches the other by itself.
        try await cli.ok(["log", "append", "taps", "{\"live\":true}"], node: "b")
        #expect(try await eventually { try await cli.entries("a") == 21 })
        // Concurrent writes on both sides, then equal digests; the later preference wins on both.
        for index in 0..<10 {
            try await cli.ok(["log", "append", "taps", "{\"a2\":\(index)}"], node: "a")
            try await cli.ok(["log", "append", "taps", "{\"b2\":\(index)}"], node: "b")
        }
        try await cli.ok(["pref", "set", "caregiver/active", "\"dad\""], node: "b")
        try await cli.ok(["sync", "--wait", "--peers", "1", "--timeout", "20"], node: "a")
        #expect(try await eventually { try await cli.digest("a") == cli.digest("b") })
        #expect(try await cli.entries("a") == 41)
        #expect(try await cli.ok(["pref", "get", "caregiver/active"], node: "a") == "\"dad\"\n")
        let peers = try await cli.ok(["peers", "--json"], node: "a")
        #expect(peers.contains("\"state\":\"connected\"") && peers.contains("\"name\":\"b\""))
        #expect(
            try await eventually {
                try await cli.ok(["peers"], node: "a").contains("in sync with 1 of 1 connected peer")
            }
        )
        #expect(a.stop() == 0)
        #expect(b.stop() == 0)
    }

    /// A node in no group refuses to run and says what to do; a bad --peer is refused before anything starts.
    @Test func aNodeInNoGroupRefusesToSync() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.device("alone")
        let result = try await cli.run(["run", "--listen", "127.0.0.1:0"], node: "alone")
        #expect(result.status != 0)
        #expect(result.stderr.contains("in no group") && result.stderr.contains("group join"))
        let badPeer = try await cli.run(["run", "--peer", "not a peer:x"], node: "alone")
        #expect(badPeer.status != 0 && badPeer.stderr.contains("HOST:PORT"))
    }

    /// `sync --wait` right after starting an agent waits for its known peer and the data; with
    /// no peer known there is nothing to wait for.
    @Test func syncWaitWaitsForKnownPeersByDefault() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.group(of: "a", "b")
        try await cli.ok(["log", "append", "taps", "{\"from\":\"a\"}"], node: "a")
        let a = try await AgentProcess(cli, node: "a")
        let alone = try await cli.ok(["sync", "--wait"], node: "a")
        #expect(alone.contains("nothing to wait for"))
        let b = try await AgentProcess(cli, node: "b", arguments: ["--peer", a.address])
        #expect(try await cli.ok(["sync", "--wait", "--timeout", "20"], node: "b").contains("in sync with 1 peer"))
        #expect(try await cli.entries("b") == 1)
        _ = b
    }

    /// A device of another group learns nothing and writes nothing; the attempt shows in `peers`.
    @Test func aNodeOfAnotherGroupGetsNothing() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.device("a")
        _ = try await cli.newGroup(on: "a")
        try await cli.device("stranger")
        _ = try await cli.newGroup(on: "stranger")
        try await cli.ok(["log", "append", "taps", "{\"secret\":\"health data\"}"], node: "a")
        try await cli.ok(["log", "append", "taps", "{\"spam\":true}"], node: "stranger")
        let a = try await AgentProcess(cli, node: "a")
        // Once the agent runs (it records its own key as a member at start).
        #expect(
            try await eventually {
                try await cli.ok(["group", "members", "--json"], node: "a").contains("\"this_device\":true")
            }
        )
        let before = try await cli.digest("a")
        let stranger = try await AgentProcess(cli, node: "stranger", arguments: ["--peer", a.address])
        #expect(
            try await eventually {
                try await cli.ok(["peers", "--json"], node: "a").contains("\"state\":\"refused\"")
            }
        )
        let refused = try await cli.ok(["peers"], node: "a")
        #expect(refused.contains("wrong group secret"))
        #expect(try await cli.entries("stranger") == 1)
        #expect(try await cli.digest("a") == before)
        #expect(a.log.contains("connection refused"))
        _ = stranger
    }

    /// Garbage and tampered bytes end that connection, never the agent or its data.
    @Test func tamperedBytesEndTheConnectionNotTheAgent() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.group(of: "a", "b")
        try await cli.ok(["log", "append", "taps", "{\"a\":1}"], node: "a")
        let a = try await AgentProcess(cli, node: "a")
        // Raw garbage, oversized length fields and a half frame, straight to the port.
        for payload in [[UInt8](repeating: 0xFF, count: 70_000), [0x00, 0x05, 1, 2, 3, 4, 5], [0x10, 0x00, 1]] {
            let socket = try TCPClient(port: a.port)
            socket.send(payload)
            socket.close()
        }
        // A proxy that flips one bit inside the session's encrypted traffic: B has 50 entries to
        // push, so byte 1,500 of what it sends falls in a transport frame, well past the handshake.
        let lines = (0..<50).map { "{\"b\":\($0)}" }.joined(separator: "\n")
        _ = try await cli.ok(["log", "append", "taps", "--lines"], node: "b", stdin: lines)
        let proxy = try TamperingProxy(target: a.port, flipAfter: 1_500)
        let b = try await AgentProcess(cli, node: "b", arguments: ["--peer", "127.0.0.1:\(proxy.port)"])
        #expect(await eventually { a.log.contains("a frame failed authentication (tampered, replayed or reordered)") })
        #expect(a.process.isRunning)
        // (The agent records B as a member once its handshake succeeds, so the digest moves; the
        // entries are what a tampered batch would have brought.)
        #expect(try await cli.entries("a") == 1, "a tampered batch must not be merged")
        #expect(try await cli.ok(["status", "--json"], node: "a").contains("\"agent_running\":true"))
        // Without the tampering, B connects directly and syncs.
        proxy.stop()
        b.stop()
        let direct = try await AgentProcess(cli, node: "b", arguments: ["--peer", a.address])
        try await cli.ok(["sync", "--wait", "--peers", "1", "--timeout", "20"], node: "b")
        #expect(try await cli.entries("a") == 51)
        #expect(try await cli.digest("b") == cli.digest("a"))
        _ = direct
    }

    /// `why` answers "did the other machine get it?" from the peers' version vectors; `watch`
    /// prints the live view; the agent logs one "synced" line for a catch-up.
    @Test func whyAndWatchShowWhoHoldsWhat() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.group(of: "a", "b")
        let a = try await AgentProcess(cli, node: "a")
        let b = try await AgentProcess(cli, node: "b", arguments: ["--peer", a.address])
        let first = try await cli.ok(["log", "append", "sessions", #"{"session":"morning"}"#], node: "a")
            .trimmingCharacters(in: .whitespacesAndNewlines)
        try await cli.ok(["sync", "--wait", "--peers", "1", "--timeout", "20"], node: "a")
        #expect(
            try await eventually {
                let why = try await cli.ok(["why", first, "--json"], node: "a")
                return why.contains(#""held_by":[{"device_id""#) && why.contains(#""lacking":[]"#)
            }
        )
        #expect(try await cli.ok(["why", first], node: "a").contains("held by:  this node, b (connected)"))
        // The JSON outputs are an interface: their keys are pinned here and listed in docs/cli.md.
        let status = try await cli.status("a")
        #expect(
            Set(status.keys) == [
                "device_id", "replica_id", "name", "data_dir", "entries", "streams", "preferences", "unset_preferences",
                "tables", "digest", "hlc", "version_vector", "group_tag", "agent_running", "peers_connected", "port",
                "discovery",
                "duplicate_device_id", "parts",
            ]
        )
        // Every part of the running agent says where it stands, in the order the parts start.
        let parts = (status["parts"] as? [[String: Any]]) ?? []
        #expect(
            parts.compactMap { $0["name"] as? String }.starts(with: [
                "peer directory", "sync listener", "control socket", "local changes", "network watch",
            ]),
            "\(parts)"
        )
        #expect(parts.allSatisfy { $0["state"] as? String == "running" }, "\(parts)")
        #expect(try await cli.status("b")["parts"].map { "\($0)" }?.contains("static peers") == true)
        #expect(
            Set((status["discovery"] as? [String: Any])?.keys ?? [:].keys) == [
                "state", "advertised_as", "detail", "same_group", "other_groups",
            ]
        )
        let peer =
            try JSONSerialization.jsonObject(with: Data(try await cli.ok(["peers", "--json"], node: "a").utf8))
            as? [String: Any] ?? [:]
        #expect(
            Set(peer.keys).isSuperset(of: [
                "device_id", "name", "address", "state", "last_seen", "we_lack", "they_lack", "clock_offset_ms",
                "public_key",
                "digest", "version_vector",
            ]),
            "\(peer.keys)"
        )
        #expect(
            Set(peer.keys).isSubset(of: [
                "device_id", "name", "address", "state", "last_seen", "last_sync", "we_lack", "they_lack",
                "clock_offset_ms",
                "last_error", "rekeyed", "public_key", "digest", "duplicate_device", "version_vector",
            ])
        )
        let whyObject =
            try JSONSerialization.jsonObject(with: Data(try await cli.ok(["why", first, "--json"], node: "a").utf8))
            as? [String: Any] ?? [:]
        #expect(
            Set(whyObject.keys) == [
                "id", "stream", "device_id", "replica_id", "counter", "time", "held_by", "lacking", "unknown",
            ]
        )
        // One line per catch-up (it counts the entry and the member records the two agents wrote).
        #expect(
            await eventually { b.log.contains("synced") && b.log.contains("sync.received=") },
            "one line per catch-up"
        )

        #expect(b.stop() == 0)
        let second = try await cli.ok(["log", "append", "sessions", #"{"session":"afternoon"}"#], node: "a")
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await eventually { try await cli.ok(["why", second], node: "a").contains("lacking:  b (as of") })
        #expect(try await cli.ok(["why", first], node: "a").contains("held by:  this node, b (as of"))
        let unknown = try await cli.run(["why", "01a1fd27-062e-7000-b84a-000000000000"], node: "a")
        #expect(unknown.status == 1 && unknown.stderr.contains("holds no entry"))

        let watch = try await cli.ok(["watch", "--count", "2", "--interval", "0.2"], node: "a")
        #expect(watch.components(separatedBy: "agent on port").count - 1 == 2, "two refreshes: \(watch)")
        #expect(watch.contains("NAME") && watch.contains("no peer connected"))
        #expect(!watch.contains("\u{1B}["), "no colour codes when not on a terminal")
        #expect(a.stop() == 0)
    }
}

/// Real agents as processes on loopback catching up and relaying: a suite of its own so that it
/// runs beside `AgentTests` (each runs its agents one test at a time).
@Suite(.serialized) struct AgentCatchUpTests {
    /// A–B–C in a line: C never talks to A, yet gets A's writes through B (deltas keep their origin).
    @Test func writesRelayAlongALine() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.group(of: "a", "b", "c")
        let a = try await AgentProcess(cli, node: "a")
        let b = try await AgentProcess(cli, node: "b", arguments: ["--peer", a.address])
        let c = try await AgentProcess(cli, node: "c", arguments: ["--peer", b.address])
        try await cli.ok(["log", "append", "taps", "{\"from\":\"a\"}"], node: "a")
        try await cli.ok(["log", "append", "taps", "{\"from\":\"c\"}"], node: "c")
        #expect(
            try await eventually {
                let (c, a) = (try await cli.entries("c"), try await cli.entries("a"))
                return c == 2 && a == 2
            }
        )
        #expect(try await cli.digest("a") == cli.digest("c"))
        let cPeers = try await cli.ok(["peers", "--json"], node: "c")
        #expect(!cPeers.contains("\"name\":\"a\""), "C must not have talked to A")
        _ = (a, b, c)
    }

    /// A peer that missed 10,000 entries catches up when it comes back, from where it stopped.
    @Test func aPeerThatWasAwayCatchesUp() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.group(of: "a", "b")
        let a = try await AgentProcess(cli, node: "a")
        var b: AgentProcess? = try await AgentProcess(cli, node: "b", arguments: ["--peer", a.address])
        try await cli.ok(["log", "append", "taps", "{\"first\":1}"], node: "a")
        try await cli.ok(["sync", "--wait", "--peers", "1"], node: "b")
        #expect(b?.stop() == 0)
        b = nil
        let lines = (0..<10_000).map { "{\"symbol_id\":\($0),\"label\":\"tap\"}" }.joined(separator: "\n")
        _ = try await cli.ok(["log", "append", "taps", "--lines"], node: "a", stdin: lines)
        try await cli.ok(["pref", "set", "board/rows", "4"], node: "b")  // written while away
        b = try await AgentProcess(cli, node: "b", arguments: ["--peer", a.address])
        // Progress while it catches up: plain lines when not on a terminal (reported at once here).
        let synced = try await cli.run(
            ["sync", "--wait", "--peers", "1", "--timeout", "60"],
            node: "b",
            environment: ["LANSYNC_PROGRESS_INTERVAL_MS": "0"]
        )
        #expect(synced.status == 0, "\(synced.stderr)")
        // Whether a progress line appears depends on how much is left at the first poll; every line
        // that does appear is a plain progress line (no terminal codes), with counts and a rate.
        for line in synced.stderr.split(separator: "\n") {
            #expect(line.hasPrefix("sync: ") && !line.contains("\u{1B}"), "\(line)")
        }
        #expect(try await cli.entries("b") == 10_001)
        #expect(try await eventually { try await cli.digest("a") == cli.digest("b") })
        #expect(try await cli.ok(["pref", "get", "board/rows"], node: "a") == "4\n")
    }

    /// Both sides hold tens of thousands of entries the other lacks and keep writing while they
    /// catch up: a regression test for two peers blocking each other in writes (each receiving
    /// task must keep reading whatever the sending side is doing).
    @Test func bothSidesCatchUpAtOnceWhileWriting() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.group(of: "a", "b")
        for node in ["a", "b"] {
            let lines = (0..<30_000).map { "{\"\(node)\":\($0),\"label\":\"a tap with some words in it\"}" }
                .joined(separator: "\n")
            _ = try await cli.ok(["log", "append", "taps", "--lines"], node: node, stdin: lines)
        }
        let a = try await AgentProcess(cli, node: "a")
        let b = try await AgentProcess(cli, node: "b", arguments: ["--peer", a.address])
        for index in 0..<20 {
            try await cli.ok(["log", "append", "live", "{\"i\":\(index)}"], node: index % 2 == 0 ? "a" : "b")
        }
        try await cli.ok(["sync", "--wait", "--peers", "1", "--timeout", "60"], node: "a")
        #expect(
            try await eventually(within: 30) {
                let (a, b) = (try await cli.entries("a"), try await cli.entries("b"))
                return a == 60_020 && b == 60_020
            }
        )
        #expect(try await cli.digest("a") == cli.digest("b"))
        _ = (a, b)
    }

    /// Entries with large payloads (4.5 MB in all, more than one wire message may hold) still
    /// sync: batches are bounded in bytes as well as rows.
    @Test func largePayloadsSync() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.group(of: "a", "b")
        let note = String(repeating: "long session note ", count: 1_700)
        let lines = (0..<150).map { "{\"i\":\($0),\"note\":\"\(note)\"}" }.joined(separator: "\n")
        _ = try await cli.ok(["log", "append", "notes", "--lines"], node: "a", stdin: lines)
        let a = try await AgentProcess(cli, node: "a")
        let b = try await AgentProcess(cli, node: "b", arguments: ["--peer", a.address])
        try await cli.ok(["sync", "--wait", "--peers", "1", "--timeout", "30"], node: "b")
        #expect(try await cli.entries("b") == 150)
        #expect(try await cli.digest("a") == cli.digest("b"))
        _ = (a, b)
    }
}

extension AgentTests {
    /// A peer whose clock is 10 minutes ahead (test hook) is refused with a clock-skew reason on
    /// both sides, and none of its writes are merged.
    @Test func aPeerWithAClockFarAheadIsRefused() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.device("a")
        let code = try await cli.newGroup(on: "a")
        try await cli.device("ahead", joining: code)
        let skew = ["LANSYNC_TEST_CLOCK_OFFSET_MS": "600000"]
        let wrote = try await cli.run(
            ["pref", "set", "caregiver/active", "\"stranger\""],
            node: "ahead",
            environment: skew
        )
        #expect(wrote.status == 0)
        try await cli.ok(["pref", "set", "caregiver/active", "\"mum\""], node: "a")
        let a = try await AgentProcess(cli, node: "a")
        let ahead = try await AgentProcess(cli, node: "ahead", arguments: ["--peer", a.address], environment: skew)
        #expect(
            try await eventually {
                let peers = try await cli.ok(["peers", "--json"], node: "a")
                return peers.contains("\"state\":\"refused\"") && peers.contains("clock skew")
            }
        )
        #expect(try await cli.ok(["peers"], node: "ahead").contains("clock skew"))
        #expect(try await cli.ok(["pref", "get", "caregiver/active"], node: "a") == "\"mum\"\n")
        _ = ahead
    }

    /// Both sides dial each other at once: one connection survives (the tie-break), and they sync.
    @Test func mutualDialingKeepsOneConnection() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.group(of: "a", "b")
        try await cli.ok(["log", "append", "taps", "{\"a\":1}"], node: "a")
        try await cli.ok(["log", "append", "taps", "{\"b\":1}"], node: "b")
        // B starts first, dialing a port A will take; then A starts and dials B.
        let portA = try freeLoopbackPort()
        let b = try await AgentProcess(cli, node: "b", arguments: ["--peer", "127.0.0.1:\(portA)"])
        let a = try await AgentProcess(cli, node: "a", arguments: ["--peer", b.address], listen: "127.0.0.1:\(portA)")
        try await cli.ok(["sync", "--wait", "--peers", "1", "--timeout", "20"], node: "a")
        #expect(try await cli.digest("a") == cli.digest("b"))
        try await Task.sleep(for: .milliseconds(1500))
        for node in ["a", "b"] {
            let peers = try await cli.ok(["peers", "--json"], node: node).split(separator: "\n")
            #expect(peers.count == 1, "\(node): \(peers)")
            #expect(peers.first?.contains("\"state\":\"connected\"") == true)
        }
        // Exactly one session per side stayed up: every later connection was the same one or dropped.
        let sessions = a.log.components(separatedBy: "peer connected").count - 1
        #expect(sessions >= 1 && sessions <= 2)
    }
}

/// A plain TCP connection for sending raw bytes.
final class TCPClient {
    let fd: Int32

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else { throw POSIXError(.ECONNREFUSED) }
    }

    func send(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }
    func close() { Glibc.close(fd) }
}

/// A loopback TCP proxy (Python, in Tests/Interop) that flips one bit after N bytes from the client.
final class TamperingProxy {
    let process = Process()
    let port: Int

    init(target: Int, flipAfter: Int) throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../Interop/tamper_proxy.py").standardizedFileURL.path
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, String(target), String(flipAfter)]
        process.standardOutput = output
        try process.run()
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    /// SIGKILL: a process started from the test runner inherits a blocked SIGTERM, which Python
    /// then never sees (lansync itself takes signals through libdispatch and is unaffected).
    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    deinit { stop() }
}

/// The in-process program of docs/library.md (Examples/TapLogger): an app syncs from its own process,
/// with no `lansync run`, and its writes reach a peer without polling.
@Suite(.serialized) struct InProcessSyncTests {
    @Test func theReadmeProgramSyncsItsTapsToAPeerAndStops() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.group(of: "a", "app")
        let a = try await AgentProcess(cli, node: "a")
        let program = URL(fileURLWithPath: CLI.executable).deletingLastPathComponent()
            .appendingPathComponent("lansync-example-taps").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = [cli.dataDir("app"), a.address]
        // A hung program must fail the test, not hang it: past the limit it is stopped and this throws.
        let (status, printed, _) = try await process.runCapturingOutput(timeLimit: .seconds(60))
        #expect(status == 0, "\(printed)")
        #expect(printed.contains("logged help as") && printed.contains("a peer holds every tap"), "\(printed)")
        #expect(try await cli.entries("a") == 3)
        #expect(try await cli.digest("a") == cli.digest("app"))
        #expect(a.stop() == 0)
    }
}
