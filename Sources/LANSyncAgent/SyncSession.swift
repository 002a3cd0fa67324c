import LANSync
import LANSyncWire
import Logging

/// The sync protocol with one connected peer, after the handshake.
///
/// One task receives and one task sends, and the receiving task never waits on a write: replies
/// (state announcements, pongs) are queued for the sending task. Otherwise two peers pushing to
/// each other under backpressure would each block in a write while neither reads — a deadlock
/// that a bulk catch-up with writes in both directions reliably provokes.
///
/// Both sides announce their state (version vector, digest, clock) on connect; each then streams
/// what the other lacks in bounded delta batches, and keeps doing so as its own state changes
/// (local writes, or rows merged from other peers: relays). `peerKnown` is what we believe the
/// peer holds: its last announced vector, advanced by every batch we send and every batch it
/// sends us, so nothing is sent twice and nothing it sent is echoed back.
actor SyncSession {
    let peer: Hello
    let node: LANSyncNode
    let sender: SealedSender
    let configuration: AgentConfiguration
    let directory: PeerDirectory
    let logger: Logger
    let initiatedByUs: Bool
    private var peerKnown = VersionVector()
    private var peerAnnounced: PeerState?
    /// Replies the receiving task queued for the sending task.
    private var announceState = false
    private var pongs: [UInt64] = []
    /// Per-connection tables of the compact live push (`EntryPush`), one per direction.
    private var pushEncoder = EntryPushEncoder()
    private var pushDecoder = EntryPushDecoder()
    /// The digest the peer last heard from us (announced, or implied by a push).
    private var digestToldToPeer: StateDigest?
    private let wake: AsyncStream<Void>.Continuation
    let wakes: AsyncStream<Void>
    private(set) var lastReceived = ContinuousClock.now

    init(
        peer: Hello, node: LANSyncNode, sender: SealedSender, configuration: AgentConfiguration,
        directory: PeerDirectory, logger: Logger, initiatedByUs: Bool
    ) {
        self.peer = peer
        self.node = node
        self.sender = sender
        self.configuration = configuration
        self.directory = directory
        self.logger = logger
        self.initiatedByUs = initiatedByUs
        (wakes, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Asks the push loop to send whatever the peer lacks now.
    nonisolated func push() { wake.yield() }

    func finish() { wake.finish() }

    func ourState() throws -> PeerState {
        let summary = try node.store.syncSummary()
        return PeerState(versionVector: summary.versionVector, digest: summary.digest, hlc: summary.hlc)
    }

    /// Our state, as about to be announced to the peer (remembered for digest-implied pushes).
    func stateToAnnounce() throws -> PeerState {
        let state = try ourState()
        digestToldToPeer = state.digest
        return state
    }

    /// Handles one message from the peer.
    func handle(_ message: WireMessage) async throws {
        lastReceived = .now
        switch message {
        case .state(let state):
            peerAnnounced = state
            peerKnown = peerKnown.merged(with: state.versionVector)
            await recordProgress()
            push()
        case .delta(let delta):
            try await startMerge(try await checked(delta))
        case .push(let push):
            let entry: Entry
            do {
                entry = try pushDecoder.entry(from: push)
            } catch {
                let sender = sender
                Task { try? await sender.send(.goodbye(code: .malformed, reason: "\(error)")) }
                throw ConnectionError.malformed("\(error)")
            }
            try await startMerge(try await checked(EntryPush.delta(carrying: entry)))
            if push.digestImplied, var announced = peerAnnounced {
                // The sender's state is its last announced one plus this entry: no state message follows.
                announced.digest = EntryPush.impliedDigest(
                    after: announced.digest, adding: entry, hasher: ReplicaStore.elementHasher)
                if announced.versionVector[entry.dot.replica] == entry.dot.counter - 1 {
                    announced.versionVector[entry.dot.replica] = entry.dot.counter
                }
                announced.hlc = max(announced.hlc, entry.hlc)
                peerAnnounced = announced
                await recordProgress()
            }
        case .ping(let value):
            pongs.append(value)
            push()
        case .pong:
            break
        case .goodbye(let code, let reason):
            throw ConnectionError.refusedByPeer(code: code, reason: reason)
        }
    }

    /// The merge under way, if any: merges run one at a time and in order, but the receiving task
    /// does not wait for one to finish before it reads and decodes the next message, so decoding
    /// a batch overlaps merging the one before (the catch-up's two slowest steps, on two cores).
    private var merging: Task<Void, any Error>?

    /// Checks a delta before it is merged (`ReplicaStore.check`); a batch is checked on a
    /// bulk-work thread, while the batch before is being merged.
    private func checked(_ delta: Delta) async throws -> CheckedDelta {
        do {
            if delta.entries.count + delta.preferences.count < Self.rowsCheckedInline {
                return try ReplicaStore.check(delta)
            }
            return try await BulkWork.run { try ReplicaStore.check(delta) }
        } catch let error as StoreError {
            let sender = sender
            Task { try? await sender.send(.goodbye(code: .malformed, reason: error.message)) }
            throw ConnectionError.malformed(error.message)
        }
    }

    /// Smaller deltas (live pushes) are checked where they arrive: a thread hop would cost more.
    static let rowsCheckedInline = 16

    /// Starts merging `delta` once the merge before it is done; throws that merge's error, if any.
    private func startMerge(_ delta: CheckedDelta) async throws {
        try await merging?.value
        merging = Task { try await self.merge(delta) }
    }

    /// Waits for the merge under way: the receiving task calls it when the peer stops sending.
    func finishMerging() async throws {
        try await merging?.value
        merging = nil
    }

    /// Merges rows from the peer (a delta, or a push made into one), noting what it holds.
    private func merge(_ checked: CheckedDelta) async throws {
        let delta = checked.delta
        // The peer holds what it sends: never echo it back.
        for range in delta.coverage where peerKnown[range.replica] < range.through {
            peerKnown[range.replica] = range.through
        }
        do {
            let outcome = try await node.merge(checked, maxSkewMilliseconds: configuration.maxClockSkewMilliseconds)
            announceState = true
            push()
            mergedSinceLog += outcome.entriesAdded + outcome.preferencesChanged
            if outcome.changedAnything {
                logger.debug(
                    "merged a delta",
                    metadata: ["peer.device": "\(peer.device)", "sync.entries": "\(outcome.entriesAdded)",
                        "sync.preferences": "\(outcome.preferencesChanged)"])
            }
        } catch {
            // Best effort, never waited on: the connection closes right after.
            let code: GoodbyeCode = error.code == .clockSkew ? .clockSkew : .malformed
            let sender = sender
            Task { try? await sender.send(.goodbye(code: code, reason: error.message)) }
            throw ConnectionError.malformed(error.message)
        }
        let now = Int64(node.clock.now())
        await directory.update(device: peer.device.description) { $0.lastSync = now }
    }

    /// Sends queued replies, every batch the peer lacks, then our state. The sending task runs it
    /// whenever `push()` was called.
    func pushMissing() async throws {
        for value in pongs { try await sender.send(.pong(value)) }
        pongs.removeAll()
        var sent = 0
        // Whether the peer can tell our new digest without a state message (every row went as a
        // digest-implied push).
        var digestKnownToPeer = true
        var delta = try nextBatch(since: peerKnown)
        while !delta.isEmpty {
            // A large batch means a catch-up: the next batch is read while this one is encoded
            // and sent, both on bulk-work threads. A live push (one new entry) goes out right here.
            let bulk = delta.entries.count + delta.preferences.count >= Self.rowsCheckedInline
            var readAhead: Task<Delta, any Error>?
            if bulk {
                var known = peerKnown
                known.advance(by: delta.coverage)
                readAhead = Task { [known] in try await self.nextBatchInBackground(since: known) }
            }
            if let push = try compactPush(for: delta) {
                try await sender.send(.push(push))
                if !push.digestImplied { digestKnownToPeer = false }
            } else {
                try await sender.send(.delta(delta), inBackground: bulk)
                digestKnownToPeer = false
            }
            peerKnown.advance(by: delta.coverage)
            sent += delta.entries.count + delta.preferences.count
            delta = try await readAhead?.value ?? nextBatch(since: peerKnown)
        }
        if announceState || (sent > 0 && !digestKnownToPeer) {
            announceState = false
            try await sender.send(.state(try stateToAnnounce()))
        }
        if sent > 0 {
            logger.debug("sent rows", metadata: ["peer.device": "\(peer.device)", "sync.rows": "\(sent)"])
            let now = Int64(node.clock.now())
            await directory.update(device: peer.device.description) { $0.lastSync = now }
        }
        await recordProgress()
    }

    /// The next batch of what a peer holding `known` lacks.
    private func nextBatch(since known: VersionVector) throws -> Delta {
        try node.store.delta(since: known, maxRows: configuration.deltaBatchRows)
    }

    private func nextBatchInBackground(since known: VersionVector) async throws -> Delta {
        let (store, rows) = (node.store, configuration.deltaBatchRows)
        return try await BulkWork.run { try store.delta(since: known, maxRows: rows) }
    }

    /// A live push for a delta that is exactly one new entry following what the peer holds of
    /// its replica; nil for anything else (sent as a delta). The push implies our new digest when
    /// it is what we last told the peer plus this entry, so no state message needs to follow.
    private func compactPush(for delta: Delta) throws -> EntryPush? {
        guard delta.entries.count == 1, let entry = delta.entries.first, delta == EntryPush.delta(carrying: entry) else {
            return nil
        }
        var implied = false
        if let told = digestToldToPeer {
            let current = try ourState().digest
            implied = EntryPush.impliedDigest(after: told, adding: entry, hasher: ReplicaStore.elementHasher) == current
            if implied { digestToldToPeer = current }
        }
        return pushEncoder.push(entry, digestImplied: implied)
    }

    /// Updates what `lansync peers` shows: who is behind whom.
    private func recordProgress() async {
        guard let announced = peerAnnounced, let ours = try? ourState() else { return }
        let now = Int64(node.clock.now())
        let weLack = announced.versionVector.operationsAhead(of: ours.versionVector)
        let theyLack = ours.versionVector.operationsAhead(of: announced.versionVector)
        let digest = announced.digest.description
        let vector = Dictionary(uniqueKeysWithValues: announced.versionVector.counters.map { ($0.key.description, $0.value) })
        await directory.update(device: peer.device.description) { record in
            record.weLack = weLack
            record.theyLack = theyLack
            record.digest = digest
            record.lastSeen = now
            record.versionVector = vector
        }
        // One log line per burst of merges: when in sync again and nothing more arrived for a second
        // (live pushes of single taps stay at debug), and one every 10 s while a long catch-up runs.
        remainingToReceive = weLack
        if mergedSinceLog > 0, weLack > 0, ContinuousClock.now - lastProgressLog > .seconds(10) {
            logSynced(done: false)
        } else if mergedSinceLog > 0, weLack == 0, logFlush == nil {
            logFlush = Task { [weak self] in
                try? await Task.sleep(for: .seconds(1))
                await self?.flushSyncedLog()
            }
        }
    }

    private func flushSyncedLog() {
        logFlush = nil
        guard mergedSinceLog > 0 else { return }
        if remainingToReceive == 0 { logSynced(done: true) } else { logSynced(done: false) }
    }

    private func logSynced(done: Bool) {
        logger.log(
            level: done && mergedSinceLog < 10 ? .debug : .info, done ? "synced" : "syncing",
            metadata: [
                "peer.name": "\(peer.name)", "peer.device": "\(peer.device)", "sync.received": "\(mergedSinceLog)",
                "sync.remaining": "\(remainingToReceive)",
            ])
        mergedSinceLog = 0
        lastProgressLog = .now
    }

    var announced: PeerState? { peerAnnounced }
    private var mergedSinceLog = 0
    private var remainingToReceive: UInt64 = 0
    private var lastProgressLog = ContinuousClock.now
    private var logFlush: Task<Void, Never>?
}
