import LANSyncCrypto
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
