import CSodium

/// A device's Ed25519 signing key (libsodium `crypto_sign`): what it signs the group's records with
/// (a removal's epoch record), so a member relaying them cannot forge or alter them.
///
/// Derived from the device's static key (`SigningKey(derivedFrom:)`), so it needs no file of its
/// own and changes exactly when the device key does. Peers learn its public half from the
/// device's `Hello`, which the handshake authenticates with the static key: the two are bound.
package struct SigningKey: Sendable {
    package static let publicKeyByteCount = 32
    package static let signatureByteCount = 64

    package let publicKey: [UInt8]
    private let secretKey: SecureBytes

    /// The signing key of a device whose static key pair is `keyPair`: the Ed25519 key pair of the
    /// seed HMAC-SHA256(static secret key, "lansync/v1/signing-key").
    package init(derivedFrom keyPair: KeyPair) {
        Sodium.ensureReady()
        var seed = SHA256.hmac(key: keyPair.secretKey, message: Array("lansync/v1/signing-key".utf8))
        defer { wipe(&seed) }
        var publicKey = [UInt8](repeating: 0, count: Self.publicKeyByteCount)
        var secret = [UInt8](repeating: 0, count: Int(crypto_sign_secretkeybytes()))
        defer { wipe(&secret) }
        _ = crypto_sign_seed_keypair(&publicKey, &secret, seed)
        self.publicKey = publicKey
        secretKey = SecureBytes(copying: secret)
    }

    /// The 64-byte detached signature of `message`.
    package func sign(_ message: [UInt8]) -> [UInt8] {
        var signature = [UInt8](repeating: 0, count: Self.signatureByteCount)
        secretKey.withUnsafeBytes { secret in
            _ = crypto_sign_detached(&signature, nil, message, UInt64(message.count), secret.bytes)
        }
        return signature
    }

    /// Whether `signature` is `publicKey`'s signature of `message`.
    package static func verify(_ signature: [UInt8], of message: [UInt8], by publicKey: [UInt8]) -> Bool {
        guard signature.count == signatureByteCount, publicKey.count == publicKeyByteCount else { return false }
        Sodium.ensureReady()
        return crypto_sign_verify_detached(signature, message, UInt64(message.count), publicKey) == 0
    }
}
