import ArgumentParser
import Foundation
import LANSync
import LANSyncAgent

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show this node: device, replica, counts and the state digest.",
        discussion: """
            Two replicas with the same digest hold exactly the same entries, preference values and app-table rows.

            --json prints one object: device_id, replica_id, name, data_dir, entries, streams, preferences, unset_preferences, tables (name, declared, rows of each app table), digest, hlc, version_vector, group_tag, agent_running, peers_connected, port, duplicate_device_id (null, or the problem and its fix), discovery (null when the agent is not running; else state — off, starting, running or unavailable — advertised_as, detail, same_group, other_groups), parts (null when the agent is not running; else one object per part of the agent — peer directory, sync listener, control socket, local changes, network watch, discovery, static peers — with name, state — starting, running, stopping, stopped or failed — and detail).

            Examples:
              lansync status
              lansync status --json | jq -r .digest
            """
    )

    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print one JSON object.") var json = false

    func run() async throws {
        let (node, status) = try await reportingErrors {
            let node = try global.openNode()
            return (node, try node.status())
        }
        let out = Output()
        let vector = status.versionVector.counters.sorted { $0.key < $1.key }
        let agent = await ControlClient.report(node.dataDirectory)
        let group = try await reportingErrors { try node.group()?.tag }
        let connected = agent?.peers.filter { $0.state == .connected }.count ?? 0
        if json {
            out.line(
                [
                    ("device_id", ExportFile.quoted(node.deviceID.description)),
                    ("replica_id", ExportFile.quoted(node.replicaID.description)),
                    ("name", ExportFile.quoted(node.identity.name)),
                    ("data_dir", ExportFile.quoted(node.dataDirectory.path)),
                    ("entries", "\(status.entries)"), ("streams", "\(status.streams)"),
                    ("preferences", "\(status.preferences)"), ("unset_preferences", "\(status.tombstones)"),
                    ("tables", "[" + status.tables.map(StatusTables.json).joined(separator: ",") + "]"),
                    ("digest", ExportFile.quoted(status.digest.description)),
                    ("hlc", ExportFile.quoted(status.hlc.description)),
                    ("version_vector", ExportFile.json(status.versionVector)),
                    ("group_tag", group.map(ExportFile.quoted) ?? "null"),
                    ("agent_running", agent == nil ? "false" : "true"), ("peers_connected", "\(connected)"),
                    ("port", agent.map { "\($0.port)" } ?? "null"),
                    ("discovery", agent?.discovery.map(Self.json) ?? "null"),
                    ("duplicate_device_id", agent?.duplicateDeviceID.map(ExportFile.quoted) ?? "null"),
                    ("parts", agent.map { "[" + $0.parts.map(Self.json).joined(separator: ",") + "]" } ?? "null"),
                ].jsonObject
            )
        } else {
            for line in aligned(
                [
                    ["device", "\(node.deviceID)  (\(node.identity.name))"],
                    ["replica", node.replicaID.description],
                    ["data", node.dataDirectory.path],
                    ["entries", "\(status.entries) in \(counted(status.streams, "stream"))"],
                    ["preferences", "\(status.preferences) set, \(status.tombstones) unset"],
                    ["tables", StatusTables.summary(status.tables)],
                    ["digest", status.digest.description],
                    [
                        "writers",
                        vector.count == 1 ? "1 replica has written here" : "\(vector.count) replicas have written here",
                    ],
                    ["group", group ?? "none (`lansync group create`, or `lansync group join CODE`)"],
                    [
                        "agent",
                        agent.map {
                            "running on port \($0.port), \(connected) peer\(connected == 1 ? "" : "s") connected"
                        } ?? "not running (start it with `lansync run`)",
                    ],
                ] + (agent?.discovery.map { [["discovery", Self.describe($0)]] } ?? [])
                    + (agent.map { agent in [["api", Self.describeAPI(agent.parts)]] } ?? [])
                    + (agent.map { [["parts", Self.describe($0.parts)]] } ?? [])
            ) { out.line(line) }
            if let agent { out.line(PeersView.verdict(agent)) }
            if let duplicate = agent?.duplicateDeviceID { note("lansync: warning: \(duplicate)") }
        }
    }

    static func json(_ part: AgentPartStatus) -> String {
        [
            ("name", ExportFile.quoted(part.name)), ("state", ExportFile.quoted(part.state.rawValue)),
            ("detail", part.detail.map(ExportFile.quoted) ?? "null"),
        ].jsonObject
    }

    /// "all 7 running", or each part that is not, with its state.
    /// Where the local API listens, from its part's detail, or why it does not.
    static func describeAPI(_ parts: [AgentPartStatus]) -> String {
        guard let api = parts.first(where: { $0.name == "local API" }) else {
            return "off (the agent runs without the local API)"
        }
        return "\(api.state.rawValue)" + (api.detail.map { ", \($0)" } ?? "")
    }

    static func describe(_ parts: [AgentPartStatus]) -> String {
        let notRunning = parts.filter { $0.state != .running }
        if notRunning.isEmpty { return "all \(parts.count) running" }
        return notRunning.map { "\($0.name) \($0.state.rawValue)" + ($0.detail.map { " (\($0))" } ?? "") }.joined(
            separator: ", "
        )
            + "; \(parts.count - notRunning.count) of \(parts.count) running"
    }

    static func json(_ discovery: DiscoveryReport) -> String {
        [
            ("state", ExportFile.quoted(discovery.state)),
            ("advertised_as", discovery.advertisedAs.map(ExportFile.quoted) ?? "null"),
            ("detail", discovery.detail.map(ExportFile.quoted) ?? "null"),
            ("same_group", "\(discovery.sameGroup)"), ("other_groups", "\(discovery.otherGroups)"),
        ].jsonObject
    }

    static func describe(_ discovery: DiscoveryReport) -> String {
        let found =
            "\(discovery.sameGroup) node\(discovery.sameGroup == 1 ? "" : "s") of this group found"
            + (discovery.otherGroups > 0 ? ", \(discovery.otherGroups) of other groups ignored" : "")
        switch discovery.state {
        case "off": return "off (the agent runs with --no-mdns; static peers only)"
        case "running":
            return "mDNS, " + (discovery.advertisedAs.map { "advertised as '\($0)'" } ?? "not yet advertised") + "; "
                + found
        case "unavailable":
            return "unavailable: \(discovery.detail ?? "avahi-daemon cannot be reached") (is avahi-daemon running? "
                + "`systemctl start avahi-daemon`); static peers only"
        default: return discovery.state
        }
    }
}
