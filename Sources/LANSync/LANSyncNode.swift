import Foundation
public import LANSyncCore
public import LANSyncIdentity
public import LANSyncStore
import Synchronization

/// A LANSync node embedded in an app: its identity and its replica, with the calls an app makes.
///
/// Writes are local and durable when they return, and never wait on the network: they commit
/// to SQLite (WAL, `synchronous=FULL`), concurrent appends sharing one commit. Reads see every
/// committed write. `changes()` streams what was committed, local or merged.
public final class LANSyncNode: Sendable {
    /// Where the node keeps its identity and its replica.
    public let dataDirectory: DataDirectory
    /// This device's identity: its device ID, name and where the ID came from.
    public let identity: DeviceIdentity
    /// The replica: what sync and the CLI's inspection read and merge, not part of an app's API.
    package let store: ReplicaStore
    package let clock: NodeClock
    let feed = ChangeFeed()
    /// The replicas' signing keys the records held here name, with the fingerprint of the records
    /// they were derived from (`replicaSigningKeys`): every merge of a peer's delta asks, and
    /// deriving them checks signatures.
    let signingKeyCache = Mutex<(fingerprint: [Int64], keys: [ReplicaID: [UInt8]], pinned: [String: Set<String>])?>(nil)
    /// The `lansync/keys/DEVICE/KEY` records known to be held (`recordPinnedKeys`): a merge that
    /// pinned nothing new writes nothing and reads nothing.
    let attestedKeys = Mutex<Set<String>>([])
    /// The replica records that came with ranges left out for want of a key (`mergeSigned`):
    /// the key such a record names may be pinned by a later merge, and only then is the range
    /// worth asking for again, though the record itself is not held here.
    let recordsAwaitingKeys = Mutex(AwaitingRecords())
    /// Makes other processes' commits visible to live queries; started by `database`.
    let otherWriters = Mutex<ReplicaChangeWatch?>(nil)

    /// This device's stable ID, the same on every install on this machine.
    public var deviceID: DeviceID { identity.deviceID }
    package var replicaID: ReplicaID { store.replica }

    private init(dataDirectory: DataDirectory, identity: DeviceIdentity, store: ReplicaStore, clock: NodeClock) {
        self.dataDirectory = dataDirectory
        self.identity = identity
        // Every change this node makes extends its replica's chain, whose heads its device signs.
        self.store = store.signingHeads(with: identity.signingKey)
        self.clock = clock
    }

    deinit {
        feed.finish()
        otherWriters.withLock { $0?.stop() }
    }

    // MARK: Setting up

    /// What `initialize` did.
    public struct InitReport: Sendable {
        /// False when the node was fully initialised already and nothing changed.
        public var changedAnything: Bool { identityCreated || replicaCreated }
        /// Whether this call created the identity (false: one was stored, and it was kept).
        public let identityCreated: Bool
        /// Whether this call created the replica (false: one existed, and it was kept).
        public let replicaCreated: Bool
        /// The node's identity, created or stored.
        public let identity: DeviceIdentity
        /// The replica's ID: new with every install, so no (replica, counter) pair is issued twice.
        public let replicaID: ReplicaID
        /// Why the machine ID could not be used, when the device ID had to be random.
        public let machineIDProblem: String?
    }

    /// Creates the node in `dataDirectory`: an identity (unless one is stored: it wins) and a
    /// replica with a fresh replica ID (unless one exists). Changes nothing on an initialised node.
    public static func initialize(
        at dataDirectory: DataDirectory,
        name: String?,
        machineIDPath: String = "/etc/machine-id"
    ) throws(LANSyncError) -> InitReport {
        if let name, let problem = deviceNameProblem(name) { throw LANSyncError(.invalidInput, problem) }
        do {
            try SecretFile.makePrivateDirectory(dataDirectory.path)
        } catch {
            throw LANSyncError(.storage, "\(error); choose a writable place with --data-dir")
        }
        let file = IdentityFile(path: dataDirectory.identityPath)
        var identity: DeviceIdentity
        var identityCreated = false
        var problem: String?
        do {
            if let stored = try file.load() {
                identity = stored
            } else {
                let made = IdentityFactory.make(name: name ?? defaultDeviceName(), machineIDPath: machineIDPath)
                identity = made.0
                problem = made.1?.description
                try file.save(identity)
                identityCreated = true
            }
        } catch {
            throw LANSyncError(.unusableData, error.description)
        }
        let created: Bool
        let store: ReplicaStore
        do {
            (store, created) = try ReplicaStore.openOrCreate(path: dataDirectory.replicaPath, device: identity.deviceID)
        } catch {
            throw translate(error)
        }
        return InitReport(
            identityCreated: identityCreated,
            replicaCreated: created,
            identity: identity,
            replicaID: store.replica,
            machineIDProblem: problem
        )
    }

    /// Creates a node with a given identity and replica (a group simulation draws the identity and
    /// the replica's nonce from its seed, so a seed replays exactly), or opens it when it exists.
    package static func create(
        at dataDirectory: DataDirectory,
        identity: DeviceIdentity,
        replica: ReplicaStore.ReplicaChoice,
        clock: NodeClock
    ) throws(LANSyncError) -> LANSyncNode {
        do {
            try SecretFile.makePrivateDirectory(dataDirectory.path)
            let file = IdentityFile(path: dataDirectory.identityPath)
            if try file.load() == nil { try file.save(identity) }
        } catch {
            throw LANSyncError(.storage, "\(error)")
        }
        do {
            let (store, _) = try ReplicaStore.openOrCreate(
                path: dataDirectory.replicaPath,
                device: identity.deviceID,
                choosing: replica
            )
            return LANSyncNode(dataDirectory: dataDirectory, identity: identity, store: store, clock: clock)
        } catch {
            throw translate(error)
        }
    }

    /// Opens the node in `dataDirectory`; it must have been initialised.
    public static func open(at dataDirectory: DataDirectory) throws(LANSyncError) -> LANSyncNode {
        try open(at: dataDirectory, clock: NodeClock())
    }

    /// Opens the node with a clock of its own (tests and `LANSYNC_CLOCK_OFFSET_MS` move it).
    package static func open(at dataDirectory: DataDirectory, clock: NodeClock) throws(LANSyncError) -> LANSyncNode {
        let identity: DeviceIdentity?
        do {
            identity = try IdentityFile(path: dataDirectory.identityPath).load()
        } catch {
            throw LANSyncError(.unusableData, error.description)
        }
        guard let identity else {
            throw LANSyncError(
                .notInitialized,
                "no LANSync node in \(dataDirectory.path); run `lansync init` first (or point --data-dir elsewhere)"
            )
        }
        do {
            let store = try ReplicaStore.open(path: dataDirectory.replicaPath)
            return LANSyncNode(dataDirectory: dataDirectory, identity: identity, store: store, clock: clock)
        } catch {
            throw translate(error)
        }
    }

    static func defaultDeviceName() -> String {
        let host = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? ""
        return deviceNameProblem(host) == nil ? host : "lansync-device"
    }

    /// Why a device name is unusable, or nil: 1–64 printable characters.
    public static func deviceNameProblem(_ name: String) -> String? {
        if name.trimmingCharacters(in: .whitespaces).isEmpty { return "a device name cannot be empty" }
        if name.count > 64 { return "a device name has at most 64 characters" }
        if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return "a device name cannot contain control characters"
        }
        return nil
    }

    // MARK: Writing

    /// Checks an append and compacts its payload; throws saying what is wrong.
    package static func validated(_ request: AppendRequest) throws(LANSyncError) -> AppendRequest {
        if let problem = Names.streamProblem(request.stream) { throw LANSyncError(.invalidInput, problem) }
        if let id = request.id, let problem = Names.entryIDProblem(id) { throw LANSyncError(.invalidInput, problem) }
        var checked = request
        checked.payload = try JSONText.compact(request.payload)
        return checked
    }

    /// Appends an entry to `stream`; durable when it returns. With an `id` already held, returns
    /// the entry held: retrying an append is safe.
    @discardableResult
    public func append(to stream: String, payload: String, id: String? = nil) async throws(LANSyncError) -> Entry {
        try await append([AppendRequest(id: id, stream: stream, payload: payload)])[0]
    }

    /// Appends several entries; all are validated first, so a bad one means none is written.
    public func append(_ requests: [AppendRequest]) async throws(LANSyncError) -> [Entry] {
        var checked = [AppendRequest]()
        checked.reserveCapacity(requests.count)
        for request in requests { checked.append(try Self.validated(request)) }
        let feed = feed
        do {
            // Concurrent appends share one commit (the store groups them); the feed hears of each
            // in commit order.
            return try await store.append(checked, now: clock.now()) { feed.publish(.entries($0, local: true)) }
        } catch {
            throw Self.translate(error)
        }
    }

    /// Sets a preference to a JSON value (last writer wins across devices). Keys are
    /// case-insensitive: capitals are stored, sent and listed in lowercase.
    @discardableResult
    public func set(_ key: String, to jsonValue: String) async throws(LANSyncError) -> PreferenceWrite {
        if let problem = Names.appKeyProblem(key) { throw LANSyncError(.invalidInput, problem) }
        let key = Names.foldedKey(key)
        if let problem = Self.reservedKeyProblem(key) { throw LANSyncError(.invalidInput, problem) }
        return try await write(PreferenceRequest(key: key, value: try JSONText.compact(jsonValue)))
    }

    /// Unsets a preference: a tombstone that wins over older writes on every device.
    @discardableResult
    public func unset(_ key: String) async throws(LANSyncError) -> PreferenceWrite {
        if let problem = Names.appKeyProblem(key) { throw LANSyncError(.invalidInput, problem) }
        let key = Names.foldedKey(key)
        if let problem = Self.reservedKeyProblem(key) { throw LANSyncError(.invalidInput, problem) }
        return try await write(PreferenceRequest(key: key, value: nil))
    }

    /// Keys under `lansync/` hold the group's membership records, written by LANSync itself.
    static func reservedKeyProblem(_ key: String) -> String? {
        guard key.hasPrefix(MemberKeys.prefix) else { return nil }
        return "preference keys under \(MemberKeys.prefix) are LANSync's own (the group's member records; "
            + "`lansync group members` shows them); use another first part, e.g. app/\(key.dropFirst(MemberKeys.prefix.count))"
    }

    private func write(_ request: PreferenceRequest) async throws(LANSyncError) -> PreferenceWrite {
        do {
            let feed = feed
            let writes = try await store.setPreferences([request], now: clock.now()) {
                feed.publish(.preferences($0, local: true))
            }
            return writes[0]
        } catch {
            throw Self.translate(error)
        }
    }

    /// Merges a delta from a peer or a file. Refused whole when a row's clock reading is more than
    /// `maxSkewMilliseconds` ahead of ours, or when it is malformed. Large deltas are committed in
    /// bounded transactions (see `ReplicaStore.merge`), so local writes are never held up for long.
    @discardableResult
    package func merge(_ delta: Delta, maxSkewMilliseconds: UInt64) async throws(LANSyncError) -> MergeOutcome {
        let checked: CheckedDelta
        do { checked = try store.check(delta) } catch { throw Self.translate(error) }
        return try await merge(checked, maxSkewMilliseconds: maxSkewMilliseconds)
    }

    /// Merges a delta checked beforehand with `ReplicaStore.check`, which a receiver runs on
    /// another thread while the batch before is being written.
    @discardableResult
    package func merge(_ checked: CheckedDelta, maxSkewMilliseconds: UInt64) async throws(LANSyncError) -> MergeOutcome
    {
        try checkClock(checked.delta.newestHLC, maxSkewMilliseconds: maxSkewMilliseconds)
        do {
            let result = try await store.merge(checked)
            publish(result)
            return result.outcome
        } catch {
            throw Self.translate(error)
        }
    }

    /// Refuses rows whose newest clock reading is more than `maxSkewMilliseconds` ahead of ours.
    func checkClock(_ newest: HybridTimestamp, maxSkewMilliseconds: UInt64) throws(LANSyncError) {
        do {
            try HybridLogicalClock.check(newest, now: clock.now(), maxSkew: maxSkewMilliseconds)
        } catch {
            throw LANSyncError(.clockSkew, error.description)
        }
    }

    /// Tells observers what a merge of another replica's rows changed.
    func publish(_ result: MergeResult) {
        if !result.entries.isEmpty { feed.publish(.entries(result.entries, local: false)) }
        if !result.preferences.isEmpty { feed.publish(.preferences(result.preferences, local: false)) }
        if !result.rows.isEmpty { feed.publish(.rows(tables: Set(result.rows.map(\.key.table)), local: false)) }
    }

    /// What a signed merge did, and which ranges it did not take (see `mergeSigned`).
    package struct SignedMergeOutcome: Sendable {
        package let outcome: MergeOutcome
        /// Each replica whose range was not taken, with where this replica now stands in it: the
        /// sender is asked to send it again from there.
        package let notTaken: [ReplicaID: UInt64]
        /// Replicas whose ranges claimed losses that have not happened here yet (open claims).
        package var claimsOpened: Set<ReplicaID> = []
        /// The replicas whose signing key the records held here name, after the merge.
        package var keysKnown: Set<ReplicaID> = []
    }

    /// Merges a delta of signed ranges from a peer (protocol version 4), checked beforehand with
    /// `ReplicaStore.check`: each range is verified against its replica's signing key
    /// (`replicaSigningKeys`, with the records the delta brings) before anything is merged, and a
    /// range that fails refuses the delta whole. Refused too when a row's clock reading is more
    /// than `maxSkewMilliseconds` ahead of ours. Ranges that cannot be verified yet, or whose
    /// loss claims do not hold here, are left for the sender to send again.
    package func mergeSigned(
        _ checked: CheckedDelta,
        maxSkewMilliseconds: UInt64
    ) async throws(LANSyncError) -> SignedMergeOutcome {
        try checkClock(checked.delta.newestHLC, maxSkewMilliseconds: maxSkewMilliseconds)
        var keys = try replicaSigningKeys(alsoIn: checked.delta)
        var pinnedWhileMerging = signingKeyCache.withLock { $0?.pinned } ?? [:]
        do {
            let result = try await mergeTakingKeysPinnedOnTheWay(checked, keys: &keys, pinned: &pinnedWhileMerging)
            publish(result)
            // Every key this merge verified with, and every key its records pin now, is kept as a
            // grow-only record: a vouch in the same delta may have replaced the record that
            // pinned the key, and a device joining later must still verify what it signed. A
            // merge that left the records alone pins nothing new: the keys it verified with were
            // attested when the records last changed (or by the first merge since the start).
            let recordsChanged = result.preferences.contains { $0.key.hasPrefix(MemberKeys.prefix) }
            let keysAfter = recordsChanged ? ((try? replicaSigningKeys()) ?? keys) : keys
            if recordsChanged || attestedKeys.withLock({ $0.isEmpty }) {
                let pinnedAfter = signingKeyCache.withLock { $0?.pinned } ?? [:]
                try await recordPinnedKeys(
                    also: pinnedWhileMerging.merging(pinnedAfter) { $0.union($1) },
                    onlyThose: true
                )
            }
            var notTaken: [ReplicaID: UInt64] = [:]
            if !result.rangesNotTaken.isEmpty {
                let vector = try store.versionVector()
                for replica in result.rangesNotTaken { notTaken[replica] = vector[replica] }
            }
            let awaiting = awaitingKeys(
                leftOut: result.rangesNotTaken.filter { keys[$0] == nil },
                of: checked.delta,
                held: keysAfter,
                pinned: recordsChanged ? signingKeyCache.withLock { $0?.pinned } : nil
            )
            return SignedMergeOutcome(
                outcome: result.outcome,
                notTaken: notTaken,
                claimsOpened: result.claimsOpened,
                keysKnown: Set(keysAfter.keys).union(awaiting)
            )
        } catch {
            throw Self.translate(error)
        }
    }

    /// `store.mergeSigned`, then again for each range it left out for want of a key that the
    /// records it merged pin (protocol §12.1, "Whose key"): a device catching up (a newcomer, a
    /// reinstall) finds the observations that pin one member's key in another member's range of
    /// the same delta, and so on along the group. Merged here, round by round, rather than asked
    /// of the peer again once per link of that chain, each time with the whole history of every
    /// replica still waiting. `keys` ends as the last round's; `pinned` gathers the keys the
    /// records pinned before each round. Only a round after the first can fail with changes
    /// committed already, and publishes them before it throws.
    private func mergeTakingKeysPinnedOnTheWay(
        _ checked: CheckedDelta,
        keys: inout [ReplicaID: [UInt8]],
        pinned: inout [String: Set<String>]
    ) async throws(LANSyncError) -> MergeResult {
        do {
            var result = try await store.mergeSigned(checked, keys: keys)
            var round = result
            while round.preferences.contains(where: { $0.key.hasPrefix(MemberKeys.prefix) }) {
                let waiting = result.rangesNotTaken.filter { keys[$0] == nil }
                guard !waiting.isEmpty else { break }
                keys = try replicaSigningKeys(alsoIn: checked.delta)
                let known = waiting.filter { keys[$0] != nil }
                guard !known.isEmpty else { break }
                pinned.merge(signingKeyCache.withLock { $0?.pinned } ?? [:]) { $0.union($1) }
                let others = Set(checked.delta.coverage.map(\.replica)).subtracting(known)
                do {
                    round = try await store.mergeSigned(checked.leavingOut(others), keys: keys)
                } catch {
                    // A range refused now refuses the rest of the delta, but the rounds before it
                    // are committed: their changes reach the app's observers all the same.
                    publish(result)
                    throw error
                }
                result.entries += round.entries
                result.preferences += round.preferences
                result.rows += round.rows
                result.rangesNotTaken = result.rangesNotTaken.subtracting(known).union(round.rangesNotTaken)
                result.claimsOpened.formUnion(round.claimsOpened)
            }
            return result
        } catch {
            throw Self.translate(error)
        }
    }

    // MARK: Reading

    /// Entries matching `query`, oldest first.
    public func entries(_ query: EntryQuery = EntryQuery()) throws(LANSyncError) -> [Entry] {
        do { return try store.entries(query) } catch { throw Self.translate(error) }
    }

    /// The value of a preference as compact JSON text; nil when unset or never set. The key is
    /// case-insensitive, as in `set`.
    public func preference(_ key: String) throws(LANSyncError) -> String? {
        do { return try store.preference(key: Names.foldedKey(key))?.value } catch { throw Self.translate(error) }
    }

    /// Every preference's winning write; tombstones (unset keys) only when asked for. The group's
    /// member records (keys under `lansync/`) are not the app's and are left out: `group members`
    /// shows them.
    public func preferences(includingUnset: Bool = false) throws(LANSyncError) -> [PreferenceWrite] {
        try allPreferences().filter { (includingUnset || !$0.isTombstone) && !$0.key.hasPrefix(MemberKeys.prefix) }
    }

    /// Every preference's winning write, tombstones and member records included.
    package func allPreferences() throws(LANSyncError) -> [PreferenceWrite] {
        do { return try store.preferences() } catch { throw Self.translate(error) }
    }

    /// The latest counter of this device's own replica: how far a peer must hold it to hold
    /// everything this device wrote.
    package func ownCounter() throws(LANSyncError) -> UInt64 {
        do { return try store.versionVector()[store.replica] } catch { throw Self.translate(error) }
    }

    /// The replica's counts, digest and version vector.
    public func status() throws(LANSyncError) -> StoreStatus {
        // The group's records are not the app's preferences.
        do { return try store.status(reservedPrefix: MemberKeys.prefix) } catch { throw Self.translate(error) }
    }

    /// Every change committed from now on, local or merged, in commit order.
    public func changes() -> AsyncStream<ReplicaChange> { feed.stream() }

    static func translate(_ error: any Error) -> LANSyncError {
        if let error = error as? LANSyncError { return error }
        if let error = error as? StoreError {
            switch error.code {
            case .notInitialized: return LANSyncError(.notInitialized, error.message)
            case .notAReplica, .newerSchema: return LANSyncError(.unusableData, error.message)
            case .invalidDelta: return LANSyncError(.invalidInput, error.message)
            case .database: return LANSyncError(.storage, error.message)
            case .schema: return LANSyncError(.schema, error.message)
            case .sql: return LANSyncError(.sql, error.message)
            case .refused: return LANSyncError(.invalidInput, error.message)
            }
        }
        return LANSyncError(.storage, "\(error)")
    }
}
