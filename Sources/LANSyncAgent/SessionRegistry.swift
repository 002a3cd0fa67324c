import LANSyncCore

/// The agent's connected peers: one sync session per peer replica, and the dial loops waiting
/// for one to end. Owned by the `Agent` actor (one per group, once a node is in several); the
/// rule for which of two connections to one peer survives is `keepsNewConnection`, a pure
/// function tested on its own.
struct SessionRegistry {
    struct Registered {
        let session: SyncSession
        let close: @Sendable () -> Void
    }

    private var byReplica: [ReplicaID: Registered] = [:]
    private var disconnectWaiters: [ReplicaID: [CheckedContinuation<Void, Never>]] = [:]

    var isEmpty: Bool { byReplica.isEmpty }
    var all: Dictionary<ReplicaID, Registered>.Values { byReplica.values }
    subscript(replica: ReplicaID) -> Registered? { byReplica[replica] }

    /// Which connection to a peer survives when a second one registers: both sides must keep the
    /// same one. A connection silent past a ping interval is stuck (an outage just ended), and the
    /// new one wins whoever dialed; a newer connection from the same side replaces the older;
    /// otherwise both keep the one initiated by the smaller replica ID.
    static func keepsNewConnection(
        existingIsStuck: Bool,
        existingInitiatedByUs: Bool,
        newInitiatedByUs: Bool,
        ourReplica: ReplicaID,
        peerReplica: ReplicaID
    ) -> Bool {
        if existingIsStuck || existingInitiatedByUs == newInitiatedByUs { return true }
        let preferredIsOurs = ourReplica < peerReplica
        return newInitiatedByUs == preferredIsOurs
    }

    /// Holds `session` as the one connection to `replica`; returns the session it replaces, if any.
    mutating func hold(
        _ session: SyncSession,
        replica: ReplicaID,
        close: @escaping @Sendable () -> Void
    )
        -> SyncSession?
    {
        let replaced = byReplica[replica]?.session
        byReplica[replica] = Registered(session: session, close: close)
        return replaced
    }

    /// Lets go of `session` if it is the one held for `replica`, and wakes who waits for that;
    /// returns whether it was.
    mutating func release(_ session: SyncSession, replica: ReplicaID) -> Bool {
        guard byReplica[replica]?.session === session else { return false }
        byReplica.removeValue(forKey: replica)
        resumeDisconnectWaiters(replica)
        return true
    }

    /// Adds a dial loop's wait for the connection to `replica` to end; resumed at once if none is held.
    mutating func waitForDisconnect(of replica: ReplicaID, _ continuation: CheckedContinuation<Void, Never>) {
        guard byReplica[replica] != nil else { return continuation.resume() }
        disconnectWaiters[replica, default: []].append(continuation)
    }

    mutating func resumeDisconnectWaiters(_ replica: ReplicaID) {
        for waiter in disconnectWaiters.removeValue(forKey: replica) ?? [] { waiter.resume() }
    }
}
