public import LANSync
import LANSyncCrypto
public import Logging
import Synchronization

/// The groups one agent process serves behind one listener and one mDNS instance (docs/groups.md):
/// one `Agent` per group, each with its own replica, sessions, peers and control socket. The first
/// agent added is the host: it listens and advertises for all. A connection's first handshake
/// message is opened with every group's keys, and the session then runs in the group whose key
/// opened it (`Agent.run`); whatever is found over mDNS goes to every group, each dialing the nodes
/// that list its tag.
package final class GroupRouter: Sendable {
    private let agents = Mutex<[Agent]>([])

    package init() {}

    func add(_ agent: Agent) { agents.withLock { $0.append(agent) } }

    /// Every group's agent, the host first.
    var all: [Agent] { agents.withLock { $0 } }

    /// The agent that listens and advertises for all.
    var host: Agent? { agents.withLock { $0.first } }

    /// The keys a responder tries on a first handshake message: every group's, each epoch it
    /// accepts (the current first), with the agent of the group it belongs to.
    func responderKeys() -> [(agent: Agent, epoch: UInt64, key: SecureBytes)] {
        all.flatMap { agent in agent.groupState.psks.map { (agent, $0.epoch, $0.key) } }
    }
}

extension Agent {
    /// Agents for several groups of one node (each node opened on one of its groups' data
    /// directories, `NodeGroups`), served from this process behind one port and one mDNS instance:
    /// the first listens and advertises for all, and each connection lands in the group whose key
    /// the peer used (docs/groups.md). Run them all in one `ServiceGroup`, with
    /// `LocalAPI(serving:)` for their API. A static peer belongs to one group: with several
    /// groups, `configuration` has none, and `staticPeers` gives each group's by its name on this
    /// node (`NodeGroups.name(of:)`); each group's agent dials its own with that group's key.
    public static func serving(
        _ nodes: [LANSyncNode],
        configuration: AgentConfiguration,
        staticPeers: [String: [PeerAddress]] = [:],
        logger: Logger
    ) throws(LANSyncError) -> [Agent] {
        let names = nodes.map { NodeGroups.name(of: $0.dataDirectory) }
        if let unknown = staticPeers.keys.sorted().first(where: { !names.contains($0) }) {
            throw LANSyncError(
                .invalidInput,
                "a static peer is given for group \(unknown), which is not served here (served: \(names.joined(separator: ", ")))"
            )
        }
        guard nodes.count > 1 else {
            return try nodes.map { node throws(LANSyncError) in
                var configuration = configuration
                configuration.staticPeers += staticPeers.values.flatMap { $0 }
                return try Agent(node: node, configuration: configuration, logger: logger)
            }
        }
        guard configuration.staticPeers.isEmpty else {
            throw LANSyncError(
                .invalidInput,
                "a static peer belongs to one group: with several groups, give each group's own "
                    + "(`--peer GROUP=HOST:PORT`), or let mDNS find them"
            )
        }
        let router = GroupRouter()
        var agents: [Agent] = []
        for (node, name) in zip(nodes, names) {
            var groupLogger = logger
            groupLogger[metadataKey: "group"] = "\(name)"
            var groupConfiguration = configuration
            groupConfiguration.staticPeers = staticPeers[name] ?? []
            agents.append(try Agent(node: node, configuration: groupConfiguration, logger: groupLogger, router: router))
        }
        return agents
    }
}
