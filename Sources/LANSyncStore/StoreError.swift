/// An error from the replica store, with a message that says what happened and what to do.
package struct StoreError: Error, CustomStringConvertible, Sendable {
    package enum Code: Sendable, Equatable {
        /// No replica at the path (or an init that never finished).
        case notInitialized
        /// The file is not a LANSync replica: another SQLite database, or not SQLite at all.
        case notAReplica
        /// The replica was written by a newer LANSync with a schema this build does not know.
        case newerSchema
        /// A delta or an import failed validation; nothing of it was written.
        case invalidDelta
        /// SQLite reported an error (disk full, I/O error, corruption, a lock held too long).
        case database
        /// An app's schema was refused; nothing of it was applied.
        case schema
        /// An app's SQL write or query failed (SQLite's error, or a rule of app tables); nothing
        /// of that write was applied.
        case sql
        /// An app's SQL reached past its declared tables (`AppSQLGuard`); nothing of it was applied.
        case refused
    }

    package let code: Code
    package let message: String
    /// The app's own error, when the app's code in a write threw it (code `.sql`).
    package var underlying: (any Error)?

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var description: String { message }
}
