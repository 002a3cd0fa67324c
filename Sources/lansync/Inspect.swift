import ArgumentParser
import Foundation
import LANSync
import LANSyncAgent
import LANSyncCore
import LANSyncStore

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show peers and sync state, refreshed live, until Ctrl-C.",
        discussion: """
            On a terminal the view is redrawn in place every --interval seconds; otherwise (a pipe, a log) each refresh is printed as a block under a time stamp.

            Examples:
              lansync watch
              lansync watch --interval 5
              lansync watch --count 3 > snapshot.txt     (three refreshes, then stop)
            """
    )

    @OptionGroup var global: GlobalOptions
    @Option(help: "Seconds between refreshes.") var interval: Double = 1
    @Option(help: "Stop after this many refreshes (default: run until interrupted).") var count: Int?

    func validate() throws {
        guard interval >= 0.1 else { throw ValidationError("--interval must be at least 0.1 seconds") }
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
    }

    func run() async throws {
        let node = try await reportingErrors { try global.openNode() }
        let style = Style.forStandardOutput()
        var refreshes = 0
        while count.map({ refreshes < $0 }) ?? true {
            refreshes += 1
            let report = await ControlClient.report(node.dataDirectory)
            let status = try await reportingErrors { try node.status() }
            var lines = [String]()
            let time = Timestamps.iso8601(milliseconds: Int64(Timestamps.nowMilliseconds()))
            lines.append(
                style.bold("\(node.identity.name)  \(node.deviceID)")
                    + "  \(counted(status.entries, "entry", "entries")), digest \(status.digest.description.prefix(12))  \(time)"
            )
            if let report {
                let connected = report.peers.filter { $0.state == .connected }.count
                lines.append(
                    "agent on port \(report.port), \(connected) connected"
                        + (report.discovery.map { ", discovery \($0.state)" } ?? "")
                )
                lines += PeersView.lines(peers: report.peers, report: report, style: style)
            } else {
                lines.append(style.red("no agent running (start it with `lansync run`); last known peers:"))
                lines += PeersView.lines(peers: ControlClient.savedPeers(node.dataDirectory), report: nil, style: style)
            }
            let out = Output()
            if style.enabled {
                out.write("\u{1B}[H\u{1B}[2J")  // home, clear: redraw in place
            } else if refreshes > 1 {
                out.line()
            }
            for line in lines { out.line(line) }
            out.flush()
            if let count, refreshes >= count { break }
            try await Task.sleep(for: .milliseconds(Int(interval * 1000)))
        }
    }
}

struct Why: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Say which known peers hold an entry or an app-table row, and which still lack it.",
        discussion: """
            Judged from each peer's version vector as it last announced it (live for connected peers, from peers.json otherwise): a peer whose vector covers the entry's operation holds it. The entry must be on this node.

            For an app-table row, give TABLE:KEY (a composite key as TABLE:A,B): the row's current state and each write it is made of (the columns that write still decides), and which peers hold all of them. A peer lacking a write lacks the columns it set.

            --json prints one object: id, stream, device_id, replica_id, counter, time, held_by and lacking (arrays of {device_id, name, state, as_of}), unknown (peers that never announced a vector).

            Examples:
              lansync why 01a1fd27-062e-7000-b84a-5046c97fba88
              lansync log list sessions --json | tail -1 | jq -r .id | xargs lansync why    (did everyone get today's session?)
              lansync why athletes:8c5e2d0a-1f1b-4a8e-9d0e-2b7c4a1f9e33
            """
    )

    @OptionGroup var global: GlobalOptions
    @Argument(
        help:
            "The entry's id (as `lansync log list --json` or `log append` print it), or TABLE:KEY for an app-table row."
    )
    var id: String
    @Flag(help: "Print one JSON object.") var json = false

    func run() async throws {
        let node = try await reportingErrors { try global.openNode() }
        if let (table, key) = try rowKey(node) { return try await whyRow(node, table: table, key: key) }
        guard let entry = try await reportingErrors({ try node.store.entry(id: id) }) else {
            note(
                "lansync: error: this node holds no entry \(id): it was not written here and has not arrived yet "
                    + "(check the id with `lansync log list --json`); peers can only be judged for entries held here"
            )
            throw ExitCode(1)
        }
        let peers =
            await ControlClient.report(node.dataDirectory)?.peers ?? ControlClient.savedPeers(node.dataDirectory)
        let replica = entry.dot.replica.description
        var held = [PeerRecord]()
        var lacking = [PeerRecord]()
        var unknown = [PeerRecord]()
        for peer in peers where peer.deviceID != nil {
            guard let vector = peer.versionVector else {
                unknown.append(peer)
                continue
            }
            if (vector[replica] ?? 0) >= entry.dot.counter { held.append(peer) } else { lacking.append(peer) }
        }
        let out = Output()
        let time = Timestamps.iso8601(milliseconds: entry.wallMilliseconds)
        if json {
            func list(_ records: [PeerRecord]) -> String {
                "["
                    + records.map { peer in
                        [
                            ("device_id", ExportFile.quoted(peer.deviceID ?? "")),
                            ("name", peer.name.map(ExportFile.quoted) ?? "null"),
                            ("state", ExportFile.quoted(peer.state.rawValue)),
                            ("as_of", peer.lastSeen.map { "\($0)" } ?? "null"),
                        ].jsonObject
                    }.joined(separator: ",") + "]"
            }
            out.line(
                [
                    ("id", ExportFile.quoted(entry.id)), ("stream", ExportFile.quoted(entry.stream)),
                    ("device_id", ExportFile.quoted(entry.originDevice.description)),
                    ("replica_id", ExportFile.quoted(replica)),
                    ("counter", "\(entry.dot.counter)"), ("time", ExportFile.quoted(time)),
                    ("held_by", list(held)), ("lacking", list(lacking)), ("unknown", list(unknown)),
                ].jsonObject
            )
            return
        }
        let now = Int64(Timestamps.nowMilliseconds())
        func describe(_ peer: PeerRecord) -> String {
            let name = peer.name ?? String((peer.deviceID ?? "?").prefix(7))
            if peer.state == .connected { return "\(name) (connected)" }
            return "\(name) (as of \(peer.lastSeen.map { ago(now - $0) } ?? "never"))"
        }
        out.line(
            "entry \(entry.id) in \(entry.stream), written \(time) by \(entry.originDevice == node.deviceID ? "this device" : entry.originDevice.description)"
        )
        out.line("held by:  this node" + held.map { ", " + describe($0) }.joined())
        out.line("lacking:  " + (lacking.isEmpty ? "no known peer" : lacking.map(describe).joined(separator: ", ")))
        if !unknown.isEmpty {
            out.line("unknown:  " + unknown.map(describe).joined(separator: ", ") + " (never announced what they hold)")
        }
    }
}

extension Why {
    /// TABLE:KEY when TABLE is an app table this node holds rows of or declares; nil otherwise.
    func rowKey(_ node: LANSyncNode) throws -> (String, [SQLValue])? {
        guard let colon = id.firstIndex(of: ":") else { return nil }
        let table = id[..<colon].lowercased()
        let status = try node.status()
        guard status.tables.contains(where: { $0.name == table }) else { return nil }
        let parts = id[id.index(after: colon)...].split(separator: ",", omittingEmptySubsequences: false).map(
            String.init
        )
        let types =
            try node.store.appliedSchema()?.schema.table(table).map { declared in
                declared.primaryKey.map { name in declared.column(name)?.type.uppercased() ?? "" }
            } ?? []
        let key = parts.enumerated().map { index, text -> SQLValue in
            let type = index < types.count ? types[index] : ""
            if type.contains("INT"), let number = Int64(text) { return .integer(number) }
            if type.contains("REAL") || type.contains("FLOA") || type.contains("DOUB"), let number = Double(text) {
                return .real(number)
            }
            return .text(text)
        }
        return (table, key)
    }

    func whyRow(_ node: LANSyncNode, table: String, key values: [SQLValue]) async throws {
        let key = RowKey(table: table, primaryKey: values)
        guard let state = try await reportingErrors({ try node.store.row(key) }) else {
            note(
                "lansync: error: this node holds no row \(key) (check the key with `lansync query \"SELECT * FROM \(table)\"`)"
            )
            throw ExitCode(1)
        }
        let writes = state.changes(key: key)
        let peers =
            await ControlClient.report(node.dataDirectory)?.peers ?? ControlClient.savedPeers(node.dataDirectory)
        var held = [PeerRecord]()
        var lacking = [(PeerRecord, [RowChange])]()
        var unknown = [PeerRecord]()
        for peer in peers where peer.deviceID != nil {
            guard let vector = peer.versionVector else {
                unknown.append(peer)
                continue
            }
            let missing = writes.filter { (vector[$0.dot.replica.description] ?? 0) < $0.dot.counter }
            if missing.isEmpty { held.append(peer) } else { lacking.append((peer, missing)) }
        }
        func describe(_ change: RowChange) -> String {
            let what: String
            switch change.kind {
            case .insert: what = "insert"
            case .delete: what = "delete"
            case .append: what = "append"
            case .update: what = "update"
            }
            let columns = change.values.map(\.column) + change.totals.map { "\($0.column) (+count)" }
            return "\(what) by replica \(change.dot.replica.description.prefix(8)) #\(change.dot.counter) at "
                + Timestamps.iso8601(milliseconds: Int64(change.hlc.physicalMilliseconds))
                + (columns.isEmpty ? "" : ": " + columns.joined(separator: ", "))
        }
        let out = Output()
        if json {
            func list(_ records: [PeerRecord]) -> String {
                "["
                    + records.map { peer in
                        [
                            ("device_id", ExportFile.quoted(peer.deviceID ?? "")),
                            ("name", peer.name.map(ExportFile.quoted) ?? "null"),
                            ("state", ExportFile.quoted(peer.state.rawValue)),
                        ].jsonObject
                    }.joined(separator: ",") + "]"
            }
            out.line(
                [
                    ("table", ExportFile.quoted(table)),
                    ("key", "[" + values.map(ExportFile.json).joined(separator: ",") + "]"),
                    ("exists", "\(state.exists)"), ("causal_length", "\(state.causalLength)"),
                    (
                        "values",
                        ExportFile.object(
                            state.values.sorted { $0.key < $1.key }.map { ($0.key, ExportFile.json($0.value)) }
                        )
                    ),
                    ("writes", "[" + writes.map { ExportFile.quoted(describe($0)) }.joined(separator: ",") + "]"),
                    ("held_by", list(held)), ("lacking", list(lacking.map(\.0))), ("unknown", list(unknown)),
                ].jsonObject
            )
            return
        }
        out.line("row \(key): \(state.exists ? "exists" : "deleted") (life \(state.causalLength))")
        for (column, value) in state.values.sorted(by: { $0.key < $1.key }) { out.line("  \(column) = \(value)") }
        out.line("made of \(counted(writes.count, "write")):")
        for change in writes { out.line("  " + describe(change)) }
        func name(_ peer: PeerRecord) -> String { peer.name ?? String((peer.deviceID ?? "?").prefix(7)) }
        out.line("held by:  this node" + held.map { ", " + name($0) }.joined())
        out.line(
            "lacking:  "
                + (lacking.isEmpty
                    ? "no known peer"
                    : lacking.map { "\(name($0.0)) (\(counted($0.1.count, "write")))" }.joined(separator: ", "))
        )
        if !unknown.isEmpty {
            out.line("unknown:  " + unknown.map(name).joined(separator: ", ") + " (never announced what they hold)")
        }
    }
}
