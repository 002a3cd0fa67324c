import Foundation
import LANSync
import LANSyncAgent
import LANSyncCore
import Logging

/// Hands a device's "left" record, everything it wrote, and everything it holds of the others'
/// writes to a member before `lansync group leave` drops the group's secret: afterwards the
/// device can reach nobody in the group, so what only it holds goes now or never
/// (`LeaveHandover`).
enum LeaveNotice {
    /// Who took what before the device left.
    struct Delivery {
        /// Connected members that hold everything this device holds, its "left" record included,
        /// and that do not leave themselves.
        var everything: [String] = []
        /// Connected members that hold everything this device wrote, when none held everything in time.
        var ownWrites: [String] = []
        /// Connected members that hold the "left" record, when none held all this device wrote in time.
        var news: [String] = []
    }

    /// The connected members that took everything (`LeaveHandover.Taken.everything`), once at
    /// least one did; after `timeout` seconds, those that took the most. Uses the agent serving
    /// the group, or runs one here for the moment (on a port of its own choosing, finding members
    /// over mDNS and at their saved addresses).
    static func deliver(_ handover: LeaveHandover, of node: LANSyncNode, timeout: Double) async -> Delivery {
        let directory = node.dataDirectory
        if await ControlClient.report(directory) != nil {
            await ControlClient.kick(directory)
            return await membersHolding(handover, of: node, timeout: timeout) { await ControlClient.report(directory) }
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
            let reached = await membersHolding(handover, of: node, timeout: timeout) { await agent.report() }
            running.cancelAll()
            return reached
        }
    }

    /// Looks at the connected members every 100 ms. Besides who took everything, it keeps, per
    /// member, the furthest it saw the member hold of this device's replica: a member may take
    /// the news or all the device wrote and disconnect before the timeout (it left too, say), and
    /// what it took still counts when the command says who was told what.
    private static func membersHolding(
        _ handover: LeaveHandover,
        of node: LANSyncNode,
        timeout: Double,
        report: () async -> AgentReport?
    ) async -> Delivery {
        let deadline = ContinuousClock.now + .seconds(timeout)
        var furthest: [String: UInt64] = [:]
        while true {
            if let report = await report() {
                let connected = report.peers.filter { $0.state == .connected }.map { peer in
                    (
                        name: peer.name ?? peer.deviceID ?? "?", device: peer.deviceID,
                        vector: Self.vector(peer.versionVector)
                    )
                }
                for peer in connected {
                    furthest[peer.name] = max(furthest[peer.name] ?? 0, peer.vector[handover.replica])
                }
                let taken = (try? node.leaveTaken(handover, by: connected.map { ($0.device, $0.vector) })) ?? []
                let everything = zip(connected, taken).filter { $0.1 == .everything }.map(\.0.name)
                if !everything.isEmpty { return Delivery(everything: everything.sorted()) }
            }
            guard ContinuousClock.now < deadline else { break }
            try? await Task.sleep(for: .milliseconds(100))
        }
        // All the device wrote up to now: an app may have written on through the wait.
        let latest = max((try? node.ownCounter()) ?? handover.recordCounter, handover.recordCounter)
        return Delivery(
            ownWrites: furthest.filter { $0.value >= latest }.keys.sorted(),
            news: furthest.filter { $0.value >= handover.recordCounter }.keys.sorted()
        )
    }
}

extension LeaveNotice {
    /// A peer's version vector as an agent's report lists it (replica IDs in hex).
    fileprivate static func vector(_ counters: [String: UInt64]?) -> VersionVector {
        var vector = VersionVector()
        for (replica, counter) in counters ?? [:] {
            if let id = ReplicaID(hex: replica) { vector[id] = counter }
        }
        return vector
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
