internal import CSQLiteConfig
import GRDB

/// How durable a transaction's commit is. The writer connection runs at `synchronous = FULL`
/// (every commit flushes the WAL before it returns), except a merge's transactions: what a peer
/// sent is held by that peer too, and a power cut that takes back a merge's last transactions
/// takes back the version vector with them, so those changes are simply sent again. The WAL is
/// flushed with the next checkpoint (every few commits; see `Checkpointer`) or the next commit of
/// the app's own writes, whichever comes first.
extension Database {
    /// Commits from now on flush the WAL: an acknowledged write survives power loss, not only a
    /// crash of the process. Outside a transaction only (SQLite refuses the change inside one).
    func commitDurably() throws { try cachedStatement(sql: "PRAGMA synchronous = FULL").execute() }

    /// Commits from now on leave the WAL to the next flush (see above). Only for a merge's
    /// transactions, which switch back with `commitDurably()`. Both are cached statements: a
    /// catch-up switches twice per transaction, hundreds of times a second.
    func commitForMerge() throws { try cachedStatement(sql: "PRAGMA synchronous = NORMAL").execute() }

    /// Flushes the WAL to disk now, as a durable commit would have: for the app's writes that
    /// rode along in a merge's transaction, before they are reported written.
    func flushWAL() throws {
        let code = lansync_sqlite3_flush_wal(sqliteConnection)
        guard code == SQLITE_OK else {
            throw DatabaseError(
                resultCode: ResultCode(rawValue: code),
                message: "could not flush the write-ahead log to disk"
            )
        }
    }
}
