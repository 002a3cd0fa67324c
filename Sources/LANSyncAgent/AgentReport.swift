import Foundation
import LANSync
import LANSyncCrypto
import LANSyncDiscovery
import LANSyncSession
import LANSyncWire
import Logging
import NIOCore
import NIOExtras
import NIOPosix
import ServiceLifecycle
import Synchronization

/// What `lansync status` and `lansync peers` show about a running agent.
extension Agent {
    /// What `lansync status` and `lansync peers` show about the running agent.
    public func report() async -> AgentReport {
        var connected = [String: String]()
        for registered in sessions.all {
            if let state = await registered.session.announced {
                connected[registered.session.peer.device.description] = state.digest.description
            }
        }
        // Who is connected is what is registered now; the directory's record of it can trail a
        // connection that replaced another by a moment.
        let registered = Set(sessions.all.map { $0.session.peer.device.description })
        let peers = await directory.all.map { record in
            var record = record
            if let device = record.deviceID {
                if registered.contains(device) {
                    record.state = .connected
                } else if record.state == .connected {
                    record.state = .disconnected
                }
            }
            return record
        }
        return AgentReport(
            port: port ?? 0,
            groupTag: group.tag,
            peers: peers,
            connectedDigests: connected,
            digest: (try? node.store.syncSummary().digest.description) ?? "",
            discovery: discoveryReport,
            duplicateDeviceID: sharedDeviceID ? Self.clonedMachineAdvice(node.deviceID.description) : nil,
            parts: partStates.all,
            followsGroupChanges: configuration.whenGroupsChange != nil
        )
    }

    static func describe(_ address: SocketAddress) -> String {
        switch address {
        case .v4: return "\(address.ipAddress ?? "?"):\(address.port ?? 0)"
        case .v6:
            let ip = address.ipAddress ?? "?"
            // A dual-stack listener sees IPv4 peers as IPv4-mapped IPv6 addresses: show them as IPv4.
            if ip.hasPrefix("::ffff:"), ip.contains(".") { return "\(ip.dropFirst(7)):\(address.port ?? 0)" }
            return "[\(ip)]:\(address.port ?? 0)"
        case .unixDomainSocket: return "local"
        }
    }
}

/// What `Agent.listeningPort()` and `LocalAPI.port()` throw when the service stopped before it
/// listened (another part failed first, or it was stopped while starting).
public struct StoppedBeforeListeningError: Error, CustomStringConvertible, Sendable {
    /// Which service: "the agent", "the local API".
    public let service: String
    /// Why, when it is known ("127.0.0.1:7001 is taken ...").
    public let reason: String?

    package init(service: String, reason: String? = nil) {
        self.service = service
        self.reason = reason
    }

    /// Says which service stopped before it listened, and why when that is known.
    public var description: String { "\(service) stopped before it listened" + (reason.map { ": \($0)" } ?? "") }
}

/// The agent could not listen (the port is taken, the address is not this machine's, ...).
public struct ListenError: Error, CustomStringConvertible, Sendable {
    /// The address it tried to listen on.
    public let host: String
    /// The port it tried to listen on.
    public let port: Int
    /// The system's reason.
    public let cause: String

    public var description: String {
        "cannot listen on \(PeerAddress(host: host, port: port)): \(cause); is another agent (or program) using "
            + "that port? Choose another with --listen HOST:PORT"
    }
}

extension AgentReport {
    /// Whether `peer`'s last announced state digest is ours: it holds what we hold.
    package func isInSync(with peer: PeerRecord) -> Bool {
        peer.deviceID.flatMap { connectedDigests[$0] } == digest
    }

    /// The peers connected now, and those among them not in sync with us: what every "am I in
    /// sync?" answer (`lansync status`, `groups`, the dashboard) is made of.
    package var connectedPeers: (all: [PeerRecord], behind: [PeerRecord]) {
        let all = peers.filter { $0.state == .connected }
        return (all, all.filter { !isInSync(with: $0) })
    }
}

/// The running agent's view, for the control socket.
public struct AgentReport: Codable, Sendable {
    /// The port the agent listens on.
    public let port: Int
    /// The group's public tag for this period, as discovery announces it.
    public let groupTag: String
    /// Every peer the agent knows of, connected or not.
    public let peers: [PeerRecord]
    /// Connected peers' last announced digests, by device ID.
    public let connectedDigests: [String: String]
    /// This replica's state digest: equal digests mean equal replicas.
    public let digest: String
    /// Where discovery stands; nil when it is off.
    public let discovery: DiscoveryReport?
    /// Set, with the fix, when another machine presented this device's own ID.
    public let duplicateDeviceID: String?
    /// The agent's parts and where each stands, in the order they start.
    public let parts: [AgentPartStatus]
    /// Whether the agent follows changes to the node's groups (`lansync run` restarts to serve
    /// the groups there are now); an app's own agent serves the groups it started with.
    public let followsGroupChanges: Bool?

    enum CodingKeys: String, CodingKey {
        case port, groupTag = "group_tag", peers, connectedDigests = "connected_digests", digest, discovery
        case duplicateDeviceID = "duplicate_device_id", parts, followsGroupChanges = "follows_group_changes"
    }
}
