import LANSync
import LANSyncSession
import LANSyncTransport
import LANSyncWire
import Logging

/// The sync protocol with one connected peer, after the handshake: carries out what the pure
/// state machine `SyncProtocol` decides (sends, merges, the goodbye and close that end a
/// session, a timer at the machine's next deadline), and keeps `lansync peers` informed.
///
/// One task receives and one task sends, and the receiving task never waits on a write: replies
/// (state announcements, pings, pongs) are queued for the sending task, the only one that
/// writes. Otherwise two peers pushing to each other under backpressure would each block in a
/// write while neither reads — a deadlock that a bulk catch-up with writes in both directions
/// reliably provokes.
actor SyncSession {
    let peer: Hello
    let node: LANSyncNode
    let sender: SealedSender
    let configuration: AgentConfiguration
    let directory: PeerDirectory
    let logger: Logger
    let initiatedByUs: Bool
    /// Rows merged from other peers, held back from this one for a moment (shared by all sessions).
    let relayGrace: SharedRelayGrace
    /// Our state, read once per change for all sessions.
    let ourStateCache: OurStateCache
    /// The protocol's rules and memory (`SyncProtocol`); this actor only carries out what it says.
    private var machine: SyncProtocol
    /// Closes the connection (the receiving task then sees it end).
    private let closeConnection: @Sendable () -> Void
    private let wake: AsyncStream<Void>.Continuation
    let wakes: AsyncStream<Void>

    init(
        peer: Hello,
        node: LANSyncNode,
        sender: SealedSender,
        configuration: AgentConfiguration,
        directory: PeerDirectory,
        relayGrace: SharedRelayGrace,
        ourStateCache: OurStateCache,
        logger: Logger,
        initiatedByUs: Bool,
        close: @escaping @Sendable () -> Void
    ) {
        self.peer = peer
        self.node = node
        self.sender = sender
        self.configuration = configuration
        self.directory = directory
        self.logger = logger
        self.initiatedByUs = initiatedByUs
        self.relayGrace = relayGrace
        self.ourStateCache = ourStateCache
        closeConnection = close
        machine = SyncProtocol(
            hasher: ReplicaStore.elementHasher,
            keepalive: configuration.keepalive,
            // The side that dialed pings an idle connection; the other answers, which keeps its
            // own longer interval from running out: one ping and one pong an interval, not two each.
            idleKeepalive: initiatedByUs ? configuration.idleKeepalive : configuration.idleKeepalive * 3 / 2,
            announceInterval: configuration.announceInterval,
            now: .now
        )
        (wakes, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Asks the push loop to send whatever the peer lacks now.
    nonisolated func push() { wake.yield() }

    /// When the peer was last heard from: a connection silent for long is stuck (`Agent.isStuck`).
    private(set) var lastReceived = ContinuousClock.now

    /// Why the session ended, once it has.
    var ending: SessionEnd? { machine.ending }

    func ourState() throws -> PeerState {
        try ourStateCache.read {
            let summary = try node.store.syncSummary()
            return PeerState(versionVector: summary.versionVector, digest: summary.digest, hlc: summary.hlc)
        }
    }

    /// Our first message: our state. Starts the timer.
    func opening() throws -> WireMessage {
        let message = machine.opening(try ourState(), now: .now)
        armTimer()
        return message
    }

    /// Handles one message from the peer.
    func handle(_ message: WireMessage) async {
        lastReceived = .now
        defer { armTimer() }
        switch machine.received(message, now: .now) {
        case .nothing: break
        case .wakeSender:
            // A state changes who lacks what; a ping only owes a pong.
            if case .state = message {
                await recordProgress()
                askToSettleOpenClaims()
            }
            push()
        case .merge(let delta):
            switch message {
            case .push, .rowPush: await recordProgress()
            default: break
            }
            await startMerge(delta)
        case .mergeRecords(let records):
            // A member hands over a new epoch's records (it ends the session next).
            await merging?.value
            do {
                _ = try await node.mergeHandedRecords(records)
            } catch {
                finish(machine.mergeFailed(error.message, clockSkew: error.code == .clockSkew))
            }
        case .end(let why): finish(why)
        }
    }

    /// The peer's bytes could not be read: goodbye(malformed), then close.
    func receiveFailed(_ reason: String) { finish(machine.receiveFailed(reason)) }

    /// The peer closed the connection.
    func peerClosed() { finish(machine.peerClosed()) }

    /// Our agent is shutting down: goodbye(shutting down), then close.
    func shutDown() { finish(machine.shutdown()) }

    /// A newer connection to this peer replaces this one: goodbye(duplicate connection), then close.
    func replaced() { finish(machine.replaced()) }

    /// Carries out an ending the machine decided: the goodbye it carries, if any, then the close.
    /// The goodbye is bounded in time (a peer that reads nothing cannot hold the connection open).
    private func finish(_ why: SessionEnd?) {
        guard let why else { return }
        wake.finish()
        timer?.task.cancel()
        timer = nil
        let close = closeConnection
        guard let goodbye = why.goodbye else {
            close()
            return
        }
        let sender = sender
        farewell = Task {
            await withTaskGroup(of: Void.self) { race in
                race.addTask { try? await sender.send(goodbye) }
                race.addTask { try? await Task.sleep(for: .seconds(1)) }
                // Whichever comes first closes the connection: a send stuck behind a full socket
                // cannot be cancelled, but the close fails it, so the group's wait ends.
                await race.next()
                close()
                race.cancelAll()
            }
        }
    }

    /// The goodbye being sent, if any; the connection closes once it is written or after 1 s.
    private var farewell: Task<Void, Never>?

    /// Waits until the ending's goodbye is written (or given up on): the connection must not be
    /// torn down under it.
    func farewellSaid() async { await farewell?.value }

    /// The last merge started, if any: merges run one at a time and in order, each task waiting
    /// for the one before, but the receiving task does not wait for one to finish before it
    /// reads, decodes and checks the next message, so checking a batch overlaps merging the one
    /// before (the catch-up's two slowest steps, on two cores).
    private var merging: Task<Void, Never>?
    /// The merge before `merging`: the receiving task waits for it before it starts another, so
    /// that at most one checked batch waits behind the merge under way. With the receiving task
    /// waiting for the merge under way itself, the check thread idled whenever a check finished
    /// before the merge beside it: merges of app-table rows as a session ran 145k rows/s (0.455x
    /// the baseline) against 158k (0.49x) so, medians of 24 runs each, alternated
    /// (`lansync-bench --tables-profile merge session baseline`).
    private var mergingBefore: Task<Void, Never>?

    /// Checks a delta before it is merged (`ReplicaStore.check`); a batch is checked on a
    /// bulk-work thread, while the batch before is being merged. Nil (and the session ends) when
    /// it fails.
    private func checked(_ delta: Delta) async -> CheckedDelta? {
        do {
            if delta.entries.count + delta.preferences.count + delta.rows.count < Self.rowsCheckedInline {
                // Without reading the store's numbers (`store.check`): for a few rows that read
                // costs more than the writer encoding their states itself.
                return try ReplicaStore.check(delta, signed: true)
            }
            let (store, expected) = (node.store, expectedHeads)
            let folded = try await BulkWork.run {
                try store.foldingAhead(store.check(delta, signed: true), expected: expected)
            }
            expectedHeads = folded.expected
            return folded.checked
        } catch let error as StoreError {
            finish(machine.mergeFailed(error.message, clockSkew: false))
        } catch {
            finish(machine.mergeFailed("\(error)", clockSkew: false))
        }
        return nil
    }

    /// Smaller deltas (live pushes) are checked where they arrive: a thread hop would cost more.
    static let rowsCheckedInline = 16

    /// Where the ranges checked so far lead each replica's chain, once their merges are done
    /// (`ReplicaStore.foldingAhead`).
    private var expectedHeads: [ReplicaID: ChainHead] = [:]

    /// Checks `delta`, then merges it once the merge before it is done.
    private func startMerge(_ delta: Delta) async {
        guard let checked = await checked(delta) else { return }
        await mergingBefore?.value
        guard !machine.isEnded else { return }
        let before = merging
        mergingBefore = before
        merging = Task {
            await before?.value
            // A merge before it failed: the session ended, and nothing after it merges.
            guard !self.machine.isEnded else { return }
            await self.merge(checked)
        }
    }

    /// Waits for the merges under way: the receiving task calls it when the peer stops sending.
    func finishMerging() async {
        await merging?.value
        merging = nil
        mergingBefore = nil
    }

    /// Merges rows from the peer (a delta, or a push made into one), each range checked against
    /// its writer's signature first (`LANSyncNode.mergeSigned`).
    private func merge(_ checked: CheckedDelta) async {
        // Marked fresh before the merge commits: the commit wakes every other session at once.
        let ours = node.replicaID
        relayGrace.merged(checked.delta.coverage.filter { $0.replica != ours })
        let signed: LANSyncNode.SignedMergeOutcome
        do {
            signed = try await node.mergeSigned(checked, maxSkewMilliseconds: configuration.maxClockSkewMilliseconds)
        } catch {
            // Rejected whole: nothing of it was applied.
            if error.code != .clockSkew {
                logger.warning(
                    "refused a delta from the peer, closing the connection",
                    metadata: [
                        "peer.name": "\(peer.name)", "peer.device": "\(peer.device)", "error": "\(error.message)",
                    ]
                )
            }
            finish(machine.mergeFailed(error.message, clockSkew: error.code == .clockSkew))
            return
        }
        let outcome = signed.outcome
        if !signed.notTaken.isEmpty {
            logger.debug(
                "asking the peer to send ranges again",
                metadata: [
                    "peer.device": "\(peer.device)",
                    "sync.replicas": "\(signed.notTaken.keys.map(\.description).sorted())",
                ]
            )
        }
        if !signed.claimsOpened.isEmpty {
            // Usual in a catch-up (the superseding change comes later); a claim still open once in
            // sync with every peer was made up, and this line names who sent it.
            logger.debug(
                "the peer's ranges say changes lost that have not lost here yet",
                metadata: [
                    "peer.device": "\(peer.device)",
                    "sync.replicas": "\(signed.claimsOpened.map(\.description).sorted())",
                ]
            )
        }
        ourStateCache.changed()
        let finished = machine.mergeFinished(
            ourDigest: { try? ourState().digest },
            notTaken: signed.notTaken,
            changedAnything: outcome.changedAnything,
            keysKnown: signed.keysKnown,
            ourVector: try? ourState().versionVector
        )
        askToSettleOpenClaims()
        if case .wakeSender = finished { push() }
        mergeLog.merged(outcome.entriesAdded + outcome.preferencesChanged + outcome.rowsChanged)
        if outcome.changedAnything {
            logger.debug(
                "merged a delta",
                metadata: [
                    "peer.device": "\(peer.device)", "sync.entries": "\(outcome.entriesAdded)",
                    "sync.preferences": "\(outcome.preferencesChanged)", "sync.rows": "\(outcome.rowsChanged)",
                ]
            )
        }
        let now = Int64(node.clock.now())
        await directory.update(device: peer.device.description) { $0.lastSync = now }
    }

    /// Asks the peer to send again the ranges of changes said lost here that have not lost yet,
    /// once we lack nothing it holds (`SyncProtocol.claimsOpen`). A read of an almost always
    /// empty table.
    private func askToSettleOpenClaims() {
        guard let claims = try? node.store.openClaims(), !claims.isEmpty, let ours = try? ourState() else { return }
        if case .wakeSender = machine.claimsOpen(claims, ourVector: ours.versionVector) {
            logger.notice(
                "asking the peer to send again ranges whose claimed losses have not happened here",
                metadata: [
                    "peer.device": "\(peer.device)", "sync.replicas": "\(claims.keys.map(\.description).sorted())",
                ]
            )
            push()
        }
    }

    /// Sends queued replies, every batch the peer lacks, then our state when it is owed. The
    /// sending task runs it whenever `push()` was called.
    ///
    /// Every change to the replica wakes every session, so a run that finds nothing to send must
    /// be cheap: one read of our state decides whether rows are missing at all, and serves the
    /// closing state and `lansync peers` too (sending changes nothing in our state; a commit
    /// meanwhile wakes this loop again).
    func pushMissing() async throws {
        for reply in machine.takeReplies() { try await send(reply) }
        var sent = 0
        let (held, settles) = relayGrace.holdBack()
        let ours = try ourState()
        // This run sends at most what we held when it started, less what is held back: rows that
        // arrive while it sends are fresh, and their merge wakes this loop again.
        var cap = ours.versionVector
        for (replica, counter) in held where counter < cap[replica] { cap[replica] = counter }
        let peerLacksRows = cap.counters.contains { replica, counter in counter > machine.peerKnown[replica] }
        var delta = peerLacksRows ? try nextBatch(since: machine.peerKnown, upTo: cap) : Delta()
        while !delta.isEmpty, !machine.isEnded {
            // A large batch means a catch-up: the next batch is read while this one is encoded
            // and sent, both on bulk-work threads. A live push (one new entry) goes out right here.
            let bulk = delta.entries.count + delta.preferences.count + delta.rows.count >= Self.rowsCheckedInline
            var readAhead: Task<Delta, any Error>?
            if bulk {
                var known = machine.peerKnown
                known.advance(by: delta.coverage)
                readAhead = Task { [known] in try await self.nextBatchInBackground(since: known, upTo: cap) }
            }
            let message = try machine.outgoing(delta) { try ourState().digest }
            try await send(message, inBackground: bulk)
            sent += delta.entries.count + delta.preferences.count + delta.rows.count
            delta = try await readAhead?.value ?? nextBatch(since: machine.peerKnown, upTo: cap)
        }
        if case .send(let state) = machine.closingState(now: .now, { sent > 0 ? (try? ourState()) ?? ours : ours }) {
            try await send(state)
        }
        // Rows held back for the peer: the timer looks again once they settle, in case it still lacks them.
        machine.heldBack(held, settles: settles, ourVector: ours.versionVector)
        armTimer()
        if sent > 0 {
            logger.debug("sent rows", metadata: ["peer.device": "\(peer.device)", "sync.rows": "\(sent)"])
            let now = Int64(node.clock.now())
            await directory.update(device: peer.device.description) { $0.lastSync = now }
        }
        await recordProgress(ours: ours)
    }

    /// Sends a message and tells the machine we spoke (a side that spoke within the keepalive
    /// interval does not ping; a wake that sent nothing must not count).
    private func send(_ message: WireMessage, inBackground: Bool = false) async throws {
        try await sender.send(configuration.outgoingMessageRewrite?(message) ?? message, inBackground: inBackground)
        machine.sent(message, at: .now)
    }

    /// The next batch of what a peer holding `known` lacks, without rows above `cap`: signed
    /// ranges, each ending where this replica holds its writer's signed head (so this replica's
    /// own changes go once its chain is extended over them, see `Agent.watchChanges`).
    private func nextBatch(since known: VersionVector, upTo cap: VersionVector) throws -> Delta {
        try node.store.signedDelta(since: known, upTo: cap, maxRows: configuration.deltaBatchRows)
    }

    private func nextBatchInBackground(since known: VersionVector, upTo cap: VersionVector) async throws -> Delta {
        let (store, rows) = (node.store, configuration.deltaBatchRows)
        return try await BulkWork.run { try store.signedDelta(since: known, upTo: cap, maxRows: rows) }
    }

    /// The one timer: at the machine's next deadline (`SyncProtocol.nextDeadline`: a ping, the
    /// end of a silent session, a held-back state or relay), or the flush of the "synced" log line
    /// if sooner. Armed again after every event; a timer that fires early (the deadline moved
    /// later meanwhile) finds nothing due and arms itself for the new one.
    private var timer: (at: ContinuousClock.Instant, task: Task<Void, Never>)?

    private func armTimer() {
        guard var deadline = machine.nextDeadline else { return }
        if let flush = mergeLog.flushAt { deadline = min(deadline, flush) }
        if let timer, timer.at <= deadline { return }
        timer?.task.cancel()
        timer = (
            deadline,
            Task { [weak self] in
                try? await Task.sleep(until: deadline)
                guard !Task.isCancelled else { return }
                await self?.timerFired()
            }
        )
    }

    private func timerFired() {
        timer = nil
        let now = ContinuousClock.now
        if let flush = mergeLog.flushAt, flush <= now, let line = mergeLog.flush(now: now) { log(line) }
        switch machine.timerFired(now: now) {
        case .nothing: break
        case .wakeSender: push()
        case .end(let why): finish(why)
        }
        armTimer()
    }

    /// Updates what `lansync peers` shows: who is behind whom.
    private func recordProgress(ours known: PeerState? = nil) async {
        guard let announced = machine.peerAnnounced, let ours = known ?? (try? ourState()) else { return }
        let now = Int64(node.clock.now())
        let weLack = announced.versionVector.operationsAhead(of: ours.versionVector)
        let theyLack = ours.versionVector.operationsAhead(of: announced.versionVector)
        let digest = announced.digest.description
        let vector = Dictionary(
            uniqueKeysWithValues: announced.versionVector.counters.map { ($0.key.description, $0.value) }
        )
        await directory.update(device: peer.device.description) { record in
            record.weLack = weLack
            record.theyLack = theyLack
            record.digest = digest
            record.lastSeen = now
            record.versionVector = vector
        }
        let flushWasDue = mergeLog.flushAt
        if let line = mergeLog.progress(weLack: weLack, now: .now) { log(line) }
        if mergeLog.flushAt != flushWasDue { armTimer() }
    }

    private func log(_ line: MergeLog.Line) {
        logger.log(
            level: line.isNotable ? .info : .debug,
            line.done ? "synced" : "syncing",
            metadata: [
                "peer.name": "\(peer.name)", "peer.device": "\(peer.device)", "sync.received": "\(line.received)",
                "sync.remaining": "\(line.remaining)",
            ]
        )
    }

    var announced: PeerState? { machine.peerAnnounced }
    /// When to log what was merged (a pure policy; the timer brings its "synced" line).
    private var mergeLog = MergeLog(now: .now)
}
