import Foundation
import LANSync
import LANSyncAgent
import Logging

/// Hands a device's "left" record, and everything it wrote before or since, to a member before
/// `lansync group leave` drops the group's secret: afterwards the device can reach nobody in the
/// group, so what it wrote goes now or never.
enum LeaveNotice {
    /// Who took what before the device left.
    struct Delivery {
        /// Connected members that hold everything this device wrote, its "left" record included.
        var everything: [String] = []
        /// Connected members that hold the "left" record, when none held everything in time.
        var news: [String] = []
    }

    /// The connected members holding the record and everything the device wrote up to the moment
    /// asked (their version vector reaches its replica's latest counter), once at least one does;
    /// after `timeout` seconds, those that hold the record at least. Not the record alone: a
    /// change before it can travel as superseded by a later write of the device's own, and that
    /// write must arrive too, or its value is missing on every member for good. Uses the agent
    /// serving the group, or runs one here for the moment (on a port of its own choosing, finding
    /// members over mDNS and at their saved addresses).
    static func deliver(
        _ written: (replica: String, counter: UInt64),
        of node: LANSyncNode,
        timeout: Double
    ) async -> Delivery {
        let directory = node.dataDirectory
        let latest = { max(written.counter, (try? node.ownCounter()) ?? written.counter) }
        if await ControlClient.report(directory) != nil {
            await ControlClient.kick(directory)
            return await membersHolding(written, latest: latest, timeout: timeout) {
                await ControlClient.report(directory)
            }
        }
        var configuration = AgentConfiguration()
        LoadedConfig.file.apply(to: &configuration)
        configuration.listenPort = 0
        configuration.staticPeers += ControlClient.savedPeers(directory).compactMap { peer in
            peer.address.flatMap { PeerAddress($0) }
        }
        let quiet = Logger(label: "lansync") { _ in SwiftLogNoOpLogHandler() }
        guard let agent = try? Agent(node: node, configuration: configuration, logger: quiet) else { return Delivery() }
        return await withDiscardingTaskGroup { running in
            running.addTask { try? await agent.run() }
            let reached = await membersHolding(written, latest: latest, timeout: timeout) { await agent.report() }
            running.cancelAll()
            return reached
        }
    }

    private static func membersHolding(
        _ written: (replica: String, counter: UInt64),
        latest: () -> UInt64,
        timeout: Double,
        report: () async -> AgentReport?
    ) async -> Delivery {
        let deadline = ContinuousClock.now + .seconds(timeout)
        var delivery = Delivery()
        while true {
            if let report = await report() {
                let connected = report.peers.filter { $0.state == .connected }
                func holding(_ counter: UInt64) -> [String] {
                    connected.filter { ($0.versionVector?[written.replica] ?? 0) >= counter }
                        .map { $0.name ?? $0.deviceID ?? "?" }
                }
                delivery.everything = holding(latest())
                if !delivery.everything.isEmpty { return delivery }
                delivery.news = Array(Set(delivery.news + holding(written.counter))).sorted()
            }
            guard ContinuousClock.now < deadline else { return delivery }
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
