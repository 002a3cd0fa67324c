import Foundation
import GRDB

/// Every database error becomes a `StoreError` here, and only here.
extension ReplicaStore {

    /// Runs `body`, turning any GRDB error into a `StoreError` with a message for people.
    static func database<T>(
        _ body: () throws -> T,
        onError: (DatabaseError) -> StoreError? = { _ in nil }
    )
        throws(StoreError) -> T
    {
        do { return try body() } catch { throw translate(error, onError) }
    }

    /// Like `database`, for reads that call back into the caller: database errors become a
    /// `StoreError`; the caller's own errors pass through unchanged.
    static func databaseCallingBack<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as DatabaseError { throw translate(error, { _ in nil }) }
    }

    static func database<T>(_ body: () async throws -> T) async throws(StoreError) -> T {
        do { return try await body() } catch { throw translate(error, { _ in nil }) }
    }

    private static func translate(_ error: any Error, _ onError: (DatabaseError) -> StoreError?) -> StoreError {
        if let error = error as? StoreError { return error }
        if let error = error as? DatabaseError {
            if let mapped = onError(error) { return mapped }
            switch error.resultCode {
            case .SQLITE_NOTADB:
                return StoreError(
                    .notAReplica,
                    "not a LANSync replica (not an SQLite database): \(error.message ?? "")"
                )
            case .SQLITE_BUSY, .SQLITE_LOCKED:
                return StoreError(
                    .database,
                    "the replica is locked by another process for too long; try again (SQLite \(error.extendedResultCode.rawValue))"
                )
            case .SQLITE_READONLY:
                return StoreError(.database, ReadOnlyReplica.writeRefusal)
            case .SQLITE_CANTOPEN:
                return StoreError(
                    .database,
                    "cannot open the replica (\(error.message ?? "unable to open database file")): check that its data directory "
                        + "exists and that this user may read it"
                )
            case .SQLITE_FULL:
                return StoreError(
                    .database,
                    "the disk is full; free some space and try again (nothing of this write was committed)"
                )
            case .SQLITE_CORRUPT:
                return StoreError(
                    .database,
                    "the replica's database is damaged (\(error.message ?? "corrupt")); "
                        + "restore it from an export or re-sync from peers"
                )
            default:
                return StoreError(.database, "database error: \(error.message ?? "\(error)")")
            }
        }
        return StoreError(.database, "\(error)")
    }
}
