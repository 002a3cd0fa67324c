/// The canonical bytes of SQL values: one encoding for a primary key stored as a BLOB in the
/// replica, for hashing row changes into the digest, and for the wire. Canonical means one value
/// has exactly one encoding, so equal keys compare and hash equal as bytes on every device.
///
///     value:  0x00                           NULL
///             0x01 · i64 big-endian          INTEGER
///             0x02 · u64 big-endian          REAL, its IEEE 754 bits
///             0x03 · u32 BE length · UTF-8   TEXT
///             0x04 · u32 BE length · bytes   BLOB
///     list:   u8 count (1...maxKeyColumns) · value…
extension SQLValue {
    /// A primary key has at most this many columns (SQLite allows more; no app needs them).
    package static let maxKeyColumns = 32
    /// A TEXT or BLOB value of a key or a change is at most this long (SQLite's default limit).
    package static let maxLength = 1_000_000_000

    package func append(to out: inout [UInt8]) {
        switch self {
        case .null:
            out.append(0)
        case .integer(let value):
            out.append(1)
            out.appendBigEndian(UInt64(bitPattern: value))
        case .realBits(let bits):
            out.append(2)
            out.appendBigEndian(bits)
        case .text(let text):
            out.append(3)
            out.appendField(text)
        case .blob(let bytes):
            bytes.withUnsafeBytes { Self.appendCanonical(blob: $0, to: &out) }
        }
    }

    /// What `append(to:)` writes for `.text` of these UTF-8 bytes (which must be valid), without
    /// building the `String`: the capture of an app's inserts reads values straight from SQLite.
    package static func appendCanonical(text utf8: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        out.append(3)
        out.appendBigEndian(UInt32(utf8.count))
        out.append(contentsOf: utf8)
    }

    /// What `append(to:)` writes for `.blob` of these bytes, without building the array.
    package static func appendCanonical(blob bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        out.append(4)
        out.appendBigEndian(UInt32(bytes.count))
        out.append(contentsOf: bytes)
    }

    /// The canonical bytes of a primary key's values.
    package static func keyBytes(_ values: [SQLValue]) -> [UInt8] {
        precondition((1...maxKeyColumns).contains(values.count), "a primary key has 1 to \(maxKeyColumns) columns")
        var out = [UInt8(values.count)]
        for value in values { value.append(to: &out) }
        return out
    }

    /// Reads the values `keyBytes` wrote; throws on anything else (a wrong tag, a length past the
    /// end or over the limit, TEXT that is not UTF-8, trailing bytes, a count out of range).
    package static func key(from bytes: [UInt8]) throws(SQLValueDecodingError) -> [SQLValue] {
        var reader = CanonicalReader(bytes: bytes)
        let count = Int(try reader.byte())
        guard (1...maxKeyColumns).contains(count) else {
            throw SQLValueDecodingError("a primary key has 1 to \(maxKeyColumns) columns, not \(count)")
        }
        var values = [SQLValue]()
        values.reserveCapacity(count)
        for _ in 0..<count { values.append(try reader.value()) }
        guard reader.isAtEnd else {
            throw SQLValueDecodingError("\(bytes.count - reader.offset) bytes after the key's last value")
        }
        return values
    }
}

extension SQLValue {
    /// Reads consecutive canonical values to the end of `bytes` (no count before them).
    package static func values(from bytes: [UInt8]) throws(SQLValueDecodingError) -> [SQLValue] {
        var reader = CanonicalReader(bytes: bytes)
        var values = [SQLValue]()
        while !reader.isAtEnd { values.append(try reader.value()) }
        return values
    }
}

/// Bytes that are not the canonical encoding of SQL values.
package struct SQLValueDecodingError: Error, Equatable, Sendable, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
}

/// Reads canonical bytes, refusing anything else with a reason.
struct CanonicalReader {
    let bytes: [UInt8]
    var offset = 0

    var isAtEnd: Bool { offset == bytes.count }

    mutating func byte() throws(SQLValueDecodingError) -> UInt8 {
        guard offset < bytes.count else { throw SQLValueDecodingError("the bytes end inside a value") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func take(_ count: Int) throws(SQLValueDecodingError) -> ArraySlice<UInt8> {
        guard count <= bytes.count - offset else { throw SQLValueDecodingError("the bytes end inside a value") }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    mutating func uint64() throws(SQLValueDecodingError) -> UInt64 {
        try take(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    mutating func text() throws(SQLValueDecodingError) -> String {
        let utf8 = try take(try length())
        guard let text = String(validating: utf8, as: UTF8.self) else {
            throw SQLValueDecodingError("TEXT that is not UTF-8")
        }
        return text
    }

    mutating func uint32() throws(SQLValueDecodingError) -> UInt32 {
        try take(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    mutating func length() throws(SQLValueDecodingError) -> Int {
        let length = Int(try take(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        guard length <= SQLValue.maxLength else {
            throw SQLValueDecodingError("a value of \(length) bytes is over the limit")
        }
        return length
    }

    mutating func value() throws(SQLValueDecodingError) -> SQLValue {
        switch try byte() {
        case 0: return .null
        case 1: return .integer(Int64(bitPattern: try uint64()))
        case 2: return .realBits(try uint64())
        case 3: return .text(try text())
        case 4: return .blob(Array(try take(try length())))
        case let tag: throw SQLValueDecodingError("unknown value tag \(tag) (0-4 are defined)")
        }
    }
}
