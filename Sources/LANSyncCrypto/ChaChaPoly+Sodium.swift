import CSodium

/// ChaCha20-Poly1305, IETF variant (96-bit nonce), from `crypto_aead_chacha20poly1305_ietf_*`:
/// Noise's `ChaChaPoly` cipher. The nonce is 4 zero bytes then the 64-bit counter, little-endian.
package enum ChaChaPoly {
    package static let keyByteCount = 32
    package static let tagByteCount = 16

    static func nonce(_ counter: UInt64) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 12)
        for index in 0..<8 { bytes[4 + index] = UInt8(truncatingIfNeeded: counter >> UInt64(8 * index)) }
        return bytes
    }

    /// Encrypts and authenticates `plaintext` and `ad`; the 16-byte tag follows the ciphertext.
    package static func seal(key: SecureBytes, nonce counter: UInt64, ad: [UInt8], plaintext: [UInt8]) -> [UInt8] {
        Sodium.ensureReady()
        precondition(key.count == keyByteCount, "a ChaChaPoly key is 32 bytes")
        var out = [UInt8](repeating: 0, count: plaintext.count + tagByteCount)
        var length: UInt64 = 0
        let nonce = nonce(counter)
        key.withUnsafeBytes { key in
            plaintext.withUnsafeBytes { plaintext in
                ad.withUnsafeBytes { ad in
                    out.withUnsafeMutableBufferPointer { out in
                        _ = crypto_aead_chacha20poly1305_ietf_encrypt(
                            out.baseAddress!,
                            &length,
                            plaintext.bytes,
                            UInt64(plaintext.count),
                            ad.bytes,
                            UInt64(ad.count),
                            nil,
                            nonce,
                            key.bytes
                        )
                    }
                }
            }
        }
        return out
    }

    /// Checks and decrypts; nil when the tag does not match (tampered, truncated, wrong key or nonce).
    package static func open(key: SecureBytes, nonce counter: UInt64, ad: [UInt8], ciphertext: [UInt8]) -> [UInt8]? {
        Sodium.ensureReady()
        guard ciphertext.count >= tagByteCount, key.count == keyByteCount else { return nil }
        var out = [UInt8](repeating: 0, count: ciphertext.count - tagByteCount)
        var length: UInt64 = 0
        let nonce = nonce(counter)
        let code = key.withUnsafeBytes { key in
            ciphertext.withUnsafeBytes { ciphertext in
                ad.withUnsafeBytes { ad in
                    out.withUnsafeMutableBufferPointer { out in
                        crypto_aead_chacha20poly1305_ietf_decrypt(
                            out.baseAddress ?? UnsafeMutablePointer(mutating: ciphertext.bytes),
                            &length,
                            nil,
                            ciphertext.bytes,
                            UInt64(ciphertext.count),
                            ad.bytes,
                            UInt64(ad.count),
                            nonce,
                            key.bytes
                        )
                    }
                }
            }
        }
        return code == 0 ? out : nil
    }
}

/// X25519 Diffie-Hellman, from `crypto_scalarmult`.
package enum X25519 {
    /// The shared secret of our secret key and their package key; nil when their key is a
    /// low-order point (libsodium refuses an all-zero result), which a handshake must reject.
    package static func sharedSecret(secretKey: SecureBytes, publicKey: [UInt8]) -> SecureBytes? {
        Sodium.ensureReady()
        guard publicKey.count == KeyPair.publicKeyByteCount, secretKey.count == KeyPair.secretKeyByteCount else {
            return nil
        }
        var shared = [UInt8](repeating: 0, count: 32)
        let code = secretKey.withUnsafeBytes { secret in
            shared.withUnsafeMutableBufferPointer { out in
                crypto_scalarmult(out.baseAddress!, secret.bytes, publicKey)
            }
        }
        defer { sodium_memzero(&shared, shared.count) }
        return code == 0 ? SecureBytes(copying: shared) : nil
    }
}

/// Zeroes a byte array in place (`sodium_memzero`, which the compiler cannot optimise away).
package func wipe(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { buffer in
        if let base = buffer.baseAddress { sodium_memzero(base, buffer.count) }
    }
}
