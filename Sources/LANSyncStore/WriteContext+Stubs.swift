import Foundation
import GRDB
import LANSyncCore

/// Stubs of superseded changes (docs/signed-changes.md, "Leaves"): what stays of a change the
/// merge rules pruned, so that its leaf can still be rebuilt and sent. App-table changes keep
/// theirs in `WriteContext+AppRows`.
extension WriteContext {
    /// Keeps an entry that lost to another version of its id, whole, so that its leaf can still be
    /// sent (the receiver's merge drops it again).
    mutating func keepLosingEntry(_ entry: Entry) throws {
        let statement = try db.cachedStatement(
            sql: """
                INSERT OR IGNORE INTO entry_stubs (dot, id, stream, origin_device, hlc, wall_ms, payload)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """)
        try statement.execute(arguments: [
            try dotKey(entry.dot), entry.id, entry.stream, blob(entry.originDevice), Int64(entry.hlc.rawValue),
            entry.wallMilliseconds, entry.payload,
        ])
    }

    /// Keeps what a superseded preference write's leaf needs (`PreferenceStub`).
    mutating func keepLosingPreference(_ write: PreferenceWrite, elementHash: [UInt8]) throws {
        let statement = try db.cachedStatement(
            sql: "INSERT OR IGNORE INTO preference_stubs (dot, key, hlc, element_hash) VALUES (?, ?, ?, ?)")
        try statement.execute(arguments: [try dotKey(write.dot), write.key, Int64(write.hlc.rawValue), Data(elementHash)])
    }
}
