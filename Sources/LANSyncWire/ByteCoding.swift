import LANSyncCore

/// Reading and writing the wire's primitive encodings.
///
/// Integers are unsigned LEB128 varints (at most 10 bytes) or fixed big-endian; strings and
/// byte strings are a varint length then the bytes. Every read is bounds-checked and throws
/// `WireError` instead of trapping: these bytes come from other machines.

/// Why bytes from a peer could not be decoded. Any such error ends the connection.
package struct WireError: Error, Equatable, Sendable, CustomStringConvertible {
    package let reason: String
    package init(_ reason: String) { self.reason = reason }
    package var description: String { "malformed message: \(reason)" }
}

package struct ByteWriter: Sendable {
    package private(set) var bytes: [UInt8] = []

    package init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    package mutating func byte(_ value: UInt8) { bytes.append(value) }

    package mutating func varint(_ value: UInt64) {
        var rest = value
        while rest >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
    }

    package mutating func varint(_ value: Int) { varint(UInt64(value)) }

    /// A signed value, zigzag-encoded so small negatives stay short.
    package mutating func signed(_ value: Int64) { varint(UInt64(bitPattern: (value << 1) ^ (value >> 63))) }

    package mutating func fixed64(_ value: UInt64) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    package mutating func fixed16(_ value: UInt16) {
        bytes.append(UInt8(value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    package mutating func raw(_ data: some Sequence<UInt8>) { bytes.append(contentsOf: data) }

    package mutating func string(_ text: String) {
        varint(text.utf8.count)
        bytes.append(contentsOf: text.utf8)
    }
}

package struct ByteReader: Sendable {
    private let bytes: [UInt8]
    package private(set) var position = 0

    package init(_ bytes: [UInt8]) { self.bytes = bytes }

    package var remaining: Int { bytes.count - position }
    package var isAtEnd: Bool { position == bytes.count }

    package mutating func byte() throws(WireError) -> UInt8 {
        guard position < bytes.count else { throw WireError("ends early at byte \(position)") }
        defer { position += 1 }
        return bytes[position]
    }

    package mutating func varint() throws(WireError) -> UInt64 {
        var value: UInt64 = 0
        for index in 0..<10 {
            let byte = try byte()
            if index == 9 && byte > 1 { throw WireError("varint overflows 64 bits at byte \(position)") }
            value |= UInt64(byte & 0x7F) << UInt64(7 * index)
            if byte & 0x80 == 0 { return value }
        }
        throw WireError("varint longer than 10 bytes at byte \(position)")
    }

    /// A varint that must fit `limit` (a count or a length): guards every allocation by the peer's word.
    package mutating func count(atMost limit: Int, _ what: String) throws(WireError) -> Int {
        let value = try varint()
        guard value <= UInt64(limit) else { throw WireError("\(what) of \(value) exceeds the limit of \(limit)") }
        return Int(value)
    }

    /// A counter of a replica's operations (a dot's, a coverage bound, a version vector's):
    /// `lowest`…`Dot.maxCounter` (2^40 − 1), so no sum or difference of counters can overflow.
    package mutating func counter(atLeast lowest: UInt64, _ what: String) throws(WireError) -> UInt64 {
        let value = try varint()
        guard value >= lowest, value <= Dot.maxCounter else {
            throw WireError("\(what) \(value) is outside \(lowest)...\(Dot.maxCounter)")
        }
        return value
    }

    /// A flags byte whose bits outside `known` must be 0.
    package mutating func flags(known: UInt8, _ what: String) throws(WireError) -> UInt8 {
        let value = try byte()
        guard value & ~known == 0 else { throw WireError("\(what) has unknown bits set (\(value))") }
        return value
    }

    package mutating func signed() throws(WireError) -> Int64 {
        let value = try varint()
        return Int64(bitPattern: value >> 1) ^ -Int64(bitPattern: value & 1)
    }

    package mutating func fixed64() throws(WireError) -> UInt64 {
        var value: UInt64 = 0
        for _ in 0..<8 { value = value << 8 | UInt64(try byte()) }
        return value
    }

    package mutating func fixed16() throws(WireError) -> UInt16 {
        UInt16(try byte()) << 8 | UInt16(try byte())
    }

    package mutating func raw(_ count: Int) throws(WireError) -> [UInt8] {
        try withBytes(count) { Array($0) }
    }

    /// Calls `body` with the next `count` bytes in place (valid only during the call), then
    /// moves past them: a decoder reads them without copying them into an array first.
    package mutating func withBytes<T>(_ count: Int, _ body: (UnsafeBufferPointer<UInt8>) -> T) throws(WireError) -> T {
        guard count >= 0, count <= remaining else { throw WireError("wants \(count) bytes, \(remaining) remain") }
        defer { position += count }
        return bytes.withUnsafeBufferPointer { body(UnsafeBufferPointer(rebasing: $0[position..<(position + count)])) }
    }

    package mutating func string(atMost limit: Int, _ what: String) throws(WireError) -> String {
        let length = try count(atMost: limit, "\(what) length")
        // Validated straight from the message's bytes: one copy, into the string (every payload).
        guard let text = try withBytes(length, { String(validating: $0, as: UTF8.self) }) else {
            throw WireError("\(what) is not UTF-8")
        }
        return text
    }

    package func expectEnd(_ what: String) throws(WireError) {
        guard isAtEnd else { throw WireError("\(remaining) stray bytes after \(what)") }
    }
}
