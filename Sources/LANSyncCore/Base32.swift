/// Base32 over an alphabet of 32 characters: 5 bits a character, most significant first, no
/// padding. Device IDs use RFC 4648's alphabet, join codes Crockford's.
package struct Base32: Sendable {
    package let alphabet: [UInt8]

    package init(_ alphabet: String) {
        precondition(alphabet.utf8.count == 32, "a base32 alphabet has 32 characters")
        self.alphabet = Array(alphabet.utf8)
    }

    /// RFC 4648: `A–Z 2–7`.
    package static let rfc4648 = Base32("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
    /// Crockford's: `0–9` and lowercase letters without i, l, o, u.
    package static let crockford = Base32("0123456789abcdefghjkmnpqrstvwxyz")

    /// The digits of `bytes`; the last digit is padded with zero bits.
    package func encode(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count * 8 + 4) / 5)
        var bits: UInt32 = 0
        var bitCount = 0
        for byte in bytes {
            bits = bits << 8 | UInt32(byte)
            bitCount += 8
            while bitCount >= 5 {
                bitCount -= 5
                out.append(alphabet[Int((bits >> UInt32(bitCount)) & 31)])
            }
        }
        if bitCount > 0 { out.append(alphabet[Int((bits << UInt32(5 - bitCount)) & 31)]) }
        return out
    }

    /// The bytes of `digits`; nil when a digit is outside the alphabet or the padding bits are not zero.
    package func decode(_ digits: some Sequence<UInt8>) -> [UInt8]? {
        var out = [UInt8]()
        var bits: UInt32 = 0
        var bitCount = 0
        for digit in digits {
            guard let value = alphabet.firstIndex(of: digit) else { return nil }
            bits = bits << 5 | UInt32(value)
            bitCount += 5
            if bitCount >= 8 {
                bitCount -= 8
                out.append(UInt8(truncatingIfNeeded: bits >> UInt32(bitCount)))
            }
        }
        guard bits & ((1 << UInt32(bitCount)) - 1) == 0 else { return nil }
        return out
    }
}
