package import LANSyncCore
package import LANSyncWire

/// The sync protocol with one peer after the handshake (`docs/protocol.md` §6), as a pure state
/// machine: each event is one mutating method that returns what to do; nothing here reads a
/// socket, a clock or the store. The agent's session actor carries the actions out (sends,
/// merges, closes), so every rule below — and every way a session ends — is tested without a
/// connection, and the session fuzz target drives it with arbitrary message sequences.
///
/// States: `syncing` until the session ends, then `ended(why)` for good; once ended, every event
/// returns no action. A session ends when the peer says goodbye or closes, when its bytes or rows
/// are malformed (we say `goodbye(malformed)`), when a merge refuses its clock (`goodbye(clock
/// skew)`), when nothing was heard for three keepalive intervals (no goodbye: the peer is
/// unreachable), when we shut down (`goodbye(shutting down)`) or when a newer connection to the
/// same peer replaces this one (`goodbye(duplicate connection)`).
///
/// What the machine remembers: `peerKnown`, our belief of what the peer holds — its last
/// announced vector, advanced by every delta we send and every delta it sends us (the peer holds
/// what it sends; never echo it back), and lowered only when the peer asks for a range again
/// (`resend`) — and the replies owed to it (pongs, requests to resend, our state after a merge).
package struct SyncProtocol: Sendable {
    package enum State: Equatable, Sendable {
        case syncing
        case ended(SessionEnd)
    }

    /// What to do after a message from the peer.
    package enum Received: Equatable, Sendable {
        /// Nothing (a pong, or the session has ended already).
        case nothing
        /// The peer's state changed (or a reply is owed): let the sending side run.
        case wakeSender
        /// Check and merge these rows (in order with earlier merges); report `mergeFinished` or `mergeFailed`.
        case merge(Delta)
        /// Merge these handed-over group records without coverage (a member handing over a new
        /// epoch); report `mergeFailed` if they are refused.
        case mergeRecords([PreferenceWrite])
        /// End the session: send the goodbye if it has one, then close.
        case end(SessionEnd)
    }

    /// What a keepalive tick asks for.
    package enum Tick: Equatable, Sendable {
        case nothing
        case ping(UInt64)
        case end(SessionEnd)
    }

    package private(set) var state: State = .syncing
    /// What we believe the peer holds.
    package private(set) var peerKnown = VersionVector()
    /// The peer's last announced state (or implied by a digest-implied push).
    package private(set) var peerAnnounced: PeerState?
    /// Pongs and requests to resend, in order.
    private var repliesOwed: [WireMessage] = []
    /// The ranges we asked the peer to send again, by replica: where we stood. Not asked again
    /// for the same place until a merge changed something (a range that could not be taken then
    /// may be takeable after it: a key or a superseding change arrived).
    private var resendAsked: [ReplicaID: UInt64] = [:]
    /// Places of replicas whose range a merge did not take, until this replica holds them.
    private var waiting: [ReplicaID: UInt64] = [:]
    /// Waiting places asked for again once their replica's key was known, by replica.
    private var askedOnceKnown: [ReplicaID: UInt64] = [:]
    /// Open claims the peer was asked to settle, by replica: the claim's counter.
    private var claimAsked: [ReplicaID: UInt64] = [:]
    /// Set after a merge: the peer should hear our new state even if we send no rows.
    private var stateOwed = false
    /// The digest the peer last heard from us (announced, or implied by a push).
    private var digestToldToPeer: StateDigest?
    /// Whether every row sent since the last `state` went as a digest-implied push.
    private var digestKnownToPeer = true
    private var pushEncoder = EntryPushEncoder()
    private var pushDecoder = EntryPushDecoder()
    private var rowPushEncoder = RowPushEncoder()
    private var rowPushDecoder = RowPushDecoder()
    /// One item per merge asked for and not yet finished, in order: the digest check the row push
    /// being merged carried, if any.
    private var mergesAwaiting: [DigestCheck?] = []
    /// How many `state` messages the peer has sent: a check only counts when none came after it.
    private var statesReceived = 0
    /// Set when we sent a row push whose digest check stands for our state: `statesReceived` then.
    /// The peer's next state either shows it holds our digest, or we owe it our state.
    private var checkSentAfterStates: Int?
    private var lastHeard: ContinuousClock.Instant
    /// When we last sent the peer anything (`sent(at:)`): a side that spoke within the last
    /// interval has nothing to prove, so it does not ping.
    private var lastSpoke: ContinuousClock.Instant
    private var pingsSent: UInt64 = 0
    private let hasher: ElementHasher
    /// How often to ping; three intervals of silence end the session.
    package let keepalive: Duration
    /// Our state changes from merges of other peers' rows reach this peer at most this often: in
    /// a burst a node merges from every peer, and a state after each merge to each peer would
    /// cost more than the rows. Owed states (after this peer's own rows, or after rows that did
    /// not imply our digest) go at once.
    package let announceInterval: Duration
    /// When we last sent our state.
    private var lastAnnounced: ContinuousClock.Instant?

    package init(
        hasher: ElementHasher, keepalive: Duration, announceInterval: Duration = .milliseconds(250),
        now: ContinuousClock.Instant
    ) {
        self.hasher = hasher
        self.keepalive = keepalive
        self.announceInterval = announceInterval
        lastHeard = now
        lastSpoke = now
    }

    package var isEnded: Bool { state != .syncing }

    // MARK: Receiving

    /// A message arrived from the peer.
    package mutating func received(_ message: WireMessage, now: ContinuousClock.Instant) -> Received {
        guard state == .syncing else { return .nothing }
        lastHeard = now
        switch message {
        case .state(let announced):
            statesReceived += 1
            peerAnnounced = announced
            peerKnown = peerKnown.merged(with: announced.versionVector)
            return .wakeSender
        case .delta(let delta):
            noteHeld(delta)
            mergesAwaiting.append(nil)
            return .merge(delta)
        case .push(let push):
            let entry: Entry
            do {
                entry = try pushDecoder.entry(from: push)
            } catch {
                return .end(end(.malformed(error.reason)))
            }
            let delta = EntryPush.delta(carrying: entry, signature: push.signature)
            noteHeld(delta)
            if push.digestImplied, let announced = peerAnnounced {
                // The sender's state is its last announced one plus this entry: no state message follows.
                advanceAnnounced(
                    digest: EntryPush.impliedDigest(after: announced.digest, adding: entry, hasher: hasher), dot: entry.dot, hlc: entry.hlc)
            }
            mergesAwaiting.append(nil)
            return .merge(delta)
        case .rowPush(let push):
            let change: RowChange
            do {
                change = try rowPushDecoder.change(from: push)
            } catch {
                return .end(end(.malformed(error.reason)))
            }
            let delta = RowPush.delta(carrying: change, signature: push.signature)
            noteHeld(delta)
            mergesAwaiting.append(push.digestCheck.map {
                DigestCheck(check: $0, dot: change.dot, hlc: change.hlc, afterStates: statesReceived)
            })
            return .merge(delta)
        case .ping(let value):
            repliesOwed.append(.pong(value))
            return .wakeSender
        case .records(let records):
            // Only a hand-over sends records: a member answering a connection from one that was
            // away during a removal, before any state and instead of a session (protocol §11).
            guard statesReceived == 0 else {
                return .end(end(.malformed("a records message in a sync session (records come only in a hand-over, before any state)")))
            }
            return .mergeRecords(records)
        case .resend(let replica, let counter):
            // The peer did not take what we sent of the replica after `counter`: send it again.
            if peerKnown[replica] > counter { peerKnown[replica] = counter }
            return .wakeSender
        case .pong:
            return .nothing
        case .goodbye(let code, let reason):
            return .end(end(.peerSaidGoodbye(code: code, reason: reason)))
        }
    }

    /// The peer holds what it sends: never send it back.
    private mutating func noteHeld(_ delta: Delta) {
        for range in delta.coverage where peerKnown[range.replica] < range.through {
            peerKnown[range.replica] = range.through
        }
    }

    /// The peer's bytes could not be read as a message (or failed authentication).
    package mutating func receiveFailed(_ reason: String) -> SessionEnd? {
        guard state == .syncing else { return nil }
        return end(.malformed(reason))
    }

    /// The peer closed the connection without a goodbye.
    package mutating func peerClosed() -> SessionEnd? {
        guard state == .syncing else { return nil }
        return end(.peerClosed)
    }

    /// What a row push's digest check says, kept until its merge finishes.
    private struct DigestCheck: Sendable {
        let check: UInt64
        let dot: Dot
        let hlc: HybridTimestamp
        let afterStates: Int
    }

    /// A merge finished: the peer should hear our new state. `ourDigest` is read only when the
    /// merged rows came in a row push with a digest check (nil: unknown, the check is skipped):
    /// when our digest now starts with it, we hold exactly the peer's state (unless the peer
    /// announced a state since), so we know its digest without its `state` message.
    /// `notTaken`: the replicas whose range the merge did not take, with where we stand in each;
    /// the peer is asked to send them again (once per place until a merge changes something:
    /// `changedAnything`).
    ///
    /// A place not taken waits until this replica holds it (`ourVector`). Once the replica's key
    /// is known here (`keysKnown`: it may come in another replica's range, after the range that
    /// needed it was refused), the place is asked for again, once. Without that, a range left
    /// out for want of a key that arrived one batch later was never asked for again in the
    /// session; asking after every merge that changed records instead asked for a replica whose
    /// key never comes (a device nobody here pinned) over and over.
    package mutating func mergeFinished(
        ourDigest: () -> StateDigest?, notTaken: [ReplicaID: UInt64] = [:], changedAnything: Bool = true,
        keysKnown: Set<ReplicaID> = [], ourVector: VersionVector? = nil
    ) -> Received {
        guard state == .syncing else { return .nothing }
        stateOwed = true
        if changedAnything { resendAsked.removeAll() }
        if let ourVector { waiting = waiting.filter { ourVector[$0.key] <= $0.value } }
        var asks = notTaken
        for (replica, counter) in waiting where notTaken[replica] == nil && keysKnown.contains(replica) && askedOnceKnown[replica] != counter {
            askedOnceKnown[replica] = counter
            asks[replica] = counter
            resendAsked[replica] = nil
        }
        waiting.merge(notTaken) { _, new in new }
        for (replica, counter) in asks.sorted(by: { $0.key < $1.key }) where resendAsked[replica] != counter {
            resendAsked[replica] = counter
            repliesOwed.append(.resend(replica, after: counter))
        }
        let pending = mergesAwaiting.isEmpty ? nil : mergesAwaiting.removeFirst()
        if let pending, pending.afterStates == statesReceived, peerAnnounced != nil, let ours = ourDigest(),
            RowPush.check(of: ours) == pending.check
        {
            advanceAnnounced(digest: ours, dot: pending.dot, hlc: pending.hlc)
        }
        return .wakeSender
    }

    /// Open claims here (`ReplicaStore.openClaims`: per replica, the lowest counter of a change a
    /// received range said lost that has not lost here), looked at after the peer's state or a
    /// merge. Once we lack nothing the peer announced, the peer holds whatever superseded those
    /// changes, or the changes themselves, live: it is asked to send each such replica again
    /// from just before the claim (protocol §6, "Asking again"). Once per place per session, so
    /// a peer that holds no better copy is not asked in a loop.
    package mutating func claimsOpen(_ claims: [ReplicaID: UInt64], ourVector: VersionVector) -> Received {
        guard state == .syncing, !claims.isEmpty, let announced = peerAnnounced,
            ourVector.dominates(announced.versionVector)
        else { return .nothing }
        var asked = false
        for (replica, counter) in claims.sorted(by: { $0.key < $1.key })
        where counter > 0 && announced.versionVector[replica] >= counter && claimAsked[replica] != counter {
            claimAsked[replica] = counter
            repliesOwed.append(.resend(replica, after: counter - 1))
            asked = true
        }
        return asked ? .wakeSender : .nothing
    }

    /// The peer's announced state after one pushed row whose digest we know: that digest, its
    /// vector advanced to the row's counter when it stood just below, its clock at least the row's.
    private mutating func advanceAnnounced(digest: StateDigest, dot: Dot, hlc: HybridTimestamp) {
        guard var announced = peerAnnounced else { return }
        announced.digest = digest
        if announced.versionVector[dot.replica] == dot.counter - 1 { announced.versionVector[dot.replica] = dot.counter }
        announced.hlc = max(announced.hlc, hlc)
        peerAnnounced = announced
    }

    /// A merge refused the peer's rows (rejected whole, nothing applied).
    package mutating func mergeFailed(_ reason: String, clockSkew: Bool) -> SessionEnd? {
        guard state == .syncing else { return nil }
        return end(clockSkew ? .clockSkew(reason) : .malformed(reason))
    }

    // MARK: Sending

    /// Our first message: our state.
    package mutating func opening(_ ours: PeerState, now: ContinuousClock.Instant) -> WireMessage {
        digestToldToPeer = ours.digest
        lastAnnounced = now
        return .state(ours)
    }

    /// Replies owed to the peer (pongs, requests to resend), in order; the sending side sends them first.
    package mutating func takeReplies() -> [WireMessage] {
        guard state == .syncing else { return [] }
        defer { repliesOwed.removeAll() }
        return repliesOwed
    }

    /// The message that carries `batch` (signed ranges the peer lacks, read for `peerKnown`): a
    /// compact push for exactly one new entry or row change that follows what the peer holds,
    /// else a delta. `digest` is our current digest, asked for only when a push could imply it.
    /// Advances `peerKnown`.
    package mutating func outgoing(_ batch: Delta, digest: () throws -> StateDigest) rethrows -> WireMessage {
        defer { peerKnown.advance(by: batch.coverage) }
        let signature = batch.coverage.count == 1 ? batch.coverage[0].signature : nil
        if batch.entries.count == 1, let entry = batch.entries.first, let signature,
            batch == EntryPush.delta(carrying: entry, signature: signature)
        {
            var implied = false
            if let told = digestToldToPeer {
                let current = try digest()
                implied = EntryPush.impliedDigest(after: told, adding: entry, hasher: hasher) == current
                if implied { digestToldToPeer = current }
            }
            if let push = pushEncoder.push(entry, signature: signature, digestImplied: implied) {
                if !implied { digestKnownToPeer = false }
                return .push(push)
            }
        }
        if batch.rows.count == 1, let change = batch.rows.first, let signature, batch == RowPush.delta(carrying: change, signature: signature) {
            let current = try digest()
            if let push = rowPushEncoder.push(change, signature: signature, digestCheck: RowPush.check(of: current)) {
                // The peer learns our digest from the check when it held our last one; its next
                // state tells us whether it did (`closingState`).
                if digestToldToPeer != nil, checkSentAfterStates == nil { checkSentAfterStates = statesReceived }
                digestToldToPeer = current
                return .rowPush(push)
            }
        }
        digestKnownToPeer = false
        return .delta(batch)
    }

    /// What follows the batches.
    package enum Closing: Equatable, Sendable {
        case nothing
        /// Send our state now.
        case send(WireMessage)
        /// Our state changed, but the peer heard it less than an announce interval ago: run the
        /// sending side again then.
        case later(ContinuousClock.Instant)
    }

    /// After the batches: whether our state must follow — at once when it is owed (after a merge
    /// of this peer's rows, or rows went that did not imply our digest), else when it changed
    /// since the peer last heard it (other peers' rows merged), at most every announce interval.
    /// The peer's announcements are what let other nodes see it needs no relay (`RelayGrace`).
    package mutating func closingState(now: ContinuousClock.Instant, _ ours: () throws -> PeerState) rethrows -> Closing {
        guard state == .syncing else { return .nothing }
        var owed = stateOwed || !digestKnownToPeer
        let announced = try ours()
        if let sentAfter = checkSentAfterStates, statesReceived > sentAfter {
            // The peer spoke since our row push: it either holds our digest, or must hear it.
            checkSentAfterStates = nil
            if peerAnnounced?.digest != announced.digest { owed = true }
        }
        if !owed {
            guard announced.digest != digestToldToPeer else { return .nothing }
            if let last = lastAnnounced, now - last < announceInterval { return .later(last + announceInterval) }
        }
        stateOwed = false
        digestKnownToPeer = true
        checkSentAfterStates = nil
        digestToldToPeer = announced.digest
        lastAnnounced = now
        return .send(.state(announced))
    }

    // MARK: Time and endings

    /// The keepalive timer fired (every `keepalive`): a ping when we have said nothing for an
    /// interval, the end of the session when the peer has said nothing for three.
    package mutating func tick(now: ContinuousClock.Instant) -> Tick {
        guard state == .syncing else { return .nothing }
        let silence = now - lastHeard
        if silence > keepalive * 3 { return .end(end(.keepaliveExpired(silence: silence))) }
        // Our pongs (or anything else we sent) already told the peer we are here: each side then
        // sends one message an interval, not a ping and a pong.
        guard now - lastSpoke >= keepalive - .milliseconds(100) else { return .nothing }
        pingsSent += 1
        lastSpoke = now
        return .ping(pingsSent)
    }

    /// We sent the peer a message (any kind).
    package mutating func sent(at now: ContinuousClock.Instant) { lastSpoke = now }

    /// When the peer was last heard from.
    package var lastHeardFrom: ContinuousClock.Instant { lastHeard }

    /// This node is shutting down.
    package mutating func shutdown() -> SessionEnd? {
        guard state == .syncing else { return nil }
        return end(.shuttingDown)
    }

    /// A newer connection to the same peer replaces this one.
    package mutating func replaced() -> SessionEnd? {
        guard state == .syncing else { return nil }
        return end(.replaced)
    }

    private mutating func end(_ why: SessionEnd) -> SessionEnd {
        state = .ended(why)
        return why
    }
}

/// Why a sync session ended, and what we tell the peer.
package enum SessionEnd: Error, Equatable, Sendable, CustomStringConvertible {
    case peerSaidGoodbye(code: GoodbyeCode, reason: String)
    case peerClosed
    case malformed(String)
    case clockSkew(String)
    /// Nothing heard for this long: the peer or the link is gone.
    case keepaliveExpired(silence: Duration)
    case shuttingDown
    case replaced

    /// The goodbye we send before closing, if any.
    package var goodbye: WireMessage? {
        switch self {
        case .peerSaidGoodbye, .peerClosed, .keepaliveExpired: return nil
        case .malformed(let reason): return .goodbye(code: .malformed, reason: reason)
        case .clockSkew(let reason): return .goodbye(code: .clockSkew, reason: reason)
        case .shuttingDown: return .goodbye(code: .shuttingDown, reason: "the peer's agent is shutting down")
        case .replaced: return .goodbye(code: .duplicateConnection, reason: "a newer connection to this peer replaced this one")
        }
    }

    package var description: String {
        switch self {
        case .peerSaidGoodbye(_, let reason): return "the peer closed the connection: \(reason)"
        case .peerClosed: return "connection closed by the peer"
        case .malformed(let reason): return "malformed data from the peer: \(reason)"
        case .clockSkew(let reason): return reason
        case .keepaliveExpired(let silence):
            let seconds = Double(silence.components.seconds) + Double(silence.components.attoseconds) / 1e18
            return "nothing heard from the peer for \((seconds * 10).rounded() / 10) s: it or the network "
                + "between us is unreachable"
        case .shuttingDown: return "this agent is shutting down"
        case .replaced: return "a newer connection to the same peer replaced this one"
        }
    }
}
