import Foundation
import LANSync
import LANSyncAgent
import Logging

/// Hands a device's "left" record to a member before `lansync group leave` drops the group's
/// secret: afterwards the device can reach nobody in the group, so the news goes now or never.
enum LeaveNotice {
    /// The names of the connected members that hold the record (their version vector reaches
    /// `written`), once at least one does; empty when none does within `timeout` seconds. Uses the
    /// agent serving the group, or runs one here for the moment (on a port of its own choosing,
    /// finding members over mDNS and at their saved addresses).
    static func deliver(
        _ written: (replica: String, counter: UInt64),
        of node: LANSyncNode,
        timeout: Double
    ) async -> [String] {
        let directory = node.dataDirectory
        if await ControlClient.report(directory) != nil {
            await ControlClient.kick(directory)
            return await membersHolding(written, timeout: timeout) { await ControlClient.report(directory) }
        }
        var configuration = AgentConfiguration()
        LoadedConfig.file.apply(to: &configuration)
        configuration.listenPort = 0
        configuration.staticPeers += ControlClient.savedPeers(directory).compactMap { peer in
            peer.address.flatMap { PeerAddress($0) }
        }
        let quiet = Logger(label: "lansync") { _ in SwiftLogNoOpLogHandler() }
        guard let agent = try? Agent(node: node, configuration: configuration, logger: quiet) else { return [] }
        let running = Task { try? await agent.run() }
        let reached = await membersHolding(written, timeout: timeout) { await agent.report() }
        running.cancel()
        await running.value
        return reached
    }

    private static func membersHolding(
        _ written: (replica: String, counter: UInt64),
        timeout: Double,
        report: () async -> AgentReport?
    ) async -> [String] {
        let deadline = ContinuousClock.now + .seconds(timeout)
        while true {
            if let report = await report() {
                let holding = report.peers.filter { peer in
                    peer.state == .connected && (peer.versionVector?[written.replica] ?? 0) >= written.counter
                }
                if !holding.isEmpty { return holding.map { $0.name ?? $0.deviceID ?? "?" } }
            }
            guard ContinuousClock.now < deadline else { return [] }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }
}

/// What the CLI tells an agent already running for the node.
enum RunningAgent {
    /// Tells the agent serving the node's groups that they changed (one was created, joined or
    /// left), through any group's control socket (`also`: one no longer listed, such as a group
    /// just left). Returns whether an agent took it in hand (it restarts to serve the groups there
    /// are now, or stops when its only group is gone).
    static func nodeGroupsChanged(in root: DataDirectory, also: DataDirectory? = nil) async -> Bool {
        var directories = ((try? NodeGroups.list(in: root)) ?? []).map(\.directory)
        if let also, !directories.contains(where: { $0.path == also.path }) { directories.insert(also, at: 0) }
        for directory in directories where await ControlClient.nodeGroupsChanged(directory) { return true }
        return false
    }

    /// Waits until no agent answers for `directory` any more; returns false after `seconds`.
    static func stopsServing(_ directory: DataDirectory, within seconds: Double) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if await ControlClient.report(directory) == nil { return true }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return false
    }
}
