/// Rules for the names people and apps choose: streams, preference keys, entry ids.
///
/// Names travel to other devices and land in file names of exports, so they are kept to a
/// portable, printable subset; each check returns a sentence saying what is wrong and what is allowed.
package enum Names {
    package static let maxStreamLength = 64
    package static let maxKeyLength = 200
    package static let maxEntryIDLength = 128

    /// A stream name: 1–64 of `a-z 0-9 _ - .`, starting with a letter or digit ("symbol_taps").
    package static func streamProblem(_ name: String) -> String? {
        if name.isEmpty { return "a stream name cannot be empty" }
        if name.utf8.count > maxStreamLength { return "a stream name has at most \(maxStreamLength) characters" }
        guard Self.allBytes(of: name, satisfy: isNameByte), let first = name.utf8.first, isAlphanumeric(first) else {
            return
                "stream name '\(name)': use lowercase letters, digits, '_', '-' and '.', starting with a letter or digit"
        }
        return nil
    }

    /// A preference key: '/'-separated segments, each like a stream name ("controls/slider/sensitivity").
    package static func keyProblem(_ key: String, as given: String? = nil) -> String? {
        if key.isEmpty { return "a preference key cannot be empty" }
        if key.utf8.count > maxKeyLength { return "a preference key has at most \(maxKeyLength) characters" }
        for segment in key.split(separator: "/", omittingEmptySubsequences: false) {
            guard let first = segment.utf8.first, isAlphanumeric(first), segment.utf8.allSatisfy(isNameByte) else {
                return
                    "preference key '\(given ?? key)': use '/'-separated parts of letters, digits, '_', '-' and '.', "
                    + "each starting with a letter or digit (e.g. controls/slider/sensitivity; capitals are the same key in lowercase)"
            }
        }
        return nil
    }

    /// A preference key as an app may write it, folded to the form stored and sent: ASCII
    /// capitals become lowercase (`game.6F96.level.L20` is `game.6f96.level.l20`), so keys are
    /// case-insensitive and an app's own spelling finds its value. Nothing else changes: any
    /// other character the key rules refuse is still refused.
    package static func foldedKey(_ key: String) -> String {
        guard key.utf8.contains(where: { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }) else { return key }
        return String(
            decoding: key.utf8.map { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) ? $0 + 32 : $0 },
            as: UTF8.self
        )
    }

    /// What is wrong with a key as an app hands it in (checked folded, quoted as given).
    package static func appKeyProblem(_ key: String) -> String? {
        keyProblem(foldedKey(key), as: key)
    }

    /// An entry id given by the caller: 1–128 printable ASCII characters, no spaces.
    package static func entryIDProblem(_ id: String) -> String? {
        if id.isEmpty { return "an entry id cannot be empty" }
        if id.utf8.count > maxEntryIDLength { return "an entry id has at most \(maxEntryIDLength) characters" }
        guard Self.allBytes(of: id, satisfy: { $0 > 0x20 && $0 < 0x7F }) else {
            return "entry id '\(id)': use printable ASCII characters without spaces"
        }
        return nil
    }

    /// Whether every UTF-8 byte of `text` passes `test`, read in place: every id and stream name
    /// a peer sends is checked, and iterating a `String.UTF8View` costs several times more.
    @inline(__always) static func allBytes(of text: String, satisfy test: (UInt8) -> Bool) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            for byte in bytes where !test(byte) { return false }
            return true
        }
    }

    static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    static func isNameByte(_ byte: UInt8) -> Bool {
        isAlphanumeric(byte) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
    }
}
