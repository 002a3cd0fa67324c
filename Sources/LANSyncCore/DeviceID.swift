/// A device's stable identity: 16 bytes derived from the machine (see `LANSyncIdentity`), shown to
/// people as four dash-separated groups of seven base32 characters, e.g. `MFRGGZD-IJ5DCMB-...`.
///
/// Following Syncthing's device IDs, the text carries check characters: each half of the 26
/// base32 digits is followed by a Luhn mod 32 check character, so a mistyped character is caught
/// when an ID is parsed rather than silently naming another device.
public struct DeviceID: Hashable, Comparable, Sendable, CustomStringConvertible, Codable {
    /// The 16 bytes.
    public let bytes: [UInt8]

    /// Wraps exactly 16 bytes; nil for any other length.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    static var alphabet: [UInt8] { Base32.rfc4648.alphabet }

    /// Parses the grouped form (dashes and spaces optional, any case); nil on a wrong length,
    /// a character outside base32, or a check character that does not match.
    public init?(_ text: some StringProtocol) {
        let chars = text.uppercased().utf8.filter { $0 != UInt8(ascii: "-") && $0 != UInt8(ascii: " ") }
        guard chars.count == 28 else { return nil }
        let first = Array(chars[0..<14])
        let second = Array(chars[14..<28])
        guard let c1 = Self.luhn32(first.dropLast()), c1 == first.last,
            let c2 = Self.luhn32(second.dropLast()), c2 == second.last
        else { return nil }
        guard let bytes = Base32.rfc4648.decode(first.dropLast() + second.dropLast()), bytes.count == 16 else {
            return nil
        }
        self.bytes = bytes
    }

    /// The 26 base32 digits of the 16 bytes (RFC 4648 alphabet, no padding).
    var base32: [UInt8] { Base32.rfc4648.encode(bytes) }

    /// The Luhn mod N check character over base32 digits (N = 32).
    static func luhn32(_ digits: some Collection<UInt8>) -> UInt8? {
        var factor = 1
        var sum = 0
        for char in digits.reversed() {
            guard let value = alphabet.firstIndex(of: char) else { return nil }
            var addend = factor * value
            factor = factor == 2 ? 1 : 2
            addend = addend / 32 + addend % 32
            sum += addend
        }
        return alphabet[(32 - sum % 32) % 32]
    }

    /// `XXXXXXX-XXXXXXX-XXXXXXX-XXXXXXX`: 26 base32 digits with two check characters.
    public var description: String {
        let digits = base32
        let first = Array(digits[0..<13])
        let second = Array(digits[13..<26])
        let chars = first + [Self.luhn32(first)!] + second + [Self.luhn32(second)!]
        var text = ""
        for (index, char) in chars.enumerated() {
            if index > 0 && index % 7 == 0 { text.append("-") }
            text.unicodeScalars.append(Unicode.Scalar(char))
        }
        return text
    }

    public static func < (a: DeviceID, b: DeviceID) -> Bool { a.bytes.lexicographicallyPrecedes(b.bytes) }

    /// Hashes the 16 bytes as two 64-bit words rather than byte by byte: device IDs are looked up
    /// for every row written or sent.
    public func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { raw in
            hasher.combine(raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
            hasher.combine(raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        }
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let id = DeviceID(text) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "not a device ID: \(text)")
            )
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
