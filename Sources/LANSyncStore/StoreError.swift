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
    }

    package let code: Code
    package let message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var description: String { message }
}
