/// A whole replica held in memory: the reference model of LANSync's CRDT.
///
/// The SQLite store implements the same rules on disk (through `MergeRule` and
/// `VersionVector.advance`); this type is what property tests check the laws on, and what the
/// store's own tests compare against.
///
/// Merge laws (checked in `LANSyncCoreTests`): for states a, b, c,
/// - commutative: merge(a, b) and merge(b, a) hold the same elements (equal digests);
/// - associative: merge(merge(a, b), c) equals merge(a, merge(b, c));
/// - idempotent: merge(a, a) equals a, and applying a delta twice changes nothing the second time;
/// - any delivery order of any set of deltas, with repeats, reaches the same digest.
package struct ReplicaState: Sendable {
    package let replica: ReplicaID
    package let device: DeviceID
    package private(set) var clock = HybridLogicalClock()
    package private(set) var versionVector = VersionVector()
    package private(set) var entries: [String: Entry] = [:]
    package private(set) var preferences: [String: PreferenceWrite] = [:]
    package private(set) var digest = StateDigest()
    private let hasher: ElementHasher

    package init(replica: ReplicaID, device: DeviceID, hasher: ElementHasher) {
        self.replica = replica
        self.device = device
        self.hasher = hasher
    }

    private mutating func nextDot() -> Dot {
        let counter = versionVector[replica] + 1
        versionVector[replica] = counter
        return Dot(replica: replica, counter: counter)
    }

    /// Appends an entry made here at physical time `now`; an existing id returns the entry held.
    @discardableResult
    package mutating func append(id: String, stream: String, payload: String, now: UInt64) -> Entry {
        if let existing = entries[id] { return existing }
        let hlc = clock.tick(now: now)
        let entry = Entry(
            id: id,
            stream: stream,
            originDevice: device,
            dot: nextDot(),
            hlc: hlc,
            wallMilliseconds: Int64(now),
            payload: payload
        )
        insert(entry)
        return entry
    }

    /// Sets (or, with nil, unsets) a preference here at physical time `now`.
    @discardableResult
    package mutating func set(key: String, value: String?, now: UInt64) -> PreferenceWrite {
        let hlc = clock.tick(now: now)
        let write = PreferenceWrite(
            key: key,
            value: value,
            originDevice: device,
            dot: nextDot(),
            hlc: hlc,
            wallMilliseconds: Int64(now)
        )
        _ = store(write)
        return write
    }

    /// Everything this replica holds that a replica covering `known` lacks.
    package func delta(since known: VersionVector) -> Delta {
        var delta = Delta()
        for (replica, through) in versionVector.counters where through > known[replica] {
            delta.coverage.append(.init(replica: replica, from: known[replica], through: through))
        }
        let lacking = { (dot: Dot) in dot.counter > known[dot.replica] }
        delta.entries = entries.values.filter { lacking($0.dot) }.sorted { $0.dot < $1.dot }
        delta.preferences = preferences.values.filter { lacking($0.dot) }.sorted { $0.dot < $1.dot }
        return delta
    }

    /// Merges a delta: a join of its rows into ours, then an advance of the version vector.
    @discardableResult
    package mutating func merge(_ delta: Delta) -> MergeOutcome {
        var outcome = MergeOutcome()
        for entry in delta.entries where MergeRule.entryReplaces(entry, existing: entries[entry.id]) {
            insert(entry)
            outcome.entriesAdded += 1
        }
        for write in delta.preferences where store(write) {
            outcome.preferencesChanged += 1
        }
        // Observing remote readings keeps our next local write ordered after everything we saw.
        let newest = max(delta.entries.map(\.hlc).max() ?? .zero, delta.preferences.map(\.hlc).max() ?? .zero)
        if newest > clock.last { clock = HybridLogicalClock(last: newest) }
        versionVector.advance(by: delta.coverage)
        return outcome
    }

    /// Merges another replica's whole state.
    package mutating func merge(_ other: ReplicaState) {
        merge(other.delta(since: VersionVector()))
    }

    private mutating func insert(_ entry: Entry) {
        if let old = entries[entry.id] { digest.remove(hash: hasher.hash(old)) }
        entries[entry.id] = entry
        digest.insert(hash: hasher.hash(entry))
    }

    private mutating func store(_ write: PreferenceWrite) -> Bool {
        let old = preferences[write.key]
        guard MergeRule.preferenceReplaces(write, existing: old) else { return false }
        if let old { digest.remove(hash: hasher.hash(old)) }
        preferences[write.key] = write
        digest.insert(hash: hasher.hash(write))
        return true
    }
}
