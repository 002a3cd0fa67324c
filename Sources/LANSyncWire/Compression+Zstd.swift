import CZstd

/// Zstandard (RFC 8878) for large wire messages: JSON payloads compress several-fold, which is
/// what keeps a bulk catch-up's bytes on the wire well under the payload bytes.
///
/// Chosen over zlib for speed: on a 500 KB sample shaped like a 2,000-row catch-up batch, measured
/// here with `zstd -b1` and Python's zlib, level 1 compresses at about 1 GB/s and decompresses at
/// 3 GB/s (zlib's fastest level: 0.28 and 0.77 GB/s), and packs tighter (8.8× against 6.8×). With
/// zlib, compressing and decompressing a catch-up's batches took about a tenth of the CPU time
/// the whole catch-up used.
///
/// The only file that calls zstd. Decompression is bounded by the length the sender declared
/// (itself at most `WireProtocol.maxMessageBytes`), so a "zip bomb" cannot make the receiver
/// allocate more than a message may hold.
enum Zstd {
    /// Level 1: fast, and JSON still shrinks to an eighth or so.
    static let level: Int32 = 1

    static func compress(_ bytes: [UInt8]) -> [UInt8]? {
        let bound = ZSTD_compressBound(bytes.count)
        var out = [UInt8](repeating: 0, count: bound)
        let length = out.withUnsafeMutableBytes { out in
            bytes.withUnsafeBytes { input in
                ZSTD_compress(out.baseAddress, out.count, input.baseAddress, input.count, level)
            }
        }
        guard ZSTD_isError(length) == 0 else { return nil }
        out.removeSubrange(length...)
        return out
    }

    /// Decompresses one frame to exactly `expectedLength` bytes, or throws.
    static func decompress(_ bytes: [UInt8], expectedLength: Int) throws(WireError) -> [UInt8] {
        guard expectedLength > 0, expectedLength <= WireProtocol.maxMessageBytes else {
            throw WireError("compressed message claims \(expectedLength) bytes")
        }
        var out = [UInt8](repeating: 0, count: expectedLength)
        let length = out.withUnsafeMutableBytes { out in
            bytes.withUnsafeBytes { input in
                // Writes at most `out.count` bytes: a frame that would inflate further is an error.
                ZSTD_decompress(out.baseAddress, out.count, input.baseAddress, input.count)
            }
        }
        guard ZSTD_isError(length) == 0, length == expectedLength else {
            throw WireError("compressed message does not decompress to its declared \(expectedLength) bytes")
        }
        return out
    }
}
