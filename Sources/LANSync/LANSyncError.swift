/// An error a user or an embedding app can see: what happened and what to do, in `description`.
public struct LANSyncError: Error, CustomStringConvertible, Sendable {
    public enum Code: Sendable, Equatable {
        /// Bad input from the caller: a name, a JSON value, a file. Nothing was written.
        case invalidInput
        /// The data directory holds no initialised node.
        case notInitialized
        /// The data directory or one of its files is not usable (wrong kind, newer version, damaged).
        case unusableData
        /// A peer's clock is too far ahead.
        case clockSkew
        /// The database or the file system failed.
        case storage
        /// An app schema was refused; nothing of it was applied.
        case schema
        /// An SQL write or query on app tables failed; nothing of that write was applied.
        case sql
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
