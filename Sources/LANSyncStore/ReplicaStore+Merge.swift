import Foundation
import GRDB
package import LANSyncCore

/// Merging rows from other replicas: checks, bounded transactions, imports.
extension ReplicaStore {

    /// Merges a delta from another replica. Rejected whole when malformed. A large delta is
    /// committed in several transactions, the coverage with the last, sized by `MergePacer`; one
    /// commits early when the app's own writes are waiting (see `LocalWriteQueue`). A crash part-way
    /// leaves merged rows (merge is idempotent) and an unmoved version vector, so the rest is
    /// simply sent again.
    package func merge(_ delta: Delta) async throws(StoreError) -> MergeResult {
        try await merge(Self.check(delta))
    }

    /// Merges preference writes handed over outside a sync session (a pairing welcome, a member
    /// handing over a new epoch), each through every check a peer's write passes, without
    /// counting any coverage: they are not a signed range, so the version vector does not move
    /// and the writers' signed ranges still bring them (and whatever they lie in) verifiably.
    package func mergeUncovered(_ writes: [PreferenceWrite]) async throws(StoreError) -> MergeResult {
        for write in writes {
            if let problem = Delta.carrying(write).problem() {
                throw StoreError(.invalidDelta, "rejected a handed-over record: \(problem)")
            }
        }
        return try await merge(CheckedDelta(delta: Delta(preferences: writes), entryHashes: []))
    }

    /// Merges a delta checked beforehand (see `check`).
    package func merge(_ checked: CheckedDelta) async throws(StoreError) -> MergeResult {
        try await merge(checked, keeping: [])
    }

    /// Merges a delta checked beforehand, and keeps `heads` (the verified heads of its signed
    /// ranges) in the transaction that counts its coverage: a crash between the two would leave
    /// a version vector past the verified head, and every later range would look like a gap.
    func merge(_ checked: CheckedDelta, keeping heads: [KeptHead]) async throws(StoreError) -> MergeResult {
        let (hasher, queue, apps) = (hasher, localWrites, apps)
        // Which rows changed the replica, by index: the writer copies no rows.
        var changed = (entries: [Int](), preferences: [Int](), rows: [Int]())
        var claimsOpened: Set<ReplicaID> = []
        var pacer = MergePacer(cost: mergeCost)
        while let share = pacer.next(of: checked.delta, appWriting: queue.appIsWriting) {
            let (part, elapsed) = try await Self.database {
                try await writer.writeWithoutTransaction { db in
                    // Timed on the writer from BEGIN to the end of COMMIT: not the wait for the writer.
                    let begin = ContinuousClock.now
                    var part = MergedShare()
                    // A merge's commits leave the WAL to the next flush (see `commitForMerge`);
                    // the writer is durable again afterwards, also when the merge fails.
                    try db.commitForMerge()
                    do {
                        try apps.capture.with(.merging) {
                            try db.inTransaction {
                                part = try Self.merge(
                                    share,
                                    of: checked,
                                    keeping: heads,
                                    db: db,
                                    hasher: hasher,
                                    apps: apps,
                                    localWrites: queue
                                )
                                return .commit
                            }
                        }
                    } catch {
                        try? db.commitDurably()
                        throw error
                    }
                    let committed = ContinuousClock.now
                    try db.commitDurably()
                    return (part, committed - begin)
                }
            }
            pacer.record(
                share,
                merged: (part.entriesMerged, part.preferencesMerged, part.changesMerged),
                elapsed: elapsed
            )
            checkpointer?.committed()
            await checkpointer?.checkpointBeforeRewind()
            changed.entries += part.changedEntries
            changed.preferences += part.changedPreferences
            changed.rows += part.changedRows
            claimsOpened.formUnion(part.claimsOpened)
            if let left = part.claimsLeft { openClaimsMayExist.value = left > 0 }
        }
        var result = MergeResult()
        let delta = checked.delta
        result.entries =
            changed.entries.count == delta.entries.count ? delta.entries : changed.entries.map { delta.entries[$0] }
        result.preferences = changed.preferences.map { delta.preferences[$0] }
        result.rows = changed.rows.map { delta.rows[$0] }
        result.claimsOpened = claimsOpened
        return result
    }

    /// Checks a delta from another replica (see `Delta.problem()`), hashes its entries and works
    /// out what each change makes of a row not heard of yet (`FirstRow`): the part of a merge
    /// that needs no database, so a receiver can run it on any thread while the batch before is
    /// being written. Rejects the delta whole when anything is wrong.
    /// With `signed`, also computes the leaf of every change (for `mergeSigned`): a session runs
    /// the check on another thread while the batch before is merged, so the leaves cost the
    /// merge nothing.
    package static func check(_ delta: Delta, signed: Bool = false) throws(StoreError) -> CheckedDelta {
        try check(delta, signed: signed, numbering: nil)
    }

    /// The same, with the states of new rows encoded as this store keeps them (its numbers of
    /// columns and replicas read first), so that the merge's writer only writes them.
    package func check(_ delta: Delta, signed: Bool = false) throws(StoreError) -> CheckedDelta {
        let numbering =
            delta.rows.isEmpty
            ? nil : try Self.database { try writer.read { try StoredNumbering.load($0, catalog: apps.catalogCache) } }
        return try Self.check(delta, signed: signed, numbering: numbering)
    }

    private static func check(
        _ delta: Delta,
        signed: Bool,
        numbering: StoredNumbering?
    ) throws(StoreError) -> CheckedDelta {
        if let problem = delta.problem() { throw StoreError(.invalidDelta, "rejected a malformed delta: \(problem)") }
        // One buffer for every entry's canonical bytes, and entries read in place by index.
        var hashes = [[UInt8]]()
        hashes.reserveCapacity(delta.entries.count)
        let hasher = elementHasher
        var buffer = [UInt8]()
        for index in delta.entries.indices { hashes.append(hasher.hash(delta.entries[index], reusing: &buffer)) }
        var firstRows = [FirstRow]()
        firstRows.reserveCapacity(delta.rows.count)
        var columns = StoredNumbering.LastColumns()
        for index in delta.rows.indices {
            let stored = numbering.flatMap {
                StoredRowState.encodeFirst(delta.rows[index], numbering: $0, last: &columns)
            }
            firstRows.append(FirstRow(delta.rows[index], hasher: hasher, buffer: &buffer, stored: stored))
        }
        return CheckedDelta(
            delta: delta,
            entryHashes: hashes,
            leaves: signed
                ? delta.changeLeaves(hasher: hasher, entryHashes: hashes, rowKeys: { firstRows[$0].key }) : nil,
            firstRows: firstRows
        )
    }

    /// What one merge transaction did with its share: how far it got (it stops early once a local
    /// write it took is due), and which rows changed the replica, by index.
    struct MergedShare {
        var entriesMerged = 0
        var preferencesMerged = 0
        var changesMerged = 0
        var changedEntries: [Int] = []
        var changedPreferences: [Int] = []
        var changedRows: [Int] = []
        /// Replicas whose ranges claim losses that have not happened here yet (open claims).
        var claimsOpened: Set<ReplicaID> = []
        /// How many open claims stay after the share that counted the coverage (nil: another share).
        var claimsLeft: Int?
    }

    /// Merges one transaction's share of a delta, or the part of it merged before a local write
    /// had waited `LocalWriteQueue.yieldDelay` (see `MergeYield`).
    private static func merge(
        _ share: MergePacer.Share,
        of checked: CheckedDelta,
        keeping heads: [KeptHead],
        db: Database,
        hasher: ElementHasher,
        apps: AppTableAccess,
        localWrites: LocalWriteQueue
    ) throws -> MergedShare {
        let delta = checked.delta
        var context = try WriteContext(db, hasher: hasher, apps: apps)
        var merged = MergedShare()
        merged.changedEntries.reserveCapacity(share.entries.count)
        var yield = MergeYield()
        // Entries go in many to a statement (`mergeEntries`), `rowsBetweenLooks` at a time.
        var pendingEntries: [Int] = []
        pendingEntries.reserveCapacity(LocalWriteQueue.rowsBetweenLooks)
        func mergePendingEntries() throws {
            try context.mergeEntries(
                pendingEntries[...],
                of: delta.entries,
                hashes: checked.entryHashes,
                changed: &merged.changedEntries
            )
            pendingEntries.removeAll(keepingCapacity: true)
        }
        for index in share.entries {
            // The clock passes every reading merged before a local write can tick: that write wins.
            context.observe(delta.entries[index].hlc)
            pendingEntries.append(index)
            merged.entriesMerged += 1
            if merged.entriesMerged % LocalWriteQueue.rowsBetweenLooks == 0 {
                try mergePendingEntries()
                if yield.isDue(afterRows: merged.entriesMerged, queue: localWrites) { break }
            }
        }
        try mergePendingEntries()
        if merged.entriesMerged == share.entries.count {
            for index in share.preferences {
                let write = delta.preferences[index]
                context.observe(write.hlc)
                if try context.mergePreference(write) { merged.changedPreferences.append(index) }
                merged.preferencesMerged += 1
                if yield.isDue(afterRows: merged.preferencesMerged, queue: localWrites) { break }
            }
        }
        if merged.entriesMerged == share.entries.count && merged.preferencesMerged == share.preferences.count {
            // Changes that open new rows wait in `newRows` and go in many to a statement (see
            // `WriteContext.mergeNewRows`); anything else sends them first.
            var newRows = [Int]()
            newRows.reserveCapacity(WriteContext.newRowsPerBatch)
            func mergeNewRows() throws {
                guard !newRows.isEmpty else { return }
                try context.mergeNewRows(newRows[...], of: checked, changed: &merged.changedRows)
                newRows.removeAll(keepingCapacity: true)
            }
            for index in share.changes {
                let change = delta.rows[index]
                context.observe(change.hlc)
                let lost = delta.lostCells.isEmpty ? [] : delta.lostCells[change.dot] ?? []
                let first = checked.firstRow(index)
                if let first, WriteContext.batchable(change, first: first, lost: lost) {
                    newRows.append(index)
                } else {
                    try mergeNewRows()
                    if try context.mergeRow(change, lost: lost, materialize: true, first: first) {
                        merged.changedRows.append(index)
                    }
                }
                merged.changesMerged += 1
                if merged.changesMerged % LocalWriteQueue.rowsBetweenLooks == 0 { try mergeNewRows() }
                if yield.isDue(afterRows: merged.changesMerged, queue: localWrites) { break }
            }
            try mergeNewRows()
        }
        var counted: [KeptHead] = []
        if share.isLast && merged.entriesMerged + merged.preferencesMerged + merged.changesMerged == share.rows {
            // What the sender says lost and has not lost here yet stays an open claim; the ranges
            // count (see `openClaims`), and claims this delta's changes settle close.
            merged.claimsOpened = try context.openClaims(of: delta)
            merged.claimsLeft = try context.closeOpenClaims()
            try context.advance(by: delta.coverage)
            counted = heads
        }
        try context.save()
        // In the transaction that counted the coverage (saved just above).
        for head in counted { try keep(head, db: db) }
        return merged
    }

    /// Runs `body` inside one write transaction that merges whatever rows it feeds in; when
    /// `body` throws, everything is rolled back and nothing is written. For imports.
    package func importing<T>(_ body: (inout ImportSession) throws -> T) throws -> (T, MergeOutcome) {
        let (hasher, apps) = (hasher, apps)
        // SQLite's errors (a full disk) become the store's, which say what failed: the replica.
        return try Self.databaseCallingBack {
            try writer.write { db in
                try apps.capture.with(.merging) {
                    var session = ImportSession(context: try WriteContext(db, hasher: hasher, apps: apps))
                    let result = try body(&session)
                    try session.finish()
                    return (result, session.outcome)
                }
            }
        }
    }
}
