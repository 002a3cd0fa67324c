import GRDB

/// How durable a transaction's commit is. The writer connection runs at `synchronous = FULL`
/// (every commit flushes the WAL before it returns, and readers see it only then), except a
/// merge's transactions, which hold nothing but what peers sent: a peer holds it too, and a power
/// cut that takes back a merge's last transactions takes back the version vector with them, so
/// those changes are simply sent again. The WAL is flushed with the next checkpoint (every few
/// commits; see `Checkpointer`) or the next commit of the app's own writes, whichever comes
/// first. The app's writes never ride in a merge's transaction (see `LocalWriteQueue`).
extension Database {
    /// Commits from now on flush the WAL: an acknowledged write survives power loss, not only a
    /// crash of the process. Outside a transaction only (SQLite refuses the change inside one).
    func commitDurably() throws { try cachedStatement(sql: "PRAGMA synchronous = FULL").execute() }

    /// Commits from now on leave the WAL to the next flush (see above). Only for a merge's
    /// transactions, which switch back with `commitDurably()`. Both are cached statements: a
    /// catch-up switches twice per transaction, hundreds of times a second.
    func commitForMerge() throws { try cachedStatement(sql: "PRAGMA synchronous = NORMAL").execute() }
}
