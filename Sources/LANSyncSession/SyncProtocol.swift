package import LANSyncCore
package import LANSyncWire

/// The sync protocol with one peer after the handshake (`docs/protocol.md` §6), as a pure state
/// machine: each event is one mutating method that returns what to do; nothing here reads a
/// socket, a clock or the store. The agent's session actor carries the actions out (sends,
/// merges, closes, a timer), so every rule below — its timing and every way a session ends
/// included — is tested without a connection, the session fuzz target drives it with arbitrary
/// message sequences, and the group simulator runs it on a simulated clock.
///
/// Phases (`State`): `opened` until the peer's first `state`, then `syncing`, then `ended(why)`
/// for good; once ended, every event returns no action. Only while `opened` may the peer hand
/// records over (protocol §11). A session ends when the peer says goodbye or closes, when its
/// bytes or rows are malformed (we say `goodbye(malformed)`), when a merge refuses its clock
/// (`goodbye(clock skew)`), when nothing was heard for three keepalive intervals nor for one
/// since a ping (no goodbye: the peer is unreachable), when we shut down (`goodbye(shutting
/// down)`) or when a newer connection to the same peer replaces this one (`goodbye(duplicate
/// connection)`).
///
/// Time comes in as the `now` of each event. What is due later — a ping after a keepalive
/// interval of our silence, the end of a silent session, our state held back by the announce
/// interval, rows held back for a relay to settle — is one deadline (`nextDeadline`); the shell
/// calls `timerFired(now:)` when it passes.
///
/// What the machine remembers (`Conversation`): `peerKnown`, our belief of what the peer holds —
/// its last announced vector, advanced by every delta we send and every delta it sends us (the
/// peer holds what it sends; never echo it back), and lowered only when the peer asks for a range
/// again (`resend`) — and the replies owed to it (pings, pongs, requests to resend, our state
/// after a merge).
package struct SyncProtocol: Sendable {
    /// How many times a place not taken is asked for again because the peer's state changed
    /// (protocol §12.5).
    package static let asksOnPeerChange = 3

    /// The session's phase, with the data it needs.
    package enum State: Sendable {
        /// Connected; the peer has not announced its state yet.
        case opened(Conversation)
        /// The peer has announced its state at least once (`Conversation.peerAnnounced`).
        case syncing(Conversation)
        /// For good: why, and what we told the peer.
        case ended(SessionEnd)
        /// Never seen from outside: holds the place while an event updates the conversation in
        /// place, so that its buffers are not copied (as swift-nio's state machines do).
        case modifying
    }

    /// What a session remembers while it is open.
    package struct Conversation: Sendable {
        /// What we believe the peer holds.
        package fileprivate(set) var peerKnown = VersionVector()
        /// The peer's last announced state (or implied by a digest-implied push); nil while `opened`.
        package fileprivate(set) var peerAnnounced: PeerState?
        /// Pings, pongs and requests to resend, in order.
        fileprivate var repliesOwed: [WireMessage] = []
        /// The ranges we asked the peer to send again, by replica (the last `resend` of each, for
        /// whatever reason): where we stood, and whether the peer has answered (sent a range of the
        /// replica from at or below that place since). No replica is asked for again while its ask
        /// is unanswered, and a place not taken is not asked for again until a merge after the
        /// answer changed something (a range that could not be taken then may be takeable after
        /// it: a key or a superseding change arrived). Waiting for the answer matters when several
        /// batches of the replica are in flight: each would be left out for the same reason, and
        /// asking again for each had the peer send the whole replica once per batch.
        fileprivate var resendAsked: [ReplicaID: (place: UInt64, answered: Bool)] = [:]
        /// Ranges the peer asked for again and we have not sent since, by replica: the place it
        /// asked from. The peer may ask for a range it holds and counts (to settle an open claim,
        /// protocol §12.5), so its state or a delta of it that comes before we send must not
        /// raise `peerKnown` past that place and cancel the request.
        fileprivate var resendOwed: [ReplicaID: UInt64] = [:]
        /// Places of replicas whose range a merge did not take, until this replica holds them.
        fileprivate var waiting: [ReplicaID: UInt64] = [:]
        /// Waiting places asked for again once their replica's key was known, by replica.
        fileprivate var askedOnceKnown: [ReplicaID: UInt64] = [:]
        /// Waiting places asked for again because the peer's state changed, by replica: the place
        /// and how many times (at most `SyncProtocol.asksOnPeerChange`).
        fileprivate var askedOnPeerChange: [ReplicaID: (place: UInt64, times: Int)] = [:]
        /// Open claims the peer was asked to settle, by replica: the claim's counter, the digest
        /// the peer had announced when last asked, and how many times it was asked.
        fileprivate var claimAsked: [ReplicaID: (counter: UInt64, peerDigest: StateDigest, times: Int)] = [:]
        /// Set after a merge: the peer should hear our new state even if we send no rows.
        fileprivate var stateOwed = false
        /// The digest the peer last heard from us (announced, or implied by a push).
        fileprivate var digestToldToPeer: StateDigest?
        /// Whether every row sent since the last `state` went as a digest-implied push.
        fileprivate var digestKnownToPeer = true
        fileprivate var pushEncoder = EntryPushEncoder()
        fileprivate var pushDecoder = EntryPushDecoder()
        fileprivate var rowPushEncoder = RowPushEncoder()
        fileprivate var rowPushDecoder = RowPushDecoder()
        /// One item per merge asked for and not yet finished, in order: the digest check the row push
        /// being merged carried, if any.
        fileprivate var mergesAwaiting: [DigestCheck?] = []
        /// How many `state` messages the peer has sent: a check only counts when none came after it.
        fileprivate var statesReceived = 0
        /// Set when we sent a row push whose digest check stands for our state: `statesReceived` then.
        /// The peer's next state either shows it holds our digest, or we owe it our state.
        fileprivate var checkSentAfterStates: Int?
        fileprivate var lastHeard: ContinuousClock.Instant
        /// When we last sent the peer anything (`sent(at:)`): a side that spoke within the last
        /// interval has nothing to prove, so it does not ping.
        fileprivate var lastSpoke: ContinuousClock.Instant
        /// When anything but a ping or a pong last went either way: a session quiet for an idle
        /// interval since pings at the idle interval (`idleKeepalive`).
        fileprivate var lastBusy: ContinuousClock.Instant
        fileprivate var pingsSent: UInt64 = 0
        /// When we sent the first ping the peer has not answered (nothing heard since): the
        /// session may end only an interval after it, so a machine that stalled past the silence
        /// bound asks before it gives up on a peer whose messages wait unread in its socket.
        fileprivate var firstUnansweredPing: ContinuousClock.Instant?
        /// When we last sent our state.
        fileprivate var lastAnnounced: ContinuousClock.Instant?
        /// When our state, held back by the announce interval, may go.
        fileprivate var announceAt: ContinuousClock.Instant?
        /// When rows held back from this peer (`RelayGrace`) settle, if it still lacks them then.
        fileprivate var relaySettlesAt: ContinuousClock.Instant?
        /// Set by an event that ends the session.
        fileprivate var ending: SessionEnd?

        fileprivate init(now: ContinuousClock.Instant) {
            lastHeard = now
            lastSpoke = now
            lastBusy = now
        }

        fileprivate mutating func end(_ why: SessionEnd) -> SessionEnd {
            ending = why
            return why
        }
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

    /// What the timer asks for (`timerFired`).
    package enum Timer: Equatable, Sendable {
        case nothing
        /// Something is due to the peer (a ping among the replies, our state, held-back rows).
        case wakeSender
        /// Nothing heard for three keepalive intervals: close, with no goodbye.
        case end(SessionEnd)
    }

    package private(set) var state: State
    private let hasher: ElementHasher
    /// How often to ping; three intervals of silence end the session.
    package let keepalive: Duration
    /// How often to ping once nothing but pings and pongs went either way for this long; three
    /// such intervals of silence end the session then. Equal to `keepalive` unless given: an
    /// idle session's pings are what a node in many groups spends its idle time on.
    package let idleKeepalive: Duration
    /// Our state changes from merges of other peers' rows reach this peer at most this often: in
    /// a burst a node merges from every peer, and a state after each merge to each peer would
    /// cost more than the rows. Owed states (after this peer's own rows, or after rows that did
    /// not imply our digest) go at once.
    package let announceInterval: Duration

    package init(
        hasher: ElementHasher,
        keepalive: Duration,
        idleKeepalive: Duration? = nil,
        announceInterval: Duration = .milliseconds(250),
        now: ContinuousClock.Instant
    ) {
        self.hasher = hasher
        self.keepalive = keepalive
        self.idleKeepalive = max(keepalive, idleKeepalive ?? keepalive)
        self.announceInterval = announceInterval
        state = .opened(Conversation(now: now))
    }

    package var isEnded: Bool { ending != nil }

    /// Why the session ended, once it has.
    package var ending: SessionEnd? {
        if case .ended(let why) = state { return why }
        return nil
    }

    /// The open conversation, if any.
    private var conversation: Conversation? {
        switch state {
        case .opened(let conversation), .syncing(let conversation): return conversation
        case .ended, .modifying: return nil
        }
    }

    /// What we believe the peer holds.
    package var peerKnown: VersionVector { conversation?.peerKnown ?? VersionVector() }
    /// The peer's last announced state (or implied by a digest-implied push).
    package var peerAnnounced: PeerState? { conversation?.peerAnnounced }
    /// When the peer was last heard from.
    package var lastHeardFrom: ContinuousClock.Instant? { conversation?.lastHeard }

    /// Runs an event on the open conversation in place, then moves to the phase it leads to;
    /// `ended` when the session is over.
    private mutating func update<Result>(ended: Result, _ event: (inout Conversation) -> Result) -> Result {
        var conversation: Conversation
        switch state {
        case .opened(let open), .syncing(let open): conversation = open
        case .ended, .modifying: return ended
        }
        state = .modifying
        let result = event(&conversation)
        if let why = conversation.ending {
            state = .ended(why)
        } else {
            state = conversation.peerAnnounced == nil ? .opened(conversation) : .syncing(conversation)
        }
        return result
    }

    // MARK: Receiving

    /// A message arrived from the peer.
    package mutating func received(_ message: WireMessage, now: ContinuousClock.Instant) -> Received {
        let hasher = hasher
        return update(ended: .nothing) { c in
            c.lastHeard = now
            c.firstUnansweredPing = nil
            switch message {
            case .ping, .pong: break
            default: c.lastBusy = now
            }
            switch message {
            case .state(let announced):
                c.statesReceived += 1
                let peerChanged = c.peerAnnounced.map { $0.digest != announced.digest } ?? false
                c.peerAnnounced = announced
                c.peerKnown = c.peerKnown.merged(with: announced.versionVector)
                c.keepResendsOwed()
                if peerChanged { c.askAgainForWaiting(heldBy: announced.versionVector) }
                return .wakeSender
            case .delta(let delta):
                c.noteHeld(delta)
                c.mergesAwaiting.append(nil)
                return .merge(delta)
            case .push(let push):
                let entry: Entry
                do throws(WireError) {
                    entry = try c.pushDecoder.entry(from: push)
                } catch {
                    return .end(c.end(.malformed(error.reason)))
                }
                let delta = EntryPush.delta(carrying: entry, signature: push.signature)
                c.noteHeld(delta)
                if push.digestImplied, let announced = c.peerAnnounced {
                    // The sender's state is its last announced one plus this entry: no state message follows.
                    c.advanceAnnounced(
                        digest: EntryPush.impliedDigest(after: announced.digest, adding: entry, hasher: hasher),
                        dot: entry.dot,
                        hlc: entry.hlc
                    )
                }
                c.mergesAwaiting.append(nil)
                return .merge(delta)
            case .rowPush(let push):
                let change: RowChange
                do throws(WireError) {
                    change = try c.rowPushDecoder.change(from: push)
                } catch {
                    return .end(c.end(.malformed(error.reason)))
                }
                let delta = RowPush.delta(carrying: change, signature: push.signature)
                c.noteHeld(delta)
                let afterStates = c.statesReceived
                c.mergesAwaiting.append(
                    push.digestCheck.map {
                        DigestCheck(check: $0, dot: change.dot, hlc: change.hlc, afterStates: afterStates)
                    }
                )
                return .merge(delta)
            case .ping(let value):
                c.repliesOwed.append(.pong(value))
                return .wakeSender
            case .records(let records):
                // Only a hand-over sends records: a member answering a connection from one that was
                // away during a removal, before any state and instead of a session (protocol §11).
                guard c.statesReceived == 0 else {
                    return .end(
                        c.end(
                            .malformed(
                                "a records message in a sync session (records come only in a hand-over, before any state)"
                            )
                        )
                    )
                }
                return .mergeRecords(records)
            case .resend(let replica, let counter):
                // The peer did not take what we sent of the replica after `counter`: send it again.
                // Kept only where it lowered our belief: at most one per replica the peer
                // announced or we sent, however many a peer asks for.
                if c.peerKnown[replica] > counter {
                    c.peerKnown[replica] = counter
                    c.resendOwed[replica] = counter
                }
                return .wakeSender
            case .pong:
                return .nothing
            case .goodbye(let code, let reason):
                return .end(c.end(.peerSaidGoodbye(code: code, reason: reason)))
            }
        }
    }

    /// The peer's bytes could not be read as a message (or failed authentication).
    package mutating func receiveFailed(_ reason: String) -> SessionEnd? {
        update(ended: nil) { $0.end(.malformed(reason)) }
    }

    /// The peer closed the connection without a goodbye.
    package mutating func peerClosed() -> SessionEnd? {
        update(ended: nil) { $0.end(.peerClosed) }
    }

    /// A merge finished: the peer should hear our new state. `ourDigest` is read only when the
    /// merged rows came in a row push with a digest check (nil: unknown, the check is skipped):
    /// when our digest now starts with it, we hold exactly the peer's state (unless the peer
    /// announced a state since), so we know its digest without its `state` message.
    /// `notTaken`: the replicas whose range the merge did not take, with where we stand in each;
    /// the peer is asked to send them again (once per place until the peer has answered and a
    /// merge changed something since: `changedAnything`).
    ///
    /// A place not taken waits until this replica holds it (`ourVector`). Once the replica's key
    /// is known here (`keysKnown`: its record, or the key that the record which came with the
    /// refused range names, may be pinned by another replica's range after the range that
    /// needed it was refused), the place is asked for again, once. Without that, a range left
    /// out for want of a key that arrived one batch later was never asked for again in the
    /// session; asking after every merge that changed records instead asked for a replica whose
    /// key never comes (a device nobody here pinned) over and over.
    package mutating func mergeFinished(
        ourDigest: () -> StateDigest?,
        notTaken: [ReplicaID: UInt64] = [:],
        changedAnything: Bool = true,
        keysKnown: Set<ReplicaID> = [],
        ourVector: VersionVector? = nil
    ) -> Received {
        update(ended: .nothing) { c in
            c.stateOwed = true
            if changedAnything { c.resendAsked = c.resendAsked.filter { !$0.value.answered } }
            if let ourVector { c.waiting = c.waiting.filter { ourVector[$0.key] <= $0.value } }
            var asks = notTaken
            for (replica, counter) in c.waiting
            where notTaken[replica] == nil && keysKnown.contains(replica) && c.askedOnceKnown[replica] != counter
                && !c.awaitsAnswer(replica)
            {
                c.askedOnceKnown[replica] = counter
                asks[replica] = counter
                c.resendAsked[replica] = nil
            }
            c.waiting.merge(notTaken) { _, new in new }
            for (replica, counter) in asks.sorted(by: { $0.key < $1.key })
            where !c.awaitsAnswer(replica) && c.resendAsked[replica]?.place != counter {
                c.resendAsked[replica] = (counter, false)
                c.repliesOwed.append(.resend(replica, after: counter))
            }
            let pending = c.mergesAwaiting.isEmpty ? nil : c.mergesAwaiting.removeFirst()
            if let pending, pending.afterStates == c.statesReceived, c.peerAnnounced != nil, let ours = ourDigest(),
                RowPush.check(of: ours) == pending.check
            {
                c.advanceAnnounced(digest: ours, dot: pending.dot, hlc: pending.hlc)
            }
            return .wakeSender
        }
    }

    /// Open claims here (`ReplicaStore.openClaims`: per replica, the lowest counter of a change a
    /// received range said lost that has not lost here), looked at after the peer's state or a
    /// merge. Once we lack nothing the peer announced, the peer holds whatever superseded those
    /// changes, or the changes themselves, live: it is asked to send each such replica again
    /// from just before the claim (protocol §12.5, "Asking again"). Once per place, and again
    /// only when the peer announced another state since (it may have taken the change that
    /// settles the claim after it sent the range: a relay that held only the stub), at most
    /// `SyncProtocol.asksOnPeerChange` more times: a peer that holds no better copy is not asked
    /// in a loop. Never while an earlier ask for the replica is unanswered.
    package mutating func claimsOpen(_ claims: [ReplicaID: UInt64], ourVector: VersionVector) -> Received {
        update(ended: .nothing) { c in
            guard !claims.isEmpty, let announced = c.peerAnnounced, ourVector.dominates(announced.versionVector) else {
                return .nothing
            }
            var asked = false
            for (replica, counter) in claims.sorted(by: { $0.key < $1.key })
            where counter > 0 && announced.versionVector[replica] >= counter && !c.awaitsAnswer(replica) {
                let before = c.claimAsked[replica].flatMap { $0.counter == counter ? $0 : nil }
                if let before {
                    guard before.peerDigest != announced.digest, before.times <= SyncProtocol.asksOnPeerChange else {
                        continue
                    }
                }
                c.claimAsked[replica] = (counter, announced.digest, (before?.times ?? 0) + 1)
                c.resendAsked[replica] = (counter - 1, false)
                c.repliesOwed.append(.resend(replica, after: counter - 1))
                asked = true
            }
            return asked ? .wakeSender : .nothing
        }
    }

    /// A merge refused the peer's rows (rejected whole, nothing applied).
    package mutating func mergeFailed(_ reason: String, clockSkew: Bool) -> SessionEnd? {
        update(ended: nil) { $0.end(clockSkew ? .clockSkew(reason) : .malformed(reason)) }
    }

    // MARK: Sending

    /// Our first message: our state.
    package mutating func opening(_ ours: PeerState, now: ContinuousClock.Instant) -> WireMessage {
        update(ended: .state(ours)) { c in
            c.digestToldToPeer = ours.digest
            c.lastAnnounced = now
            return .state(ours)
        }
    }

    /// Replies owed to the peer (pings, pongs, requests to resend), in order; the sending side
    /// sends them first.
    package mutating func takeReplies() -> [WireMessage] {
        update(ended: []) { c in
            defer { c.repliesOwed.removeAll() }
            return c.repliesOwed
        }
    }

    /// The message that carries `batch` (signed ranges the peer lacks, read for `peerKnown`): a
    /// compact push for exactly one new entry or row change that follows what the peer holds,
    /// else a delta. `digest` is our current digest, asked for only when a push could imply it.
    /// Advances `peerKnown`.
    package mutating func outgoing<Failure: Error>(
        _ batch: Delta,
        digest: () throws(Failure) -> StateDigest
    ) throws(Failure) -> WireMessage {
        let hasher = hasher
        var failure: Failure?
        let message = update(ended: WireMessage.delta(batch)) { c -> WireMessage in
            do throws(Failure) {
                return try c.outgoing(batch, hasher: hasher, digest: digest)
            } catch {
                failure = error
                return .delta(batch)
            }
        }
        if let failure { throw failure }
        return message
    }

    /// What follows the batches.
    package enum Closing: Equatable, Sendable {
        case nothing
        /// Send our state now.
        case send(WireMessage)
    }

    /// After the batches: whether our state must follow — at once when it is owed (after a merge
    /// of this peer's rows, or rows went that did not imply our digest), else when it changed
    /// since the peer last heard it (other peers' rows merged), at most every announce interval
    /// (until then it waits for the timer: `nextDeadline`). The peer's announcements are what let
    /// other nodes see it needs no relay (`RelayGrace`).
    package mutating func closingState<Failure: Error>(
        now: ContinuousClock.Instant,
        _ ours: () throws(Failure) -> PeerState
    ) throws(Failure) -> Closing {
        let interval = announceInterval
        var failure: Failure?
        let closing = update(ended: Closing.nothing) { c -> Closing in
            var owed = c.stateOwed || !c.digestKnownToPeer
            let announced: PeerState
            do throws(Failure) {
                announced = try ours()
            } catch {
                failure = error
                return .nothing
            }
            if let sentAfter = c.checkSentAfterStates, c.statesReceived > sentAfter {
                // The peer spoke since our row push: it either holds our digest, or must hear it.
                c.checkSentAfterStates = nil
                if c.peerAnnounced?.digest != announced.digest { owed = true }
            }
            if !owed {
                guard announced.digest != c.digestToldToPeer else { return .nothing }
                if let last = c.lastAnnounced, now - last < interval {
                    c.announceAt = last + interval
                    return .nothing
                }
            }
            c.stateOwed = false
            c.digestKnownToPeer = true
            c.checkSentAfterStates = nil
            c.digestToldToPeer = announced.digest
            c.lastAnnounced = now
            c.announceAt = nil
            return .send(.state(announced))
        }
        if let failure { throw failure }
        return closing
    }

    /// Rows were held back from this peer for a moment (`RelayGrace.holdBack`: per replica, the
    /// counter sent up to; they settle at `settles`): when it still lacks any of them once they
    /// settle, the timer wakes the sending side then.
    package mutating func heldBack(
        _ held: [ReplicaID: UInt64],
        settles: ContinuousClock.Instant?,
        ourVector: VersionVector
    ) {
        update(ended: ()) { c in
            guard let settles, held.contains(where: { c.peerKnown[$0.key] < ourVector[$0.key] }) else { return }
            c.relaySettlesAt = min(c.relaySettlesAt ?? settles, settles)
        }
    }

    // MARK: Time and endings

    /// When the timer must fire next (`timerFired`): a ping owed after a keepalive interval of our
    /// silence, the end of a session silent for three (and an interval after an unanswered ping),
    /// our held-back state, or held-back rows settling. Nil once the session has ended.
    package var nextDeadline: ContinuousClock.Instant? {
        guard let c = conversation else { return nil }
        var deadline = min(
            c.lastSpoke + pingInterval(c),
            Self.silenceEnds(c, keepalive: silenceInterval(c))
        )
        if let at = c.announceAt { deadline = min(deadline, at) }
        if let at = c.relaySettlesAt { deadline = min(deadline, at) }
        return deadline
    }

    /// When a silent peer's session ends: three keepalive intervals after we last heard from it,
    /// and no sooner than one interval after the first ping it left unanswered (a late timer, as
    /// after the machine stalled, pings first). With no ping out, the timer then sends one.
    private static func silenceEnds(_ c: Conversation, keepalive: Duration) -> ContinuousClock.Instant {
        guard let ping = c.firstUnansweredPing else { return c.lastHeard + keepalive * 3 }
        return max(c.lastHeard + keepalive * 3, ping + keepalive)
    }

    /// The interval our silence may last before we ping: the idle one when, by the time the busy
    /// one runs out, the session has been quiet for an idle interval. A function of the state
    /// alone, so that the deadline and what the timer does at it always agree.
    private func pingInterval(_ c: Conversation) -> Duration {
        c.lastSpoke + keepalive - c.lastBusy >= idleKeepalive ? idleKeepalive : keepalive
    }

    /// The interval the silence bound counts in (three of them, and one after an unanswered ping):
    /// the idle one when the session had been quiet for an idle interval by the time three busy
    /// intervals of silence would run out. Right after busy traffic a dead peer is noticed in
    /// three busy intervals; an idle session waits for the peer's idle pings.
    private func silenceInterval(_ c: Conversation) -> Duration {
        c.lastHeard + keepalive * 3 - c.lastBusy >= idleKeepalive ? idleKeepalive : keepalive
    }

    /// The timer fired: the session ends when the peer has said nothing for three keepalive
    /// intervals, nor for one since our first ping it did not answer; a ping is owed when we have
    /// said nothing for one (or the peer is silent past the bound and no ping is out); held-back
    /// state or rows are due.
    package mutating func timerFired(now: ContinuousClock.Instant) -> Timer {
        guard let held = conversation else { return .nothing }
        let keepalive = silenceInterval(held)
        let pingInterval = pingInterval(held)
        return update(ended: .nothing) { c in
            let silence = now - c.lastHeard
            if silence >= keepalive * 3, let ping = c.firstUnansweredPing, now - ping >= keepalive {
                return .end(c.end(.keepaliveExpired(silence: silence)))
            }
            var due = false
            // Our pongs (or anything else we sent) already told the peer we are here: each side then
            // sends one message an interval, not a ping and a pong. A peer silent past the bound is
            // asked once before the session ends, whatever we sent it.
            if now - c.lastSpoke >= pingInterval || (silence >= keepalive * 3 && c.firstUnansweredPing == nil) {
                c.pingsSent += 1
                c.lastSpoke = now
                if c.firstUnansweredPing == nil { c.firstUnansweredPing = now }
                c.repliesOwed.append(.ping(c.pingsSent))
                due = true
            }
            if let at = c.announceAt, now >= at {
                c.announceAt = nil
                due = true
            }
            if let at = c.relaySettlesAt, now >= at {
                c.relaySettlesAt = nil
                due = true
            }
            return due ? .wakeSender : .nothing
        }
    }

    /// We sent the peer `message`.
    package mutating func sent(_ message: WireMessage, at now: ContinuousClock.Instant) {
        update(ended: ()) { c in
            c.lastSpoke = now
            switch message {
            case .ping, .pong: break
            default: c.lastBusy = now
            }
        }
    }

    /// This node is shutting down.
    package mutating func shutdown() -> SessionEnd? {
        update(ended: nil) { $0.end(.shuttingDown) }
    }

    /// A newer connection to the same peer replaces this one.
    package mutating func replaced() -> SessionEnd? {
        update(ended: nil) { $0.end(.replaced) }
    }
}

/// What a row push's digest check says, kept until its merge finishes.
package struct DigestCheck: Sendable {
    let check: UInt64
    let dot: Dot
    let hlc: HybridTimestamp
    let afterStates: Int
}

extension SyncProtocol.Conversation {
    /// The peer holds what it sends: never send it back. A range from at or below a place we
    /// asked the peer to send again answers that ask.
    fileprivate mutating func noteHeld(_ delta: Delta) {
        for range in delta.coverage {
            if peerKnown[range.replica] < range.through { peerKnown[range.replica] = range.through }
            if let asked = resendAsked[range.replica], range.from <= asked.place {
                resendAsked[range.replica]?.answered = true
            }
        }
        keepResendsOwed()
    }

    /// The peer announced a new state: it may hold now what it lacked when it sent a range we did
    /// not take (the range's record, which reached it after it sent the range without one, from
    /// a member that had kept the record back). Each waiting place the peer's vector passes is
    /// asked for again, once per changed state of the peer and `SyncProtocol.asksOnPeerChange`
    /// times at most, so that a range that never becomes takeable (a device nobody here pinned)
    /// is not asked for at every write of a busy peer.
    fileprivate mutating func askAgainForWaiting(heldBy peerVector: VersionVector) {
        for (replica, place) in waiting.sorted(by: { $0.key < $1.key })
        where peerVector[replica] > place && !awaitsAnswer(replica) {
            let before = askedOnPeerChange[replica].flatMap { $0.place == place ? $0.times : nil } ?? 0
            guard before < SyncProtocol.asksOnPeerChange else { continue }
            askedOnPeerChange[replica] = (place, before + 1)
            resendAsked[replica] = (place, false)
            repliesOwed.append(.resend(replica, after: place))
        }
    }

    /// Whether we asked the peer to send the replica again and it has not answered yet. The answer
    /// starts at or below the place asked for, and every later place is at or above it (this
    /// replica's vector only grows), so asking again before it comes only has the peer send the
    /// same changes twice.
    fileprivate func awaitsAnswer(_ replica: ReplicaID) -> Bool {
        resendAsked[replica].map { !$0.answered } ?? false
    }

    /// Keeps `peerKnown` at or below each place the peer asked to have sent again, until it is sent.
    fileprivate mutating func keepResendsOwed() {
        for (replica, counter) in resendOwed where peerKnown[replica] > counter {
            peerKnown[replica] = counter
        }
    }

    /// The peer's announced state after one pushed row whose digest we know: that digest, its
    /// vector advanced to the row's counter when it stood just below, its clock at least the row's.
    fileprivate mutating func advanceAnnounced(digest: StateDigest, dot: Dot, hlc: HybridTimestamp) {
        guard var announced = peerAnnounced else { return }
        announced.digest = digest
        if announced.versionVector[dot.replica] == dot.counter - 1 {
            announced.versionVector[dot.replica] = dot.counter
        }
        announced.hlc = max(announced.hlc, hlc)
        peerAnnounced = announced
    }

    /// See `SyncProtocol.outgoing`.
    fileprivate mutating func outgoing<Failure: Error>(
        _ batch: Delta,
        hasher: ElementHasher,
        digest: () throws(Failure) -> StateDigest
    ) throws(Failure) -> WireMessage {
        defer {
            peerKnown.advance(by: batch.coverage)
            for range in batch.coverage {
                if let owed = resendOwed[range.replica], range.from <= owed { resendOwed[range.replica] = nil }
            }
        }
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
        if batch.rows.count == 1, let change = batch.rows.first, let signature,
            batch == RowPush.delta(carrying: change, signature: signature)
        {
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
        case .replaced:
            return .goodbye(code: .duplicateConnection, reason: "a newer connection to this peer replaced this one")
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
