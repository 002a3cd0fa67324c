/// Entry ids generated for appends that bring none: UUIDv7 text (RFC 9562).
///
/// The first 48 bits are the HLC's milliseconds and the next 12 its logical counter, so ids made
/// on one replica sort in the order they were written and inserts append to the end of the
/// B-tree instead of splitting pages at random; 62 random bits keep ids of different replicas apart.
public enum EntryIDs {
    public static func make(hlc: HybridTimestamp) -> String {
        var random = SystemRandomNumberGenerator()
        let high = hlc.physicalMilliseconds << 16 | 0x7000 | UInt64(hlc.logical & 0x0FFF)
        let low = (random.next() as UInt64) & 0x3FFF_FFFF_FFFF_FFFF | 0x8000_0000_0000_0000
        let hex = hex16(high) + hex16(low)
        let chars = Array(hex)
        return String(chars[0..<8]) + "-" + String(chars[8..<12]) + "-" + String(chars[12..<16]) + "-"
            + String(chars[16..<20]) + "-" + String(chars[20..<32])
    }

    private static func hex16(_ value: UInt64) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: 16 - text.count) + text
    }
}

extension Delta {
    /// The greatest HLC reading among the delta's rows: what a receiver checks against its skew bound.
    public var newestHLC: HybridTimestamp {
        max(entries.lazy.map(\.hlc).max() ?? .zero, preferences.lazy.map(\.hlc).max() ?? .zero)
    }
}
