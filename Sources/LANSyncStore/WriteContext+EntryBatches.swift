import GRDB
import LANSyncCore

/// Entries merged many to an INSERT: a catch-up brings entries this replica lacks, thousands to a
/// delta, and SQLite's work per statement (reset, bind, step) is then a large part of each one's.
/// The statement is a plain INSERT: when one of its entries is held already, or its id is taken,
/// SQLite backs the whole statement out, and each entry goes through `mergeEntry`, exactly as it
/// would have alone.
extension WriteContext {
    /// Merges `indices` of `entries` (their element hashes at the same indices of `hashes`), in
    /// order; appends the index of each that changed the replica to `changed`.
    mutating func mergeEntries(
        _ indices: ArraySlice<Int>,
        of entries: [Entry],
        hashes: [[UInt8]],
        changed: inout [Int]
    ) throws {
        if indices.count > 1, try insertAll(indices, of: entries) {
            for index in indices {
                digest.insert(hash: hashes[index])
                countInsertedEntry()
                changed.append(index)
            }
            return
        }
        for index in indices where try mergeEntry(entries[index], hash: hashes[index]) { changed.append(index) }
    }

    /// Inserts every entry of `indices` in one statement; false when one of them is held already
    /// or its id is taken (a constraint failed, and nothing was inserted).
    private mutating func insertAll(_ indices: ArraySlice<Int>, of entries: [Entry]) throws -> Bool {
        let insert = try insertEntries(count: indices.count)
        var position: Int32 = 1
        for index in indices {
            Self.bind(entries[index], key: try dotKey(entries[index].dot), to: insert, from: position)
            position += 7
        }
        do {
            try insert.runClearingBindings()
            return true
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            return false
        }
    }

    /// The INSERT of `count` entries, prepared once per transaction and count.
    private mutating func insertEntries(count: Int) throws -> BoundStatement {
        if let statement = insertEntriesStatements[count] { return statement }
        let row = "(?, ?, ?, ?, ?, ?, ?)"
        let statement = try BoundStatement(
            db,
            sql: """
                INSERT INTO \(Self.entryInsertColumns)
                VALUES \(Array(repeating: row, count: count).joined(separator: ", "))
                """
        )
        insertEntriesStatements[count] = statement
        return statement
    }
}
