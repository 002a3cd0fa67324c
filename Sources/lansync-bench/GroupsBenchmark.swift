import Foundation

/// `--groups N`: a therapy room's machine serving N groups from one `lansync run` process, each
/// group with two peers of its own on loopback (their own `lansync run` processes dialing the
/// room's one port), beside a room in one group with its two peers, all started in this run:
/// - idle CPU of each room over the same window (goal: at most 0.2% of a core with N groups),
///   once nothing but keepalives went for `settleSeconds` (past the agent's idle keepalive on both
///   sides, as on a machine left alone; the quick run does not wait that long), over two idle
///   intervals: the sessions synced together, so their pings come in bursts;
/// - memory: each room's resident size, and what a group adds (the difference over N - 1);
/// - a write to one group reaching its peer: the room's API takes an entry for one group and the
///   peer's API is polled until it holds it; the one-group room, the room of many writing to one
///   group, and to each group in turn, alternate (A B C A B C), medians and ranges;
/// - the handshake's key trial on the responder, 1 against N groups (`GroupTrialBenchmark`).
struct GroupsBenchmark {
    let root: String
    let groups: Int
    let idleSeconds: Int
    /// How long both rooms are left alone before the idle window.
    let settleSeconds: Int
    let writes: Int

    /// A room, with what the measurements need.
    struct Room {
        let agent: Process
        let directory: String
        let names: [String]
        /// Each group's first peer's data directory, by group name.
        let peers: [String: String]
    }

    /// The API tokens a room's write and its peers' polls use: the room's node token, and each
    /// group's first peer's own, read once (the agents make them when they start).
    struct Tokens {
        let room: String
        let peers: [String: String]

        init(_ room: Room) throws {
            self.room = try GroupsBenchmark.read(room.directory + "/node-api-token")
            peers = try room.peers.mapValues { try GroupsBenchmark.read($0 + "/api-token") }
        }
    }

    /// Every process the run started, stopped when it ends, also when it fails half-way.
    final class Started {
        var processes: [Process] = []

        func stopAll() {
            for process in processes where process.isRunning { process.terminate() }
            for process in processes { process.waitUntilExit() }
        }
    }

    func run() throws {
        let bench = IdleBenchmark(root: root)
        guard FileManager.default.isExecutableFile(atPath: IdleBenchmark.executable) else {
            print("  skipped: no lansync executable at \(IdleBenchmark.executable) (build the lansync product too)")
            return
        }
        print("")
        print("One node in \(groups) groups, each with two peers on loopback, beside a node in one group:")
        fflush(nil)
        let clock = ContinuousClock()
        let setupStart = clock.now
        let started = Started()
        defer { started.stopAll() }
        let one = try room(named: "one", groups: 1, bench, started)
        let many = try room(named: "many", groups: groups, bench, started)
        try waitUntilInSync(one, bench)
        try waitUntilInSync(many, bench)
        print(
            "  set up and in sync: \(groups + 1) groups, \(2 * (groups + 1)) peers, in \(Self.seconds(clock.now - setupStart))"
        )
        fflush(nil)

        // Idle: both rooms over the same window, past their start-up work (and, in the full run,
        // past the switch of their sessions to the idle keepalive).
        Thread.sleep(forTimeInterval: Double(settleSeconds))
        let before = [IdleBenchmark.Usage(pid: one.agent.processIdentifier), .init(pid: many.agent.processIdentifier)]
        let start = Date()
        Thread.sleep(forTimeInterval: Double(idleSeconds))
        let elapsed = Date().timeIntervalSince(start)
        let after = [IdleBenchmark.Usage(pid: one.agent.processIdentifier), .init(pid: many.agent.processIdentifier)]
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let cpu = (0..<2).map { Double(after[$0].cpuTicks - before[$0].cpuTicks) / ticks / elapsed * 100 }
        let switches = (0..<2).map { Double(after[$0].contextSwitches(since: before[$0])) / elapsed }
        print(
            String(
                format: "  idle over %.0f s, %d s after the last sync: one group %.3f%% of a core (%.1f context "
                    + "switches/s); %d groups %.3f%% (%.1f/s) (goal <= 0.2%%: %@)",
                elapsed,
                settleSeconds,
                cpu[0],
                switches[0],
                groups,
                cpu[1],
                switches[1],
                cpu[1] <= 0.2 ? "met" : "MISSED"
            )
        )
        GoalRecord.record(
            "idle node in \(groups) groups: CPU",
            figure: String(format: "%.3f%% of a core (one group: %.3f%%)", cpu[1], cpu[0]),
            goal: "≤ 0.2% of a core",
            met: cpu[1] <= 0.2
        )

        // Memory: resident size; what each group beyond the first adds.
        let resident = [
            Self.residentKilobytes(one.agent.processIdentifier), Self.residentKilobytes(many.agent.processIdentifier),
        ]
        let perGroup = Double(resident[1] - resident[0]) / Double(max(1, groups - 1))
        print(
            String(
                format: "  memory (resident): one group %.1f MB; %d groups %.1f MB: %.2f MB per group",
                Double(resident[0]) / 1024,
                groups,
                Double(resident[1]) / 1024,
                perGroup / 1024
            )
        )
        GoalRecord.record(
            "node in \(groups) groups: memory per group",
            figure: String(
                format: "%.2f MB (one group %.1f MB, %d groups %.1f MB)",
                perGroup / 1024,
                Double(resident[0]) / 1024,
                groups,
                Double(resident[1]) / 1024
            ),
            goal: "reported",
            met: true
        )
        fflush(nil)

        // A write to one group reaching its peer, alternating (A B C A B C): the one-group room;
        // the room of many, writing to one group each time, as while one family's app is in use
        // (its group and peer warm, as the one-group room's are); and the room of many writing to
        // each group in turn, so that every write finds its group and its peer idle since setup.
        var latencies: [[Double]] = [[], [], []]
        let (oneTokens, manyTokens) = (try Tokens(one), try Tokens(many))
        let active = many.names[many.names.count / 2]
        for round in 0..<writes {
            latencies[0].append(try propagation(from: one, tokens: oneTokens, group: one.names[0], round: round))
            latencies[1].append(try propagation(from: many, tokens: manyTokens, group: active, round: round))
            let next = many.names[round % many.names.count]
            latencies[2].append(try propagation(from: many, tokens: manyTokens, group: next, round: round))
        }
        let summaries = latencies.map(Self.summary)
        let medians = latencies.map { $0.sorted()[$0.count / 2] }
        print(
            "  a write to one group reaching its peer (\(writes) each, alternating; medians [ranges]): one group "
                + summaries[0] + "; \(groups) groups, one family's group " + summaries[1]
                + String(format: " (ratio %.2f)", medians[1] / max(medians[0], 0.001))
                + "; each group in turn " + summaries[2]
                + String(format: " (ratio %.2f)", medians[2] / max(medians[0], 0.001))
        )
        GoalRecord.record(
            "write reaching its peer, node in \(groups) groups",
            figure: summaries[1] + " (one group: " + summaries[0] + "; each group in turn, idle till then: "
                + summaries[2] + ")",
            goal: "as fast as one group",
            met: medians[1] <= medians[0] * 1.5 + 1
        )
        fflush(nil)
    }

    /// Starts a room in `groups` groups and two peers per group dialing it; returns once all run.
    func room(named name: String, groups count: Int, _ bench: IdleBenchmark, _ started: Started) throws -> Room {
        let directory = root + "/room-\(name)"
        try bench.lansync(["init", "--name", "room-\(name)"], directory)
        var names: [String] = []
        var codes: [String] = []
        for index in 0..<count {
            let group = index == 0 ? "default" : "g\(index)"
            try bench.lansync(["group", "create"] + (index == 0 ? [] : ["--name", group]), directory)
            codes.append(
                try bench.lansync(["--group", group, "group", "show", "--code"], directory)
                    .trimmingCharacters(in: .whitespacesAndNewlines)
            )
            names.append(group)
        }
        let agent = try bench.start(
            ["run", "--no-mdns", "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0", "--log-level", "error"],
            directory,
            output: directory + ".out"
        )
        started.processes.append(agent)
        let port = try Self.listeningPort(in: directory + ".out", of: agent)
        var peers: [String: String] = [:]
        for (group, code) in zip(names, codes) {
            for peer in 0..<2 {
                let peerDirectory = root + "/peer-\(name)-\(group)-\(peer)"
                try bench.lansync(["init", "--name", "\(group)-\(peer)"], peerDirectory)
                try bench.lansync(["group", "join", code], peerDirectory)
                started.processes.append(
                    try bench.start(
                        [
                            "run", "--no-mdns", "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0", "--peer",
                            "127.0.0.1:\(port)", "--log-level", "error",
                        ],
                        peerDirectory
                    )
                )
                if peer == 0 { peers[group] = peerDirectory }
            }
        }
        return Room(agent: agent, directory: directory, names: names, peers: peers)
    }

    /// Waits until every group of the room is in sync with its two peers.
    func waitUntilInSync(_ room: Room, _ bench: IdleBenchmark) throws {
        let deadline = Date().addingTimeInterval(Double(60 + 3 * groups))
        while Date() < deadline {
            let lines = try bench.lansync(["groups", "--json"], room.directory).split(separator: "\n")
            if lines.count == room.names.count, lines.allSatisfy({ $0.contains("\"sync\":\"in sync with 2 of 2") }) {
                return
            }
            Thread.sleep(forTimeInterval: 0.5)
        }
        throw BenchmarkFailure("the room \(room.directory) did not get in sync with its peers")
    }

    /// Milliseconds from the room's API taking an entry for `group` to its first peer holding it.
    func propagation(from room: Room, tokens: Tokens, group: String, round: Int) throws -> Double {
        guard let peer = room.peers[group], let peerToken = tokens.peers[group] else {
            throw BenchmarkFailure("no peer for group \(group)")
        }
        let token = tokens.room
        func peerEntries() -> Int? {
            guard let answer = UnixHTTP.request(socket: peer + "/api.sock", "GET", "/v1/status", token: peerToken),
                let range = answer.body.range(of: "\"entries\":")
            else { return nil }
            return Int(answer.body[range.upperBound...].prefix { $0.isNumber })
        }
        guard let before = peerEntries() else { throw BenchmarkFailure("the peer's API at \(peer) does not answer") }
        let clock = ContinuousClock()
        let start = clock.now
        guard
            let answer = UnixHTTP.request(
                socket: room.directory + "/api.sock",
                "POST",
                "/v1/groups/\(group)/streams/taps/entries",
                token: token,
                body: "{\"round\":\(round)}"
            ), (200..<300).contains(answer.status)
        else { throw BenchmarkFailure("the room's API refused the write to \(group)") }
        while clock.now - start < .seconds(10) {
            if let now = peerEntries(), now > before { return (clock.now - start).milliseconds }
            usleep(200)
        }
        throw BenchmarkFailure("the write to \(group) did not reach its peer within 10 s")
    }

    static func listeningPort(in output: String, of process: Process) throws -> Int {
        for _ in 0..<1_200 {
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("listening on ") }),
                let port = Int(line.split(separator: ":").last ?? "")
            {
                return port
            }
            guard process.isRunning else { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        throw BenchmarkFailure("the room's agent did not start (see \(output))")
    }

    static func residentKilobytes(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first { !$0.isEmpty } ?? "") ?? 0
    }

    static func read(_ path: String) throws -> String {
        try String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func summary(_ values: [Double]) -> String {
        let sorted = values.sorted()
        return String(format: "%.2f ms [%.2f-%.2f]", sorted[sorted.count / 2], sorted[0], sorted[sorted.count - 1])
    }

    static func seconds(_ duration: Duration) -> String { String(format: "%.1f s", duration.milliseconds / 1000) }
}
