import CZstd

/// Zstandard (RFC 8878) for large wire messages: JSON payloads compress several-fold, which is
/// what keeps a bulk catch-up's bytes on the wire well under the payload bytes.
///
/// Chosen over zlib: at level 1 it compresses and decompresses a catch-up batch several times
/// faster than zlib's fastest level, and packs it tighter; with zlib, compression took a tenth
/// of a catch-up's CPU time (figures in docs/journal/2026-11-speed.md).
///
/// The only file that calls zstd. Decompression is bounded by the length the sender declared
/// (itself at most `WireProtocol.maxMessageBytes`), so a "zip bomb" cannot make the receiver
/// allocate more than a message may hold.
enum Zstd {
    /// Level -3 (`zstd --fast=3`): on a 514 KB sample shaped like a batch, 1.9 GB/s to compress and
    /// 5.4 to decompress against level 1's 1.0 and 3.2, for 7.4× instead of 9.1×. The benchmark's
    /// catch-up then sends 31 bytes an entry instead of 22, about a seventh of the payload; the
    /// CPU is what a catch-up runs short of.
    static let level: Int32 = -3

    static func compress(_ bytes: [UInt8]) -> [UInt8]? {
        let bound = ZSTD_compressBound(bytes.count)
        // Uninitialized: zstd writes what it returns, and the rest is cut off.
        var failed = false
        let out = [UInt8](unsafeUninitializedCapacity: bound) { out, initialized in
            let length = bytes.withUnsafeBytes { input in
                ZSTD_compress(out.baseAddress, out.count, input.baseAddress, input.count, level)
            }
            failed = ZSTD_isError(length) != 0
            initialized = failed ? 0 : length
        }
        return failed ? nil : out
    }

    /// Decompresses one frame to exactly `expectedLength` bytes, or throws.
    static func decompress(_ bytes: [UInt8], expectedLength: Int) throws(WireError) -> [UInt8] {
        guard expectedLength > 0, expectedLength <= WireProtocol.maxMessageBytes else {
            throw WireError("compressed message claims \(expectedLength) bytes")
        }
        var length = 0
        // Uninitialized: only the bytes zstd wrote are kept, and anything short of the declared
        // length is refused below.
        let out = [UInt8](unsafeUninitializedCapacity: expectedLength) { out, initialized in
            length = bytes.withUnsafeBytes { input in
                // Writes at most `out.count` bytes: a frame that would inflate further is an error.
                ZSTD_decompress(out.baseAddress, out.count, input.baseAddress, input.count)
            }
            initialized = ZSTD_isError(length) == 0 ? length : 0
        }
        guard ZSTD_isError(length) == 0, length == expectedLength else {
            throw WireError("compressed message does not decompress to its declared \(expectedLength) bytes")
        }
        return out
    }
}
