/// An error a user or an embedding app can see: what happened and what to do, in `description`.
public struct LANSyncError: Error, CustomStringConvertible, Sendable {
    /// What kind of error it is. A struct with one static member per kind rather than an enum,
    /// so that a later version can add kinds without breaking an app that switches on them
    /// (GRDB's `ResultCode` does the same): a `switch` over codes needs a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// A stable name, as the local API's `error` field spells it (`invalid_input`).
        public let name: String

        init(_ name: String) { self.name = name }

        public var description: String { name }

        /// Bad input from the caller: a name, a JSON value, a file. Nothing was written.
        public static let invalidInput = Code("invalid_input")
        /// The data directory holds no initialised node.
        public static let notInitialized = Code("not_initialized")
        /// The data directory or one of its files is not usable (wrong kind, newer version, damaged).
        public static let unusableData = Code("unusable_data")
        /// A peer's clock is too far ahead.
        public static let clockSkew = Code("clock_skew")
        /// The database or the file system failed.
        public static let storage = Code("storage")
        /// An app schema was refused; nothing of it was applied.
        public static let schema = Code("schema")
        /// An SQL write or query on app tables failed; nothing of that write was applied.
        public static let sql = Code("sql")
    }

    /// What kind of error it is, for code that reacts to it.
    public let code: Code
    /// What happened and what to do, for people.
    public let message: String

    /// An error of kind `code` that says `message`.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
