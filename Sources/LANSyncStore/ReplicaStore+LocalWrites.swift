import Foundation
package import GRDB
package import LANSyncCore
import LANSyncCrypto

/// Local writes: appends and preference writes made on this replica, durable when they return.
extension ReplicaStore {

    /// Appends entries made on this replica in one durable transaction: each gets the next dot and
    /// HLC reading. A request whose id is held already returns the entry held (idempotent retry).
    /// Suspends, never blocks, until the transaction has committed: its own, or a merge
    /// transaction's that took it along (see `LocalWriteQueue`). Concurrent appends share a
    /// commit. `onCommit` is called once it is durable, in commit order across callers.
    package func append(
        _ requests: [AppendRequest],
        now: UInt64,
        onCommit: (@Sendable ([Entry]) -> Void)? = nil
    )
        async throws(StoreError) -> [Entry]
    {
        try await commit({ context in try Self.append(requests, now: now, context: &context) }, onCommit: onCommit)
    }

    /// Sets preferences (a nil value unsets: a tombstone) in one durable transaction.
    package func setPreferences(
        _ writes: [PreferenceRequest],
        now: UInt64,
        onCommit: (@Sendable ([PreferenceWrite]) -> Void)? = nil
    ) async throws(StoreError) -> [PreferenceWrite] {
        try await commit({ context in try Self.set(writes, now: now, context: &context) }, onCommit: onCommit)
    }

    /// Runs an app's SQL on its tables in one durable transaction (shared with other local writes
    /// waiting then, each in its own savepoint): every row it inserts, updates or deletes becomes a
    /// change made here at `now`. When `body` or one of its statements fails, nothing of it is
    /// written; the error is a `StoreError` of code `.sql` (with the app's own error as `underlying`).
    /// `seed`: the rows are seed data (an app's defaults on first launch), whose every value any
    /// real write of the same column beats, on every device (`WriteContext.seedClock`).
    package func write<T: Sendable>(
        now: UInt64,
        seed: Bool = false,
        onCommit: (@Sendable () -> Void)? = nil,
        _ body: @escaping @Sendable (Database) throws -> T
    ) async throws(StoreError) -> T {
        var report: (@Sendable (T) -> Void)?
        if let onCommit { report = { @Sendable _ in onCommit() } }
        return try await commit(
            { context in try Self.writeAppTables(now: now, seed: seed, body, context: &context) },
            onCommit: report
        )
    }

    private static func writeAppTables<T>(
        now: UInt64,
        seed: Bool,
        _ body: (Database) throws -> T,
        context: inout WriteContext
    ) throws -> T {
        context.seeding = seed
        defer { context.seeding = false }
        do {
            return try context.writeAppTables(now: now, body)
        } catch let isolated as IsolatedWriteFailure {
            throw IsolatedWriteFailure(error: storeError(isolated.error))
        }
    }

    /// An app write's failure as its caller sees it.
    private static func storeError(_ error: any Error) -> StoreError {
        switch error {
        case let error as StoreError: return error
        case let error as DatabaseError where error.resultCode == .SQLITE_READONLY:
            return StoreError(.database, ReadOnlyReplica.writeRefusal)
        case let error as DatabaseError: return StoreError(.sql, sqlMessage(error))
        default:
            var wrapped = StoreError(.sql, "the write failed: \(error)")
            wrapped.underlying = error
            return wrapped
        }
    }

    /// SQLite's complaint about an app's statement, with the statement.
    static func sqlMessage(_ error: DatabaseError) -> String {
        let message = error.message ?? "\(error.resultCode)"
        guard let sql = error.sql, !sql.isEmpty else { return message }
        return "\(message) (in `\(sql.trimmingCharacters(in: .whitespacesAndNewlines))`)"
    }

    /// Runs a local write in the next transaction and returns its result once committed.
    private func commit<T: Sendable>(
        _ write: @escaping @Sendable (inout WriteContext) throws -> T,
        onCommit: (@Sendable (T) -> Void)?
    ) async throws(StoreError) -> T {
        let (writer, hasher, queue, checkpointer, apps) = (writer, hasher, localWrites, checkpointer, apps)
        let chain = (coverage: chainCoverage, replica: replica, signer: headSigner)
        return try await Self.database {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                queue.add(
                    LocalWrite(
                        apply: { context in
                            let result = try write(&context)
                            return {
                                onCommit?(result)
                                continuation.resume(returning: result)
                            }
                        },
                        fail: { continuation.resume(throwing: $0) }
                    )
                )
                writer.asyncWriteWithoutTransaction { db in
                    if Self.commitWaiting(queue, db: db, hasher: hasher, apps: apps, extendingChain: chain) {
                        checkpointer?.committed()
                    }
                }
            }
        }
    }

    /// Commits every waiting local write in one transaction (none, when a merge took them).
    /// Returns whether it committed anything.
    private static func commitWaiting(
        _ queue: LocalWriteQueue,
        db: Database,
        hasher: ElementHasher,
        apps: AppTableAccess,
        extendingChain chain: (coverage: ChainCoverage, replica: ReplicaID, signer: SigningKey?)
    ) -> Bool {
        guard queue.hasWaiting else { return false }
        var taken = TakenWrites()
        var coveringChain = false
        do {
            try db.inTransaction {
                var context = try WriteContext(db, hasher: hasher, apps: apps)
                try taken.take(from: queue, into: &context)
                if !taken.writes.isEmpty {
                    try context.save()
                    coveringChain = extendInCommit(
                        chain.coverage,
                        replica: chain.replica,
                        signer: chain.signer,
                        db: db,
                        hasher: hasher,
                        catalogs: apps.catalogCache
                    )
                }
                return .commit
            }
        } catch {
            for write in taken.writes { write.fail(error) }
            return false
        }
        if !taken.writes.isEmpty { chain.coverage.committed(coveringChain: coveringChain) }
        taken.reportCommitted()
        return !taken.writes.isEmpty
    }

    static func append(_ requests: [AppendRequest], now: UInt64, context: inout WriteContext) throws -> [Entry] {
        var results = [Entry]()
        results.reserveCapacity(requests.count)
        var random = SplitMix64()
        for request in requests {
            if let id = request.id, let existing = try context.entry(id: id) {
                results.append(existing)
                continue
            }
            let hlc = context.tick(now: now)
            let entry = Entry(
                id: request.id ?? EntryIDs.make(hlc: hlc, random: &random),
                stream: request.stream,
                originDevice: context.device,
                dot: context.nextDot(),
                hlc: hlc,
                wallMilliseconds: Int64(now),
                payload: request.payload
            )
            _ = try context.mergeEntry(entry)
            results.append(entry)
        }
        return results
    }

    private static func set(
        _ writes: [PreferenceRequest],
        now: UInt64,
        context: inout WriteContext
    ) throws
        -> [PreferenceWrite]
    {
        var results = [PreferenceWrite]()
        for request in writes {
            // Our clock is past every reading merged so far, so a local write always wins here.
            let hlc = context.tick(now: now)
            let write = PreferenceWrite(
                key: request.key,
                value: request.value,
                originDevice: context.device,
                dot: context.nextDot(),
                hlc: hlc,
                wallMilliseconds: Int64(now)
            )
            _ = try context.mergePreference(write)
            results.append(write)
        }
        return results
    }
}
