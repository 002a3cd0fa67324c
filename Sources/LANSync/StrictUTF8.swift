import Foundation

/// Text read from outside (standard input, a file, an HTTP body, the command line) taken as it
/// is or refused: Swift's usual decoding swaps each invalid byte for U+FFFD, and a log that
/// changes what it was given is not a log.
package enum StrictUTF8 {
    /// `bytes` as text, or an `.invalidInput` error naming the first byte that is not UTF-8 and `what` held it.
    /// The message ends with "nothing was written" unless `saying` is false (the caller says it).
    package static func decode(
        _ bytes: some Collection<UInt8>,
        _ what: String,
        saying: Bool = true
    ) throws(LANSyncError) -> String {
        if let text = String(validating: bytes, as: UTF8.self) { return text }
        let offset = firstInvalidOffset(bytes) ?? 0
        throw LANSyncError(
            .invalidInput,
            "\(what) is not valid UTF-8 (byte \(offset) is not); send text as UTF-8, or binary data as base64"
                + (saying ? "; nothing was written" : "")
        )
    }

    /// Where the first byte that does not decode is.
    static func firstInvalidOffset(_ bytes: some Collection<UInt8>) -> Int? {
        var decoder = UTF8()
        var iterator = bytes.makeIterator()
        var offset = 0
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let scalar): offset += UTF8.width(scalar)
            case .emptyInput: return nil
            case .error: return offset
            }
        }
    }

    /// The command line's arguments as the program received them, refused when one is not UTF-8
    /// (Swift's `CommandLine.arguments` has already replaced such bytes).
    package static func checkCommandLine() throws(LANSyncError) {
        for index in 1..<Int(CommandLine.argc) {
            guard let argument = CommandLine.unsafeArgv[index] else { continue }
            let bytes = UnsafeBufferPointer(
                start: UnsafeRawPointer(argument).assumingMemoryBound(to: UInt8.self),
                count: strlen(argument)
            )
            _ = try decode(bytes, "argument \(index)")
        }
    }
}
