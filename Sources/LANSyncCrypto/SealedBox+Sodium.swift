import CSodium

/// libsodium's sealed boxes (`crypto_box_seal`): bytes encrypted to one X25519 public key by an
/// anonymous sender, so only the holder of the matching secret key can read them. A new group
/// epoch's secret travels to each remaining member this way, sealed to the static key the group
/// pinned for that member's device: a relay, or a device that was removed, cannot open it.
///
/// A box is the plaintext plus 48 bytes (an ephemeral public key and a Poly1305 tag).
package enum SealedBox {
    package static let overhead = Int(crypto_box_sealbytes())

    /// Seals `message` to `publicKey` (32 bytes).
    package static func seal(_ message: SecureBytes, to publicKey: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard publicKey.count == KeyPair.publicKeyByteCount else {
            throw .invalidKeyLength(expected: KeyPair.publicKeyByteCount, actual: publicKey.count)
        }
        Sodium.ensureReady()
        var box = [UInt8](repeating: 0, count: message.count + overhead)
        let code = message.withUnsafeBytes { plain in
            box.withUnsafeMutableBufferPointer { out in
                crypto_box_seal(out.baseAddress!, plain.bytes, UInt64(plain.count), publicKey)
            }
        }
        try Sodium.check(code, "crypto_box_seal")
        return box
    }

    /// Opens a box sealed to `keyPair`'s public key; nil when it was sealed to another key or
    /// altered.
    package static func open(_ box: [UInt8], with keyPair: KeyPair) -> SecureBytes? {
        guard box.count > overhead else { return nil }
        Sodium.ensureReady()
        var plain = [UInt8](repeating: 0, count: box.count - overhead)
        defer { wipe(&plain) }
        let code = keyPair.secretKey.withUnsafeBytes { secret in
            plain.withUnsafeMutableBufferPointer { out in
                crypto_box_seal_open(out.baseAddress!, box, UInt64(box.count), keyPair.publicKey, secret.bytes)
            }
        }
        return code == 0 ? SecureBytes(copying: plain) : nil
    }
}
