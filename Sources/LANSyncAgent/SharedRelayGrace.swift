import LANSyncCore
import LANSyncSession
import Synchronization

/// The agent's one `RelayGrace`, shared by its sync sessions: a merge in one session makes those
/// rows fresh for all the others. Only rows whose origin is connected to us are held back: on a
/// LAN where discovery connects everyone, an origin we reach directly is pushing its rows to the
/// others itself. Rows from an origin we hear only through relays go on at once (we may be the
/// only bridge to the peer).
final class SharedRelayGrace: Sendable {
    private struct State {
        var grace: RelayGrace
        var connectedOrigins: Set<ReplicaID> = []
    }

    private let state: Mutex<State>

    init(grace: Duration) { state = Mutex(State(grace: RelayGrace(grace: grace))) }

    func merged(_ coverage: [Delta.Coverage]) {
        guard !coverage.isEmpty else { return }
        state.withLock { $0.grace.merged(coverage, at: .now) }
    }

    /// A session with `replica` started (or ended: `false`); the agent registers one per replica.
    func connected(_ replica: ReplicaID, _ isConnected: Bool) {
        state.withLock { state in
            if isConnected { state.connectedOrigins.insert(replica) } else { state.connectedOrigins.remove(replica) }
        }
    }

    func holdBack() -> (cap: [ReplicaID: UInt64], settles: ContinuousClock.Instant?) {
        state.withLock { state in
            let (cap, settles) = state.grace.holdBack(at: .now)
            let held = cap.filter { state.connectedOrigins.contains($0.key) }
            return (held, held.isEmpty ? nil : settles)
        }
    }
}
