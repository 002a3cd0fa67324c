import Foundation
import LANSync
import LANSyncAgent
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

    private static func membersHolding(
        _ handover: LeaveHandover,
        of node: LANSyncNode,
        timeout: Double,
        report: () async -> AgentReport?
    ) async -> Delivery {
        let deadline = ContinuousClock.now + .seconds(timeout)
        var delivery = Delivery()
        while true {
            if let report = await report() {
                var taken: [LeaveHandover.Taken: [String]] = [:]
                for peer in report.peers where peer.state == .connected {
                    let took =
                        (try? node.leaveTaken(handover, byMember: peer.deviceID, vector: peer.versionVector ?? [:]))
                        ?? .nothing
                    taken[took, default: []].append(peer.name ?? peer.deviceID ?? "?")
                }
                delivery.everything = taken[.everything] ?? []
                if !delivery.everything.isEmpty { return delivery }
                // As of now (an app may write on through the wait); the news is kept from earlier
                // looks, since a member may disconnect before the timeout.
                delivery.ownWrites = (taken[.ownWrites] ?? []).sorted()
                delivery.news = Array(Set(delivery.news + (taken[.news] ?? []) + (taken[.ownWrites] ?? []))).sorted()
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
