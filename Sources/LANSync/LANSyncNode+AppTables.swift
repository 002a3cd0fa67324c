import Foundation
public import GRDB
import LANSyncCore
import LANSyncStore

/// App tables (docs/app-tables.md): the app declares SQL tables once, then reads and writes
/// them with plain SQL through GRDB, and LANSync syncs them column by column.
extension LANSyncNode {
    /// Declares the app's tables: `CREATE TABLE` and `CREATE INDEX` statements, plus the lines
    /// `-- lansync: append-only TABLE` and `-- lansync: counter TABLE.COLUMN`. Applying the same
    /// schema again changes nothing; a newer one may add tables, columns (nullable or with a
    /// default) and indexes. A refused schema changes nothing, and the error names each
    /// statement at fault, why, and what to do instead. Returns what was added, one line each.
    @discardableResult
    public func applySchema(_ sql: String) throws(LANSyncError) -> [String] {
        do { return try store.applySchema(sql).map(\.description) } catch { throw Self.translate(error) }
    }

    /// The schema the app last applied, as written; nil before the first.
    public func appliedSchema() throws(LANSyncError) -> String? {
        do { return try store.appliedSchema()?.source } catch { throw Self.translate(error) }
    }

    /// The names of the tables the applied schema declares, as declared.
    public func appliedSchemaTables() throws(LANSyncError) -> [String] {
        do { return try store.appliedSchema()?.schema.tables.map(\.name) ?? [] } catch { throw Self.translate(error) }
    }

    /// Rows whose parent row is missing, by their `REFERENCES`: sync does not enforce foreign
    /// keys (a child may arrive before its parent), so a parent deleted on one device while a
    /// child was added on another leaves the child behind everywhere. The app decides: delete
    /// the orphan, or insert its parent again. (`lansync doctor` and `GET /v1/orphans` list them.)
    public func orphans() throws(LANSyncError) -> [AppOrphan] {
        do { return try store.orphans() } catch { throw Self.translate(error) }
    }

    /// Writes app tables with plain SQL in one transaction, durable when this returns:
    ///
    ///     try await node.write { db in
    ///         try db.execute(sql: "UPDATE athletes SET weight_kg = ? WHERE id = ?", arguments: [61.5, id])
    ///     }
    ///
    /// Every row the SQL inserts, updates or deletes syncs: each changed column is a
    /// last-writer-wins register, a delete beats concurrent edits, counters add up, `max` and
    /// `min` columns keep the greatest (smallest) value written, and an insert leaves columns at
    /// their default out so it never overrides another device's values with them. Concurrent
    /// writes share a commit. When `body` throws, or SQLite or an app-table rule refuses a
    /// statement, nothing of this write is kept: the app's own error is rethrown as is; others
    /// are a `LANSyncError` of code `.sql`.
    ///
    /// `seed`: the rows are seed data, such as the defaults an app inserts on first launch with
    /// `INSERT OR IGNORE` on every device. Any real write of a column beats a seed's value of it,
    /// whichever device wrote first or merged first, so a device set up later, seeding the same
    /// rows, does not undo what the user edited elsewhere; a deleted seed row stays deleted.
    public func write<T: Sendable>(
        seed: Bool = false,
        _ body: @escaping @Sendable (Database) throws -> T
    ) async throws -> T {
        let feed = feed
        do {
            return try await store.write(
                now: clock.now(),
                seed: seed,
                onCommit: { feed.publish(.rows(tables: [], local: true)) },
                body
            )
        } catch {
            if let underlying = error.underlying { throw underlying }
            throw Self.translate(error)
        }
    }

    /// Reads with plain SQL (joins, aggregates, GRDB records) on a consistent snapshot. SQLite's
    /// errors are a `LANSyncError` of code `.sql`; the app's own errors pass through.
    public func read<T>(_ body: (Database) throws -> T) throws -> T {
        do {
            return try store.read(body)
        } catch let error as StoreError {
            throw Self.translate(error)
        }
    }

    /// The database to observe app tables on, with GRDB's `ValueObservation`:
    ///
    ///     ValueObservation.tracking { db in try Row.fetchAll(db, sql: "SELECT * FROM athletes") }.removeDuplicates()
    ///         .values(in: node.database)
    ///
    /// Writing through it fails: app tables are written with `write`. Observations see every
    /// commit, also one made by another process (the agent merging a peer's rows while it runs
    /// as `lansync run`, the CLI): the node watches its replica's files for them from the first
    /// use of this property (`ReplicaChangeWatch`).
    public var database: any DatabaseReader {
        otherWriters.withLock { watch in
            guard watch == nil, !store.isReadOnly else { return }
            let store = store
            watch = ReplicaChangeWatch(store: store, dataDirectory: dataDirectory) {
                try? store.notifyObserversOfChangesElsewhere()
            }
        }
        return store.reader
    }
}
