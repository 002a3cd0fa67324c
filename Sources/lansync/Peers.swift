import ArgumentParser
import Foundation
import LANSync
import LANSyncAgent

struct Peers: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List known peers: who is connected, who is behind, who was refused and why.",
        discussion: """
            Asks the running agent; when none runs, shows what it recorded when it last ran.

            --json prints one object per line: device_id, name, address, state (connected, dialing, refused, unreachable, disconnected), last_seen and last_sync (ms since the epoch), we_lack and they_lack (changes: entries and preference writes), clock_offset_ms, last_error, rekeyed, public_key, digest, duplicate_device (two machines present this device ID), version_vector (what the peer holds, as it last said). Fields without a value are left out.

            Examples:
              lansync peers
              lansync peers --json | jq 'select(.state == "refused")'
            """
    )

    @OptionGroup var global: GlobalOptions
    @Flag(help: "One JSON object per line.") var json = false

    func run() async throws {
        let directory = global.dataDirectory
        _ = try await reportingErrors { try global.openNode() }
        let report = await ControlClient.report(directory)
        let peers = report?.peers ?? ControlClient.savedPeers(directory)
        let out = Output()
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            for peer in peers { out.line(String(decoding: try encoder.encode(peer), as: UTF8.self)) }
            return
        }
        if report == nil {
            note("no agent is running for \(directory.path); showing what it saw last (start it with `lansync run`)")
        }
        for line in PeersView.lines(peers: peers, report: report, style: Style.forStandardOutput()) { out.line(line) }
    }
}

/// The peers table and its one-line verdict, shared by `peers`, `status` and `watch`.
enum PeersView {
    static func lines(peers: [PeerRecord], report: AgentReport?, style: Style) -> [String] {
        guard !peers.isEmpty else { return ["no peers known yet"] }
        let now = Int64(Timestamps.nowMilliseconds())
        var rows = [["NAME", "DEVICE", "ADDRESS", "STATE", "LAST SEEN", "WE LACK", "THEY LACK", "NOTE"]]
        for peer in peers {
            var notes = [String]()
            if peer.duplicateDevice == true {
                notes.append(
                    "DUPLICATE device ID: two machines share it (cloned machine-id; `lansync status` on them says how to fix)"
                )
            }
            if peer.rekeyed == true { notes.append("re-keyed") }
            if let error = peer.lastError, peer.state != .connected { notes.append(error) }
            rows.append([
                peer.name ?? "-", peer.deviceID.map { String($0.prefix(7)) } ?? "-", peer.address ?? "-",
                peer.state.rawValue, peer.lastSeen.map { ago(now - $0) } ?? "never",
                peer.weLack.map(String.init) ?? "-", peer.theyLack.map(String.init) ?? "-",
                notes.joined(separator: "; "),
            ])
        }
        var lines = aligned(rows)
        lines[0] = style.bold(lines[0])
        for (index, peer) in peers.enumerated() {
            switch peer.state {
            case .connected: lines[index + 1] = style.green(lines[index + 1])
            case .refused: lines[index + 1] = style.red(lines[index + 1])
            case .dialing, .unreachable, .disconnected: lines[index + 1] = style.dim(lines[index + 1])
            }
        }
        if let report { lines.append(style.bold(verdict(report))) }
        return lines
    }

    /// One line that answers "am I in sync?".
    static func verdict(_ report: AgentReport) -> String {
        let (connected, behind) = report.connectedPeers
        let refused = report.peers.filter { $0.state == .refused }.count
        let refusedNote = refused == 0 ? "" : "; \(refused) refused (see NOTE)"
        guard !connected.isEmpty else { return "no peer connected" + refusedNote }
        if behind.isEmpty {
            return
                "in sync with \(connected.count) of \(connected.count) connected peer\(connected.count == 1 ? "" : "s")"
                + refusedNote
        }
        return behind.map { peer in
            let name = peer.name ?? peer.deviceID ?? "?"
            if let lack = peer.weLack, lack > 0 { return "behind \(name) by \(counted(Int(lack), "change"))" }
            if let lack = peer.theyLack, lack > 0 { return "\(name) is behind by \(counted(Int(lack), "change"))" }
            return "syncing with \(name)"
        }.joined(separator: "; ") + refusedNote
    }
}

/// ANSI colour, only when standard output is a terminal (and NO_COLOR is not set).
struct Style {
    let enabled: Bool

    static func forStandardOutput() -> Style {
        let environment = ProcessInfo.processInfo.environment
        return Style(
            enabled: isatty(STDOUT_FILENO) != 0 && environment["NO_COLOR"] == nil && environment["TERM"] != "dumb"
        )
    }

    private func wrap(_ code: String, _ text: String) -> String { enabled ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text }
    func bold(_ text: String) -> String { wrap("1", text) }
    func green(_ text: String) -> String { wrap("32", text) }
    func red(_ text: String) -> String { wrap("31", text) }
    func dim(_ text: String) -> String { wrap("2", text) }
}

/// "3 s ago", "5 min ago", "2 h ago", "4 d ago".
func ago(_ milliseconds: Int64) -> String {
    let seconds = max(0, milliseconds / 1000)
    switch seconds {
    case ..<60: return "\(seconds) s ago"
    case ..<3600: return "\(seconds / 60) min ago"
    case ..<86_400: return "\(seconds / 3600) h ago"
    default: return "\(seconds / 86_400) d ago"
    }
}

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Wait until this node and its connected peers hold the same data.",
        discussion: """
            Needs a running agent (`lansync run`; one that is still starting gets a few seconds). Returns when every connected peer reports the same state digest as this node. When the agent knows of peers it first waits for at least one to connect (--peers N asks for N; --peers 0 for none). Exits 1 on timeout, saying who is behind.

            Examples:
              lansync sync --wait
              lansync sync --wait --peers 2 --timeout 60
            """
    )

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Wait until in sync (the only mode so far).") var wait = false
    @Option(help: "Give up after this many seconds.") var timeout: Double = 30
    @Option(help: "Wait until at least this many peers are connected (default: 1 when any peer is known, else 0).")
    var peers: Int?

    func validate() throws {
        guard wait else { throw ValidationError("say --wait: `lansync sync --wait` waits until peers are in sync") }
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
        guard (peers ?? 0) >= 0 else { throw ValidationError("--peers cannot be negative") }
    }

    func run() async throws {
        let directory = global.dataDirectory
        _ = try await reportingErrors { try global.openNode() }
        let clock = ContinuousClock()
        let start = clock.now
        var lastProgress = start
        let progress = ProgressReporter(label: "sync", unit: "changes")
        defer { progress.finish() }
        var largestRemaining = 0
        while true {
            guard let report = await ControlClient.report(directory) else {
                // An agent started a moment ago may not answer yet.
                if clock.now - start < .seconds(min(timeout, 3)) {
                    try await Task.sleep(for: .milliseconds(100))
                    continue
                }
                note("lansync: error: no agent is running for \(directory.path); start it with `lansync run`")
                throw ExitCode(1)
            }
            let required = peers ?? (report.peers.isEmpty ? 0 : 1)
            if required == 0 && report.peers.isEmpty {
                Output().line("no peers known yet; nothing to wait for")
                return
            }
            let connected = report.peers.filter { $0.state == .connected }
            let behind = connected.filter { peer in report.connectedDigests[peer.deviceID ?? ""] != report.digest }
            if connected.count >= required && behind.isEmpty {
                Output().line(
                    "in sync with \(connected.count) peer\(connected.count == 1 ? "" : "s") (digest \(report.digest.prefix(16)))"
                )
                return
            }
            let waited = clock.now - start
            let status =
                connected.count < required
                ? "\(connected.count) of \(required) peer\(required == 1 ? "" : "s") connected"
                : "waiting for "
                    + behind.map {
                        "\($0.name ?? $0.deviceID ?? "?") (we lack \($0.weLack ?? 0), it lacks \($0.theyLack ?? 0))"
                    }.joined(separator: ", ")
            if waited > .seconds(timeout) {
                note("lansync: error: not in sync after \(Int(timeout)) s: \(status)")
                throw ExitCode(1)
            }
            // A catch-up in progress shows as a bar (changes still to exchange with the peers behind).
            let remaining = behind.reduce(0) { $0 + Int(($1.weLack ?? 0) + ($1.theyLack ?? 0)) }
            largestRemaining = max(largestRemaining, remaining)
            if connected.count >= required, remaining > 0 {
                progress.update(done: largestRemaining - remaining, total: largestRemaining)
            } else if waited > .seconds(1) && clock.now - lastProgress > .seconds(1) {
                note("sync: \(status)")
                lastProgress = clock.now
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}
