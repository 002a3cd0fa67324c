internal import CSQLiteConfig

/// Process-wide SQLite settings, applied once before the store opens its first connection.
///
/// SQLite's memory statistics (`SQLITE_CONFIG_MEMSTATUS`, on by default) take one process-wide
/// mutex around every allocation SQLite makes. Every connection in the process shares it: the
/// writer merging a catch-up, the readers answering peers and the app, a second replica in the
/// same process; turned off, a million-entry catch-up between two agents in one process is about
/// a seventh faster (docs/journal/2026-11-speed.md). LANSync reads no memory statistics and sets
/// no soft heap limit, the two things that need them.
///
/// SQLite accepts process settings only before it initializes: when the host app opened a
/// connection of its own first, the call changes nothing and SQLite keeps its defaults. A program
/// that opens SQLite databases itself before any replica (the benchmark's baseline does) calls
/// `apply()` first, so that both run under the same settings.
package enum SQLiteProcessSettings {
    /// Applies the settings; only the first call in the process does anything.
    package static func apply() { applied }

    private static let applied: Void = { _ = lansync_sqlite3_disable_memory_statistics() }()
}
