import CSodium

/// SHA-256, from libsodium's `crypto_hash_sha256`.
package enum SHA256 {
    /// The digest size in bytes.
    package static let byteCount = 32

    /// The SHA-256 digest of `bytes`.
    package static func hash(_ bytes: some ContiguousBytes) -> [UInt8] {
        Sodium.ensureReady()
        var out = [UInt8](repeating: 0, count: byteCount)
        bytes.withUnsafeBytes { input in
            out.withUnsafeMutableBytes { output in
                _ = crypto_hash_sha256(
                    output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    input.bytes,
                    UInt64(input.count)
                )
            }
        }
        return out
    }

    /// HMAC-SHA-256 of `message` under `key` (any length), from `crypto_auth_hmacsha256_*`.
    package static func hmac(key: some ContiguousBytes, message: some ContiguousBytes) -> [UInt8] {
        Sodium.ensureReady()
        var state = crypto_auth_hmacsha256_state()
        var out = [UInt8](repeating: 0, count: Int(crypto_auth_hmacsha256_BYTES))
        key.withUnsafeBytes { key in
            _ = crypto_auth_hmacsha256_init(
                &state,
                key.bytes,
                key.count
            )
        }
        message.withUnsafeBytes { message in
            _ = crypto_auth_hmacsha256_update(
                &state,
                message.bytes,
                UInt64(message.count)
            )
        }
        out.withUnsafeMutableBufferPointer { out in
            _ = crypto_auth_hmacsha256_final(&state, out.baseAddress!)
        }
        sodium_memzero(&state, MemoryLayout<crypto_auth_hmacsha256_state>.size)
        return out
    }
}

/// Bytes laid out contiguously in memory, readable without a copy.
package protocol ContiguousBytes {
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
}

extension Array: ContiguousBytes where Element == UInt8 {}
extension ArraySlice: ContiguousBytes where Element == UInt8 {}
extension UnsafeRawBufferPointer: ContiguousBytes {
    package func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try body(self) }
}
