import LANSyncCore

/// Checks and compacts JSON text given by apps and people (see `CompactJSON`, which does the work).
///
/// Payloads are stored byte for byte as written at their origin (the digest hashes those bytes),
/// so compaction only removes whitespace between tokens: numbers, key order and escapes stay
/// exactly as given, and one value always prints on one line.
package enum JSONText {
    /// The largest payload or preference value accepted, in bytes.
    package static let maxBytes = Delta.maxValueBytes

    /// Returns `text` without insignificant whitespace, or throws saying why it is not JSON.
    package static func compact(_ text: String) throws(LANSyncError) -> String {
        // Most apps send compact JSON already: check it in place, without building a copy.
        if text.utf8.count <= maxBytes, CompactJSON.isCompact(text) { return text }
        switch CompactJSON.compact(text) {
        case .success(let compacted):
            guard compacted.utf8.count <= maxBytes else {
                throw LANSyncError(
                    .invalidInput,
                    "the JSON value has \(compacted.utf8.count) bytes; the limit is \(maxBytes)"
                )
            }
            return compacted
        case .failure(let problem):
            if text.allSatisfy(\.isWhitespace) {
                throw LANSyncError(
                    .invalidInput,
                    "the JSON value is empty; give a value such as {\"symbol\":\"more\"} or 42"
                )
            }
            // A bare word is the usual slip on a command line: say how to write a string.
            let hint =
                problem.reason.hasPrefix("unexpected character")
                ? " (a string needs double quotes, e.g. '\"dad\"')" : ""
            throw LANSyncError(.invalidInput, "not valid JSON: \(problem) in \(preview(text))\(hint)")
        }
    }

    static func preview(_ text: String) -> String {
        let flat = text.split(whereSeparator: \.isNewline).joined(separator: " ")
        return flat.count > 60 ? "'" + flat.prefix(57) + "...'" : "'" + flat + "'"
    }
}
