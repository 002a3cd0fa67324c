/// What one replica ships to another: the rows the receiver lacks, and how far they bring its
/// version vector.
///
/// For each replica `r` the sender includes every row it holds whose dot is `(r, n)` with
/// `from < n <= through`, where `from` is what the receiver was known to cover. Rows superseded
/// at the sender (an overwritten preference, a losing duplicate entry) are not shipped: the row
/// that superseded them is shipped or already covered, so the receiver ends up with at least it.
package struct Delta: Hashable, Sendable {
    /// The range of one replica's counters that this delta completes: `(from, through]`.
    package struct Coverage: Hashable, Sendable {
        package let replica: ReplicaID
        package let from: UInt64
        package let through: UInt64
        /// Signed changes: the replica's signature of its chain's head at `through` (64 bytes),
        /// and its latest genesis when the range starts at or below it.
        package var signature: [UInt8]?
        package var genesis: ProvenanceCheck.Genesis?
        /// The replica's record (`lansync/replica/R`'s JSON value: its device and signing key,
        /// signed with that key) when the range starts below the counter the record was written
        /// at: a receiver that does not hold it yet needs it to check the range, and would
        /// otherwise get it only in a later range. Used for the key alone, never merged.
        package var record: String?

        package init(
            replica: ReplicaID,
            from: UInt64,
            through: UInt64,
            signature: [UInt8]? = nil,
            genesis: ProvenanceCheck.Genesis? = nil,
            record: String? = nil
        ) {
            self.replica = replica
            self.from = from
            self.through = through
            self.signature = signature
            self.genesis = genesis
            self.record = record
        }

        /// The longest replica record a range may carry, in UTF-8 bytes (one is about 250).
        package static let maxRecordBytes = 1_024
    }

    package var entries: [Entry]
    package var preferences: [PreferenceWrite]
    /// Writes to app-table rows (each carrying only what still wins of it at the sender).
    package var rows: [RowChange]
    package var coverage: [Coverage]
    /// Signed changes (docs/signed-changes.md): what stays of the preference writes in the ranges
    /// that later writes superseded, so that their leaves can be rebuilt.
    package var preferenceStubs: [PreferenceStub]
    /// Signed changes: the cells of row changes in `rows` that lost at the sender, by the change's
    /// dot. A change whose every cell lost is in `rows` with no cells, as written otherwise (its
    /// kind, life and clock); the receiver checks after merging that each of these cells lost.
    package var lostCells: [Dot: [RowChange.LostCell]]

    package init(
        entries: [Entry] = [],
        preferences: [PreferenceWrite] = [],
        rows: [RowChange] = [],
        coverage: [Coverage] = [],
        preferenceStubs: [PreferenceStub] = [],
        lostCells: [Dot: [RowChange.LostCell]] = [:]
    ) {
        self.entries = entries
        self.preferences = preferences
        self.rows = rows
        self.coverage = coverage
        self.preferenceStubs = preferenceStubs
        self.lostCells = lostCells
    }

    package var isEmpty: Bool {
        entries.isEmpty && preferences.isEmpty && rows.isEmpty && coverage.isEmpty && preferenceStubs.isEmpty
            && lostCells.isEmpty
    }

    /// The largest payload or preference value, in bytes, that any replica accepts.
    package static let maxValueBytes = 64 * 1024

    /// Why this delta cannot be applied, or nil when it is well-formed: every row's dot inside a
    /// declared range, ranges non-empty and one per replica, names valid. A delta that fails this
    /// is rejected whole.
    package func problem() -> String? {
        var ranges: [ReplicaID: Coverage] = [:]
        for range in coverage {
            if let signature = range.signature, signature.count != 64 {
                return "the signature of replica \(range.replica)'s range is malformed"
            }
            if let genesis = range.genesis, genesis.signature.count != 64 {
                return "the genesis of replica \(range.replica) is malformed"
            }
            guard range.from < range.through else {
                return "coverage of replica \(range.replica) is empty or reversed (\(range.from)...\(range.through))"
            }
            guard ranges.updateValue(range, forKey: range.replica) == nil else {
                return "replica \(range.replica) has two coverage ranges"
            }
        }
        func inRange(_ dot: Dot) -> Bool {
            guard let range = ranges[dot.replica] else { return false }
            return dot.counter > range.from && dot.counter <= range.through
        }
        // By index, not `for entry in entries`: iterating copies each entry (a retain and release
        // of each of its strings), and this runs for every row a peer sends.
        for index in entries.indices {
            guard inRange(entries[index].dot) else {
                return "entry \(entries[index].id) has dot \(entries[index].dot) outside the delta's coverage"
            }
            if let problem = entries[index].problem() { return problem }
        }
        for write in preferences {
            guard inRange(write.dot) else {
                return "preference \(write.key) has dot \(write.dot) outside the delta's coverage"
            }
            if let problem = write.problem() { return problem }
        }
        for change in rows {
            guard inRange(change.dot) else {
                return "row change of \(change.key) has dot \(change.dot) outside the delta's coverage"
            }
            if let problem = change.problem() { return problem }
        }
        for stub in preferenceStubs {
            guard inRange(stub.dot) else {
                return "the stub of preference \(stub.key) has dot \(stub.dot) outside the delta's coverage"
            }
            if let problem = Names.keyProblem(stub.key) { return problem }
            guard stub.elementHash.count == ChainHead.hashByteCount else {
                return "the stub of preference \(stub.key) has a malformed hash"
            }
        }
        if !lostCells.isEmpty {
            let changes = Dictionary(rows.map { ($0.dot, $0) }, uniquingKeysWith: { first, _ in first })
            for (dot, cells) in lostCells {
                guard let change = changes[dot] else {
                    return "lost cells name change \(dot), which the delta does not carry"
                }
                guard change.leaf(lost: cells, hasher: Self.shapeOnly) != nil else {
                    return "the lost cells of change \(dot) repeat a column or are malformed"
                }
            }
        }
        return nil
    }

    /// The leaf of each change this delta carries, by dot (`ChangeLeaf`): what a receiver checks
    /// its ranges with. Nil when a row change's lost cells do not fit it (`problem()` says so first).
    /// `entryHashes`: the entries' element hashes when the caller has them (a checked delta),
    /// which are their leaves.
    package func leaves(hasher: ElementHasher, entryHashes: [[UInt8]]? = nil) -> [Dot: [UInt8]] {
        changeLeaves(hasher: hasher, entryHashes: entryHashes).byDot
    }

    /// The same leaves, per replica in counter order (`ChangeLeaves`): what a receiver walks
    /// along each range, without a hash table of dots. `rowKeys(i)`: the key bytes of `rows[i]`,
    /// when the caller has them already (a check that made each row's first state).
    package func changeLeaves(
        hasher: ElementHasher,
        entryHashes: [[UInt8]]? = nil,
        rowKeys: ((Int) -> [UInt8])? = nil
    ) -> ChangeLeaves {
        var leaves = ChangeLeaves()
        var buffer = [UInt8]()
        // Entries come grouped by replica: each group goes in at once.
        var group: (replica: ReplicaID, leaves: [(counter: UInt64, leaf: [UInt8])])?
        for index in entries.indices {
            let dot = entries[index].dot
            let leaf = entryHashes?[index] ?? hasher.hash(entries[index], reusing: &buffer)
            if group?.replica != dot.replica {
                if let group { leaves.add(group.replica, group.leaves) }
                group = (dot.replica, [])
                group!.leaves.reserveCapacity(entries.count - index)
            }
            group!.leaves.append((dot.counter, leaf))
        }
        if let group { leaves.add(group.replica, group.leaves) }
        for write in preferences { leaves.add(write.dot, ChangeLeaf.preference(write, hasher: hasher)) }
        for stub in preferenceStubs { leaves.add(stub.dot, ChangeLeaf.preference(stub, hasher: hasher)) }
        for index in rows.indices {
            let dot = rows[index].dot
            let lost = lostCells.isEmpty ? [] : lostCells[dot] ?? []
            if let leaf = rows[index].leaf(lost: lost, hasher: hasher, reusing: &buffer, keyBytes: rowKeys?(index)) {
                leaves.add(dot, leaf)
            }
        }
        leaves.sort()
        return leaves
    }

    /// Checks only the shape of a leaf's input (the hash itself is the caller's business).
    private static let shapeOnly = ElementHasher { _ in [UInt8](repeating: 0, count: ChainHead.hashByteCount) }

    /// Why a payload or value from another replica is unacceptable: not compact JSON, or too large.
    static func valueProblem(_ text: String) -> String? {
        if text.utf8.count > maxValueBytes { return "is larger than \(maxValueBytes) bytes" }
        return CompactJSON.isCompact(text) ? nil : "is not compact JSON"
    }
}

extension Entry {
    /// Why this row is not one any replica may hold (names, payload), or nil. What a delta from a
    /// peer and a line of an import file are both checked with.
    package func problem() -> String? {
        if let problem = Names.streamProblem(stream) { return problem }
        if let problem = Names.entryIDProblem(id) { return problem }
        if let problem = Delta.valueProblem(payload) { return "entry \(id): payload \(problem)" }
        return nil
    }
}

extension PreferenceWrite {
    /// Why this write is not one any replica may hold (key, value), or nil.
    package func problem() -> String? {
        if let problem = Names.keyProblem(key) { return problem }
        if let value, let problem = Delta.valueProblem(value) { return "preference \(key): \(problem)" }
        if key.hasPrefix(Self.replicaRecordPrefix),
            key.dropFirst(Self.replicaRecordPrefix.count) != dot.replica.description
        {
            return "preference \(key) is a replica's own record, written by replica \(dot.replica)"
        }
        return nil
    }
}

extension VersionVector {
    /// Advances the vector by a delta's coverage after its rows were merged. A range only counts
    /// when it starts at or below what we already cover: otherwise there is a gap (rows we never
    /// saw), the rows are still merged (always safe: merge is a join), and a later delta fills it.
    package mutating func advance(by coverage: [Delta.Coverage]) {
        for range in coverage where self[range.replica] >= range.from {
            self[range.replica] = max(self[range.replica], range.through)
        }
    }
}

/// How a merge changed a replica.
package struct MergeOutcome: Hashable, Sendable {
    /// Entries new to this replica (or replacing a version that loses to them).
    package var entriesAdded = 0
    /// Preferences whose winning write changed.
    package var preferencesChanged = 0
    /// App-table rows whose state changed.
    package var rowsChanged = 0

    package init(entriesAdded: Int = 0, preferencesChanged: Int = 0, rowsChanged: Int = 0) {
        self.entriesAdded = entriesAdded
        self.preferencesChanged = preferencesChanged
        self.rowsChanged = rowsChanged
    }

    package var changedAnything: Bool { entriesAdded > 0 || preferencesChanged > 0 || rowsChanged > 0 }
}

/// The element-level merge rules, shared by the in-memory `ReplicaState` and the SQLite store so
/// both follow exactly the same laws.
package enum MergeRule {
    /// Whether an incoming entry replaces the version held under its id (nil: none held).
    @inlinable package static func entryReplaces(_ incoming: Entry, existing: Entry?) -> Bool {
        guard let existing else { return true }
        return Entry.precedes(incoming, existing)
    }

    /// Whether an incoming preference write replaces the one held under its key (nil: none held).
    @inlinable package static func preferenceReplaces(_ incoming: PreferenceWrite, existing: PreferenceWrite?) -> Bool {
        guard let existing else { return true }
        return PreferenceWrite.loses(existing, to: incoming)
    }
}

extension PreferenceWrite {
    /// The prefix of the keys LANSync keeps its own records under (the group's members); apps
    /// cannot write there, and peers hand these records over on their own (`Delta.carrying`).
    package static let reservedPrefix = "lansync/"
    /// Where each replica records which device and key it belongs to (`lansync/replica/REPLICA`);
    /// only that replica may write there, so no other member can overwrite the record.
    package static let replicaRecordPrefix = reservedPrefix + "replica/"
}

extension Delta {
    /// A delta of one preference that covers exactly its dot: how member records travel on their
    /// own (a hand-over, a welcome) without claiming any other change of their replica.
    package static func carrying(_ record: PreferenceWrite) -> Delta {
        Delta(
            preferences: [record],
            coverage: [.init(replica: record.dot.replica, from: record.dot.counter - 1, through: record.dot.counter)]
        )
    }
}
