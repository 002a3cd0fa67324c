import CSodium

/// A device's long-term Curve25519 (X25519) key pair: its static key in the Noise handshake.
///
/// The secret half lives in `SecureBytes`, wiped on release and redacted in `description`.
package struct KeyPair: Sendable, CustomStringConvertible {
    /// Key sizes in bytes (`crypto_scalarmult_BYTES`, `crypto_scalarmult_SCALARBYTES`).
    package static let publicKeyByteCount = 32
    package static let secretKeyByteCount = 32

    package let publicKey: [UInt8]
    package let secretKey: SecureBytes

    /// A fresh key pair from libsodium's CSPRNG.
    package static func generate() -> KeyPair {
        Sodium.ensureReady()
        let secret = SecureBytes(randomCount: secretKeyByteCount)
        return try! KeyPair(secretKey: secret)  // A random 32-byte scalar is always valid for X25519.
    }

    /// Rebuilds a key pair from its secret key, deriving the package key (`crypto_scalarmult_base`).
    package init(secretKey: SecureBytes) throws(CryptoError) {
        guard secretKey.count == Self.secretKeyByteCount else {
            throw .invalidKeyLength(expected: Self.secretKeyByteCount, actual: secretKey.count)
        }
        Sodium.ensureReady()
        var publicKey = [UInt8](repeating: 0, count: Self.publicKeyByteCount)
        let code = secretKey.withUnsafeBytes { secret in
            publicKey.withUnsafeMutableBufferPointer { out in
                crypto_scalarmult_base(out.baseAddress!, secret.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        try Sodium.check(code, "crypto_scalarmult_base")
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    package var description: String { "KeyPair(public: \(publicKey.hexString), secret: redacted)" }
}

extension Array where Element == UInt8 {
    /// Lowercase hexadecimal, two digits a byte.
    package var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Parses lowercase or uppercase hexadecimal; nil when the text is not whole bytes of hex.
    package init?(hexString text: some StringProtocol) {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var out = [UInt8]()
        out.reserveCapacity(chars.count / 2)
        var index = 0
        while index < chars.count {
            guard let high = nibble(chars[index]), let low = nibble(chars[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        self = out
    }
}
