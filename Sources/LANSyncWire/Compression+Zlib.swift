import CZlib

/// zlib (RFC 1950) for large wire messages: JSON payloads compress several-fold, which is what
/// keeps a bulk catch-up's bytes on the wire near the payload bytes.
///
/// The only file that calls zlib. Decompression is bounded by the length the sender declared
/// (itself at most `WireProtocol.maxMessageBytes`), so a "zip bomb" cannot make the receiver
/// allocate more than a message may hold.
enum Zlib {
    /// Level 1: fastest; JSON still shrinks to a third or less.
    static func compress(_ bytes: [UInt8]) -> [UInt8]? {
        var length = compressBound(uLong(bytes.count))
        var out = [UInt8](repeating: 0, count: Int(length))
        let code = out.withUnsafeMutableBufferPointer { out in
            bytes.withUnsafeBufferPointer { input in
                compress2(out.baseAddress, &length, input.baseAddress, uLong(input.count), 1)
            }
        }
        guard code == Z_OK else { return nil }
        out.removeSubrange(Int(length)...)
        return out
    }

    /// Inflates to exactly `expectedLength` bytes, or throws.
    static func decompress(_ bytes: [UInt8], expectedLength: Int) throws(WireError) -> [UInt8] {
        guard expectedLength > 0, expectedLength <= WireProtocol.maxMessageBytes else {
            throw WireError("compressed message claims \(expectedLength) bytes")
        }
        var out = [UInt8](repeating: 0, count: expectedLength)
        var length = uLong(expectedLength)
        let code = out.withUnsafeMutableBufferPointer { out in
            bytes.withUnsafeBufferPointer { input in
                uncompress(out.baseAddress, &length, input.baseAddress, uLong(input.count))
            }
        }
        guard code == Z_OK, Int(length) == expectedLength else {
            throw WireError("compressed message does not inflate to its declared \(expectedLength) bytes")
        }
        return out
    }
}
