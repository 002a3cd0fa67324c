import Foundation

/// Checks and compacts JSON text given by apps and people.
///
/// Payloads are stored byte for byte as written at their origin (the digest hashes those bytes),
/// so compaction only removes whitespace outside strings: numbers, key order and escapes stay
/// exactly as given, and one value always prints on one line.
public enum JSONText {
    /// The largest payload or preference value accepted, in bytes.
    public static let maxBytes = 64 * 1024

    /// Returns `text` without insignificant whitespace, or throws saying why it is not JSON.
    public static func compact(_ text: String) throws(LANSyncError) -> String {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.contains(where: { !isWhitespace($0) }) else {
            throw LANSyncError(.invalidInput, "the JSON value is empty; give a value such as {\"symbol\":\"more\"} or 42")
        }
        do {
            _ = try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
        } catch {
            throw LANSyncError(.invalidInput, "not valid JSON: \(describe(error)) in \(preview(text))")
        }
        var out = [UInt8]()
        out.reserveCapacity(bytes.count)
        var inString = false
        var escaped = false
        for byte in bytes {
            if inString {
                out.append(byte)
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
            } else if byte == UInt8(ascii: "\"") {
                inString = true
                out.append(byte)
            } else if !isWhitespace(byte) {
                out.append(byte)
            }
        }
        guard out.count <= maxBytes else {
            throw LANSyncError(.invalidInput, "the JSON value has \(out.count) bytes; the limit is \(maxBytes)")
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    static func preview(_ text: String) -> String {
        let flat = text.replacingOccurrences(of: "\n", with: " ")
        return flat.count > 60 ? "'" + flat.prefix(57) + "...'" : "'" + flat + "'"
    }

    static func describe(_ error: any Error) -> String {
        let nsError = error as NSError
        return (nsError.userInfo[NSDebugDescriptionErrorKey] as? String) ?? nsError.localizedDescription
    }
}
