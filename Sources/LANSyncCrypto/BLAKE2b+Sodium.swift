import CSodium

/// BLAKE2b with a 32-byte output, from libsodium's `crypto_generichash`.
///
/// The state digest hashes every row with it: it is more than twice as fast as libsodium's
/// SHA-256 (which does not use the CPU's SHA instructions), and a digest only needs every replica
/// to use the same collision-resistant hash.
package enum BLAKE2b {
    package static let byteCount = 32

    package static func hash(_ bytes: some ContiguousBytes) -> [UInt8] {
        Sodium.ensureReady()
        var out = [UInt8](repeating: 0, count: byteCount)
        bytes.withUnsafeBytes { input in
            out.withUnsafeMutableBufferPointer { output in
                _ = crypto_generichash(output.baseAddress!, byteCount, input.bytes, UInt64(input.count), nil, 0)
            }
        }
        return out
    }
}
